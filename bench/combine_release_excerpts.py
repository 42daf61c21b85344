"""Excerpts and counts of the in-kernel combine's code, as results/2026-12-01-cpu-combine-release
shows it before and after its fix (CPU, no GPU):

    python3 -m bench.combine_release_excerpts amdgcn LISTING.amdgcn OUT.txt [LISTING OUT ...]
    python3 -m bench.combine_release_excerpts tail-counts BEFORE_DIR AFTER_DIR
    python3 -m bench.combine_release_excerpts compare-reports BEFORE.json AFTER.json
    python3 -m bench.combine_release_excerpts ptx SUBMISSION.py OUT_PREFIX

amdgcn: the tail of each AMDGCN listing, from the partial stores before the counter's first
atomic to the buffer_inv after its last (.loc lines, implicit-def comments and .Ltmp labels
left out), with the listing's line numbers.
tail-counts: per listing of AFTER_DIR (python3 -m bench.combine_release --asm-dir) and its namesake in
BEFORE_DIR, from the first partial store to the end: the instructions, vmcnt waits,
barriers, atomics, buffer_wbl2 and buffer_inv.
compare-reports: every specialization of two `python3 -m bench.gfx950_report --json` reports, matched
by name (the ARRIVALS constexpr the fix adds taken out), with every figure that differs (the
offered launches, which gain the launch's each_thread_releases field, and compile times
left out).
ptx: the sm_90 PTX of the in-kernel combine, from the last partial store to the counter's
last atomic, for the Triton fp8 f16 form as offered on the H200 (4 x 1024) and the Gluon fp8
form with the in-kernel combine forced, of the copy of submission.py given; writes
OUT_PREFIX-<name>.ptx.txt.
"""
import argparse
import collections
import dataclasses
import importlib.util
import json
import re
import sys
from pathlib import Path

from bench import combine_release

TAIL_KEYS = ("instructions", "s_waitcnt vmcnt", "s_barrier", "atomics", "buffer_wbl2", "buffer_inv")
REPORT_FIELDS_IGNORED = {"name", "launch", "offered", "compile_seconds"}


def amdgcn_excerpt(path: str, out: str) -> None:
    lines = Path(path).read_text().splitlines()
    atomics = [i for i, line in enumerate(lines) if re.match(r"\t(buffer|global)_atomic_", line)]
    stores = [i for i, line in enumerate(lines[:atomics[0]]) if re.match(r"\t(buffer|global)_store_", line)]
    start = min(i for i in stores if i > atomics[0] - 200)  # the run of stores before the first atomic
    end = atomics[-1]
    while end < len(lines) and not lines[end].startswith("\tbuffer_inv"):
        end += 1
    keep = [f"{n + 1:6d}  {line}" for n, line in enumerate(lines[start:end + 3], start)
            if line.strip() and not line.lstrip().startswith((".loc", "; implicit-def"))
            and not re.match(r"^\.Ltmp\d+:", line)]
    header = (f"; {Path(path).name}: lines {start + 1}-{end + 3} "
              "(.loc lines, implicit-def comments and .Ltmp labels left out)\n")
    Path(out).write_text(header + "\n".join(keep) + "\n")


def tail_counts(path: Path) -> tuple[collections.Counter, int]:
    kernel = combine_release.Kernel(path.read_text())
    counts = collections.Counter()
    for mnemonic, operands in kernel.instructions[min(kernel.partial_stores):]:
        counts["instructions"] += 1
        counts["s_waitcnt vmcnt"] += mnemonic == "s_waitcnt" and "vmcnt" in operands
        counts["s_barrier"] += mnemonic == "s_barrier"
        counts["atomics"] += bool(re.fullmatch(r"(buffer|global|flat)_atomic_\w+", mnemonic))
        counts["buffer_wbl2"] += mnemonic == "buffer_wbl2"
        counts["buffer_inv"] += mnemonic == "buffer_inv"
    return counts, len(kernel.instructions)


def print_tail_counts(before_dir: Path, after_dir: Path) -> None:
    print("from the first partial store to the end (before -> after): " + ", ".join(TAIL_KEYS))
    for after_path in sorted(after_dir.glob("*.amdgcn")):
        (before, whole_before), (after, whole_after) = tail_counts(before_dir / after_path.name), tail_counts(after_path)
        print(f"{after_path.stem:44s} " + ", ".join(f"{before[k]}->{after[k]}" for k in TAIL_KEYS)
              + f"   (whole kernel {whole_before}->{whole_after})")


def print_report_differences(before_path: Path, after_path: Path) -> None:
    def by_name(path: Path) -> dict:
        return {re.sub(r"\.ARRIVALS=\d+", "", k["name"]): k for k in json.loads(path.read_text())["kernels"]}

    before, after = by_name(before_path), by_name(after_path)
    print(f"specializations: {len(before)} before, {len(after)} after, same names: {set(before) == set(after)}")
    for name in sorted(before):
        old, new = before[name], after.get(name, {})
        diffs = {field: (old[field], new.get(field)) for field in old
                 if field not in REPORT_FIELDS_IGNORED and old[field] != new.get(field)}
        in_kernel = old["launch"]["constexprs"].get("COMBINE_IN_KERNEL")
        print(("IN-KERNEL COMBINE " if in_kernel else "") + name + ": " + ("unchanged" if not diffs else json.dumps(diffs)))


def ptx_excerpts(submission_path: str, out: str) -> None:
    spec = importlib.util.spec_from_file_location("submission", submission_path)
    sub = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = sub
    spec.loader.exec_module(sub)
    from tools import compile_target as ct
    launches = {"triton_f16": next(launch for launch in sub.launch_candidates("fp8", 4, 1024, 132, "sm_90")
                                   if launch.combine_in_kernel)}
    form = sub.kernel_form("fp8", "gluon")
    gluon = sub._launch(8, form.tiles[0], form, "sm_90")
    launches["gluon_ampere"] = dataclasses.replace(gluon, combine_in_kernel=True)
    for name, launch in launches.items():
        call = ct.decode_kernel_calls(ct.contract_inputs(4, 1024), "fp8", launch)[0]
        ptx = ct.specialize(call, ct.TARGETS["sm_90"]).compile().asm["ptx"].splitlines()
        atoms = [i for i, line in enumerate(ptx) if "atom." in line]
        stores = [i for i in range(atoms[0]) if "st.global" in ptx[i]]
        start, end = stores[-1] - 2, atoms[-1] + 8
        keep = [f"{n + 1:6d}  {line}" for n, line in enumerate(ptx[start:end], start)
                if not line.lstrip().startswith((".loc", "//", "$L__tmp"))]
        Path(f"{out}-{name}.ptx.txt").write_text(
            f"; {name}: {launch}\n; PTX lines {start + 1}-{end} (.loc lines, comments, $L__tmp labels left out)\n"
            + "\n".join(keep) + "\n")
        print(name, "atomics at PTX lines", [a + 1 for a in atoms])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    excerpt = commands.add_parser("amdgcn", help="LISTING OUT pairs")
    excerpt.add_argument("pairs", nargs="+")
    counts = commands.add_parser("tail-counts")
    counts.add_argument("before_dir", type=Path)
    counts.add_argument("after_dir", type=Path)
    compare = commands.add_parser("compare-reports")
    compare.add_argument("before", type=Path)
    compare.add_argument("after", type=Path)
    ptx = commands.add_parser("ptx")
    ptx.add_argument("submission")
    ptx.add_argument("out_prefix")
    args = parser.parse_args()
    if args.command == "amdgcn":
        if len(args.pairs) % 2:
            parser.error("amdgcn takes LISTING OUT pairs")
        for source, destination in zip(args.pairs[::2], args.pairs[1::2]):
            amdgcn_excerpt(source, destination)
    elif args.command == "tail-counts":
        print_tail_counts(args.before_dir, args.after_dir)
    elif args.command == "compare-reports":
        print_report_differences(args.before, args.after)
    else:
        ptx_excerpts(args.submission, args.out_prefix)


if __name__ == "__main__":
    main()

"""Is every offered kernel specialization, Triton and Gluon, compiled to the same machine code
at two commits, with the installed Triton?

    python3 -m bench.code_unchanged OLD [NEW] [--language gluon|triton|all] [--new-offers-ok]
                                    [--save DIR [--save-only]]

OLD and NEW are commits (NEW defaults to this checkout's working tree) or JSON files that an
earlier run saved with --save. Each tree is extracted with git archive into a temporary
folder and, in a subprocess run in that tree (TRITON_INTERPRET unset, an empty Triton cache),
every launch that its compile_target finds offered for the 8 benchmark shapes is specialized
as Triton's JIT would: on gfx950 (AMDGCN) the Triton routes' decode and combine launches,
Triton and Gluon forms, and the aiter route's Triton launches (Q quantizer, kv_indptr
guards); on sm_90 (PTX) the Triton routes' launches. Each distinct specialization of the
chosen language is compiled once. compile_target is tools/compile_target.py, or in a tree
from before it moved there bench/compile_target.py (its subprocess gets bench/ on PYTHONPATH).

The two trees' offers are paired by what they are (route, format, shape, the launch's fields
both trees have; a launch offered at one tree alone, or at another rank, is a difference, or
with --new-offers-ok, for a tree that adds forms ahead of the others, listed), and each
paired launch's kernels are compared pairwise by their code: the
text before the first debug section, without .loc / .file lines and the labels that only
mark inlined functions' ranges for the debugger (.Ltmp<n>: / $L__tmp<n>:): the debug
information holds file paths, line numbers and the functions a kernel inlined. Kernels are
matched by the launch that offers them, not by their constexprs, so a renamed constexpr does
not hide a change of code or fake one. Prints one line a distinct pair of kernels (the first
lines of any difference), then a summary; exit status 1 on any difference.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tools import amdgcn

ROOT = Path(__file__).resolve().parents[1]

# Run inside the tree being compiled: argv[1] the compile_target module to import, argv[2]
# the language whose kernels are compiled (the others are listed with no code).
DUMP = r"""
import dataclasses, importlib, json, sys, tempfile
from triton import knobs
compile_target = importlib.import_module(sys.argv[1])
language = sys.argv[2]

def plain(value):
    return value if isinstance(value, (bool, int, float, str, type(None))) else str(value)

dump = {}
for arch, kind in (("gfx950", "amdgcn"), ("sm_90", "ptx")):
    target = compile_target.TARGETS[arch]
    offered, kernels, keys = [], {}, {}
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for launch in compile_target.offered_launches(arch, with_aiter=arch == "gfx950"):
            used = []
            for call in launch.calls:
                spec = compile_target.specialize(call, target)
                if spec.identity not in keys:
                    keys[spec.identity] = str(len(keys))
                    kernels[keys[spec.identity]] = {
                        "kernel": spec.kernel.fn.__name__, "language": spec.language,
                        "constexprs": {k: plain(v) for k, v in spec.constexpr_values().items()},
                        "options": {k: plain(v) for k, v in spec.non_default_options().items()},
                        "code": spec.compile().asm[kind] if language in ("all", spec.language) else None}
                used.append(keys[spec.identity])
            fields = launch.launch if isinstance(launch.launch, dict) else dataclasses.asdict(launch.launch)
            offered.append({"route": launch.route, "kv_format": launch.kv_format, "batch": launch.batch,
                            "kv_len": launch.kv_len, "rank": launch.rank,
                            "launch": {k: plain(v) for k, v in fields.items()}, "kernels": used})
    dump[arch] = {"offered": offered, "kernels": kernels}
json.dump(dump, sys.stdout)
"""


def compiled_code(tree: Path, language: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    if (tree / "tools" / "compile_target.py").is_file():
        module = "tools.compile_target"  # `python3 -c` has the tree's root (its cwd) on the path
    else:  # a tree from before the move: bench/compile_target.py, imported from bench/
        module, env["PYTHONPATH"] = "compile_target", str(tree / "bench")
    proc = subprocess.run([sys.executable, "-c", DUMP, module, language], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=6 * 3600)
    if proc.returncode != 0:
        raise SystemExit(f"compiling in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def compiled_at(commit: str, language: str) -> dict:
    if Path(commit).is_file():
        return json.loads(Path(commit).read_text())
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        return compiled_code(Path(folder), language)


# Lines of debug information, not code: source locations, and the labels that mark where an
# inlined function's instructions begin and end (.Ltmp<n> in AMDGCN, $L__tmp<n> in PTX).
_DEBUG_LINE = re.compile(r"\s*(\.loc\b|\.file\b|\.Ltmp\d+:\s*$|\$L__tmp\d+:\s*$)")


def code_lines(text: str) -> list:
    text = re.split(r"\n\s*\.section\s*\.?debug", text)[0]
    return [line for line in text.splitlines() if not _DEBUG_LINE.match(line)]


def without_register_names(lines: list) -> list:
    """The lines with every register name (AMDGCN v7, s[2:3], a4; PTX %r12, %rd3, %p1) as R."""
    return [re.sub(r"%[a-z]+\d+|\b[vsa]\d+\b|\b[vsa]\[\d+:\d+\]", "R", line) for line in lines]


def what_differs(arch: str, old_code: str, new_code: str) -> str:
    """How far a difference goes: the lines that differ once register names are set aside,
    and on gfx950 whether the main loop (tools/amdgcn.py's) is the same but for them."""
    old, new = without_register_names(code_lines(old_code)), without_register_names(code_lines(new_code))
    changed = [line for line in difflib.unified_diff(old, new, lineterm="", n=0)
               if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    summary = f"{len(changed)} line(s) differ with register names set aside"
    if arch == "gfx950":
        loops = [amdgcn.main_loop(code) for code in (old_code, new_code)]
        if all(loop is not None for loop in loops):
            same = without_register_names([f"{m} {o}" for m, o in loops[0]]) == without_register_names(
                [f"{m} {o}" for m, o in loops[1]])
            summary += f"; main loop {len(loops[0])} -> {len(loops[1])} instructions, " + (
                "the same but for register names" if same else "DIFFERENT")
    return summary


def describe(kernel: dict) -> str:
    shown = ",".join(f"{k}={v}" for k, v in kernel["constexprs"].items())
    options = ",".join(f"{k}={v}" for k, v in kernel["options"].items())
    return f"{kernel['kernel']}[{shown}][{options}]"


def kernel_pair_difference(ka: dict, kb: dict) -> list:
    """The lines that tell two kernels offered at the same place apart (empty: the same)."""
    diff = list(difflib.unified_diff(code_lines(ka["code"]), code_lines(kb["code"]), lineterm="", n=0))
    if ka["options"] != kb["options"]:
        diff.insert(0, f"options {ka['options']} -> {kb['options']}")
    return diff


def _offer_key(offer: dict, fields: dict) -> tuple:
    """What an offer is, its rank aside: route, format, shape and its launch's fields that
    both trees' launches of its route have (fields: route -> names)."""
    launch = tuple(sorted((k, v) for k, v in offer["launch"].items() if k in fields[offer["route"]]))
    return offer["route"], offer["kv_format"], offer["batch"], offer["kv_len"], launch


def compare(old: dict, new: dict, old_name: str, new_name: str, language: str, new_offers_ok: bool = False) -> int:
    """Prints the comparison of the kernels of `language` ("all": every kernel); returns the
    number of differences. Offers are paired by what they are (route, format, shape, the
    launch's fields both trees have), not by rank: an offer at OLD that NEW lacks is a
    difference; one that only NEW has, or an offer at another rank, is one too unless
    new_offers_ok (a tree that adds forms ahead of the others), when they are listed."""
    different = 0
    for arch in sorted(set(old) | set(new)):
        if arch not in old or arch not in new:
            print(f"{arch}: only at {old_name if arch in old else new_name}")
            different += 1
            continue
        a, b = old[arch], new[arch]
        offers = a["offered"] + b["offered"]
        fields = {route: set.intersection(*(set(o["launch"]) for o in offers if o["route"] == route))
                  for route in {o["route"] for o in offers}}
        new_by_key = {}  # a launch a tree offers twice for one shape is paired in order
        for y in b["offered"]:
            new_by_key.setdefault(_offer_key(y, fields), []).append(y)
        old_keys = {_offer_key(x, fields) for x in a["offered"]}
        pairs, moved = {}, 0
        for x in a["offered"]:
            where = f"{x['route']} {x['batch']}x{x['kv_len']} rank {x['rank']}"
            y = (new_by_key.get(_offer_key(x, fields)) or [None]).pop(0)
            if y is None:
                print(f"{arch}: offer {where} {x['launch']}: not offered at {new_name}")
                different += 1
                continue
            if y["rank"] != x["rank"]:
                moved += 1
                if not new_offers_ok:
                    print(f"{arch}: offer {where}: rank {x['rank']} -> {y['rank']}")
                    different += 1
            if len(x["kernels"]) != len(y["kernels"]):
                print(f"{arch}: offer {where}: {len(x['kernels'])} kernels -> {len(y['kernels'])}")
                different += 1
            for key_a, key_b in zip(x["kernels"], y["kernels"]):
                pairs.setdefault((key_a, key_b), where)
        added = [y for y in b["offered"] if _offer_key(y, fields) not in old_keys]
        if added:
            kernels = sorted({b["kernels"][k]["kernel"] for y in added for k in y["kernels"]})
            print(f"{arch}: {len(added)} launches offered at {new_name} alone (kernels {', '.join(kernels)})"
                  + (f"; {moved} launches offered at both moved rank" if moved else ""))
            different += 0 if new_offers_ok else len(added)
        compared = 0
        for (key_a, key_b), where in sorted(pairs.items(), key=lambda item: int(item[0][1])):
            ka, kb = a["kernels"][key_a], b["kernels"][key_b]
            if language not in ("all", ka["language"]) and language not in ("all", kb["language"]):
                continue
            compared += 1
            if ka["language"] != kb["language"]:
                diff = [f"language {ka['language']} -> {kb['language']}"]
            elif ka["code"] is None or kb["code"] is None:  # a saved side compiled for another language
                raise SystemExit(f"{arch} {describe(kb)}: no code saved for it at "
                                 f"{old_name if ka['code'] is None else new_name}")
            else:
                diff = kernel_pair_difference(ka, kb)
            lines = f"{len(code_lines(kb['code']))} lines" if kb["code"] is not None else "not compiled"
            print(f"{arch} {'same' if not diff else 'DIFFERENT'} ({lines}): {describe(kb)} (first offered: {where})")
            different += bool(diff)
            if diff and ka["code"] is not None and kb["code"] is not None:
                print("    " + what_differs(arch, ka["code"], kb["code"]))
            for line in diff[:30]:
                print("   ", line)
        print(f"{arch}: {len(a['offered'])} launches offered at {old_name}, {len(b['offered'])} at {new_name}; "
              f"{len(pairs)} distinct kernel pairs of the launches offered at both ({compared} {language}), "
              f"{len(b['kernels'])} distinct kernels at {new_name}")
    return different


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="a commit, or a JSON file saved by --save")
    parser.add_argument("new", nargs="?", help="a commit or a saved JSON file (default: this working tree)")
    parser.add_argument("--language", choices=("gluon", "triton", "all"), default="all",
                        help="the kernels compiled and compared (default: all)")
    parser.add_argument("--save", type=Path, help="write each side's compiled code to DIR/<name>.json")
    parser.add_argument("--save-only", action="store_true", help="with --save: compile OLD, save it, compare nothing")
    parser.add_argument("--new-offers-ok", action="store_true",
                        help="launches offered at NEW alone, and the ranks they move, are listed, not differences "
                             "(NEW adds forms: every launch offered at both must still compile to the same code)")
    args = parser.parse_args()
    if args.save_only and not args.save:
        parser.error("--save-only needs --save DIR")
    old = compiled_at(args.old, args.language)
    if args.save_only:
        args.save.mkdir(parents=True, exist_ok=True)
        (args.save / f"{args.old}.json").write_text(json.dumps(old))
        return 0
    new = compiled_at(args.new, args.language) if args.new else compiled_code(ROOT, args.language)
    new_name = args.new or "the working tree"
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for name, dump in ((args.old, old), (args.new or "working-tree", new)):
            if not Path(name).is_file():
                (args.save / f"{name}.json").write_text(json.dumps(dump))
    different = compare(old, new, args.old, new_name, args.language, args.new_offers_ok)
    print(f"{different} difference(s) between {args.old} and {new_name} ({args.language})")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())

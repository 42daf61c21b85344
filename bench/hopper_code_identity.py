"""Is the Hopper forms' machine code the code that ran on the H200?

    python3 -m bench.hopper_code_identity OLD [NEW] [--forms NAMES] [--save DIR]

OLD and NEW are commits (NEW defaults to this checkout's working tree). A tree holds the
Hopper kernels either as phase 1 kept them, in hopper_forms.py beside a submission.py it
imports from (commit 33622d5 is the code results/2026-12-03-h200-hopper-forms ran, 3d0bbde
its cleanup), or folded into submission.py (its section "Hopper forms" and the forms'
records). Each tree is extracted with git archive into a temporary folder and, in a
subprocess there (TRITON_INTERPRET unset, an empty Triton cache), every launch configuration
below is built by that tree's own launch code and specialized as Triton's JIT would on the
H200 (tools/compile_target.py of this checkout: the binder, arguments on the "meta" device
at the benchmark shape's sizes, so every specialization the 8 shapes give is compiled), then
compiled for sm_90 and disassembled (Triton's bundled ptxas and nvdisasm).

Configurations: the three Hopper forms (fp8 with Q and P as two e4m3 terms, fp8 with one,
MXFP4 with V kept in shared memory and a one-stage ring: at 33622d5 the MXFP4 builder's
stages=1, v_smem=True) on the 8 benchmark shapes, each at the splits that fill 2 programs an
SM of the H200's 132 (with the in-kernel combine and with the second combine kernel) and at
half those splits (in-kernel); --forms takes a subset (a commit before 33622d5 has only the
fp8 form with one e4m3 term). In a folded tree the tool also checks that every launch the
autopick offers for the Hopper forms on sm_90 is among them.

Each distinct specialization's decode kernel is compared by its SASS instructions (the
addresses, encodings and comments set aside): "same" where the instruction lists are equal,
"same but for register numbers" where one consistent renaming of the registers maps one onto
the other (the register allocator numbered them differently: the same program), else
DIFFERENT with the first lines that differ. Also compared: registers, spilled bytes and shared
memory. Prints a line per specialization and a summary; exit status 1 on any DIFFERENT.
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

ROOT = Path(__file__).resolve().parents[1]

# Run inside the tree being compiled (cwd), this checkout's root after it on PYTHONPATH (its
# tools.compile_target). Prints {label: {"sass", "ptxas", "shared"}} as JSON.
DUMP = r"""
import dataclasses, inspect, json, os, re, subprocess, sys, tempfile
from pathlib import Path
import torch, triton
from triton import knobs
from tools import compile_target
import submission as sub

H200_SMS = 132
SHAPES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
FORMS = {"fp8 two e4m3 terms": ("fp8", "hopper_two_term"), "fp8 one e4m3 term": ("fp8", "hopper_one_term"),
         "mxfp4": ("mxfp4", "hopper")}
FOLDED = not Path("hopper_forms.py").is_file()
CHOSEN = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else list(FORMS)
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


def pow2_floor(n):
    return 1 << (max(n, 1).bit_length() - 1)


def configurations():
    for batch, kv_len in SHAPES:
        fill = pow2_floor(min(2 * H200_SMS // batch, 64, max(kv_len // 64, 1)))
        for form in CHOSEN:
            for splits, in_kernel in ((fill, True), (fill, False), (max(fill // 2, 1), True)):
                yield form, batch, kv_len, splits, in_kernel


def phase1_call(form, batch, kv_len, splits, in_kernel):
    import hopper_forms as hf
    data = compile_target.contract_inputs(batch, kv_len)
    q, kv_data, qo_indptr, kv_indptr, config = data
    scratch = sub.make_triton_scratch(batch, sub.TritonLaunch(splits, 64, 4, 1), "meta")
    common = dict(q=q, qo_indptr=qo_indptr, kv_indptr=kv_indptr, out=sub._new_output(q), scratch=scratch,
                  sm_scale=config["sm_scale"], num_splits=splits, combine_in_kernel=in_kernel)
    if form.startswith("fp8"):
        if "split_operands" in inspect.signature(hf.hopper_fp8_calls).parameters:
            common["split_operands"] = form == "fp8 two e4m3 terms"
        else:  # before 33622d5: one e4m3 term only
            assert form == "fp8 one e4m3 term", f"{form}: not at this commit (compare it with --forms)"
        kernel, grid, args, options = hf.hopper_fp8_calls(kv=kv_data["fp8"][0], kv_scale=kv_data["fp8"][1],
                                                          **common)
    else:
        extra = {}
        if "v_smem" in inspect.signature(hf.hopper_mxfp4_calls).parameters:  # 33622d5: the kept configuration
            extra = dict(stages=1, v_smem=True)
        kernel, grid, args, options = hf.hopper_mxfp4_calls(kv=kv_data["mxfp4"][0], kv_scales=kv_data["mxfp4"][1],
                                                            **common, **extra)
    return type("Call", (), dict(kernel=kernel, args=args, options=options))


def folded_call(form, batch, kv_len, splits, in_kernel):
    kv_format, name = FORMS[form]
    record = sub.kernel_form(kv_format, name)
    launch = dataclasses.replace(sub._launch(splits, record.tiles[0], record, "sm_90"), combine_in_kernel=in_kernel)
    return compile_target.decode_kernel_calls(compile_target.contract_inputs(batch, kv_len), kv_format, launch)[0]


def offered_in_configurations():
    known = {(FORMS[form], batch, kv_len, splits, in_kernel or splits == 1)
             for form, batch, kv_len, splits, in_kernel in configurations()}
    for batch, kv_len in SHAPES:
        for kv_format in ("fp8", "mxfp4"):
            for launch in sub.triton_launch_candidates(kv_format, batch, kv_len, H200_SMS, "sm_90"):
                if (kv_format, launch.form) in {FORMS[form] for form in CHOSEN}:
                    key = ((kv_format, launch.form), batch, kv_len, launch.num_splits,
                           launch.combine_in_kernel or launch.num_splits == 1)
                    assert key in known, f"an offered Hopper launch this tool does not compare: {key}"


def disassemble(cubin):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        Path(path).write_bytes(cubin)
        return subprocess.run([str(BIN / "nvdisasm"), "-c", path], capture_output=True, text=True, check=True).stdout


def ptxas_report(ptx):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        Path(path).write_text(ptx)
        out = subprocess.run([str(BIN / "ptxas"), "-arch=sm_90a", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                             capture_output=True, text=True).stderr
    return {"registers": int(re.search(r"Used (\d+) registers", out).group(1)),
            "spilled": int(re.search(r"(\d+) bytes spill stores", out).group(1)), "advisories": "C7514" in out}


if FOLDED:
    offered_in_configurations()
dump, seen = {}, {}
with tempfile.TemporaryDirectory() as cache:
    knobs.cache.dir = cache
    for config in configurations():
        call = (folded_call if FOLDED else phase1_call)(*config)
        spec = compile_target.specialize(call, compile_target.TARGETS["sm_90"])
        form, batch, kv_len, splits, in_kernel = config
        label = f"{form}, {batch}x{kv_len}, splits {splits}" + (", combine " + ("in kernel" if in_kernel else "launched")
                                                               if splits > 1 else "")
        # Two configurations of one specialization are one kernel: compiled once, listed under the first.
        key = (form, spec.key)
        if key in seen:
            dump[seen[key]]["configurations"].append(label)
            continue
        seen[key] = label
        compiled = spec.compile()
        dump[label] = {"configurations": [label], "sass": disassemble(compiled.asm["cubin"]),
                       "ptxas": ptxas_report(compiled.asm["ptx"]), "shared": compiled.metadata.shared}
        print(label, file=sys.stderr, flush=True)
json.dump(dump, sys.stdout)
"""

FORM_NAMES = ("fp8 two e4m3 terms", "fp8 one e4m3 term", "mxfp4")  # DUMP's FORMS
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
_REGISTER = re.compile(r"\b(U?R\d+|U?P\d+)\b")


def instructions(sass: str) -> list:
    """The SASS instructions as text, without addresses, encodings and comments."""
    return [m.group(1) for line in sass.splitlines() if (m := _INSTRUCTION.match(line))]


def renumbered(lines: list) -> list:
    """The instructions with registers numbered in order of first appearance, per kind
    (R, UR, P, UP): two listings equal after this differ only in the allocator's numbering."""
    names: dict = {}

    def rename(match):
        register = match.group(1)
        kind = re.match(r"[A-Z]+", register).group(0)
        if register not in names:
            names[register] = f"{kind}#{sum(1 for r in names if re.match(r'[A-Z]+', r).group(0) == kind)}"
        return names[register]
    return [_REGISTER.sub(rename, line) for line in lines]


def compiled_at(tree: Path, forms: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env["PYTHONPATH"] = f"{tree}{os.pathsep}{ROOT}"
    proc = subprocess.run([sys.executable, "-c", DUMP, forms], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=6 * 3600)
    if proc.returncode != 0:
        raise SystemExit(f"compiling in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def compiled_commit(commit: str, forms: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        return compiled_at(Path(folder), forms)


def compare(old: dict, new: dict) -> int:
    """Prints one line per specialization; returns the number that differ."""
    different = 0
    by_configuration = {c: label for label, entry in old.items() for c in entry["configurations"]}
    for label, entry in new.items():
        old_label = by_configuration.get(label)
        if old_label is None:
            print(f"DIFFERENT {label}: no such configuration compiled at OLD")
            different += 1
            continue
        a, b = old[old_label], entry
        if set(a["configurations"]) != set(b["configurations"]):
            print(f"  note: {label} specializes with {b['configurations']} here, {a['configurations']} at OLD")
        ia, ib = instructions(a["sass"]), instructions(b["sass"])
        resources = [f"{name} {a['ptxas'][name]} -> {b['ptxas'][name]}" for name in ("registers", "spilled")
                     if a["ptxas"][name] != b["ptxas"][name]]
        if a["shared"] != b["shared"]:
            resources.append(f"shared {a['shared']} -> {b['shared']}")
        summary = (f"{len(ib)} instructions, {b['ptxas']['registers']} registers, {b['ptxas']['spilled']} bytes "
                   f"spilled, {b['shared']} bytes of shared memory")
        if ia == ib and not resources:
            print(f"same: {label} ({summary})")
        elif renumbered(ia) == renumbered(ib) and not resources:
            moved = sum(x != y for x, y in zip(ia, ib))
            print(f"same but for register numbers: {label} ({summary}; {moved} instructions name other registers)")
        else:
            different += 1
            print(f"DIFFERENT: {label} ({summary}; {'; '.join(resources) or 'resources equal'})")
            diff = [line for line in difflib.unified_diff(renumbered(ia), renumbered(ib), lineterm="", n=0)
                    if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            for line in diff[:20]:
                print("   ", line)
    return different


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="a commit")
    parser.add_argument("new", nargs="?", help="a commit (default: this working tree)")
    parser.add_argument("--save", type=Path, help="write each side's SASS to DIR/<name>.json")
    parser.add_argument("--forms", default="", help="a comma-separated subset of: " + ", ".join(FORM_NAMES))
    args = parser.parse_args()
    if set(filter(None, args.forms.split(","))) - set(FORM_NAMES):
        parser.error(f"--forms: choose among {FORM_NAMES}")
    old = compiled_commit(args.old, args.forms)
    new = compiled_commit(args.new, args.forms) if args.new else compiled_at(ROOT, args.forms)
    new_name = args.new or "the working tree"
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for name, dump in ((args.old, old), (args.new or "working-tree", new)):
            (args.save / f"{name}.json").write_text(json.dumps(dump))
    different = compare(old, new)
    print(f"{len(new)} Hopper specializations compiled at {new_name}, {len(old)} at {args.old}; "
          f"{different} differ from {args.old}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())

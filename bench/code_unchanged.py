"""Is the machine code of every offered specialization the same at two commits, with the
installed Triton? (A change meant to move code around, not to change it, must leave what
Triton emits as it was.)

    python3 -m bench.code_unchanged OLD [NEW] [--language gluon|triton|all]

Extracts OLD (and NEW, if given; else this checkout is used) with git archive into a
temporary folder, compiles in each (a subprocess, TRITON_INTERPRET unset, an empty Triton
cache) every distinct specialization tools/compile_target.py finds offered for the 8
benchmark shapes on gfx950 (AMDGCN; the aiter route's Triton launches included) and sm_90
(PTX), and compares the code: the text before the first debug section, without .loc / .file
lines (the debug information holds file paths and line numbers, which differ between the
trees). A specialization is named by its target, kernel, constexprs and launch options, so
a renamed kernel or constexpr value shows as one name only at each commit. Prints one line
a specialization; exit status 1 on a difference. A commit from before compile_target.py
moved to tools/ is read through its bench/compile_target.py.
"""
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

DUMP = r"""
import importlib.util, json, sys, tempfile
from pathlib import Path
from triton import knobs
if Path("tools/compile_target.py").exists():
    from tools import compile_target
else:  # a tree from before the move: the file sets its own import path
    spec = importlib.util.spec_from_file_location("compile_target", "bench/compile_target.py")
    compile_target = sys.modules["compile_target"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compile_target)
language = sys.argv[1]
code = {}
for arch, kind in (("gfx950", "amdgcn"), ("sm_90", "ptx")):
    launches = compile_target.offered_launches(arch, with_aiter=arch.startswith("gfx"))
    specs = compile_target.distinct_specializations(launches, compile_target.TARGETS[arch])
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for spec in specs.values():
            if language in ("all", spec.language):
                values = sorted((k, str(v)) for k, v in spec.constexpr_values().items())
                options = sorted((k, str(v)) for k, v in spec.non_default_options().items())
                name = f"{arch} {spec.kernel.fn.__name__} {json.dumps(values)} {json.dumps(options)}"
                code[name] = spec.compile().asm[kind]
json.dump(code, sys.stdout)
"""


def compiled_code(tree: Path, language: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", DUMP, language], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"compiling in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def code_lines(text: str) -> list:
    text = re.split(r"\n\s*\.section\s*\.?debug", text)[0]
    return [line for line in text.splitlines() if not line.strip().startswith((".loc", ".file"))]


def compiled_at(commit: str, language: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        return compiled_code(Path(folder), language)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the commit to compare with")
    parser.add_argument("new", nargs="?", help="the other commit (default: this checkout)")
    parser.add_argument("--language", choices=("gluon", "triton", "all"), default="all")
    args = parser.parse_args()
    commit, newer = args.old, args.new
    here = newer or "here"
    theirs = compiled_at(commit, args.language)
    ours = compiled_at(newer, args.language) if newer else compiled_code(ROOT, args.language)
    different = 0
    for name in sorted(set(theirs) | set(ours)):
        if name not in theirs or name not in ours:
            print(f"only {'at ' + here if name in ours else 'at ' + commit}: {name}")
            different += 1
            continue
        a, b = code_lines(theirs[name]), code_lines(ours[name])
        diff = list(difflib.unified_diff(a, b, lineterm="", n=0))
        print(f"{'same' if not diff else 'DIFFERENT'} ({len(b)} lines): {name}")
        different += bool(diff)
        for line in diff[:20]:
            print("   ", line)
    print(f"{len(ours)} specializations ({args.language}) at {here}, {different} differ from {commit}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())

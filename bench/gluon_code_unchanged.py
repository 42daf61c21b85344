"""Is the machine code of every offered Gluon specialization the same at two commits, with
the installed Triton? (Issue 28 item 2: the two-spelling aliases must not change what
Triton 3.6 emits.)

    python3 bench/gluon_code_unchanged.py OLD [NEW]

Extracts OLD (and NEW, if given; else this checkout is used) with git archive into a
temporary folder, compiles in each (a subprocess, TRITON_INTERPRET unset, an empty Triton
cache) every distinct Gluon
specialization bench/compile_target.py finds offered for the 8 benchmark shapes on gfx950
(AMDGCN) and sm_90 (PTX), and compares the code: the text before the first debug section,
without .loc / .file lines (the debug information holds file paths and line numbers, which
differ between the trees). Prints one line a specialization; exit status 1 on a difference.
"""
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
import json, sys, tempfile
sys.path[:0] = ["bench", "."]
import compile_target
from triton import knobs
code = {}
for arch, kind in (("gfx950", "amdgcn"), ("sm_90", "ptx")):
    specs = compile_target.distinct_specializations(compile_target.offered_launches(arch, with_aiter=False),
                                                    compile_target.TARGETS[arch])
    with tempfile.TemporaryDirectory() as cache:
        knobs.cache.dir = cache
        for spec in specs.values():
            if spec.language == "gluon":
                name = arch + " " + json.dumps(sorted((k, str(v)) for k, v in spec.constexpr_values().items()))
                code[name] = spec.compile().asm[kind]
json.dump(code, sys.stdout)
"""


def compiled_code(tree: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", DUMP], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"compiling in {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def code_lines(text: str) -> list:
    text = re.split(r"\n\s*\.section\s*\.?debug", text)[0]
    return [line for line in text.splitlines() if not line.strip().startswith((".loc", ".file"))]


def compiled_at(commit: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        return compiled_code(Path(folder))


def main() -> int:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    commit = sys.argv[1]
    newer = sys.argv[2] if len(sys.argv) == 3 else None
    here = newer or "here"
    theirs = compiled_at(commit)
    ours = compiled_at(newer) if newer else compiled_code(ROOT)
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
    print(f"{len(ours)} Gluon specializations at {here}, {different} differ from {commit}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())

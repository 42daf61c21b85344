"""Which of the kernels' opcodes AMD's pseudocode covers, and which tests/test_gfx950_pcode.py
evaluates: runs that test module with pcode's runs recorded, then prints one line per
opcode of its KERNEL_OPCODES:

    python3 -m bench.pcode_coverage [--out PATH]

    evaluated  the tests run its pseudocode to the end at least once (instruction calls
               inside other pseudocode, such as v_max_i32 in v_med3_i32, count too)
    present    it has pseudocode that the tests parse but do not run
    prose      its entry is prose, not code (the parser rejects it)
    absent     AMD's CDNA tables have no entry for it
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import pytest

from tools.gfx950_emu.pcode import oracle
from tools.gfx950_emu.pcode.kernel_opcodes import KERNEL_OPCODES, NO_PCODE, PROSE

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ran = set()
    run, call = oracle._run, oracle._call_instruction

    def recording_run(opcode, *rest):      # a run that raises is not counted
        ctx = run(opcode, *rest)
        ran.add(oracle.mnemonic(opcode))
        return ctx

    def recording_call(name, *rest):
        value = call(name, *rest)
        ran.add(oracle.mnemonic(name))
        return value

    oracle._run, oracle._call_instruction = recording_run, recording_call
    status = pytest.main(["-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_gfx950_pcode.py")])
    oracle._run, oracle._call_instruction = run, call
    lines = []
    for opcode in KERNEL_OPCODES:
        kind = ("absent" if opcode in NO_PCODE else "prose" if opcode in PROSE
                else "evaluated" if opcode in ran else "present")
        lines.append(f"{opcode:36s} {kind}")
    counts = collections.Counter(line.split()[-1] for line in lines)
    text = "\n".join(lines) + "\n" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + "\n"
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())

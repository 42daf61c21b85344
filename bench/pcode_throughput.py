"""How fast the pseudocode oracle (tools/gfx950_emu/pcode) evaluates the kernels' instructions, per lane, on random
operands: the cost of comparing the emulator with AMD's pseudocode on N inputs per opcode.

    python3 -m bench.pcode_throughput [--evals 500] [--json PATH]

For every opcode of the kernels' listings (tools/gfx950_emu/pcode/kernel_opcodes.py)
that has pseudocode and runs on register operands alone, times `evaluate` on --evals
random inputs (each source as wide as the pseudocode reads it; the cross-lane ones with a
random register file), in CPU time of this process (time.process_time, so that other
processes on a shared machine count less), and prints microseconds per evaluation, then
the mean and the total for 2000 evaluations per opcode (the three whole-wave instructions,
whose one evaluation gives all 64 lanes, apart). Opcodes it skips are listed with the
reason (memory instructions need an address map, not random operands)."""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from tools.gfx950_emu import pcode
from tools.gfx950_emu.pcode import interpreter
from tools.gfx950_emu.pcode.kernel_opcodes import KERNEL_OPCODES

MODIFIERS = {"v_bitop3_b32": {"bitop3": 0x96}, "v_bitop3_b16": {"bitop3": 0x96}}
# Their pseudocode loops over the wave's 64 lanes: one evaluation is the whole wave's result.
WHOLE_WAVE = {"ds_bpermute_b32", "v_permlane16_swap_b32", "v_permlane32_swap_b32"}
MEMORY_OPERANDS = {"ADDR", "VADDR", "SRSRC", "SBASE", "SADDR"}


def operand_width(prog, name: str) -> int:
    views = prog.source_types.get(name, set())
    if name in ("VCC", "EXEC") or any(t.width == 64 for t in views):
        return 64
    return min(interpreter.REGISTER_WIDTHS.get(name, 32), 32)


def random_inputs(prog, rng: random.Random) -> dict:
    inputs = {}
    for name in sorted(prog.reads):
        if name in ("SRC0", "VDST", "DATA0"):
            inputs[name] = rng.randrange(512)
        elif name == "ADDR" and prog.name == "ds_bpermute_b32":
            inputs[name] = rng.randrange(512)
        else:
            inputs[name] = rng.getrandbits(operand_width(prog, name))
    return inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--evals", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(0)
    vgpr = np.random.default_rng(0).integers(0, 2 ** 32, size=(64, 512), dtype=np.uint32)
    rows, skipped = [], {}
    for opcode in KERNEL_OPCODES:
        try:
            prog = pcode.program(opcode)
        except (pcode.NoPcode, pcode.PcodeSyntaxError) as error:
            skipped[opcode] = type(error).__name__
            continue
        if "MEM" in pcode.pcode_text(opcode) or prog.reads & MEMORY_OPERANDS and opcode != "ds_bpermute_b32":
            skipped[opcode] = "memory instruction"
            continue
        cross_lane = "VGPR[" in pcode.pcode_text(opcode) and opcode not in (
            "v_cvt_scalef32_pk_bf16_fp4", "v_cvt_scalef32_pk_fp8_f32")
        inputs = [random_inputs(prog, rng) for _ in range(args.evals)]
        kwargs = {"modifiers": MODIFIERS.get(opcode), "vgpr": vgpr if cross_lane else None}
        try:
            pcode.evaluate(opcode, inputs[0], **kwargs)
        except pcode.PCODE_ERRORS as error:
            skipped[opcode] = f"{type(error).__name__}: {error}"
            continue
        start = time.process_time()
        for i, one in enumerate(inputs):
            pcode.evaluate(opcode, one, lane=i % 64, **kwargs)
        rows.append((opcode, (time.process_time() - start) / args.evals * 1e6))
    for opcode, us in sorted(rows, key=lambda r: r[1]):
        print(f"{opcode:36s} {us:8.1f} us/eval" + ("  (one evaluation: all 64 lanes)" if opcode in WHOLE_WAVE else ""))
    lanes = [us for opcode, us in rows if opcode not in WHOLE_WAVE]
    waves = [us for opcode, us in rows if opcode in WHOLE_WAVE]
    print(f"{len(lanes)} per-lane opcodes timed ({args.evals} random inputs each): mean {sum(lanes) / len(lanes):.1f} "
          f"us/eval; 2000 evaluations of each: {sum(lanes) * 2000 / 1e6:.1f} s; 200 of each: {sum(lanes) * 200 / 1e6:.1f} s")
    print(f"{len(waves)} whole-wave opcodes: 2000 evaluations of each: {sum(waves) * 2000 / 1e6:.1f} s")
    print(f"skipped {len(skipped)}: " + "; ".join(f"{k} ({v})" for k, v in skipped.items()))
    if args.json:
        args.json.write_text(json.dumps({"evals": args.evals, "us_per_eval": dict(rows), "skipped": skipped}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

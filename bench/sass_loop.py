"""Instruction mix of the decode kernel's main loop, compiled for sm_90 on any machine.

    python3 -m bench.sass_loop [--format fp8|mxfp4] [--block-n 32] [--warps 4] [--stages 3]
                               [--sass FILE]

No GPU needed: Triton compiles for a named target (Hopper, sm_90) and its bundled
nvdisasm prints the SASS. The kernel is specialized as Triton's JIT specializes it on the
H200 for a 4 x 8192 call (tools/compile_target.py); the launch's split count only decides
whether the kernel writes partials (more than one split) or the output. The main loop is
the one backward branch whose body holds the MMAs; counts are per warp per tile.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import tempfile
from pathlib import Path

import submission as sub
from tools import compile_target, external_programs


def compile_kernel(kv_format: str, launch: sub.KernelLaunch, batch: int = 4, kv_len: int = 8192):
    """The decode kernel of `launch`, compiled for sm_90 as the JIT specializes it for a
    (batch, kv_len) call (tools/compile_target.py)."""
    data = compile_target.contract_inputs(batch, kv_len)
    decode = compile_target.decode_kernel_calls(data, kv_format, launch)[0]
    return compile_target.specialize(decode, compile_target.TARGETS["sm_90"]).compile()


def disassemble(cubin: bytes) -> str:
    """The SASS of `cubin`, by Triton's bundled nvdisasm (tools/external_programs.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        Path(path).write_bytes(cubin)
        return subprocess.run([*external_programs.command("nvdisasm"), "-c", path], capture_output=True, text=True,
                              check=True).stdout


def main_loop(sass: str, mma: str = "HMMA") -> list:
    """The opcodes of the tile loop: the shortest body of a backward branch that holds an
    instruction named with `mma` (HMMA: mma.sync; GMMA: warpgroup MMAs); [] where none does."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*\.(L_x_\d+):", line))}
    instruction = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
    loop = []
    for i, line in enumerate(lines):
        branch = re.search(r"BRA `\(\.(L_x_\d+)\)", line)
        if branch and labels.get(branch.group(1), i) < i:
            body = [m.group(1) for b in lines[labels[branch.group(1)]:i + 1] if (m := instruction.match(b))]
            if any(mma in op for op in body) and (not loop or len(body) < len(loop)):
                loop = body
    return loop


def main_loop_mix(sass: str) -> collections.Counter:
    """The tile loop's opcodes (with their modifiers) by count."""
    loop = main_loop(sass)
    if not loop:
        raise RuntimeError("no loop with MMAs found in the SASS")
    return collections.Counter(loop)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", default="fp8", choices=("fp8", "mxfp4"))
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--block-n", type=int, default=32)
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--sass", help="also write the whole SASS here")
    args = parser.parse_args()
    if (problem := external_programs.problem("nvdisasm")) is not None:
        raise SystemExit(problem)
    launch = sub.KernelLaunch(args.splits, args.block_n, args.warps, args.stages)
    compiled = compile_kernel(args.format, launch)
    sass = disassemble(compiled.asm["cubin"])
    if args.sass:
        Path(args.sass).write_text(sass)
    mix = main_loop_mix(sass)
    print(f"{args.format} {launch}: shared memory {compiled.metadata.shared} B; main loop, per warp per "
          f"{args.block_n}-token tile: {sum(mix.values())} instructions")
    for op, count in mix.most_common(20):
        print(f"  {count:5d}  {op}")


if __name__ == "__main__":
    main()

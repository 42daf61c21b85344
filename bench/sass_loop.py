"""Instruction mix of the decode kernel's main loop, compiled for sm_90 on any machine.

    python3 bench/sass_loop.py [--format fp8|mxfp4] [--block-n 32] [--warps 4] [--stages 3]
                               [--sass FILE]

No GPU needed: Triton compiles for a named target (Hopper, sm_90) and its bundled
nvdisasm prints the SASS. The kernel is specialized as on the H200 for the benchmark
inputs (16-byte aligned pointers, strides divisible by 16, several splits). The main loop
is the one backward branch whose body holds the MMAs; counts are per warp per tile.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import submission as sub  # noqa: E402

POINTERS = {"q_ptr": "*bf16", "kv_scale_ptr": "*fp32", "qo_indptr_ptr": "*i32", "kv_indptr_ptr": "*i32",
            "out_ptr": "*bf16", "part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "counters_ptr": "*i32"}


def compile_kernel(kv_format: str, launch: sub.TritonLaunch):
    kernel = sub._mla_decode_kernel
    names = kernel.arg_names
    is_mxfp4 = kv_format == "mxfp4"
    types = dict(POINTERS, kv_ptr="*u8" if is_mxfp4 else "*fp8e4nv", qk_scale="fp32")
    if is_mxfp4:
        types["kv_scale_ptr"] = "*u8"
    constants = {"KV_FORM": sub.kernel_form(kv_format, launch), "SPLIT": launch.num_splits > 1,
                 "COMBINE_IN_KERNEL": launch.combine_in_kernel, "BLOCK_N": launch.block_n,
                 "EMULATE": False}
    signature = {n: "constexpr" if n in constants else types.get(n, "i32") for n in names}
    aligned = [n for n in names if n in POINTERS or n == "kv_ptr"
               or n in ("stride_q_tok", "stride_q_head", "stride_kv", "stride_o_tok", "stride_o_head")]
    source = ASTSource(kernel, signature, {(names.index(n),): v for n, v in constants.items()},
                       {(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=launch.num_warps, num_stages=launch.num_stages))


def disassemble(cubin: bytes) -> str:
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        Path(path).write_bytes(cubin)
        return subprocess.run([str(nvdisasm), "-c", path], capture_output=True, text=True, check=True).stdout


def main_loop_mix(sass: str) -> collections.Counter:
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"\s*\.(L_x_\d+):", line))}
    instruction = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
    for i, line in enumerate(lines):
        branch = re.search(r"BRA `\(\.(L_x_\d+)\)", line)
        if branch and labels.get(branch.group(1), i) < i:
            mix = collections.Counter(m.group(1) for body in lines[labels[branch.group(1)]:i + 1]
                                      if (m := instruction.match(body)))
            if any(op.startswith("HMMA") for op in mix):
                return mix
    raise RuntimeError("no loop with MMAs found in the SASS")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--format", default="fp8", choices=("fp8", "mxfp4"))
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--block-n", type=int, default=32)
    parser.add_argument("--warps", type=int, default=4)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--sass", help="also write the whole SASS here")
    args = parser.parse_args()
    launch = sub.TritonLaunch(args.splits, args.block_n, args.warps, args.stages)
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

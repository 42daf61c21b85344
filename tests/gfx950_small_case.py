"""Small loops whose gfx950 code was checked by hand, for tests/test_gfx950_report.py.

    python3 tests/gfx950_small_case.py   (TRITON_INTERPRET unset) -> JSON on stdout

Each case is a loop over tiles accumulating one small product; the JSON holds the record
bench/gfx950_report.py makes of it (kernel_record), so the test checks the report's own
reading of compiled code against counts read off the listing by hand.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import compile_target  # noqa: E402
import gfx950_report  # noqa: E402
from submission import KernelCall  # noqa: E402


@triton.jit
def dot_loop_kernel(a_ptr, b_ptr, out_ptr, n_tiles, BLOCK_N: tl.constexpr, K: tl.constexpr):
    # out (16 x BLOCK_N) = sum over tiles t of A_t (16 x K) . B_t (K x BLOCK_N)
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, K)
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    for t in range(n_tiles):
        a = tl.load(a_ptr + t * 16 * K + rows[:, None] * K + ks[None, :])
        b = tl.load(b_ptr + t * K * BLOCK_N + ks[:, None] * BLOCK_N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + rows[:, None] * BLOCK_N + cols[None, :], acc)


@triton.jit
def scaled_dot_loop_kernel(a_ptr, b_ptr, b_scale_ptr, out_ptr, n_tiles, BLOCK_N: tl.constexpr, K: tl.constexpr):
    # As dot_loop_kernel with A in e4m3 and B in e2m1 (two a byte along K) with an e8m0
    # scale per 32 values along K.
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    for t in range(n_tiles):
        a = tl.load(a_ptr + t * 16 * K + rows[:, None] * K + tl.arange(0, K)[None, :])
        b = tl.load(b_ptr + t * BLOCK_N * K // 2 + tl.arange(0, K // 2)[:, None] * BLOCK_N + cols[None, :])
        b_scale = tl.load(b_scale_ptr + t * BLOCK_N * (K // 32) + cols[:, None] * (K // 32)
                          + tl.arange(0, K // 32)[None, :])
        acc = tl.dot_scaled(a, None, "e4m3", b, b_scale, "e2m1", acc)
    tl.store(out_ptr + rows[:, None] * BLOCK_N + cols[None, :], acc)


@triton.jit
def inline_asm_loop_kernel(a_ptr, b_ptr, out_ptr, n_tiles, BLOCK_N: tl.constexpr, K: tl.constexpr):
    # As dot_loop_kernel with A read in fp32 and raised by 4 through a 4-line inline-asm
    # block (one v_add_f32 a line, an element a lane), then rounded to fp16 for the MFMA.
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, K)
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    for t in range(n_tiles):
        a = tl.load(a_ptr + t * 16 * K + rows[:, None] * K + ks[None, :])
        a = tl.inline_asm_elementwise("v_add_f32 $0, 1.0, $1\n"
                                      "v_add_f32 $0, 1.0, $0\n"
                                      "v_add_f32 $0, 1.0, $0\n"
                                      "v_add_f32 $0, 1.0, $0",
                                      "=v,v", [a], dtype=tl.float32, is_pure=True, pack=1)
        b = tl.load(b_ptr + t * K * BLOCK_N + ks[:, None] * BLOCK_N + cols[None, :])
        acc = tl.dot(a.to(tl.float16), b, acc)
    tl.store(out_ptr + rows[:, None] * BLOCK_N + cols[None, :], acc)


def _meta(dtype, elements=1 << 16):
    return torch.empty((elements,), dtype=dtype, device="meta")


CASES = {
    # 1 wave; K = 64 of fp16 is two v_mfma_f32_16x16x32_f16 an iteration
    "f16": KernelCall(dot_loop_kernel, (1,),
                      (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 16, 64),
                      dict(num_warps=1, num_stages=1)),
    # as "f16" with two stages: the next tile's loads are issued before this tile's MFMAs
    "f16_two_stages": KernelCall(dot_loop_kernel, (1,),
                                 (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 16, 64),
                                 dict(num_warps=1, num_stages=2)),
    # 1 wave; K = 128 of e4m3 is one v_mfma_f32_16x16x128_f8f6f4 (fp8 x fp8)
    "fp8": KernelCall(dot_loop_kernel, (1,),
                      (_meta(torch.float8_e4m3fn), _meta(torch.float8_e4m3fn), _meta(torch.float32), 4, 16, 128),
                      dict(num_warps=1, num_stages=1)),
    # 4 waves split BLOCK_N = 64 into four 16-column tiles; the scaled MFMA takes the e2m1
    # operand as A (cbsz:4) and the e4m3 one as B
    "e4m3_x_e2m1": KernelCall(scaled_dot_loop_kernel, (1,),
                              (_meta(torch.float8_e4m3fn), _meta(torch.uint8), _meta(torch.uint8),
                               _meta(torch.float32), 4, 64, 128),
                              dict(num_warps=4, num_stages=1)),
    # 1 wave; K = 32: one v_mfma_f32_16x16x32_f16 an iteration, 8 elements of A a lane,
    # so 8 inline-asm blocks of 4 lines
    "inline_asm": KernelCall(inline_asm_loop_kernel, (1,),
                             (_meta(torch.float32), _meta(torch.float16), _meta(torch.float32), 4, 16, 32),
                             dict(num_warps=1, num_stages=1)),
}


def main():
    target = compile_target.TARGETS["gfx950"]
    records = {}
    for name, call in CASES.items():
        spec = compile_target.specialize(call, target)
        records[name] = gfx950_report.kernel_record(name, spec, spec.compile())
    json.dump(records, sys.stdout, indent=1)


if __name__ == "__main__":
    main()

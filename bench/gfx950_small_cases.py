"""Small loops whose gfx950 code was checked by hand: the calibration of the gfx950 report's
reader (tests/test_gfx950_report.py holds the counts read off their listings by hand).

    python3 -m bench.gfx950_small_cases   (TRITON_INTERPRET unset) -> JSON on stdout

Each case is a loop over tiles accumulating one small product; the JSON holds the record
bench/gfx950_report.py makes of it (kernel_record), so the test checks the report's own
reading of compiled code against counts read off the listing by hand. One case is a
Gluon ring (global -> LDS by the buffer-to-LDS loads, two stages), and two read a tile
in a way that leaves its loads unchecked by the hardware (global_load): the buffer-load
test must catch those.
"""
import json
import sys
import time

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.amd import cdna4

from bench import gfx950_report
from submission import KernelCall
from tools import compile_target


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


@triton.jit
def word_dot_loop_kernel(a_ptr, b_ptr, out_ptr, n_tiles, BLOCK_N: tl.constexpr, K: tl.constexpr):
    # As dot_loop_kernel with B read as 4-byte words (two fp16 each) through a pointer
    # cast: the cast hides B's base from Triton's buffer-load conversion, so B is read by
    # global_load (the deliberately wrong kernel of the buffer-load test).
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, K)
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    for t in range(n_tiles):
        a = tl.load(a_ptr + t * 16 * K + rows[:, None] * K + ks[None, :])
        b_pairs = b_ptr + t * K * BLOCK_N + ks[:, None] * BLOCK_N + 2 * tl.arange(0, BLOCK_N // 2)[None, :]
        words = tl.load(b_pairs.to(tl.pointer_type(tl.uint32)))
        b = tl.join(words.to(tl.uint16), (words >> 16).to(tl.uint16)).reshape(K, BLOCK_N)
        acc = tl.dot(a, b.to(tl.float16, bitcast=True), acc)
    tl.store(out_ptr + rows[:, None] * BLOCK_N + cols[None, :], acc)


@triton.jit
def gathered_dot_loop_kernel(a_ptr, b_ptr, b_rows_ptr, out_ptr, n_tiles, BLOCK_N: tl.constexpr, K: tl.constexpr):
    # As dot_loop_kernel with B's K rows gathered through row numbers read from memory
    # (unbounded: any int32): B's offsets are not provably in range or non-negative.
    rows = tl.arange(0, 16)
    cols = tl.arange(0, BLOCK_N)
    ks = tl.arange(0, K)
    acc = tl.zeros([16, BLOCK_N], tl.float32)
    for t in range(n_tiles):
        a = tl.load(a_ptr + t * 16 * K + rows[:, None] * K + ks[None, :])
        b_rows = tl.load(b_rows_ptr + t * K + ks)
        b = tl.load(b_ptr + b_rows[:, None] * BLOCK_N + cols[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + rows[:, None] * BLOCK_N + cols[None, :], acc)


@gluon.jit
def gluon_ring_kernel(a_ptr, b_ptr, out_ptr, n_tiles, K: gl.constexpr, BLOCK_N: gl.constexpr, RELAXED: gl.constexpr):
    # out (16 x BLOCK_N) = sum over tiles t of A_t (16 x K) . B_t (K x BLOCK_N) in fp16, one wave: each
    # tile goes global -> LDS by buffer_load_to_shared into a ring of two stages; the next
    # tile's copies (the last tile's again at the end: no predicate) are issued and
    # committed before this tile's wait_group(1), LDS reads and MFMAs.
    a_copy: gl.constexpr = gl.BlockedLayout([1, 8], [8, 8], [1, 1], [1, 0])  # 16 B a lane
    b_copy: gl.constexpr = gl.BlockedLayout([1, 8], [32, 2], [1, 1], [1, 0])
    ring_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    mfma: gl.constexpr = cdna4.AMDMFMALayout(4, [16, 16, 32], True, [1, 1])
    a_ring = gl.allocate_shared_memory(gl.float16, [2, 16, K], ring_layout)
    b_ring = gl.allocate_shared_memory(gl.float16, [2, K, BLOCK_N], ring_layout)
    a_offs = (gl.arange(0, 16, gl.SliceLayout(1, a_copy))[:, None] * K
              + gl.arange(0, K, gl.SliceLayout(0, a_copy))[None, :])
    b_offs = (gl.arange(0, K, gl.SliceLayout(1, b_copy))[:, None] * BLOCK_N
              + gl.arange(0, BLOCK_N, gl.SliceLayout(0, b_copy))[None, :])
    cdna4.async_copy.buffer_load_to_shared(a_ring.index(0), a_ptr, a_offs)
    cdna4.async_copy.buffer_load_to_shared(b_ring.index(0), b_ptr, b_offs)
    cdna4.async_copy.commit_group()
    acc = gl.zeros([16, BLOCK_N], gl.float32, mfma)
    for t in range(n_tiles):
        following = gl.minimum(t + 1, n_tiles - 1)
        cdna4.async_copy.buffer_load_to_shared(a_ring.index((t + 1) % 2), a_ptr, a_offs + following * 16 * K)
        cdna4.async_copy.buffer_load_to_shared(b_ring.index((t + 1) % 2), b_ptr, b_offs + following * K * BLOCK_N)
        cdna4.async_copy.commit_group()
        cdna4.async_copy.wait_group(1)
        if RELAXED:
            # the reads marked as ordered by wait_group alone
            a = cdna4.async_copy.load_shared_relaxed(a_ring.index(t % 2), gl.DotOperandLayout(0, mfma, 8))
            b = cdna4.async_copy.load_shared_relaxed(b_ring.index(t % 2), gl.DotOperandLayout(1, mfma, 8))
        else:
            # plain reads: LLVM orders them after every LDS-destination load still in flight
            # (the next tile's copies might write what they read): s_waitcnt vmcnt(0)
            a = a_ring.index(t % 2).load(gl.DotOperandLayout(0, mfma, 8))
            b = b_ring.index(t % 2).load(gl.DotOperandLayout(1, mfma, 8))
        acc = cdna4.mfma(a, b, acc)
    cdna4.async_copy.wait_group(0)
    out_layout: gl.constexpr = gl.BlockedLayout([1, 4], [16, 4], [1, 1], [1, 0])
    out_offs = (gl.arange(0, 16, gl.SliceLayout(1, out_layout))[:, None] * BLOCK_N
                + gl.arange(0, BLOCK_N, gl.SliceLayout(0, out_layout))[None, :])
    gl.store(out_ptr + out_offs, gl.convert_layout(acc, out_layout))


def _call(kernel, args, options):
    return KernelCall(kernel, (1,), dict(zip(kernel.arg_names, args, strict=True)), options)


def _meta(dtype, elements=1 << 16):
    return torch.empty((elements,), dtype=dtype, device="meta")


CASES = {
    # 1 wave; K = 64 of fp16 is two v_mfma_f32_16x16x32_f16 an iteration
    "f16": _call(dot_loop_kernel,
                      (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 16, 64),
                      dict(num_warps=1, num_stages=1)),
    # as "f16" with two stages: the next tile's loads are issued before this tile's MFMAs
    "f16_two_stages": _call(dot_loop_kernel,
                                 (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 16, 64),
                                 dict(num_warps=1, num_stages=2)),
    # 1 wave; K = 128 of e4m3 is one v_mfma_f32_16x16x128_f8f6f4 (fp8 x fp8)
    "fp8": _call(dot_loop_kernel,
                      (_meta(torch.float8_e4m3fn), _meta(torch.float8_e4m3fn), _meta(torch.float32), 4, 16, 128),
                      dict(num_warps=1, num_stages=1)),
    # 4 waves split BLOCK_N = 64 into four 16-column tiles; the scaled MFMA takes the e2m1
    # operand as A (cbsz:4) and the e4m3 one as B
    "e4m3_x_e2m1": _call(scaled_dot_loop_kernel,
                              (_meta(torch.float8_e4m3fn), _meta(torch.uint8), _meta(torch.uint8),
                               _meta(torch.float32), 4, 64, 128),
                              dict(num_warps=4, num_stages=1)),
    # 1 wave; K = 32: one v_mfma_f32_16x16x32_f16 an iteration, 8 elements of A a lane,
    # so 8 inline-asm blocks of 4 lines
    "inline_asm": _call(inline_asm_loop_kernel,
                             (_meta(torch.float32), _meta(torch.float16), _meta(torch.float32), 4, 16, 32),
                             dict(num_warps=1, num_stages=1)),
    # Gluon, 1 wave; K = 64: per tile 2 + 2 buffer_load_dwordx4 ... lds (A, B: 2 KiB each),
    # two v_mfma_f32_16x16x32_f16
    "gluon_ring": _call(gluon_ring_kernel,
                             (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 64, 16, True),
                             dict(num_warps=1)),
    # as "gluon_ring" with plain shared-memory reads: nothing stays in flight at the MFMAs
    "gluon_ring_plain_reads": _call(gluon_ring_kernel,
                                         (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 64,
                                          16, False),
                                         dict(num_warps=1)),
    # as "f16", B's rows gathered by row numbers read from memory: still buffer loads
    "gathered_rows": _call(gathered_dot_loop_kernel,
                                (_meta(torch.float16), _meta(torch.float16), _meta(torch.int32), _meta(torch.float32),
                                 4, 16, 64),
                                dict(num_warps=1, num_stages=1)),
    # as "f16", B read as words through a pointer cast: global_load
    "pointer_cast": _call(word_dot_loop_kernel,
                               (_meta(torch.float16), _meta(torch.float16), _meta(torch.float32), 4, 16, 64),
                               dict(num_warps=1, num_stages=1)),
    # as "f16" with B in a 4 GiB tensor: no tt.pointer_range 32 (2 GiB and more), so B is
    # read by global_load
    "b_over_2_gib": _call(dot_loop_kernel,
                               (_meta(torch.float16), _meta(torch.float16, (1 << 31) + 64), _meta(torch.float32), 4,
                                16, 64),
                               dict(num_warps=1, num_stages=1)),
}


def main():
    target = compile_target.TARGETS["gfx950"]
    records = {}
    for name, call in CASES.items():
        spec = compile_target.specialize(call, target)
        started = time.perf_counter()
        compiled = spec.compile()
        records[name] = gfx950_report.kernel_record(name, spec, compiled, time.perf_counter() - started)
    json.dump(records, sys.stdout, indent=1)


if __name__ == "__main__":
    main()

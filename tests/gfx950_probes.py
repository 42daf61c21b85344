"""Small Triton and Gluon kernels whose results torch can compute: compiled for gfx950 the
way the project compiles its own (the JIT's specialization, tools/compile_target.py), they
are the emulator's oracle. AMD tests Triton's gfx950 lowering on silicon, so where the
emulator's result differs from torch's, the emulator is wrong (tests/test_gfx950_emu_probes.py).

Each PROBES entry builds (KernelCall list, check) on the CPU: check() raises AssertionError
with what differs. Kept small: a probe runs in seconds."""
from __future__ import annotations

import fractions

import numpy as np
import torch
import triton
import triton.language as tl

import submission as sub


# ---------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------
@triton.jit
def int_ops_kernel(x_ptr, y_ptr, o_ptr, wide_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    base = o_ptr + offs * 12
    tl.store(base + 0, x + y, mask=m)
    tl.store(base + 1, x - y, mask=m)
    tl.store(base + 2, x * y, mask=m)
    tl.store(base + 3, x >> 3, mask=m)
    tl.store(base + 4, (x.to(tl.uint32, bitcast=True) >> 5).to(tl.int32, bitcast=True), mask=m)
    tl.store(base + 5, (x & y) | ~x, mask=m)
    tl.store(base + 6, tl.minimum(x, y), mask=m)
    tl.store(base + 7, tl.maximum(x, y), mask=m)
    tl.store(base + 8, x // 7, mask=m)
    tl.store(base + 9, x % 5, mask=m)
    tl.store(base + 10, tl.where(x < y, x, y ^ 0x5A5A), mask=m)
    tl.store(base + 11, (x << 4) ^ (y >> 28), mask=m)
    tl.store(wide_ptr + offs, (x.to(tl.int64) * y) >> 7, mask=m)


@triton.jit
def _three_float_inputs(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    # (this program's elements, their mask, a, b, c there)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    return offs, m, tl.load(a_ptr + offs, mask=m), tl.load(b_ptr + offs, mask=m), tl.load(c_ptr + offs, mask=m)


@triton.jit
def float_ops_kernel(a_ptr, b_ptr, c_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs, m, a, b, c = _three_float_inputs(a_ptr, b_ptr, c_ptr, n, BLOCK)
    base = o_ptr + offs * 8
    tl.store(base + 0, a + b, mask=m)
    tl.store(base + 1, a * b, mask=m)
    tl.store(base + 2, tl.fma(a, b, c), mask=m)
    tl.store(base + 3, a / b, mask=m)
    tl.store(base + 4, tl.exp2(a), mask=m)
    tl.store(base + 5, tl.log2(tl.abs(b)), mask=m)
    tl.store(base + 6, tl.maximum(a, c), mask=m)
    tl.store(base + 7, a - c, mask=m)


@triton.jit
def nan_max_kernel(a_ptr, b_ptr, c_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs, m, a, b, c = _three_float_inputs(a_ptr, b_ptr, c_ptr, n, BLOCK)
    hi = tl.maximum(tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL), c, propagate_nan=tl.PropagateNan.ALL)
    lo = tl.minimum(tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL), c, propagate_nan=tl.PropagateNan.ALL)
    tl.store(o_ptr + offs * 2, hi, mask=m)
    tl.store(o_ptr + offs * 2 + 1, lo, mask=m)


@triton.jit
def convert_kernel(f_ptr, i_ptr, e_ptr, bf_ptr, f8_ptr, back_ptr, ints_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    f = tl.load(f_ptr + offs, mask=m)
    i = tl.load(i_ptr + offs, mask=m)
    e = tl.load(e_ptr + offs, mask=m)                       # e8m0 bytes
    tl.store(bf_ptr + offs, f.to(tl.bfloat16), mask=m)
    q = (f * 64.0).to(tl.float8e4nv)
    tl.store(f8_ptr + offs, q, mask=m)
    tl.store(back_ptr + offs * 3 + 0, q.to(tl.float32), mask=m)
    tl.store(back_ptr + offs * 3 + 1, f.to(tl.bfloat16).to(tl.float32), mask=m)
    tl.store(back_ptr + offs * 3 + 2, i.to(tl.float32), mask=m)
    tl.store(ints_ptr + offs, (f * 1000.0).to(tl.int32), mask=m)
    tl.store(scale_ptr + offs, (e.to(tl.uint32) << 23).to(tl.float32, bitcast=True), mask=m)


@triton.jit
def reduce_kernel(x_ptr, k_ptr, sum_ptr, max_ptr, isum_ptr, R: tl.constexpr, C: tl.constexpr):
    rows = tl.arange(0, R)
    cols = tl.arange(0, C)
    x = tl.load(x_ptr + rows[:, None] * C + cols[None, :])
    k = tl.load(k_ptr + rows[:, None] * C + cols[None, :])
    tl.store(sum_ptr + rows, tl.sum(x, axis=1))
    tl.store(max_ptr + cols, tl.max(x, axis=0))
    tl.store(isum_ptr, tl.sum(tl.sum(k, axis=1), axis=0))


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@triton.jit
def dot_scaled_kernel(a_ptr, as_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    # a: [M, K/2] e2m1 pairs (low nibble the even k), as: [M, K/32] e8m0; b: [K, N] e4m3
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    a_scale = tl.load(as_ptr + rm[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot_scaled(a, a_scale, "e2m1", b, None, "e4m3"))


@triton.jit
def atomic_kernel(counter_ptr, bins_ptr, keys_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    keys = tl.load(keys_ptr + offs, mask=m, other=0)
    tl.atomic_add(bins_ptr + keys, 1, mask=m)
    old = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    tl.store(old_ptr + tl.program_id(0), old)


@triton.jit
def masked_copy_kernel(x_ptr, y_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.5)
    tl.store(y_ptr + offs + shift, x * 2.0, mask=(offs < n) & (offs % 3 != 0))


@triton.jit
def transpose_kernel(a_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    a = tl.load(a_ptr + rm[:, None] * N + rn[None, :])
    tl.store(o_ptr + rn[:, None] * M + rm[None, :], tl.trans(a))


try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.amd import cdna4 as gl_cdna4
except Exception:  # noqa: BLE001 - any Triton whose Gluon differs: the Gluon probe is skipped
    gluon = None

if gluon is not None:
    @gluon.jit
    def gluon_ring_copy_kernel(x_ptr, y_ptr, rows, ROWS: gl.constexpr, COLS: gl.constexpr):
        # rows x COLS bytes through a 2-stage LDS ring by buffer loads into LDS (16 bytes a
        # thread), each tile waited for with wait_group, read back and stored; rows past
        # `rows` are clamped to the last row, as the project's copies are.
        layout: gl.constexpr = gl.BlockedLayout([1, 16], [64 // (COLS // 16), COLS // 16], [4, 1], [1, 0])
        ring = gl.allocate_shared_memory(gl.uint8, [2, ROWS, COLS], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
        c = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
        for tile in gl.static_range(2):
            row = gl.minimum(r + tile * ROWS, rows - 1)
            offsets = gl.expand_dims(row, 1) * COLS + gl.expand_dims(c, 0)
            gl_cdna4.async_copy.buffer_load_to_shared(ring.index(tile), x_ptr, offsets)
            gl_cdna4.async_copy.commit_group()
        for tile in gl.static_range(2):
            gl_cdna4.async_copy.wait_group(1 - tile)
            data = gl_cdna4.async_copy.load_shared_relaxed(ring.index(tile), layout)
            out = (gl.expand_dims(r + tile * ROWS, 1) * COLS + gl.expand_dims(c, 0))
            gl.store(y_ptr + out, data + 1)


    @gluon.jit
    def gluon_byte_rows_kernel(x_ptr, y_ptr, z_ptr, rows, stride, ROWS: gl.constexpr, BLOCKS: gl.constexpr):
        # Bytes 0..BLOCKS-1 of x's rows (`stride` bytes apart) as [BLOCKS, ROWS] (BLOCKS / 2 of
        # one row a thread, as the MXFP4 Gluon form loads its scales) by byte buffer loads, the
        # rows past `rows` read by none: into y, their offsets moved to 2^31 (one selection a
        # row, the blocks as the loads' immediate offsets), into z, masked (Triton's lowering:
        # the masked lanes' offset 0x80000000, no `other`): both rely on the hardware returning
        # 0 out of range.
        layout: gl.constexpr = gl.BlockedLayout([BLOCKS // 2, 1], [2, 32], [1, 4], [0, 1])
        r = gl.expand_dims(gl.arange(0, ROWS, layout=gl.SliceLayout(0, layout)), 0)
        b = gl.expand_dims(gl.arange(0, BLOCKS, layout=gl.SliceLayout(1, layout)), 1)
        valid = r < rows
        lane_blocks = b // (BLOCKS // 2) * (BLOCKS // 2)
        moved = (gl.where(valid, r * stride, -2147483648) + lane_blocks) + b % (BLOCKS // 2)
        out = b * ROWS + r
        gl.store(y_ptr + out, gl_cdna4.buffer_load(x_ptr, moved).to(gl.int32))
        gl.store(z_ptr + out, gl_cdna4.buffer_load(x_ptr, r * stride + b, mask=valid & (b >= 0)).to(gl.int32))


# ---------------------------------------------------------------------------------------
# probes: (calls, check)
# ---------------------------------------------------------------------------------------
def _call(kernel, grid, args, **options):
    options.setdefault("num_warps", 4)
    return sub.KernelCall(kernel, grid, dict(zip(kernel.arg_names, args, strict=True)), options)


def _bits_equal(name, got, want):
    got_bits = got.contiguous().view(torch.int32 if got.element_size() == 4 else torch.int16)
    want_bits = want.contiguous().view(torch.int32 if want.element_size() == 4 else torch.int16)
    nan = got.isnan() & want.isnan() if got.is_floating_point() else torch.zeros_like(got, dtype=torch.bool)
    bad = (got_bits != want_bits) & ~nan
    assert not bad.any(), f"{name}: {int(bad.sum())} elements differ, e.g. {got[bad][:4].tolist()} for {want[bad][:4].tolist()}"


def _within_ulps(name, got, want, ulps):
    g = got.double()
    w = want.double()
    spacing = torch.from_numpy(np.spacing(np.abs(want.numpy().astype(np.float32)))).double()
    finite = w.isfinite()
    bad = finite & ((g - w).abs() > ulps * spacing)
    bad |= ~finite & ~((g == w) | (g.isnan() & w.isnan()))
    assert not bad.any(), f"{name}: {int(bad.sum())} beyond {ulps} ulp, e.g. {got[bad][:4].tolist()} for {want[bad][:4].tolist()}"


def probe_int_ops():
    gen = torch.Generator().manual_seed(1)
    n = 700
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), generator=gen, dtype=torch.int32)
    y = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), generator=gen, dtype=torch.int32)
    y[::7] = torch.randint(-9, 9, (len(y[::7]),), generator=gen, dtype=torch.int32) | 1
    out = torch.full((n, 12), 0x1234567, dtype=torch.int32)
    wide = torch.zeros(n, dtype=torch.int64)
    calls = [_call(int_ops_kernel, (triton.cdiv(n, 256),), (x, y, out, wide, n, 256))]

    def check():
        X, Y = x.long(), y.long()
        wrap = lambda v: ((v + 2 ** 31) % 2 ** 32 - 2 ** 31).to(torch.int32)  # noqa: E731
        want = [wrap(X + Y), wrap(X - Y), wrap(X * Y), x >> 3, wrap((X % 2 ** 32) >> 5), (x & y) | ~x,
                torch.minimum(x, y), torch.maximum(x, y), torch.div(x, 7, rounding_mode="trunc"),
                torch.fmod(x, 5), torch.where(x < y, x, y ^ 0x5A5A), wrap((X << 4) ^ (Y >> 28))]
        for i, w in enumerate(want):
            _bits_equal(f"int op {i}", out[:, i], w)
        _bits_equal("int64 product", wide.view(torch.int32), ((X * Y) >> 7).view(torch.int32))
    return calls, check


def _exact_fma(a, b, c):
    """fma(a, b, c) of float32 tensors, rounded once from the exact rational value (NaN and
    infinities as float64 arithmetic gives them)."""
    F = fractions.Fraction
    finite = torch.isfinite(a) & torch.isfinite(b) & torch.isfinite(c)
    result = (a.double() * b.double() + c.double()).float()
    idx = torch.nonzero(finite).flatten()
    result[idx] = _exact_fma_finite(a[idx], b[idx], c[idx])
    return result


def _exact_fma_finite(a, b, c):
    F = fractions.Fraction
    values = [float(F(float(x)) * F(float(y)) + F(float(z))) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    # a float64 nearest to the exact value may sit on a float32 midpoint: decide with the exact value
    out = []
    for x, y, z, v in zip(a.tolist(), b.tolist(), c.tolist(), values):
        exact = F(float(x)) * F(float(y)) + F(float(z))
        r = np.float32(v)
        lo, hi = np.nextafter(r, np.float32(-np.inf)), np.nextafter(r, np.float32(np.inf))
        best = min((r, lo, hi), key=lambda t: (abs(F(float(t)) - exact), int(np.array(t).view(np.uint32)) & 1))
        out.append(best)
    return torch.tensor(np.array(out, dtype=np.float32))


def probe_float_ops():
    gen = torch.Generator().manual_seed(2)
    n = 600
    a = torch.randn(n, generator=gen) * 4
    b = torch.randn(n, generator=gen)
    c = torch.randn(n, generator=gen)
    a[:4] = torch.tensor([0.0, -0.0, 1e-40, 126.5])        # zeros, a denormal, near exp2's top
    b[4] = 0.0                                              # x / 0
    a[6:10] = torch.tensor([3e38, 1e-38, 2.0 ** -140, 7e37])   # quotients near the float32 limits
    b[6:10] = torch.tensor([1e-5, 3e5, 0.75, 2.0 ** -60])
    c[5] = float("nan")                                     # max with a NaN
    out = torch.full((n, 8), -7.0)
    calls = [_call(float_ops_kernel, (triton.cdiv(n, 256),), (a, b, c, out, n, 256))]

    def check():
        _bits_equal("a + b", out[:, 0], a + b)
        _bits_equal("a * b", out[:, 1], a * b)
        _bits_equal("fma(a, b, c)", out[:, 2], _exact_fma(a, b, c))
        _bits_equal("a / b", out[:, 3], a / b)
        _within_ulps("exp2(a)", out[:, 4], torch.exp2(a.double()).float(), 1)
        _within_ulps("log2(|b|)", out[:, 5], torch.log2(b.abs().double()).float(), 1)
        _bits_equal("maximum(a, c) (a NaN loses)", out[:, 6], torch.fmax(a, c))
        _bits_equal("a - c", out[:, 7], a - c)
    return calls, check


def probe_nan_max():
    gen = torch.Generator().manual_seed(9)
    n = 300
    a, b, c = (torch.randn(n, generator=gen) for _ in range(3))
    a[::7] = float("nan")
    b[3::11] = float("nan")
    a[1::13], b[1::13] = 0.0, -0.0
    out = torch.zeros((n, 2))
    calls = [_call(nan_max_kernel, (triton.cdiv(n, 128),), (a, b, c, out, n, 128))]

    def ieee(x, y, larger):
        # IEEE 754-2019 maximum / minimum, LLVM's llvm.maximum / llvm.minimum: NaN if either
        # is, and -0 < +0 (torch's maximum leaves the zeros' order open)
        pick = torch.where(x > y, x, y) if larger else torch.where(x < y, x, y)
        zeros = (x == 0) & (y == 0)
        signed = torch.where(torch.signbit(x) & torch.signbit(y) if larger else torch.signbit(x) | torch.signbit(y),
                             torch.tensor(-0.0), torch.tensor(0.0))
        pick = torch.where(zeros, signed, pick)
        return torch.where(x.isnan() | y.isnan(), torch.tensor(float("nan")), pick)

    def check():
        want_max = ieee(ieee(a, b, True), c, True)
        want_min = ieee(ieee(a, b, False), c, False)
        _bits_equal("maximum, NaN propagated", out[:, 0], want_max)
        _bits_equal("minimum, NaN propagated", out[:, 1], want_min)
    return calls, check


def probe_conversions():
    gen = torch.Generator().manual_seed(3)
    n = 512
    f = torch.randn(n, generator=gen)
    # 6.9 * 64 = 441.6 (e4m3's top); 3e36 * 64 saturates (an infinity's conversion is not known)
    f[:6] = torch.tensor([0.0, -0.0, 3.0e36, -2.5e-39, 6.9, -6.9])
    i = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), generator=gen, dtype=torch.int32)
    e = torch.randint(1, 255, (n,), generator=gen, dtype=torch.uint8)
    bf = torch.zeros(n, dtype=torch.bfloat16)
    f8 = torch.zeros(n, dtype=torch.float8_e4m3fn)
    back = torch.zeros((n, 3))
    ints = torch.zeros(n, dtype=torch.int32)
    scale = torch.zeros(n)
    calls = [_call(convert_kernel, (triton.cdiv(n, 256),), (f, i, e, bf, f8, back, ints, scale, n, 256))]

    def check():
        _bits_equal("f32 -> bf16", bf, f.to(torch.bfloat16))
        in_range = (f * 64).abs() <= 448
        want_f8 = (f * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
        _bits_equal("f32 -> e4m3 (in range)", f8.view(torch.uint8)[in_range].to(torch.int32),
                    want_f8.view(torch.uint8)[in_range].to(torch.int32))
        # beyond e4m3's range: Triton sets MODE.FP16_OVFL on gfx950, so the convert saturates
        _bits_equal("f32 -> e4m3 (saturated)", f8.view(torch.uint8)[~in_range].to(torch.int32),
                    want_f8.view(torch.uint8)[~in_range].to(torch.int32))
        _bits_equal("e4m3 -> f32", back[:, 0], f8.float())
        _bits_equal("bf16 -> f32", back[:, 1], f.to(torch.bfloat16).float())
        _bits_equal("i32 -> f32", back[:, 2], i.float())
        small = (f * 1000).abs() < 2 ** 31
        _bits_equal("f32 -> i32", ints[small], (f * 1000)[small].to(torch.int32))
        _bits_equal("e8m0 -> f32", scale, torch.exp2(e.double() - 127).float())
    return calls, check


def probe_reductions():
    gen = torch.Generator().manual_seed(4)
    R, C = 64, 128
    x = torch.randn((R, C), generator=gen)
    k = torch.randint(-1000, 1000, (R, C), generator=gen, dtype=torch.int32)
    sums, maxes, isum = torch.zeros(R), torch.zeros(C), torch.zeros(1, dtype=torch.int32)
    calls = [_call(reduce_kernel, (1,), (x, k, sums, maxes, isum, R, C))]

    def check():
        exact = x.double().sum(1)
        assert ((sums.double() - exact).abs() <= 1e-5 * x.abs().double().sum(1)).all(), "row sums"
        _bits_equal("column maxima", maxes, x.max(0).values)
        assert int(isum) == int(k.sum()), f"integer sum {int(isum)} != {int(k.sum())}"
    return calls, check


def probe_dot(dtype, M, N, K):
    def build():
        gen = torch.Generator().manual_seed(5)
        a = torch.randn((M, K), generator=gen).to(dtype)
        b = torch.randn((K, N), generator=gen).to(dtype)
        c = torch.zeros((M, N))
        calls = [_call(dot_kernel, (1,), (a, b, c, M, N, K), matrix_instr_nonkdim=16)]

        def check():
            exact = a.double() @ b.double()
            assert ((c.double() - exact).abs() <= 1e-6 * (a.double().abs() @ b.double().abs()) + 1e-30).all(), \
                f"tl.dot {dtype} {M}x{N}x{K}: largest error {(c.double() - exact).abs().max().item()}"
        return calls, check
    return build


E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)


def probe_dot_scaled(M, N, K):
    def build():
        gen = torch.Generator().manual_seed(6)
        a = torch.randint(0, 256, (M, K // 2), generator=gen, dtype=torch.uint8)
        a_scale = torch.randint(118, 136, (M, K // 32), generator=gen, dtype=torch.uint8)
        b = torch.randn((K, N), generator=gen).to(torch.float8_e4m3fn)
        c = torch.zeros((M, N))
        calls = [_call(dot_scaled_kernel, (1,), (a, a_scale, b, c, M, N, K), matrix_instr_nonkdim=16)]

        def check():
            values = torch.stack([E2M1[(a & 15).long()], E2M1[(a >> 4).long()]], -1).reshape(M, K)
            values = values * torch.exp2(a_scale.double() - 127).repeat_interleave(32, 1)
            exact = values @ b.double()
            tolerance = 1e-6 * (values.abs() @ b.double().abs())
            assert ((c.double() - exact).abs() <= tolerance).all(), \
                f"tl.dot_scaled e2m1 x e4m3 {M}x{N}x{K}: largest error {(c.double() - exact).abs().max().item()}"
        return calls, check
    return build


def probe_atomics():
    gen = torch.Generator().manual_seed(7)
    n, block = 900, 256
    keys = torch.randint(0, 16, (n,), generator=gen, dtype=torch.int32)     # many lanes on one bin
    counter = torch.zeros(1, dtype=torch.int32)
    bins = torch.zeros(16, dtype=torch.int32)
    programs = triton.cdiv(n, block)
    old = torch.full((programs,), -1, dtype=torch.int32)
    calls = [_call(atomic_kernel, (programs,), (counter, bins, keys, old, n, block))]

    def check():
        assert torch.equal(bins, torch.bincount(keys.long(), minlength=16).int()), "histogram by atomic_add"
        assert int(counter) == programs and sorted(old.tolist()) == list(range(programs)), \
            f"counter {int(counter)}, returned {old.tolist()}"
    return calls, check


def probe_masked():
    n, shift = 333, 5
    x = torch.arange(n, dtype=torch.float32)
    y = torch.full((n + shift + 7,), 9.0)
    calls = [_call(masked_copy_kernel, (triton.cdiv(n, 128),), (x, y, n, shift, 128))]

    def check():
        want = torch.full_like(y, 9.0)
        offs = torch.arange(n)
        keep = offs % 3 != 0
        want[offs[keep] + shift] = x[keep] * 2
        _bits_equal("masked load and store", y, want)
    return calls, check


def probe_transpose(dtype, M, N):
    def build():
        gen = torch.Generator().manual_seed(8)
        a = (torch.randn((M, N), generator=gen) * 50).to(dtype)
        o = torch.zeros((N, M), dtype=dtype)
        calls = [_call(transpose_kernel, (1,), (a, o, M, N))]

        def check():
            assert torch.equal(o.view(torch.uint8), a.T.contiguous().view(torch.uint8)), f"transpose {dtype} {M}x{N}"
        return calls, check
    return build


def probe_gluon_ring():
    rows_total, rows, cols = 50, 32, 64
    x = torch.randint(0, 250, (rows_total, cols), dtype=torch.uint8)
    y = torch.zeros((2 * rows, cols), dtype=torch.uint8)
    calls = [_call(gluon_ring_copy_kernel, (1,), (x, y, rows_total, rows, cols))]

    def check():
        want = x[torch.clamp(torch.arange(2 * rows), max=rows_total - 1)] + 1
        assert torch.equal(y, want), "the LDS ring's copy"
    return calls, check


def probe_gluon_byte_rows():
    rows, cap, blocks, stride = 45, 128, 16, 18
    x = torch.randint(1, 255, (rows, stride), dtype=torch.uint8)  # exactly the rows read: nothing past them
    y = torch.full((blocks, cap), 7, dtype=torch.int32)
    z = torch.full((blocks, cap), 7, dtype=torch.int32)
    calls = [_call(gluon_byte_rows_kernel, (1,), (x, y, z, rows, stride, cap, blocks))]

    def check():
        want = torch.zeros((blocks, cap), dtype=torch.int32)
        want[:, :rows] = x[:, :blocks].T.int()
        assert torch.equal(y, want), "byte loads moved past the range: not 0, or a valid row wrong"
        assert torch.equal(z, want), "masked byte loads: not 0, or a valid row wrong"
    return calls, check


PROBES = {
    "int ops (add sub mul shifts logic min max div mod select, int64)": probe_int_ops,
    "float ops (add mul fma div exp2 log2 max with NaN)": probe_float_ops,
    "conversions (bf16, e4m3, int, e8m0)": probe_conversions,
    "maximum / minimum propagating NaN": probe_nan_max,
    "reductions across lanes and waves": probe_reductions,
    "tl.dot bf16 16x16x32": probe_dot(torch.bfloat16, 16, 16, 32),
    "tl.dot bf16 32x64x128": probe_dot(torch.bfloat16, 32, 64, 128),
    "tl.dot fp8 16x16x32": probe_dot(torch.float8_e4m3fn, 16, 16, 32),
    "tl.dot fp8 32x32x256": probe_dot(torch.float8_e4m3fn, 32, 32, 256),
    "tl.dot_scaled e2m1 x e4m3 16x16x128": probe_dot_scaled(16, 16, 128),
    "tl.dot_scaled e2m1 x e4m3 32x16x512": probe_dot_scaled(32, 16, 512),
    "atomics (histogram, acq_rel counter)": probe_atomics,
    "masked loads and stores (buffer ops)": probe_masked,
    "layout through LDS (transpose f32)": probe_transpose(torch.float32, 64, 64),
    "layout through LDS (transpose bf16)": probe_transpose(torch.bfloat16, 32, 128),
    "layout through LDS (transpose u8)": probe_transpose(torch.uint8, 64, 64),
    "Gluon LDS ring (buffer loads into LDS, wait_group)": probe_gluon_ring,
    "Gluon byte buffer loads out of range (0, nothing read)": probe_gluon_byte_rows,
}

"""The Triton MXFP4 / fp8 decode kernels, run on CPU under the Triton interpreter.

The interpreter must be on (TRITON_INTERPRET=1) before the process first imports
triton: Triton's own helpers (tl.cdiv, tl.sum, ...) are decorated then. Other test
modules import triton without it, so the kernels run in one worker process, spawned
with TRITON_INTERPRET=1 in its environment, whatever this process imported first.
Inputs and references are made here; the worker only runs the launchers.

Reference: attention in float64 on the same dequantized KV, written here from the format
rules (E2M1 table, 2^(s-127) scales), not from the kernel's bit tricks.
Bound: |out - ref| <= 2^-7 |ref| + abs_slack (+ p_rounding for fp8). The MXFP4 kernel
computes in fp32 here (the interpreter's dots take fp32 operands), so nearly all of its
error is the final bf16 store; the interpreter truncates fp32 -> bf16 instead of
rounding, which costs up to one bf16 ulp (<= 2^-7 |ref|). abs_slack = 1e-5 * max|ref|
covers the fp32 softmax and split merge (about 1e-6 relative here), plus one bf16
subnormal ulp (2^-133) for the bottom of the e8m0 range. The fp8 kernel's operands are
fp16, as on the GPU: Q (power-of-two scaled) and K, V are exact there, P is rounded to
fp16, each weight by at most 2^-11 of itself (normal range) or 2^-25 (subnormal), so
the output moves by at most p_rounding = (2^-11 + n * 2^-25) * max|V| for n tokens.

The CDNA4 forms (fp8 "e4m3_waves", MXFP4 "waves") quantize Q to e4m3 in the
kernel, with a power-of-two scale per head (amax into [128, 256)): their reference is the
same attention on that quantized Q (q_e4m3 below, written from the rule, rounding by
torch's own e4m3 conversion), so the bounds above still hold for the MXFP4 forms, whose
other operands are exact under the interpreter. The fp8 "e4m3_waves" form also rounds P * 2^8
to e4m3: each weight moves by at most 2^-4 of itself, or 2^-18 in e4m3's subnormal range,
so output element j moves by at most 2^-4 * A_j + n * 2^-18 * max|V| (A_j: the same
attention over |V|); those roundings are independent and zero-mean, so the relative RMS
error stays under their RMS, 2^-4 / sqrt(3) = 3.6%, which is checked too.
"""
import dataclasses
import os

import pytest
import torch

import submission as sub
from conftest import interpreted_forms
from interpreter_worker import InterpreterWorker

E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
SM_SCALE = 576 ** -0.5


# ------------------------------------------------------------------ the interpreter worker
_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


def _decode_in_worker(kv_format, q, buf, scale, qo, kv_indptr, launch):
    """Runs in the worker: one launcher call on a poisoned output."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16)
    scratch = sub.make_split_scratch(q.shape[0], launch, "cpu")
    decode = sub.mxfp4_decode if kv_format == "mxfp4" else sub.fp8_decode
    decode(q, buf, scale, qo, kv_indptr, SM_SCALE, out, scratch, launch)
    return out, scratch.counters


def run_kernel(kv_format, q, buf, scale, qo, kv_indptr, launch):
    out, counters = _worker.run(_decode_in_worker, kv_format, q, buf, scale, qo, kv_indptr, launch)
    assert (counters == 0).all(), "the in-kernel combine must reset its counters for the next call"
    return out


def run_mxfp4(q, buf, scales, qo, kv_indptr, launch):
    return run_kernel("mxfp4", q, buf, scales, qo, kv_indptr, launch)


def run_fp8(q, buf, scale, qo, kv_indptr, launch):
    return run_kernel("fp8", q, buf, scale, qo, kv_indptr, launch)


# ------------------------------------------------------------------ reference
def dequant_mxfp4(buf_u8, scales_u8):
    rows = buf_u8.shape[0]
    b = buf_u8.reshape(rows, 288).long()
    codes = torch.stack([b & 15, b >> 4], dim=-1).reshape(rows, 576)  # low nibble first
    values = E2M1_VALUES[codes & 7] * torch.where(codes >= 8, -1.0, 1.0)
    s = scales_u8[:rows, :18].double()
    return values * torch.repeat_interleave(torch.exp2(s - 127.0), 32, dim=1)


def attention_ref(q, kv, qo_indptr, kv_indptr):
    """q (total_q, 16, 576); kv (rows, 576) float64; clamps indptr as the kernel must."""
    out = torch.zeros(q.shape[0], 16, 512, dtype=torch.float64)
    rows = kv.shape[0]
    for b in range(len(kv_indptr) - 1):
        end = min(max(int(kv_indptr[b + 1]), 0), rows)
        start = min(max(int(kv_indptr[b]), 0), end)
        if start == end:
            continue
        k = kv[start:end]
        p = torch.softmax((q[int(qo_indptr[b])].double() @ k.T) * SM_SCALE, dim=-1)
        out[int(qo_indptr[b])] = p @ k[:, :512]
    return out


def attention_abs_v(q, kv, qo_indptr, kv_indptr):
    """attention_ref's weights over |V|: A_j, the scale of the e4m3 P rounding's bound."""
    kv_abs = kv.clone()
    kv_abs[:, :512] = kv_abs[:, :512].abs()
    return attention_ref(q, kv_abs, qo_indptr, kv_indptr)


def q_e4m3(q, dims):
    """Q as the CDNA4 forms see it: the first `dims` columns of each head scaled by the
    power of two that puts their amax in [128, 256), rounded to e4m3 (nearest, ties to
    even, by torch), scaled back; float64. The other columns stay exact."""
    q = q.double().clone()
    part = q[..., :dims]
    exponent = torch.floor(torch.log2(part.abs().amax(-1, keepdim=True).clamp(min=2.0 ** -126)))
    scale = torch.exp2((7 - exponent).clamp(-126, 126))
    q[..., :dims] = (part * scale).float().to(torch.float8_e4m3fn).double() / scale
    return q


def fp16_p_rounding(v, n_tokens):
    """The fp8 kernel's largest output change from rounding P to fp16 (module docstring)."""
    return (2.0 ** -11 + n_tokens * 2.0 ** -25) * v.abs().max().item()


def assert_close(out, ref, p_rounding=0.0):
    """p_rounding: a number, or a tensor of per-element bounds."""
    out = out.double()
    assert torch.isfinite(out).all(), "non-finite output (or an unwritten row)"
    slack = 1e-5 * ref.abs().max().item() + 2.0 ** -133 + p_rounding
    err = (out - ref).abs() - (2.0 ** -7 * ref.abs() + slack)
    worst = int(err.argmax())
    assert err.max().item() <= 0, (
        f"element {worst}: got {out.flatten()[worst].item()}, want {ref.flatten()[worst].item()}")


# ------------------------------------------------------------------ inputs
def make_indptr(lengths):
    kv = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    kv[1:] = torch.tensor(lengths, dtype=torch.int32).cumsum(0)
    return torch.arange(len(lengths) + 1, dtype=torch.int32), kv


def make_fp8(rows, gen):
    """A unit-variance fp8 cache as the leaderboard makes it: (bytes (rows, 1, 576) e4m3,
    the per-tensor scale, the dequantized rows (rows, 576) in float64)."""
    kv = torch.randn(rows, 1, 576, generator=gen)
    scale = (kv.abs().amax() / 448.0).reshape(1).float()
    buf = (kv / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    return buf, scale, buf.reshape(rows, 576).double() * scale.double()


def make_mxfp4(rows, scale_lo, scale_hi, padded=False, gen=None):
    buf = torch.randint(0, 256, (rows, 1, 288), dtype=torch.uint8, generator=gen)
    scales = torch.randint(scale_lo, scale_hi + 1, (rows, 18), dtype=torch.uint8, generator=gen)
    if padded:  # aiter's older layout: rows to a multiple of 256, 24 columns, junk padding
        full = torch.full((-(-rows // 256) * 256, 24), 0xFF, dtype=torch.uint8)
        full[:rows, :18] = scales
        scales = full
    return buf, scales


def fp8_case(lengths, launch):
    """(q, fp8 bytes, scale, dequantized KV, qo_indptr, kv_indptr): a random fp8 case of
    these sequence lengths, seeded by them and the launch's splits."""
    gen = torch.Generator().manual_seed(sum(lengths) + launch.num_splits)
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, kv = make_fp8(int(kv_indptr[-1]), gen)
    return torch.randn(len(lengths), 16, 576, generator=gen).bfloat16(), buf, scale, kv, qo, kv_indptr


def mxfp4_case(lengths, launch):
    """(q, e2m1 bytes, e8m0 scales, qo_indptr, kv_indptr): a random MXFP4 case as fp8_case;
    the scales padded (aiter's older layout) on an even number of splits."""
    gen = torch.Generator().manual_seed(sum(lengths) + launch.num_splits)
    qo, kv_indptr = make_indptr(lengths)
    buf, scales = make_mxfp4(int(kv_indptr[-1]), 122, 130, padded=launch.num_splits % 2 == 0, gen=gen)
    return torch.randn(len(lengths), 16, 576, generator=gen).bfloat16(), buf, scales, qo, kv_indptr


L = sub.KernelLaunch
LENGTHS = [[257], [257], [1, 31, 300], [1, 31, 300], [64, 0, 31], [300, 64]]
SPLITS = [1, 4, 1, 3, 2, 8]  # one split and several, mixed lengths, an empty sequence
IN_KERNEL = [False, True, False, False, True, False]  # both ways of merging the splits
# MXFP4 takes block_n >= 32 (16 was wrong on the H200, see the launcher); fp8 takes 16.
MXFP4_CASES = [(n, L(s, bn, 4, 2, ik)) for n, s, bn, ik in zip(LENGTHS, SPLITS, [32, 64, 64, 32, 32, 64], IN_KERNEL)]
FP8_CASES = [(n, L(s, bn, 4, 2, not ik)) for n, s, bn, ik in zip(LENGTHS, SPLITS, [32, 16, 16, 32, 16, 32], IN_KERNEL)]


@pytest.mark.parametrize("lengths,launch", MXFP4_CASES)
def test_mxfp4_matches_fp64_attention(lengths, launch):
    q, buf, scales, qo, kv_indptr = mxfp4_case(lengths, launch)
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert_close(run_mxfp4(q, buf, scales, qo, kv_indptr, launch), ref)


@pytest.mark.parametrize("lengths,launch", FP8_CASES)
def test_fp8_matches_fp64_attention(lengths, launch):
    q, buf, scale, kv, qo, kv_indptr = fp8_case(lengths, launch)
    ref = attention_ref(q, kv, qo, kv_indptr)
    assert_close(run_fp8(q, buf, scale, qo, kv_indptr, launch), ref, fp16_p_rounding(kv[:, :512], max(lengths)))


# The CDNA4 forms on the same lengths, splits and merges, at the tiles they are offered with.
# The MXFP4 "waves" form: one group of block_n / num_warps rows a wave, 1 to 8 groups;
# with hw_convert (gfx950's convert instruction) the interpreter decodes by
# bit operations all the same, but the launch's plumbing is exercised.
MXFP4_WAVES_CASES = [(n, dataclasses.replace(launch, form="waves", block_n=bn, num_warps=warps, hw_convert=cvt))
                     for (n, launch), (bn, warps), cvt in zip(MXFP4_CASES, [(128, 4), (128, 4), (64, 2), (128, 4),
                                                                             (32, 1), (256, 8)],
                                                              [False, True, False, True, False, True])]
MXFP4_WAVES_CASES += [([1, 64, 31], L(2, 128, 4, 2, True, form="waves")), ([300, 0, 1], L(3, 128, 4, 1, form="waves"))]
# The fp8 wave form at several group counts (num_warps) and group sizes (block_n / num_warps):
# groups left wholly past a short sequence's end, 1 to 8 groups merged.
WAVES_CASES = [(n, dataclasses.replace(launch, form="e4m3_waves", block_n=bn, num_warps=warps, num_stages=1))
               for (n, launch), (bn, warps) in zip(FP8_CASES, [(128, 4), (64, 4), (32, 2), (128, 8), (128, 4),
                                                               (64, 2)])]


@pytest.mark.parametrize("lengths,launch", MXFP4_WAVES_CASES)
def test_mxfp4_waves_form_matches_fp64_attention_on_e4m3_q(lengths, launch):
    """dot_scaled is emulated under the interpreter (decode + fp32 dot), and the
    hardware convert by the bit decode; everything but Q's e4m3 rounding is exact.
    Splits of one group or several, sequences shorter than a group, groups whose rows
    are all past a split's end, an empty sequence, padded scales (row stride 24)."""
    q, buf, scales, qo, kv_indptr = mxfp4_case(lengths, launch)
    ref = attention_ref(q_e4m3(q, 512), dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert_close(run_mxfp4(q, buf, scales, qo, kv_indptr, launch), ref)


def assert_e4m3_p_close(out, q, kv, qo, kv_indptr):
    """The fp8 e4m3_waves form against attention on its e4m3 Q: the P rounding's bounds."""
    ref = attention_ref(q_e4m3(q, 576), kv, qo, kv_indptr)
    n_tokens = int((kv_indptr[1:] - kv_indptr[:-1]).max())
    bound = 2.0 ** -4 * attention_abs_v(q_e4m3(q, 576), kv, qo, kv_indptr) + n_tokens * 2.0 ** -18 * kv[:, :512].abs().max()
    assert_close(out, ref, bound)
    written = ref.abs().sum((1, 2)) > 0
    relative_rms = ((out.double() - ref)[written].pow(2).mean() / ref[written].pow(2).mean()).sqrt().item()
    assert relative_rms <= 2.0 ** -4 / 3 ** 0.5, relative_rms


@pytest.mark.parametrize("lengths,launch", WAVES_CASES)
def test_fp8_e4m3_waves_form_matches_fp64_attention_on_e4m3_q(lengths, launch):
    q, buf, scale, kv, qo, kv_indptr = fp8_case(lengths, launch)
    assert_e4m3_p_close(run_fp8(q, buf, scale, qo, kv_indptr, launch), q, kv, qo, kv_indptr)


def equal_scores_fp8_input(lengths):
    """(q, buf, scale, kv, qo, kv_indptr) where every score is equal: Q zero on the nope
    dims and one rope row for all tokens, so every P is 1 (exact in e4m3 after * 2^8) and
    the output is the mean of V: a wrong V row, column or scale shows at once."""
    gen = torch.Generator().manual_seed(29)
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, kv = make_fp8(int(kv_indptr[-1]), gen)
    buf[:, :, 512:] = buf[0, :, 512:]
    kv[:, 512:] = kv[0, 512:]
    q = torch.randn(len(lengths), 16, 576, generator=gen)
    q[:, :, :512] = 0
    return q.bfloat16(), buf, scale, kv, qo, kv_indptr


def test_fp8_e4m3_waves_form_is_exact_where_p_is():
    """Every score equal (equal_scores_fp8_input): the output is the mean of V to fp32
    rounding."""
    q, buf, scale, kv, qo, kv_indptr = equal_scores_fp8_input([5, 70, 130])
    ref = attention_ref(q, kv, qo, kv_indptr)
    assert torch.allclose(ref[1], kv[5:75, :512].mean(0).expand(16, 512), atol=1e-12)
    assert_close(run_fp8(q, buf, scale, qo, kv_indptr, L(3, 128, 4, 1, form="e4m3_waves")), ref)


def test_e4m3_rounding_under_the_interpreter_is_torchs():
    """The interpreter's own fp32 -> e4m3 conversion mis-rounds at binade tops; the
    kernels round first (_to_e4m3). Every e4m3 value, the midpoints between neighbours
    (ties to even), and random values, positive and negative, must match torch."""
    grid = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    midpoints = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([grid, midpoints, torch.rand(4096, generator=torch.Generator().manual_seed(3)) * 440])
    x = torch.cat([x, -x])
    got = _worker.run(_round_e4m3_in_worker, x)
    assert torch.equal(got.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))


def _round_e4m3_in_worker(x):
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, y_ptr, N: tl.constexpr):
        offsets = tl.arange(0, N)
        tl.store(y_ptr + offsets, sub._to_e4m3(tl.load(x_ptr + offsets), True))

    n = triton.next_power_of_2(x.numel())
    padded = torch.zeros(n)
    padded[:x.numel()] = x
    y = torch.empty(n, dtype=torch.float8_e4m3fn)
    kernel[(1,)](padded, y, n)
    return y[:x.numel()]


def test_fp8_many_splits_combine():
    """40 splits: the combine kernel pads them to 64 (masked) and takes 128 columns a
    program; splits past a short sequence's end are empty and must weigh nothing."""
    gen = torch.Generator().manual_seed(23)
    lengths = [100, 3, 0, 700]
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, v = make_fp8(int(kv_indptr[-1]), gen)
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    ref = attention_ref(q, v, qo, kv_indptr)
    assert sub._combine_columns(40) == 128
    out = run_fp8(q, buf, scale, qo, kv_indptr, L(40, 16, 4, 2))
    assert_close(out, ref, fp16_p_rounding(v[:, :512], max(lengths)))
    assert (out[2] == 0).all()


def test_fp8_query_scaling_reaches_the_bf16_range():
    """fp16 holds only up to 65504: the fp8 kernel scales each head of Q by a power of
    two first. Heads of 2^100 (one-hot softmax: out = the best row of V), 2^-100 (flat
    softmax: the mean of V) and 1 must all come out as in float64."""
    gen = torch.Generator().manual_seed(19)
    lengths = [37, 64]
    qo, kv_indptr = make_indptr(lengths)
    buf, scale, v = make_fp8(int(kv_indptr[-1]), gen)
    q = torch.randn(2, 16, 576, generator=gen)
    q[:, 0:5] *= 2.0 ** 100
    q[:, 5:10] *= 2.0 ** -100
    q = q.bfloat16()
    ref = attention_ref(q, v, qo, kv_indptr)
    mean_v = v[:37, :512].mean(0)
    assert torch.allclose(ref[0, 5:10], mean_v.expand(5, 512), atol=1e-9)  # flat softmax
    assert any(torch.allclose(ref[0, 0], row, atol=1e-9) for row in v[:37, :512])  # one-hot
    assert_close(run_fp8(q, buf, scale, qo, kv_indptr, L(2, 32, 4, 2)), ref, fp16_p_rounding(v[:, :512], 64))
    # The e4m3_waves form scales each head into e4m3's range the same way.
    assert_e4m3_p_close(run_fp8(q, buf, scale, qo, kv_indptr, L(2, 128, 4, 1, form="e4m3_waves")), q, v, qo,
                        kv_indptr)


MXFP4_FORMS = interpreted_forms("mxfp4")  # these tests run the kernels under the interpreter


def form_launch(splits, form):
    """The MXFP4 form at its first offered tile (num_stages 2, no occupancy hint)."""
    tile = sub.kernel_form("mxfp4", form).tiles[0]
    return L(splits, tile.block_n, tile.num_warps, 2, form=form)


def mxfp4_query(q, form):
    """What the form's kernel multiplies: Q, or Q with its nope dims in e4m3."""
    return q if form == "bf16" else q_e4m3(q, 512)


@pytest.mark.parametrize("form", MXFP4_FORMS)
def test_mxfp4_dtype_spellings_and_layouts_agree(form):
    """fp4x2 + e8m0 dtypes, a 2D buffer, and column-major scales read the same bytes."""
    gen = torch.Generator().manual_seed(7)
    qo, kv_indptr = make_indptr([31, 40])
    buf, scales = make_mxfp4(71, 120, 132, gen=gen)
    q = torch.randn(2, 16, 576, generator=gen).bfloat16()
    ref = attention_ref(mxfp4_query(q, form), dequant_mxfp4(buf, scales), qo, kv_indptr)
    launch = form_launch(2, form)
    fp4 = buf.view(torch.float4_e2m1fn_x2)
    e8m0 = scales.view(torch.float8_e8m0fnu)
    column_major = scales.t().contiguous().t()
    assert column_major.stride() == (1, 71)
    for b, s in ((fp4, e8m0), (buf.reshape(71, 288), column_major)):
        assert_close(run_mxfp4(q, b, s, qo, kv_indptr, launch), ref)


@pytest.mark.parametrize("form", MXFP4_FORMS)
def test_mxfp4_bottom_of_e8m0_range(form):
    """s = 0 means 2^-127, an fp32 subnormal: flushing it would give zeros. Length-1
    sequences make out = V exactly; magnitude codes >= 4 (2, 3, 4, 6) keep every
    product at or above 2^-126, because the interpreter's own fp32 -> bf16 store
    flushes subnormal results (the GPU's cvt does not)."""
    gen = torch.Generator().manual_seed(11)
    qo, kv_indptr = make_indptr([1, 1])
    buf, scales = make_mxfp4(2, 0, 2, gen=gen)
    buf |= 0x44
    scales[0, :] = 0
    q = torch.randn(2, 16, 576, generator=gen).bfloat16()
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert ref[0].abs().min() == 2.0 ** -126 and ref.abs().max() < 2.0 ** -122
    out = run_mxfp4(q, buf, scales, qo, kv_indptr, form_launch(2, form))
    assert torch.equal(out.double(), ref)


@pytest.mark.parametrize("form", MXFP4_FORMS)
def test_mxfp4_top_of_e8m0_range(form):
    """Scales up to s = 254 (2^127) in V's blocks stay finite where fp32 does; q is zero
    over those blocks so the scores stay finite. Magnitude codes are capped where the
    product would overflow fp32 (2 * 2^127), as an fp32 reference would."""
    gen = torch.Generator().manual_seed(13)
    qo, kv_indptr = make_indptr([1, 6])
    buf, scales = make_mxfp4(7, 124, 130, gen=gen)
    scales[:, 4:8] = torch.randint(240, 249, (7, 4), dtype=torch.uint8, generator=gen)
    scales[0, 8] = 254
    buf[0, 0, 128:144] &= 0xBB  # row 0, block 8: magnitude codes <= 3 (<= 1.5 * 2^127)
    q = torch.randn(2, 16, 576, generator=gen).bfloat16()
    q[:, :, 128:288] = 0
    ref = attention_ref(mxfp4_query(q, form), dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert ref.abs().max() > 2.0 ** 126
    assert_close(run_mxfp4(q, buf, scales, qo, kv_indptr, form_launch(2, form)), ref)


@pytest.mark.parametrize("form", MXFP4_FORMS)
def test_bad_indptr_is_clamped_to_the_buffer(form):
    """kv_indptr past the buffer end reads only the buffer; a decreasing one is empty."""
    gen = torch.Generator().manual_seed(17)
    buf, scales = make_mxfp4(50, 124, 130, gen=gen)
    q = torch.randn(3, 16, 576, generator=gen).bfloat16()
    qo = torch.arange(4, dtype=torch.int32)
    kv_indptr = torch.tensor([0, 40, 1000, 30], dtype=torch.int32)
    ref = attention_ref(mxfp4_query(q, form), dequant_mxfp4(buf, scales), qo, kv_indptr)
    out = run_mxfp4(q, buf, scales, qo, kv_indptr, form_launch(3, form))
    assert_close(out, ref)
    assert (out[2] == 0).all() and (out[1] != 0).any()


def test_kv_row_stride_too_large_for_32_bit_tile_offsets():
    """The fp8 kernel's offsets within a tile are 32-bit: a launch whose tile would span
    2^31 elements is refused before anything runs (meta tensors: no memory needed); the
    MXFP4 kernel's are 64-bit and take it."""
    q = torch.empty((1, 16, 576), dtype=torch.bfloat16, device="meta")
    scratch = sub.make_split_scratch(1, L(1, 32, 4, 3), "meta")
    wide = torch.empty((2, 1, 576), dtype=torch.float8_e4m3fn, device="meta").as_strided((2, 1, 576), (2 ** 26, 576, 1))
    with pytest.raises(ValueError, match="stride"):
        sub.decode_arguments("fp8", L(1, 32, 4, 3), q, wide, None, SM_SCALE, scratch)
    narrow = wide.as_strided((2, 1, 576), (2 ** 26 - 1, 576, 1))
    assert sub.decode_arguments("fp8", L(1, 32, 4, 3), q, narrow, None, SM_SCALE, scratch)[1] is None
    # the MXFP4 kernel's row offsets are 64-bit: the same stride is served
    wide_fp4 = torch.empty((2, 1, 288), dtype=torch.uint8, device="meta").as_strided((2, 1, 288), (2 ** 26, 288, 1))
    scales = torch.empty((2, 18), dtype=torch.uint8, device="meta")
    assert sub.decode_arguments("mxfp4", L(1, 32, 4, 3), q, wide_fp4, scales, SM_SCALE, scratch)[1] is None


def test_mxfp4_rejects_block_n_16():
    qo, kv_indptr = make_indptr([4])
    buf, scales = make_mxfp4(4, 124, 130)
    with pytest.raises(ValueError):
        run_mxfp4(torch.zeros(1, 16, 576).bfloat16(), buf, scales, qo, kv_indptr, L(1, 16, 4, 2))


# The fastest config per benchmark shape in the H200 sweep (bench/kernel_sweep.py,
# results/2026-11-29-h200-combine-kernel/kernel_sweep.json): (splits, block_n, warps);
# stages 1 for MXFP4, 3 for fp8 (2 and 3 within 5% of each other for fp8).
MEASURED_BEST = {(4, 1024): (16, 64, 8), (4, 8192): (64, 32, 4), (32, 1024): (8, 32, 4),
                 (32, 8192): (8, 32, 4), (64, 1024): (4, 32, 4), (64, 8192): (4, 32, 4),
                 (256, 1024): (1, 32, 4), (256, 8192): (1, 32, 4)}


def test_launch_candidates():
    for fmt, form, stages in (("mxfp4", "bf16", 1), ("fp8", "f16", 3)):
        for (batch, length), best in MEASURED_BEST.items():
            # the Hopper forms lead on sm_90 with launches of their own (tests/test_hopper_forms.py)
            cands = [c for c in sub.launch_candidates(fmt, batch, length, 132, "sm_90")
                     if c.gluon_arch != "hopper"]
            # NVIDIA: one thread releases a program's partials after a barrier (PTX's is cumulative)
            assert cands[0] == L(*best, stages, form=form, each_wave_fences=False), (fmt, batch, length)
            # the one-launch form of the first candidate is timed too, wherever it splits
            assert (L(*best, stages, True, form=form, each_wave_fences=False) in cands) == (best[0] > 1)
            # and the CDNA4 form at the leading split count, then the Gluon form where it runs
            other = [c for c in cands if c.form != form]
            extra = ["e4m3_waves" if fmt == "fp8" else "waves"]
            extra += ["gluon"] if sub.gluon_forms_here("sm_90") else []
            assert [c.form for c in other] == extra
            assert all(c.num_splits == best[0] and c.waves_per_eu == 0 for c in other)
        for batch, length in ((1, 1), (3, 300), (1000, 50), (4, 1 << 20)):
            cands = sub.launch_candidates(fmt, batch, length, 132)
            assert cands and len(cands) <= 7 and len(set(cands)) == len(cands)
            for c in cands:
                assert 1 <= c.num_splits <= 64 and c.block_n in (32, 64, 128) and c.num_warps in (4, 8)
                assert c.num_splits == 1 or length // c.num_splits >= 64
    with pytest.raises(ValueError):
        sub.launch_candidates("bf16", 4, 1024, 132)


def test_a_new_form_is_a_record_naming_its_kernel_and_argument_builder(monkeypatch):
    """Adding a form is adding a record: one whose kernel and argument builder are its own
    is offered where its places say (first on sm_90 here, nowhere else), and its launches
    pass its kernel the call's tensors and its own arguments, by name (host logic, CPU)."""
    launched = {}

    class Kernel:  # stands for the form's JIT function: records what a launch passes it
        def __getitem__(self, grid):
            return lambda **arguments: launched.update(grid=grid, **arguments)

    def arguments(form, launch, q, kv, kv_scale, sm_scale, scratch):
        return dict(rows=kv.shape[0], TILE=launch.block_n, FORM=form.name)

    record = sub.KernelForm("fp8", "probe", "triton", places={"sm_90": -1},
                            tiles=(sub.Tile(64, num_stages=2, num_warps=4),), kernel=Kernel(), arguments=arguments)
    monkeypatch.setattr(sub, "KERNEL_FORMS", sub.KERNEL_FORMS + (record,))
    monkeypatch.setattr(sub, "_FORMS_BY_NAME", {**sub._FORMS_BY_NAME, ("fp8", "probe"): record})
    lead = sub.launch_candidates("fp8", 4, 1024, 132, "sm_90")[0]
    assert lead.form == "probe" and (lead.block_n, lead.num_warps, lead.num_stages) == (64, 4, 2)
    for arch in ("gfx950", "sm_80", ""):
        assert "probe" not in {c.form for c in sub.launch_candidates("fp8", 4, 1024, 132, arch)}
    launch = sub.dataclasses.replace(lead, num_splits=1)
    q, qo, kv_indptr = torch.zeros(1, 16, 576, dtype=torch.bfloat16), *make_indptr([40])
    buf, scale, _ = make_fp8(40, torch.Generator().manual_seed(3))
    out = torch.empty(1, 16, 512, dtype=torch.bfloat16)
    sub.decode("fp8", q, buf, scale, qo, kv_indptr, SM_SCALE, out, sub.make_split_scratch(1, launch, "cpu"),
                      launch)
    assert launched == dict(grid=(1, 1), q_ptr=q, kv_ptr=buf, kv_scale_ptr=scale, qo_indptr_ptr=qo,
                            kv_indptr_ptr=kv_indptr, out_ptr=out, rows=40, TILE=64, FORM="probe", num_warps=4,
                            num_stages=2)
    assert sub.launch_label("fp8", launch).startswith("triton_fp8[form=probe,")


def test_launch_candidates_on_gfx950():
    """The MI355X gets the Gluon form first where Gluon imports (fp8, MXFP4), then only the CDNA4
    Triton forms (the others run at one wave a SIMD there, see bench/gfx950_report.py),
    with the AMD occupancy hint. Its splits are the fewest that give each of the 256 CUs a
    program (two for the MXFP4 Gluon form, which keeps its loads in flight only so), at
    least one tile a split; twice as many follow."""
    gluon_first = sub.gluon_forms_here("gfx950")
    for fmt, form in (("fp8", "e4m3_waves"), ("mxfp4", "waves")):
        for (batch, length) in MEASURED_BEST:
            cands = sub.launch_candidates(fmt, batch, length, 256, "gfx950")
            lead = "gluon" if gluon_first else form
            assert cands[0].form == lead and {c.form for c in cands} == {lead, form}
            assert all(c.waves_per_eu >= 2 for c in cands if c.form == form)
            gluon_waves_per_eu = sub.kernel_form(fmt, "gluon").tiles[0].waves_per_eu
            assert all(c.gluon_arch == "cdna4" and c.waves_per_eu == gluon_waves_per_eu
                       for c in cands if c.form == "gluon")
            cands = [c for c in cands if c.form == lead]  # the leading form's splits, below
            # gfx950's convert instruction for the MXFP4 waves form there, and nowhere else
            # (the Gluon form writes its own)
            assert all(c.hw_convert == (c.form == "waves") for c in cands)
            assert not any(c.hw_convert for c in sub.launch_candidates(fmt, batch, length, 132, "sm_90"))
            first = cands[0]
            fill = 256 * sub.kernel_form(fmt, lead).programs_per_cu
            tiles_a_split = length // first.num_splits // first.block_n
            assert batch * first.num_splits >= fill or first.num_splits == 64 or tiles_a_split == 1, (batch, length)
            assert tiles_a_split >= 1 and (first.num_splits == 1 or batch * first.num_splits // 2 < fill)
            if first.num_splits * 2 <= min(64, length // first.block_n):
                assert sub.dataclasses.replace(first, num_splits=first.num_splits * 2) in cands
    expected = {(4, 1024): 8, (4, 8192): 64, (32, 1024): 8, (32, 8192): 8, (64, 1024): 4, (64, 8192): 4,
                (256, 1024): 1, (256, 8192): 1}
    for (batch, length), splits in expected.items():
        assert sub.launch_candidates("fp8", batch, length, 256, "gfx950")[0].num_splits == splits
        assert sub.launch_candidates("mxfp4", batch, length, 256, "gfx950", "waves")[0].num_splits == splits
    if gluon_first:  # the MXFP4 Gluon form fills each CU twice
        expected = {(4, 1024): 8, (4, 8192): 64, (32, 1024): 8, (32, 8192): 16, (64, 1024): 8, (64, 8192): 8,
                    (256, 1024): 2, (256, 8192): 2}
        for (batch, length), splits in expected.items():
            assert sub.launch_candidates("mxfp4", batch, length, 256, "gfx950")[0].num_splits == splits


def test_forced_form(monkeypatch):
    """MLA_ROUTE=<route>:<form> offers that form alone, with its own tiles, on any device;
    a form of another format or an unknown one is refused by name."""
    cands = sub.launch_candidates("fp8", 64, 8192, 132, "sm_90", form="e4m3_waves")
    assert cands and {c.form for c in cands} == {"e4m3_waves"}
    monkeypatch.setenv("MLA_ROUTE", "triton_fp8:e4m3_waves")
    assert sub.forced_route() == ("triton_fp8", "e4m3_waves")
    monkeypatch.setenv("MLA_ROUTE", "triton_mxfp4")
    assert sub.forced_route() == ("triton_mxfp4", "")
    for bad in ("triton_fp8:scaled", "triton_mxfp4:f16", "torch:e4m3", "triton_fp8:"):
        monkeypatch.setenv("MLA_ROUTE", bad)
        if bad.endswith(":"):
            assert sub.forced_route() == ("triton_fp8", "")
            continue
        with pytest.raises(ValueError, match="unknown form"):
            sub.forced_route()
    with pytest.raises(ValueError, match="no fp8 kernel form"):
        sub.launch_candidates("fp8", 4, 1024, 132, form="scaled")


def test_mxfp4_waves_refuses_rows_not_4_byte_aligned():
    """The waves form loads the codes as 4-byte words: a row stride or a start address
    that is not a multiple of 4 is refused by name; the bf16 form takes the same bytes."""
    scales = torch.zeros((3, 18), dtype=torch.uint8)
    wide = torch.zeros((3, 290), dtype=torch.uint8)
    for buf in (wide[:, :288], wide.view(-1)[1:1 + 3 * 288].view(3, 288)):
        assert buf.stride(0) % 4 or buf.data_ptr() % 4
        with pytest.raises(ValueError, match="4-byte aligned"):
            sub.kv_operands({"mxfp4": (buf, scales)}, "mxfp4", L(1, 128, 4, 1, form="waves"))
        assert sub.kv_operands({"mxfp4": (buf, scales)}, "mxfp4", L(1, 32, 4, 1, form="bf16"))[0] is not None
    aligned = torch.zeros((3, 288), dtype=torch.uint8)
    assert sub.kv_operands({"mxfp4": (aligned, scales)}, "mxfp4", L(1, 128, 4, 1, form="waves"))[0] is aligned

"""The Triton MXFP4 / fp8 decode kernels, run on CPU under the Triton interpreter.

Triton decides interpret-or-compile when a kernel is decorated, so this module loads its
own copy of submission.py with TRITON_INTERPRET=1 set while loading it and while running
its kernels: that works whatever other test modules imported first (torch, triton, or
submission itself), and leaves their environment as it was between calls.

Reference: attention in float64 on the same dequantized KV, written here from the format
rules (E2M1 table, 2^(s-127) scales), not from the kernel's bit tricks.
Bound: |out - ref| <= 2^-7 |ref| + abs_slack. The kernel computes in fp32 (the
interpreter's dots take fp32 operands), so nearly all of the error is the final bf16
store; the interpreter truncates fp32 -> bf16 instead of rounding, which costs up to one
bf16 ulp (<= 2^-7 |ref|). abs_slack = 1e-5 * max|ref| covers the fp32 softmax and
split merge (about 1e-6 relative here), plus one bf16 subnormal ulp (2^-133) for the
bottom of the e8m0 range.
"""
import contextlib
import importlib.util
import os
import pathlib
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
SM_SCALE = 576 ** -0.5


@contextlib.contextmanager
def interpreting():
    """TRITON_INTERPRET=1 only while inside: Triton reads it when kernels are decorated
    and again while the interpreter runs them."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = previous


def _load_interpreted_submission():
    name = "_submission_triton_interpreted"
    if name in sys.modules:
        return sys.modules[name]
    with interpreting():
        spec = importlib.util.spec_from_file_location(name, ROOT / "submission.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(module)
    return module


sub = _load_interpreted_submission()


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


def assert_close(out, ref):
    out = out.double()
    assert torch.isfinite(out).all(), "non-finite output (or an unwritten row)"
    slack = 1e-5 * ref.abs().max().item() + 2.0 ** -133
    err = (out - ref).abs() - (2.0 ** -7 * ref.abs() + slack)
    worst = int(err.argmax())
    assert err.max().item() <= 0, (
        f"element {worst}: got {out.flatten()[worst].item()}, want {ref.flatten()[worst].item()}")


# ------------------------------------------------------------------ inputs
def make_indptr(lengths):
    kv = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    kv[1:] = torch.tensor(lengths, dtype=torch.int32).cumsum(0)
    return torch.arange(len(lengths) + 1, dtype=torch.int32), kv


def make_mxfp4(rows, scale_lo, scale_hi, padded=False, gen=None):
    buf = torch.randint(0, 256, (rows, 1, 288), dtype=torch.uint8, generator=gen)
    scales = torch.randint(scale_lo, scale_hi + 1, (rows, 18), dtype=torch.uint8, generator=gen)
    if padded:  # aiter's older layout: rows to a multiple of 256, 24 columns, junk padding
        full = torch.full((-(-rows // 256) * 256, 24), 0xFF, dtype=torch.uint8)
        full[:rows, :18] = scales
        scales = full
    return buf, scales


def run_mxfp4(q, buf, scales, qo, kv_indptr, launch):
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16)
    scratch = sub.make_triton_scratch(q.shape[0], launch, "cpu")
    with interpreting():
        sub.triton_mxfp4_decode(q, buf, scales, qo, kv_indptr, SM_SCALE, out, scratch, launch)
    assert (scratch.counters == 0).all(), "split counters must be reset for the next call"
    return out


def run_fp8(q, buf, scale, qo, kv_indptr, launch):
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16)
    scratch = sub.make_triton_scratch(q.shape[0], launch, "cpu")
    with interpreting():
        sub.triton_fp8_decode(q, buf, scale, qo, kv_indptr, SM_SCALE, out, scratch, launch)
    assert (scratch.counters == 0).all(), "split counters must be reset for the next call"
    return out


L = sub.TritonLaunch
CASES = [  # (lengths, launch): one split and several, both tile sizes, mixed and empty
    ([257], L(1, 32, 4, 2)),
    ([257], L(4, 16, 4, 2)),
    ([1, 31, 300], L(1, 16, 4, 2)),
    ([1, 31, 300], L(3, 32, 8, 2)),
    ([64, 0, 31], L(2, 16, 4, 2)),
    ([300, 64], L(8, 32, 4, 2)),
]


@pytest.mark.parametrize("lengths,launch", CASES)
def test_mxfp4_matches_fp64_attention(lengths, launch):
    gen = torch.Generator().manual_seed(sum(lengths) + launch.num_splits)
    qo, kv_indptr = make_indptr(lengths)
    buf, scales = make_mxfp4(int(kv_indptr[-1]), 122, 130, padded=launch.num_splits % 2 == 0, gen=gen)
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert_close(run_mxfp4(q, buf, scales, qo, kv_indptr, launch), ref)


@pytest.mark.parametrize("lengths,launch", CASES)
def test_fp8_matches_fp64_attention(lengths, launch):
    gen = torch.Generator().manual_seed(sum(lengths) + launch.num_splits)
    qo, kv_indptr = make_indptr(lengths)
    kv = torch.randn(int(kv_indptr[-1]), 1, 576, generator=gen)
    scale = (kv.abs().amax() / 448.0).reshape(1).float()
    buf = (kv / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    q = torch.randn(len(lengths), 16, 576, generator=gen).bfloat16()
    ref = attention_ref(q, buf.reshape(-1, 576).double() * scale.double(), qo, kv_indptr)
    assert_close(run_fp8(q, buf, scale, qo, kv_indptr, launch), ref)


def test_mxfp4_dtype_spellings_and_layouts_agree():
    """fp4x2 + e8m0 dtypes, a 2D buffer, and column-major scales read the same bytes."""
    gen = torch.Generator().manual_seed(7)
    qo, kv_indptr = make_indptr([31, 40])
    buf, scales = make_mxfp4(71, 120, 132, gen=gen)
    q = torch.randn(2, 16, 576, generator=gen).bfloat16()
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    launch = L(2, 16, 4, 2)
    fp4 = buf.view(torch.float4_e2m1fn_x2)
    e8m0 = scales.view(torch.float8_e8m0fnu)
    column_major = scales.t().contiguous().t()
    assert column_major.stride() == (1, 71)
    for b, s in ((fp4, e8m0), (buf.reshape(71, 288), column_major)):
        assert_close(run_mxfp4(q, b, s, qo, kv_indptr, launch), ref)


def test_mxfp4_bottom_of_e8m0_range():
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
    out = run_mxfp4(q, buf, scales, qo, kv_indptr, L(2, 16, 4, 2))
    assert torch.equal(out.double(), ref)


def test_mxfp4_top_of_e8m0_range():
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
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    assert ref.abs().max() > 2.0 ** 126
    assert_close(run_mxfp4(q, buf, scales, qo, kv_indptr, L(2, 16, 4, 2)), ref)


def test_bad_indptr_is_clamped_to_the_buffer():
    """kv_indptr past the buffer end reads only the buffer; a decreasing one is empty."""
    gen = torch.Generator().manual_seed(17)
    buf, scales = make_mxfp4(50, 124, 130, gen=gen)
    q = torch.randn(3, 16, 576, generator=gen).bfloat16()
    qo = torch.arange(4, dtype=torch.int32)
    kv_indptr = torch.tensor([0, 40, 1000, 30], dtype=torch.int32)
    ref = attention_ref(q, dequant_mxfp4(buf, scales), qo, kv_indptr)
    out = run_mxfp4(q, buf, scales, qo, kv_indptr, L(3, 16, 4, 2))
    assert_close(out, ref)
    assert (out[2] == 0).all() and (out[1] != 0).any()


def test_launch_candidates():
    for fmt in ("mxfp4", "fp8"):
        for batch, length in ((4, 1024), (256, 8192), (1, 1), (3, 300)):
            cands = sub.triton_launch_candidates(fmt, batch, length, 132)
            assert cands and len(cands) <= 8 and len(set(cands)) == len(cands)
            for c in cands:
                assert 1 <= c.num_splits <= 64 and c.block_n in (16, 32, 64)
                assert c.num_warps in (4, 8) and c.num_stages >= 1
    assert max(c.num_splits for c in sub.triton_launch_candidates("mxfp4", 4, 8192, 132)) > 1
    assert sub.triton_launch_candidates("fp8", 256, 8192, 132)[0].num_splits <= 2
    with pytest.raises(ValueError):
        sub.triton_launch_candidates("bf16", 4, 1024, 132)

"""submission's Q quantizer (bf16 -> fp8 per tensor, two Triton launches) against
reference.quantize_fp8, byte for byte and scale bit for bit.

The kernels run under the Triton interpreter in a worker process (tests/interpreter_worker.py);
the reference runs here, on the CPU. e4m3fnuz (gfx942's fp8) is checked against the same
reference function with its format constant set to e4m3fnuz.

What the reference rounds, and how the inputs reach each rounding:
- amax / fp8_max, rounded to bf16: a range of amax values (tiny, around the 1e-12 floor,
  large, the largest bf16), all-zero Q; and, without kernels, every bf16 amax against the
  reciprocal multiply that torch uses on CUDA for a division by a Python number.
- q / scale, an fp32 division rounded to fp32 and then to bf16: exact ties at the bf16
  rounding cannot occur (two bf16 significands never divide to within 2^-17 of a bf16
  tie, far outside fp32's rounding: checked below for every pair), so the inputs are the
  values whose quotients come nearest to ties, on both sides.
- the cast to fp8, nearest with ties to even: every bf16 value up to the fp8 maximum, both
  signs, at scales 1, 2^-40 and 2^40: every tie, every subnormal, the largest values.
On a GPU the kernels also run compiled there, against the reference on the same GPU.
"""
from __future__ import annotations

import pytest
import torch

import reference
import submission as sub
from conftest import DEVICE, needs_gpu
from interpreter_worker import InterpreterWorker

FORMATS = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
ROW = 16 * 576
_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


@pytest.fixture(params=sorted(FORMATS))
def fmt(request, monkeypatch):
    """Each fp8 format, the reference switched to it."""
    monkeypatch.setattr(reference, "FP8_DTYPE", FORMATS[request.param])
    return request.param


# ------------------------------------------------------------------ running the kernels
def _quantize_in_worker(q, fmt_name, block, max_partials):
    """Runs in the interpreter worker. block None: the public API; else the plan-scratch
    form with that block and partials count."""
    fp8_dtype = FORMATS[fmt_name]
    if block is None:
        q_fp8, scale = sub.quantize_q_fp8(q, fp8_dtype)
    else:
        scratch = sub.make_q_fp8_scratch(q.shape, fp8_dtype, "cpu", block, max_partials)
        q_fp8, scale = sub.quantize_q_fp8_into(q, scratch)
    assert q_fp8.shape == q.shape and q_fp8.dtype == fp8_dtype and q_fp8.is_contiguous()
    assert scale.shape == (1,) and scale.dtype == torch.float32
    return q_fp8.view(torch.uint8).clone(), scale.clone()


def kernel_quantize(q, fmt_name="e4m3fn", block=None, max_partials=None):
    """(fp8 bytes, scale) from the Triton kernels, under the interpreter."""
    return _worker.run(_quantize_in_worker, q, fmt_name, block, max_partials)


def reference_quantize(q):
    q_fp8, scale = reference.quantize_fp8(q)
    return q_fp8.view(torch.uint8), scale


def is_nan_byte(codes, fmt_name):
    return codes == 0x80 if fmt_name == "e4m3fnuz" else (codes & 0x7F) == 0x7F


def assert_same(got, want, fmt_name="e4m3fn"):
    """Same bytes (a NaN where the reference has a NaN: e4m3fn's NaN sign is the
    platform's), same scale bits (or both NaN)."""
    (got_bytes, got_scale), (want_bytes, want_scale) = got, want
    assert got_bytes.shape == want_bytes.shape
    nan = is_nan_byte(want_bytes, fmt_name)
    assert torch.equal(is_nan_byte(got_bytes, fmt_name), nan), "NaN bytes in other places"
    differ = (got_bytes != want_bytes) & ~nan
    if differ.any():
        first = int(differ.flatten().nonzero()[0])
        raise AssertionError(f"{int(differ.sum())} bytes differ; first at flat index {first}: got "
                             f"{int(got_bytes.flatten()[first]):#04x}, want {int(want_bytes.flatten()[first]):#04x}")
    if torch.isnan(want_scale).all():
        assert torch.isnan(got_scale).all()
    else:
        assert torch.equal(got_scale.view(torch.int32), want_scale.view(torch.int32)), (got_scale, want_scale)


# ------------------------------------------------------------------ inputs
def as_q(values: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """Flat bf16 values laid into (rows, 16, 576), the rest zeros."""
    rows = rows or -(-values.numel() // ROW)
    q = torch.zeros(rows * ROW, dtype=torch.bfloat16)
    q[:values.numel()] = values
    return q.view(rows, 16, 576)


def bf16_from_bits(bits) -> torch.Tensor:
    return torch.as_tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def all_bf16_up_to(limit: float) -> torch.Tensor:
    """Every non-negative finite bf16 value <= limit, subnormals included."""
    values = bf16_from_bits(torch.arange(0, 0x7F80))
    return values[values.float() <= limit]


def fp8_midpoints(fp8_dtype) -> torch.Tensor:
    """The points halfway between consecutive non-negative fp8 values (the ties)."""
    codes = torch.arange(0, 0x80, dtype=torch.uint8).view(fp8_dtype).float()
    finite = codes[torch.isfinite(codes)].unique()
    return (finite[1:] + finite[:-1]) / 2


# ------------------------------------------------------------------ tests: kernels
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 32, 256])
def test_harness_like_q_of_every_size(rows):
    """Unit randn as the harness makes it, with zeros and negative zeros, from one row to
    the 256-sequence benchmark's 4096 x 576 rows (256 x 16 heads)."""
    gen = torch.Generator().manual_seed(rows)
    q = torch.randn((rows, 16, 576), generator=gen).bfloat16()
    q.view(-1)[::97] = 0.0
    q.view(-1)[1::101] = -0.0
    want = reference_quantize(q)
    assert len(want[0].unique()) > 150  # a spread of codes, not a degenerate case
    assert_same(kernel_quantize(q), want)


@pytest.mark.parametrize("exponent", [0, -40, 40])
def test_every_fp8_rounding_case(fmt, exponent):
    """Every bf16 value up to the fp8 maximum, both signs, times 2^exponent: the amax is
    fp8_max * 2^exponent, so the scale is 2^exponent and q / scale is exact: each value's
    fp8 rounding is tested as is, ties and subnormals included."""
    fp8_dtype = FORMATS[fmt]
    fp8_max = torch.finfo(fp8_dtype).max
    magnitudes = all_bf16_up_to(fp8_max)
    assert torch.isin(fp8_midpoints(fp8_dtype), magnitudes.float()).all()  # every tie is here
    values = torch.cat([magnitudes, -magnitudes]).float() * 2.0 ** exponent
    q = as_q(values.bfloat16())
    want = reference_quantize(q)
    assert want[1].item() == 2.0 ** exponent
    assert_same(kernel_quantize(q, fmt), want, fmt)


def _nearest_to_bf16_ties(scale: torch.Tensor, limit: float, count: int) -> torch.Tensor:
    """The `count` bf16 values x <= limit whose fp32 quotient x / scale lies nearest to a
    bf16 rounding tie (half of each side's), as the reference computes the quotient."""
    x = all_bf16_up_to(limit)[1:]
    fp32_quotient = x.float() / scale.float()
    low = fp32_quotient.view(torch.int32) & 0xFFFF
    below, above = low < 0x8000, low >= 0x8000
    distance = (low - 0x8000).abs()
    return torch.cat([x[side][distance[side].argsort()[:count // 2]] for side in (below, above)])


@pytest.mark.parametrize("amax", [5.0, 3.140625, 100.5, 1.5e-5])
def test_quotients_nearest_to_bf16_ties(amax):
    scale = (torch.tensor(amax, dtype=torch.bfloat16) / 448.0)
    picks = _nearest_to_bf16_ties(scale, amax, 4000)
    fp32_quotient = picks.float() / scale.float()
    # A rounding that is not to nearest would differ here: truncation does on about half.
    nearest = fp32_quotient.bfloat16()
    truncated = (fp32_quotient.view(torch.int32) & ~0xFFFF).view(torch.float32)
    assert (nearest.float() != truncated).sum() > 1000
    q = as_q(torch.cat([torch.tensor([amax], dtype=torch.bfloat16), picks, -picks]))
    want = reference_quantize(q)
    assert want[1].item() == scale.float().item()
    assert_same(kernel_quantize(q), want)


def test_no_bf16_quotient_lands_on_a_bf16_tie_in_fp32():
    """Why the test above takes near-ties: for every pair of bf16 significands (and both
    exponent alignments), the fp32 quotient is at least 2^-17 (relative) away from a bf16
    tie, so fp32's rounding never makes one and the two roundings equal one."""
    significands = torch.arange(128, 256, dtype=torch.float64)
    x, s = significands[:, None], significands[None, :]
    for quotient in (x / s, 2 * x / s):
        ulp = torch.exp2(torch.floor(torch.log2(quotient)) - 7)
        offset = quotient / ulp - torch.floor(quotient / ulp)  # position within a bf16 ulp
        assert ((offset - 0.5).abs() * ulp / quotient).min() >= 2.0 ** -17


@pytest.mark.parametrize("case", ["largest", "tiny_under_floor", "just_over_floor", "subnormal_values",
                                  "all_zero", "one_nonzero"])
def test_extreme_magnitudes(fmt, case):
    gen = torch.Generator().manual_seed(5)
    largest = torch.finfo(torch.bfloat16).max
    smallest = bf16_from_bits([1]).float().item()  # 2^-133, the smallest bf16 subnormal
    base = torch.randn(3 * ROW, generator=gen)
    values = {
        # scale = bf16(max / fp8_max); values near the top round up past fp8_max: the clamp
        "largest": torch.cat([torch.tensor([largest, -largest, largest * 0.999]), base * 1e37]),
        # amax below the 1e-12 floor: the floor sets the scale, everything rounds to ~0
        "tiny_under_floor": base * 1e-14,
        "just_over_floor": torch.cat([torch.tensor([1.0e-12 * 1.01]), base * 1e-13]),
        # bf16 subnormals next to an amax of 1: they quantize to zeros
        "subnormal_values": torch.cat([torch.tensor([1.0, smallest, -smallest, 3 * smallest]), base * 1e-39]),
        "all_zero": torch.where(base > 0, 0.0, -0.0),
        "one_nonzero": torch.cat([torch.tensor([-3.5e-3]), torch.zeros(ROW - 1)]),
    }[case]
    q = as_q(values.bfloat16())
    assert_same(kernel_quantize(q, fmt), reference_quantize(q), fmt)


def test_all_zero_q_gives_the_floor_scale_and_signed_zeros():
    q = as_q(torch.tensor([0.0, -0.0, 0.0]).bfloat16(), rows=1)
    got_bytes, got_scale = kernel_quantize(q)
    want_bytes, want_scale = reference_quantize(q)
    assert want_scale.item() == (torch.tensor(1e-12).bfloat16() / 448.0).float().item() > 0
    assert got_bytes.flatten()[:3].tolist() == [0x00, 0x80, 0x00]
    assert_same((got_bytes, got_scale), (want_bytes, want_scale))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_values_give_what_the_reference_gives(fmt, bad):
    """NaN: scale NaN, every byte NaN. inf: scale inf, finite values 0 (signed), inf NaN."""
    gen = torch.Generator().manual_seed(9)
    q = torch.randn((2, 16, 576), generator=gen).bfloat16()
    q[1, 3, 7] = bad
    want = reference_quantize(q)
    assert torch.isnan(want[1]).all() or torch.isinf(want[1]).all()
    assert_same(kernel_quantize(q, fmt), want, fmt)


@pytest.mark.parametrize("rows, block, max_partials", [(1, 512, 4), (3, 256, 8), (2, 8192, 1)])
def test_programs_taking_several_blocks(rows, block, max_partials):
    """Past max_partials blocks each program takes several (the last one partly past the
    end); production meets this from 456 rows up (4096-element blocks, 1024 partials)."""
    scratch = sub.make_q_fp8_scratch((rows, 16, 576), torch.float8_e4m3fn, "meta", block, max_partials)
    assert scratch.blocks_per_program > 1 and scratch.programs <= max_partials
    gen = torch.Generator().manual_seed(rows)
    q = (torch.randn((rows, 16, 576), generator=gen) * 3).bfloat16()
    q.view(-1)[-1] = 40.0  # the amax in the very last element
    assert_same(kernel_quantize(q, "e4m3fn", block, max_partials), reference_quantize(q))


def test_non_contiguous_q_through_the_public_api():
    gen = torch.Generator().manual_seed(3)
    wide = torch.randn((3, 16, 640), generator=gen).bfloat16()
    wide[..., 576:] = 1000.0  # outside the view: must not reach the amax
    q = wide[..., :576]
    assert not q.is_contiguous()
    assert_same(kernel_quantize(q), reference_quantize(q))


# ------------------------------------------------------------------ tests: no kernels
def test_scratch_is_sized_by_shape():
    s = sub.make_q_fp8_scratch((256, 16, 576), torch.float8_e4m3fn, "meta")
    assert (s.programs, s.blocks_per_program, s.partials.shape, s.max_partials) == (576, 1, (576,), 1024)
    assert s.q_fp8.shape == (256, 16, 576) and s.q_fp8_bytes.shape == (256 * ROW,)
    big = sub.make_q_fp8_scratch((1000, 16, 576), torch.float8_e4m3fnuz, "meta")
    assert (big.programs, big.blocks_per_program) == (750, 3) and big.q_fp8.dtype == torch.float8_e4m3fnuz
    assert [call.grid for call in sub.q_fp8_calls(torch.empty((256, 16, 576), dtype=torch.bfloat16,
                                                              device="meta"), s)] == [(576,), (576,)]


def test_torch_path_without_the_interpreter(fmt):
    """This process has no interpreter: the CPU path is torch's, and equal too."""
    assert not sub._INTERPRETED
    gen = torch.Generator().manual_seed(2)
    q = torch.randn((5, 16, 576), generator=gen).bfloat16()
    q_fp8, scale = sub.quantize_q_fp8(q, FORMATS[fmt])
    assert_same((q_fp8.view(torch.uint8), scale), reference_quantize(q), fmt)


def test_the_default_format_on_the_cpu_is_e4m3fn():
    assert sub.default_fp8_dtype("cpu") == torch.float8_e4m3fn
    assert sub.quantize_q_fp8(torch.zeros((1, 16, 576), dtype=torch.bfloat16))[0].dtype == torch.float8_e4m3fn


@pytest.mark.parametrize("q, fp8_dtype, error", [
    (torch.zeros((2, 16, 576)), None, TypeError),                       # float32
    (torch.zeros((2, 8, 576), dtype=torch.bfloat16), None, ValueError),  # 8 heads
    (torch.zeros((2, 16, 512), dtype=torch.bfloat16), None, ValueError),
    (torch.zeros((16, 576), dtype=torch.bfloat16), None, ValueError),
    (torch.zeros((0, 16, 576), dtype=torch.bfloat16), None, ValueError),
    (torch.zeros((2, 16, 576), dtype=torch.bfloat16), torch.float8_e5m2, TypeError),
    ([[0.0]], None, TypeError),
])
def test_bad_input_is_refused(q, fp8_dtype, error):
    with pytest.raises(error):
        sub.quantize_q_fp8(q, fp8_dtype)


@pytest.mark.parametrize("fp8_max", [448.0, 240.0])
def test_scale_division_equals_a_reciprocal_multiply_for_every_bf16_amax(fp8_max):
    """On CUDA, torch divides a tensor by a Python number by multiplying with its fp32
    reciprocal; on the CPU it divides. For every positive finite bf16 amax both give the
    same bf16 scale, so the kernels' division matches the reference on either device."""
    amax = bf16_from_bits(torch.arange(1, 0x7F80)).float()
    divided = (amax / fp8_max).bfloat16()
    multiplied = (amax * torch.tensor(1.0 / fp8_max, dtype=torch.float32)).bfloat16()
    assert torch.equal(divided.view(torch.int16), multiplied.view(torch.int16))


@needs_gpu
@pytest.mark.parametrize("rows", [1, 4, 256])
def test_compiled_kernels_on_the_gpu(monkeypatch, rows):
    """The two launches compiled for this GPU, in its fp8 format, give the reference's bytes
    and scale (the reference computed on the same GPU)."""
    fp8_dtype = sub.default_fp8_dtype(DEVICE)
    monkeypatch.setattr(reference, "FP8_DTYPE", fp8_dtype)
    gen = torch.Generator().manual_seed(rows)
    q = torch.randn((rows, 16, 576), generator=gen).bfloat16().to(DEVICE)
    q.view(-1)[::97] = 0.0
    q_fp8, scale = sub.quantize_q_fp8(q, fp8_dtype)
    torch.cuda.synchronize()
    fmt = {torch.float8_e4m3fn: "e4m3fn", torch.float8_e4m3fnuz: "e4m3fnuz"}[fp8_dtype]
    want_bytes, want_scale = reference_quantize(q)
    assert_same((q_fp8.view(torch.uint8).cpu(), scale.cpu()), (want_bytes.cpu(), want_scale.cpu()), fmt)

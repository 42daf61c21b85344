"""Q's e4m3 scale per head (submission._q_e4m3_scale): one rule, stated here in Python,
and every compiled version of it held to the same answers.

The rule: for a head whose largest |q| is amax, the scale is the power of two 2^k that puts
amax in [128, 256), k = 7 - floor(log2(amax)), k clamped to [-126, 126] (so a head of zeros
or subnormals gets 2^126); the inverse is 2^-k, and NaN where amax is inf or NaN (a head
holding one), so that head's scores and output come out NaN, as exact attention's do. As an
e8m0 byte (the scaled MFMA's form of the inverse): 127 - k, and 0xFF (NaN) for NaN.

Where each version runs:
- the Triton version (_q_e4m3_scale, _e8m0_of) under the interpreter, and the Triton forms
  that use it (fp8 e4m3_waves, MXFP4 waves) on a Q with an inf head and a NaN head;
- the same functions called from a Gluon kernel (Gluon does not run on a CPU)
  compiled for gfx950 and run by the project's gfx950 emulator;
- both on a GPU, where there is one (the Gluon one where Gluon runs there).
"""
import math
import os

import pytest
import torch
import triton
import triton.language as tl

import submission as sub
from conftest import DEVICE, EMULATED_PINNED_CODE, needs_gpu, pinned_triton_codegen
from interpreter_worker import InterpreterWorker


def q_e4m3_scale_reference(amax: float) -> tuple[float, float]:
    """The rule, from its statement (module docstring): (scale, inverse) for amax >= 0, inf or NaN."""
    if math.isnan(amax) or math.isinf(amax):
        # The scale of fp32's exponent field 255 (what it multiplies no longer matters:
        # the inverse is NaN).
        return 2.0 ** -121, math.nan
    if amax < 2.0 ** -126:  # zero or an fp32 subnormal
        k = 126
    else:
        k = min(max(7 - math.floor(math.log2(amax)), -126), 126)
    return 2.0 ** k, 2.0 ** -k


def e8m0_reference(inverse: float) -> int:
    return 0xFF if math.isnan(inverse) else 127 + round(math.log2(inverse))


def _amaxes() -> torch.Tensor:
    """Every binade of fp32 at its bottom, middle and top, zero, subnormals, inf and NaN."""
    values = [0.0, 2.0 ** -149, 2.0 ** -130, math.inf, math.nan, 3.4028234663852886e38, 448.0, 127.99, 128.0,
              255.99, 256.0]
    for exponent in range(-126, 128):
        values += [2.0 ** exponent, 1.5 * 2.0 ** exponent, (2.0 - 2.0 ** -23) * 2.0 ** exponent]
    return torch.tensor(values, dtype=torch.float32)


AMAXES = _amaxes()
N = triton.next_power_of_2(len(AMAXES))


def _padded(amaxes: torch.Tensor) -> torch.Tensor:
    return torch.cat([amaxes, torch.ones(N - len(amaxes))])


def assert_follows_the_rule(amaxes, scale, inverse, e8m0) -> None:
    for index, amax in enumerate(amaxes.tolist()):
        want_scale, want_inverse = q_e4m3_scale_reference(amax)
        got = (scale[index].item(), inverse[index].item(), int(e8m0[index]))
        assert got[0] == want_scale, (amax, got, want_scale)
        assert got[1] == want_inverse or (math.isnan(got[1]) and math.isnan(want_inverse)), (amax, got, want_inverse)
        assert got[2] == e8m0_reference(want_inverse), (amax, got, e8m0_reference(want_inverse))


def test_the_rule_puts_each_heads_amax_in_128_to_256_with_exact_inverses():
    """The statement's consequences: every finite amax from 2^-119 up lands in [128, 256)
    (below, the scale stops at 2^126), scale x inverse = 1, both fp32 powers of two."""
    for amax in AMAXES.tolist():
        scale, inverse = q_e4m3_scale_reference(amax)
        assert torch.tensor(scale, dtype=torch.float32).item() == scale and math.log2(scale).is_integer()
        if math.isnan(inverse):
            assert not math.isfinite(amax)
            continue
        assert scale * inverse == 1.0 and torch.tensor(inverse, dtype=torch.float32).item() == inverse
        if amax >= 2.0 ** -119:
            assert 128.0 <= amax * scale < 256.0, amax
        else:
            assert scale == 2.0 ** 126


# ------------------------------------------------------------------ the Triton version
@triton.jit
def triton_rule_kernel(amax_ptr, scale_ptr, inverse_ptr, e8m0_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    scale, inverse = sub._q_e4m3_scale(tl.load(amax_ptr + offsets))
    tl.store(scale_ptr + offsets, scale)
    tl.store(inverse_ptr + offsets, inverse)
    tl.store(e8m0_ptr + offsets, sub._e8m0_of(inverse))


def _run_rule(kernel, device, **constexprs):
    amax = _padded(AMAXES).to(device)
    scale, inverse = torch.empty_like(amax), torch.empty_like(amax)
    e8m0 = torch.empty(N, dtype=torch.uint8, device=device)
    kernel[(1,)](amax, scale, inverse, e8m0, N=N, **constexprs, num_warps=4)
    return scale.cpu(), inverse.cpu(), e8m0.cpu()


def _triton_rule_in_worker():
    assert os.environ.get("TRITON_INTERPRET") == "1"
    return _run_rule(triton_rule_kernel, "cpu")


_worker = InterpreterWorker()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_worker():
    yield
    _worker.shutdown()


def test_the_triton_version_follows_the_rule_under_the_interpreter():
    assert_follows_the_rule(AMAXES, *_worker.run(_triton_rule_in_worker))


def _forms_on_nonfinite_heads_in_worker(kv_format, form):
    """Runs in the worker: the form's decode of one sequence of 40 tokens whose Q holds an
    inf in head 3 and a NaN in head 9 (rope dims for fp8, nope dims for MXFP4's e4m3 part);
    the output, and the same decode of the clean Q."""
    from test_triton_kernels import make_fp8, make_indptr, make_mxfp4
    gen = torch.Generator().manual_seed(5)
    qo, kv_indptr = make_indptr([40])
    q = torch.randn(1, 16, 576, generator=gen).bfloat16()
    bad = q.clone()
    bad[0, 3, 100] = float("inf")
    bad[0, 9, 7] = float("nan")
    tile = sub.kernel_form(kv_format, form).tiles[0]
    launch = sub.KernelLaunch(1, tile.block_n, tile.num_warps, tile.num_stages, form=form)
    if kv_format == "fp8":
        buf, scale, _ = make_fp8(40, gen)
        decode = sub.fp8_decode
    else:
        buf, scale = make_mxfp4(40, 122, 130, gen=gen)
        decode = sub.mxfp4_decode
    outs = []
    for query in (bad, q):
        out = torch.full((1, 16, 512), 7.0, dtype=torch.bfloat16)
        decode(query, buf, scale, qo, kv_indptr, 576 ** -0.5, out, sub.make_split_scratch(1, launch, "cpu"), launch)
        outs.append(out.float())
    return outs


@pytest.mark.parametrize("kv_format,form", [("fp8", "e4m3_waves"), ("mxfp4", "waves")])
def test_a_triton_form_gives_nan_for_an_inf_or_nan_head_and_leaves_the_others(kv_format, form):
    """The rule in use: an inf or a NaN in a head of Q makes that head's whole output NaN
    (exact attention's answer), the other heads' outputs are the clean Q's, bit for bit."""
    bad, clean = _worker.run(_forms_on_nonfinite_heads_in_worker, kv_format, form)
    assert bad[0, 3].isnan().all() and bad[0, 9].isnan().all()
    others = [h for h in range(16) if h not in (3, 9)]
    assert torch.isfinite(clean).all() and torch.equal(bad[0, others], clean[0, others])


# ------------------------------------------------------------------ the Gluon version
try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
except Exception:  # noqa: BLE001 - a Triton without Gluon: the Gluon tests skip, naming it
    gluon = None

if gluon is not None and sub.GLUON_AVAILABLE:
    @gluon.jit
    def gluon_rule_kernel(amax_ptr, scale_ptr, inverse_ptr, e8m0_ptr, N: gl.constexpr, LANES: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [LANES], [4], [0])
        offsets = gl.arange(0, N, layout=layout)
        scale, inverse = sub._q_e4m3_scale(gl.load(amax_ptr + offsets))
        gl.store(scale_ptr + offsets, scale)
        gl.store(inverse_ptr + offsets, inverse)
        gl.store(e8m0_ptr + offsets, sub._e8m0_of(inverse))
else:
    gluon_rule_kernel = None

needs_gluon = pytest.mark.skipif(gluon_rule_kernel is None, reason="needs a Triton whose Gluon builds the kernels "
                                 f"(here: {sub._GLUON_PROBLEMS['']})")


@needs_gluon
@pytest.mark.gfx950_emulator
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="compiles for gfx950: needs TRITON_INTERPRET unset")
@pinned_triton_codegen(EMULATED_PINNED_CODE)
def test_the_gluon_version_follows_the_rule_compiled_for_gfx950_in_the_emulator():
    from tools import gfx950_cases
    amax = _padded(AMAXES)
    scale, inverse = torch.empty_like(amax), torch.empty_like(amax)
    e8m0 = torch.empty(N, dtype=torch.uint8)
    call = sub.KernelCall(gluon_rule_kernel, (1,), dict(amax_ptr=amax, scale_ptr=scale, inverse_ptr=inverse,
                                                       e8m0_ptr=e8m0, N=N, LANES=64), dict(num_warps=4))
    machine, _ = gfx950_cases.run_calls([call])
    assert not machine.violations, machine.violations[:3]
    assert_follows_the_rule(AMAXES, scale, inverse, e8m0)


@needs_gpu
def test_both_versions_follow_the_rule_on_the_gpu():
    assert_follows_the_rule(AMAXES, *_run_rule(triton_rule_kernel, DEVICE))
    arch = sub.device_arch(DEVICE)[1]
    if not sub.gluon_forms_here(arch):
        pytest.skip(f"the Gluon version needs a GPU with a Gluon ARCH (gfx950, NVIDIA sm_80+), not {arch}")
    lanes = arch.warp_size
    assert_follows_the_rule(AMAXES, *_run_rule(gluon_rule_kernel, DEVICE, LANES=lanes))

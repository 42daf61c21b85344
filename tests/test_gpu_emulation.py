"""GPU only: what the interpreter runs in place of what it lacks (EMULATE) gives what the
compiled kernels give. The same kernel source is compiled twice on the GPU, once with
EMULATE, and the outputs compared:
- fp8 e4m3: EMULATE rounds onto the e4m3 grid in fp32 before converting, which must not
  change a single value: the outputs are equal bit for bit;
- mxfp4 scaled: EMULATE computes dot_scaled as decode + fp32 dot, and (for the
  interpreter's broken bf16 dots) keeps P, V and the rope dims in fp32 instead of bf16.
  The products are exact either way; what may differ is P's bf16 rounding (at most 2^-9 of
  each weight, RMS 2^-9 / sqrt(3) = 0.11%), so the relative RMS difference must stay under
  4e-3. A wrong scale, nibble or column order in the dot_scaled call moves it to O(1).
Skipped on a machine without a GPU."""
import pytest
import torch

import reference
import submission as sub
from conftest import needs_gpu

pytestmark = needs_gpu

FORMS = [("fp8", "e4m3"), ("mxfp4", "scaled")]


def decode(kv_format, form, data, monkeypatch, emulate):
    monkeypatch.setattr(sub, "_INTERPRETED", emulate)
    q, kv_data, qo_indptr, kv_indptr, config = data
    launch = sub.TritonLaunch(4, 32, 4, 1, form=form)
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16, device=q.device)
    scratch = sub.make_triton_scratch(q.shape[0], launch, q.device)
    kv, kv_scale = sub.triton_kv_operands(kv_data, kv_format, launch)
    tails = sub.decode_tails(q, kv, kv_scale, kv_format, config["sm_scale"], scratch, launch)
    for call in sub.decode_calls((q, kv, kv_scale, qo_indptr, kv_indptr, out), tails, launch):
        call.launch()
    torch.cuda.synchronize()
    return out.float()


@pytest.mark.parametrize("kv_format,form", FORMS)
def test_emulation_equals_the_compiled_kernel(kv_format, form, monkeypatch):
    data = reference.generate_input(4, 1, 1024, 4217)
    compiled = decode(kv_format, form, data, monkeypatch, False)
    emulated = decode(kv_format, form, data, monkeypatch, True)
    assert torch.isfinite(compiled).all() and torch.isfinite(emulated).all()
    if form == "e4m3":
        assert torch.equal(compiled, emulated)
    relative = ((compiled - emulated).pow(2).mean() / compiled.pow(2).mean()).sqrt().item()
    print(f"\n{kv_format}:{form} emulated vs compiled: relative RMS difference {relative:.2e}")
    assert relative < 4e-3, relative

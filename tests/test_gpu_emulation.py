"""GPU only: what the interpreter runs in place of what it lacks (EMULATE) gives what the
compiled kernels give. The same kernel source is compiled twice on the GPU, once with
EMULATE, and the outputs compared:
- fp8 e4m3_waves: EMULATE rounds onto the e4m3 grid in fp32 before converting, which must not
  change a single value: the outputs are equal bit for bit;
- mxfp4 waves: EMULATE computes dot_scaled as decode + fp32 dot, decodes V by bit
  operations where gfx950 takes its convert instruction, and (for the interpreter's
  broken bf16 dots) keeps P, V and the rope dims in fp32 instead of bf16.
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

FORMS = [("fp8", "e4m3_waves", 128), ("mxfp4", "waves", 128)]  # (format, form, block_n it is offered with)


def decode(kv_format, form, block_n, data, monkeypatch, emulate):
    monkeypatch.setattr(sub, "_INTERPRETED", emulate)
    q, kv_data, qo_indptr, kv_indptr, config = data
    _, arch = sub.device_arch(q.device)
    launch = sub.KernelLaunch(4, block_n, 4, 1, form=form, hw_convert=arch.gfx950_convert and form == "waves")
    out = torch.full((q.shape[0], 16, 512), float("nan"), dtype=torch.bfloat16, device=q.device)
    scratch = sub.make_split_scratch(q.shape[0], launch, q.device)
    kv, kv_scale = sub.kv_operands(kv_data, kv_format, launch)
    arguments = sub.decode_arguments(kv_format, launch, q, kv, kv_scale, config["sm_scale"], scratch)
    for call in sub.decode_calls(kv_format, launch, arguments, q, kv, kv_scale, qo_indptr, kv_indptr, out):
        call.launch()
    torch.cuda.synchronize()
    return out.float()


@pytest.mark.parametrize("kv_format,form,block_n", FORMS)
def test_emulation_equals_the_compiled_kernel(kv_format, form, block_n, monkeypatch):
    data = reference.generate_input(4, 1, 1024, 4217)
    compiled = decode(kv_format, form, block_n, data, monkeypatch, False)
    emulated = decode(kv_format, form, block_n, data, monkeypatch, True)
    assert torch.isfinite(compiled).all() and torch.isfinite(emulated).all()
    if form == "e4m3_waves":
        assert torch.equal(compiled, emulated)
    relative = ((compiled - emulated).pow(2).mean() / compiled.pow(2).mean()).sqrt().item()
    print(f"\n{kv_format}:{form} emulated vs compiled: relative RMS difference {relative:.2e}")
    assert relative < 4e-3, relative

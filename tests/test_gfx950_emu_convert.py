"""The emulator's gfx950 convert, tied to LLVM: for each byte index j, the form LLVM itself
emits for llvm.amdgcn.cvt.scalef32.pk.bf16.fp4(src, scale, j) (tests/test_gfx950_inline_asm.py
reads it from Triton's bundled LLVM) must, run in the emulator, decode byte j of src into
the result's two bf16 halves (low nibble low), scaled by 2^(s - 127) for the scale bits
s << 23. So the op_sel the project's inline asm writes (tied to the same forms by that test)
means in the emulator what it means to LLVM."""
import numpy as np
import pytest
import torch

from tools.gfx950_emu.single import run_instructions

pytestmark = [pytest.mark.gfx950_emulator, pytest.mark.fast]


E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]


@pytest.mark.parametrize("byte", range(4))
@pytest.mark.parametrize("scale_byte", [127, 120, 131])
def test_llvm_convert_form_decodes_its_byte(byte, scale_byte):
    from test_gfx950_inline_asm import llvm_convert_forms
    roles, modifiers = llvm_convert_forms()[byte]
    assert roles == ("result", "src", "scale"), roles
    text = "v_cvt_scalef32_pk_bf16_fp4 v2, v0, v1" + "".join(f" {name}:{value}" for name, value in modifiers)
    words = np.random.default_rng(byte).integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32)
    wave, machine = run_instructions([text], vgprs={0: words, 1: np.full(64, scale_byte << 23, dtype=np.uint32)})
    assert not machine.violations
    codes = (words >> np.uint32(8 * byte)) & np.uint32(0xFF)
    factor = 2.0 ** (scale_byte - 127)
    want_lo = torch.tensor([E2M1[c & 15] * factor for c in codes.tolist()]).to(torch.bfloat16).view(torch.int16)
    want_hi = torch.tensor([E2M1[c >> 4] * factor for c in codes.tolist()]).to(torch.bfloat16).view(torch.int16)
    got = wave.v[2]
    assert np.array_equal(got & 0xFFFF, want_lo.numpy().astype(np.uint16).astype(np.uint32))
    assert np.array_equal(got >> 16, want_hi.numpy().astype(np.uint16).astype(np.uint32))

"""Every MFMA kind the project's gfx950 kernels issue, checked against AMD's published
register layouts: the operands are placed element by element as AMD's CDNA4 ISA guide
(5 Aug 2025; its matrix-core chapter, "Dense matrix layouts" and the F8F6F4 tables) states
them, the one instruction runs in the emulator, and the result must be A @ B + C read back
through the guide's accumulator layout.

The guide's rules, as written here (independently of tools/gfx950_emu/semantics/mfma.py):
- result / C, 16x16: register r of lane L holds D[4 (L // 16) + r][L % 16];
- A (16 x K): A[i][k] is in lane i + 16 (k // KL), item k % KL, KL = K / 4 items a lane,
  packed from the low bits of the first register; B (K x 16): B[k][j] in lane j + 16 (k // KL);
- the 16x16x128 f8f6f4 formats: fp4 (e2m1) keeps that rule, KL = 32 nibbles in 4 registers,
  the low nibble first; fp8 (e4m3) holds k = 16 g .. 16 g + 15 in registers 0-3 and
  64 + 16 g .. 64 + 16 g + 15 in registers 4-7, g = L // 16;
- block scales (v_mfma_scale): A[i][k] is scaled by the e8m0 byte (op_sel[0] + 2 op_sel_hi[0])
  of scale register 0 in lane i + 16 (k // 32); B[k][j] by byte (op_sel[1] + 2 op_sel_hi[1])
  of scale register 1 in lane j + 16 (k // 32); 2^(s - 127)."""
import numpy as np
import pytest
import torch

from tools.gfx950_emu.single import run_instructions

pytestmark = [pytest.mark.gfx950_emulator, pytest.mark.fast]


E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def place(items_of_lane, regs):
    """[64 lanes][n items of `bits` bits] integer codes -> [regs, 64] uint32, low bits first."""
    lanes = len(items_of_lane)
    bits = 32 * regs // len(items_of_lane[0])
    out = np.zeros((regs, lanes), dtype=np.uint64)
    for lane, items in enumerate(items_of_lane):
        for n, code in enumerate(items):
            position = n * bits
            out[position // 32, lane] |= np.uint64(int(code) << (position % 32))
    return out.astype(np.uint32)


def k_of(fmt, K, g, item):
    kl = K // 4
    if fmt == "fp8" and K == 128:
        return 16 * g + item if item < 16 else 64 + 16 * g + (item - 16)
    return kl * g + item


def operand(fmt, K, codes, as_b):
    """codes[row_or_column][k] -> registers, per the guide's placement."""
    kl = K // 4
    lanes = []
    for lane in range(64):
        idx, g = lane % 16, lane // 16
        lanes.append([codes[idx][k_of(fmt, K, g, item)] for item in range(kl)])
    return place(lanes, {"bf16": kl // 2, "f16": kl // 2, "fp8": kl // 4, "fp4": kl // 8}[fmt])


def values(fmt, codes):
    codes = np.asarray(codes)
    if fmt == "bf16":
        return torch.from_numpy(codes.astype(np.int16)).view(torch.bfloat16).double().numpy()
    if fmt == "f16":
        return codes.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "fp8":
        return torch.from_numpy(codes.astype(np.uint8)).view(torch.float8_e4m3fn).double().numpy()
    return E2M1[codes]


def random_codes(fmt, shape, rng):
    if fmt == "bf16":
        return torch.randn(shape, generator=torch.Generator().manual_seed(int(rng.integers(1 << 30)))) \
            .to(torch.bfloat16).view(torch.int16).numpy().astype(np.int64) & 0xFFFF
    if fmt == "f16":
        return rng.standard_normal(shape).astype(np.float16).view(np.uint16).astype(np.int64)
    if fmt == "fp8":
        x = torch.randn(shape, generator=torch.Generator().manual_seed(int(rng.integers(1 << 30))))
        return x.to(torch.float8_e4m3fn).view(torch.uint8).numpy().astype(np.int64)
    return rng.integers(0, 16, shape)


def accumulator_registers(c):
    regs = np.zeros((4, 64), dtype=np.uint32)
    for lane in range(64):
        for r in range(4):
            regs[r, lane] = np.float32(c[4 * (lane // 16) + r, lane % 16]).view(np.uint32)
    return regs


def read_result(wave, row):
    d = np.zeros((16, 16))
    for lane in range(64):
        for r in range(4):
            d[4 * (lane // 16) + r, lane % 16] = wave.v[row + r, lane].view(np.float32)
    return d


CASES = [
    ("v_mfma_f32_16x16x32_bf16", "bf16", "bf16", 32, ""),
    ("v_mfma_f32_16x16x32_f16", "f16", "f16", 32, ""),   # the forced fp8 f16 form
    ("v_mfma_f32_16x16x32_fp8_fp8", "fp8", "fp8", 32, ""),
    ("v_mfma_f32_16x16x128_f8f6f4", "fp8", "fp8", 128, ""),
    ("v_mfma_f32_16x16x128_f8f6f4", "fp4", "fp8", 128, " cbsz:4"),
    ("v_mfma_f32_16x16x128_f8f6f4", "fp8", "fp4", 128, " blgp:4"),
]


def _run(mnemonic, fa, fb, K, mods, scales=None, seed=0):
    rng = np.random.default_rng(seed)
    a_codes = random_codes(fa, (16, K), rng)
    b_codes = random_codes(fb, (K, 16), rng)
    c = rng.standard_normal((16, 16)).astype(np.float32)
    a_regs = operand(fa, K, a_codes, as_b=False)
    b_regs = operand(fb, K, b_codes.T, as_b=True)
    vgprs = {}
    a_row, b_row, c_row, d_row = 0, 16, 32, 40
    for i, r in enumerate(a_regs):
        vgprs[a_row + i] = r
    for i, r in enumerate(b_regs):
        vgprs[b_row + i] = r
    for i, r in enumerate(accumulator_registers(c)):
        vgprs[c_row + i] = r
    a = values(fa, a_codes)
    b = values(fb, b_codes)
    text = (f"{mnemonic} v[{d_row}:{d_row + 3}], v[{a_row}:{a_row + len(a_regs) - 1}], "
            f"v[{b_row}:{b_row + len(b_regs) - 1}], v[{c_row}:{c_row + 3}]")
    if scales is not None:
        op_sel, op_sel_hi = scales
        scale_a = rng.integers(120, 135, (16, K // 32))
        scale_b = rng.integers(120, 135, (16, K // 32))
        sa = np.zeros(64, dtype=np.uint32)
        sb = np.zeros(64, dtype=np.uint32)
        byte_a, byte_b = op_sel[0] + 2 * op_sel_hi[0], op_sel[1] + 2 * op_sel_hi[1]
        noise = rng.integers(0, 256, (2, 64, 4))
        for lane in range(64):
            words = [noise[0, lane].copy(), noise[1, lane].copy()]
            words[0][byte_a] = scale_a[lane % 16, lane // 16]
            words[1][byte_b] = scale_b[lane % 16, lane // 16]
            sa[lane] = sum(int(x) << (8 * n) for n, x in enumerate(words[0]))
            sb[lane] = sum(int(x) << (8 * n) for n, x in enumerate(words[1]))
        vgprs[50], vgprs[51] = sa, sb
        a = a * np.exp2(np.repeat(scale_a, 32, axis=1) - 127.0)
        b = b * np.exp2(np.repeat(scale_b, 32, axis=1) - 127.0).T
        text += (f", v50, v51 op_sel:[{op_sel[0]},{op_sel[1]},0] op_sel_hi:[{op_sel_hi[0]},{op_sel_hi[1]},0]")
    wave, machine = run_instructions([text + mods], vgprs=vgprs)
    exact = a @ b + c.astype(np.float64)
    scale = np.abs(a) @ np.abs(b) + np.abs(c)
    return read_result(wave, d_row), exact, scale


@pytest.mark.parametrize("mnemonic,fa,fb,K,mods", CASES, ids=[f"{c[0]}-{c[1]}x{c[2]}" for c in CASES])
def test_mfma_follows_amds_register_layout(mnemonic, fa, fb, K, mods):
    got, exact, scale = _run(mnemonic, fa, fb, K, mods)
    assert (np.abs(got - exact) <= 1e-6 * scale).all(), np.abs(got - exact).max()


@pytest.mark.parametrize("op_sel,op_sel_hi", [((0, 0), (0, 0)), ((1, 1), (0, 0)), ((0, 1), (1, 0)), ((1, 0), (1, 1))])
@pytest.mark.parametrize("fa,fb,mods", [("fp4", "fp8", " cbsz:4"), ("fp8", "fp4", " blgp:4")])
def test_scaled_mfma_takes_each_lanes_block_scale_from_the_selected_byte(op_sel, op_sel_hi, fa, fb, mods):
    got, exact, scale = _run("v_mfma_scale_f32_16x16x128_f8f6f4", fa, fb, 128, mods,
                             scales=(op_sel, op_sel_hi), seed=3)
    assert (np.abs(got - exact) <= 1e-6 * scale).all(), np.abs(got - exact).max()

"""The quantizers on hand-picked values, in both aiter generations (aiter's rule):
scale byte = clamp(floor(log2(amax rounded at 0x200000, mantissa cleared)) - 2, -127, 127)
+ 127; codes = nearest E2M1 of value / 2^exponent (ties to even or away), saturating at 6,
sign in bit 3, even index in the low nibble."""
import math
import struct

import pytest
import torch

import reference

pytestmark = pytest.mark.fast

BF16_MAX = torch.finfo(torch.bfloat16).max
# E2M1 ties at scale 1: the code each tie rule picks (magnitudes; negatives add 8).
TIE_CODES = {  # value: (ties to even, ties away)
    0.25: (0, 1), 0.75: (2, 2), 1.25: (2, 3), 1.75: (4, 4),
    2.5: (4, 5), 3.5: (6, 6), 5.0: (6, 7)}
GENERATIONS = {"even": {"ties": "even", "padded": False},
               "away": {"ties": "away", "padded": True}}


def quantize_block(values: list[float], ties: str) -> tuple[list[int], int]:
    """(32 codes, scale byte) of one block holding `values` then zeros."""
    block = torch.zeros(32, dtype=torch.float32)
    block[:len(values)] = torch.tensor(values, dtype=torch.float32)
    x = block.to(torch.bfloat16)
    assert torch.equal(x.float(), block), "hand values must be exact in bf16"
    data, scales = reference.quantize_mxfp4(x.view(1, 1, 32), **GENERATIONS[ties])
    packed = data.view(torch.uint8).flatten()
    codes = torch.stack((packed & 0xF, packed >> 4), dim=-1).flatten().tolist()
    return codes, int(scales.view(torch.uint8)[0, 0])


def scale_byte_by_rule(amax: float) -> int:
    """The scale rule with Python's struct and math, independent of the torch version."""
    bits = struct.unpack("<I", struct.pack("<f", amax))[0]
    rounded = struct.unpack("<f", struct.pack("<I", (bits + 0x200000) & 0xFF800000))[0]
    exponent = -math.inf if rounded == 0 else math.inf if math.isinf(rounded) else \
        math.floor(math.log2(rounded)) - 2
    return int(max(-127, min(127, exponent))) + 127


@pytest.mark.parametrize("ties", ["even", "away"])
@pytest.mark.parametrize("exponent", [0, -3, 4])
def test_ties_between_e2m1_values(ties, exponent):
    scale = 2.0 ** exponent
    ties_list = list(TIE_CODES)
    # 6 * scale sets the block's amax: 6 rounds to 4 at 0x200000, so the exponent is `exponent`.
    values = [v * scale for v in ties_list] + [-v * scale for v in ties_list] + [6 * scale]
    codes, scale_byte = quantize_block(values, ties)
    pick = 0 if ties == "even" else 1
    expected = [TIE_CODES[v][pick] for v in ties_list]
    assert scale_byte == exponent + 127
    assert codes[:7] == expected
    assert codes[7:14] == [code | 8 for code in expected]
    assert codes[14] == 7


@pytest.mark.parametrize("ties", ["even", "away"])
def test_exact_values_and_saturation(ties):
    # amax 7.5 rounds to 8: exponent 1, so values are halved: 0.5 (code 1), 1.5 (3),
    # 3.75 -> 4 (6), -1 (10).
    codes, scale_byte = quantize_block([1.0, 3.0, 7.5, -2.0], ties)
    assert (scale_byte, codes[:4]) == (128, [1, 3, 6, 10])
    # amax 6.9 stays below the rounding threshold 7: exponent 0; 6.5 and 6.9 saturate at 6.
    codes, scale_byte = quantize_block([6.5, -6.875, 5.5, 0.5], ties)
    assert (scale_byte, codes[:4]) == (127, [7, 15, 7, 1])


@pytest.mark.parametrize("ties", ["even", "away"])
def test_all_zero_block_has_scale_byte_zero(ties):
    codes, scale_byte = quantize_block([], ties)
    assert (scale_byte, codes) == (0, [0] * 32)


@pytest.mark.parametrize("ties", ["even", "away"])
def test_negative_zero_and_negative_underflow_keep_the_sign(ties):
    """aiter's bit-level conversion ORs the sign into any code, zero included: -0.0 and
    negatives that round to zero give code 8 (a negative zero)."""
    codes, _ = quantize_block([-0.0, 0.0, -0.0625, 4.0], ties)
    assert codes[:4] == [8, 0, 8, 6]


@pytest.mark.parametrize("ties", ["even", "away"])
def test_tiny_magnitudes_clamp_the_exponent_at_minus_127(ties):
    # amax 2^-126 -> exponent floor(-126) - 2 = -128, clamped to -127 (byte 0); values are
    # multiplied by 2^127: 2^-126 -> 2 (code 4), 2^-128 -> 0.5 (code 1), 2^-130 -> 0.125 (0).
    codes, scale_byte = quantize_block([2.0 ** -126, 2.0 ** -128, -(2.0 ** -130)], ties)
    assert (scale_byte, codes[:3]) == (0, [4, 1, 8])


@pytest.mark.parametrize("ties", ["even", "away"])
def test_huge_magnitudes_clamp_the_exponent_at_127(ties):
    # bf16 max (1.9921875 * 2^127) + 0x200000 overflows to inf: log2 = inf, clamped to 127
    # (byte 254); 1.9921875 -> 2 (code 4). 2^126 -> 0.5 (code 1).
    codes, scale_byte = quantize_block([BF16_MAX, 2.0 ** 126], ties)
    assert (scale_byte, codes[:2]) == (254, [4, 1])
    # 1.5 * 2^127 rounds to 2^127 only: exponent 125, 1.5 * 4 = 6 (code 7).
    codes, scale_byte = quantize_block([1.5 * 2.0 ** 127], ties)
    assert (scale_byte, codes[0]) == (252, 7)


def test_scale_bytes_follow_the_rule_on_many_magnitudes():
    amaxes = [2.0 ** e * m for e in range(-133, 128, 7) for m in (1.0, 1.5, 1.75, 1.9921875)]
    amaxes = [a for a in amaxes if a <= BF16_MAX]
    x = torch.zeros(len(amaxes), 1, 32)
    x[:, 0, 0] = torch.tensor(amaxes)
    x = x.to(torch.bfloat16)
    _, scales = reference.quantize_mxfp4(x)
    expected = [scale_byte_by_rule(float(v)) for v in x[:, 0, 0].float()]
    assert scales.view(torch.uint8)[:, 0].tolist() == expected


@pytest.mark.parametrize("ties", ["even", "away"])
def test_codes_are_the_nearest_e2m1_value(ties):
    """Against a brute-force nearest search on random bf16 values (exponent 0 blocks)."""
    generator = torch.Generator().manual_seed(3)
    uniform = torch.rand(32, 31, generator=generator) * 12 - 6
    sixteenths = torch.randint(-96, 97, (32, 31), generator=generator) / 16   # many ties
    values = torch.cat([uniform, sixteenths]).to(torch.bfloat16)
    blocks = torch.cat([values, torch.full((64, 1), 6.0, dtype=torch.bfloat16)], dim=1)
    data, _ = reference.quantize_mxfp4(blocks.view(64, 1, 32), **GENERATIONS[ties])
    decoded = reference.mxfp4_to_f32(data).flatten()
    grid = torch.tensor(reference.E2M1_VALUES, dtype=torch.float64)
    for value, got in zip(blocks.flatten().double().tolist(), decoded.tolist()):
        distances = (grid - abs(value)).abs()
        nearest = grid[distances == distances.min()]
        if len(nearest) == 1:
            best = nearest.item()
        elif ties == "away":
            best = nearest.max().item()
        else:  # the even code: index in E2M1_VALUES is even
            best = [v for v in nearest.tolist() if reference.E2M1_VALUES.index(v) % 2 == 0][0]
        assert abs(got) == best and (got == 0 or math.copysign(1, got) == math.copysign(1, value))


def test_packing_puts_even_index_in_the_low_nibble():
    data, _ = reference.quantize_mxfp4(torch.tensor([0.5, 6.0] + [0.0] * 30,
                                                    dtype=torch.bfloat16).view(1, 1, 32))
    assert data.view(torch.uint8)[0, 0, 0] == 0x71


@pytest.mark.parametrize("rows", [1, 255, 256, 300])
def test_legacy_scales_are_padded_and_current_trimmed(rows):
    x = torch.randn(rows, 1, 576, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    data_now, scales_now = reference.quantize_mxfp4(x)
    data_old, scales_old = reference.quantize_mxfp4(x, ties="away", padded=True)
    padded_rows = -(-rows // 256) * 256
    assert scales_now.shape == (rows, 18)
    assert scales_old.shape == (padded_rows, 24)
    assert data_now.shape == data_old.shape == (rows, 1, 288)
    assert data_now.dtype == reference.FP4X2_DTYPE and scales_now.dtype == reference.E8M0_DTYPE
    old_bytes = scales_old.view(torch.uint8)
    assert torch.equal(old_bytes[:rows, :18], scales_now.view(torch.uint8))
    padding = torch.ones_like(old_bytes, dtype=torch.bool)
    padding[:rows, :18] = False
    assert bool((old_bytes[padding] == 0xFF).all())


def test_generations_differ_only_on_ties():
    x = torch.randn(512, 1, 576, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    now = reference.mxfp4_to_f32(reference.quantize_mxfp4(x)[0])
    old = reference.mxfp4_to_f32(reference.quantize_mxfp4(x, ties="away", padded=True)[0])
    differing = (now != old).float().mean().item()
    assert 0.001 < differing < 0.02   # ~0.6% of unit randn elements are ties that differ


def test_e8m0_and_e2m1_decoding():
    scales = torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)
    decoded = reference.e8m0_to_f32(scales.view(reference.E8M0_DTYPE)).tolist()
    assert decoded[:6] == [2.0 ** -127, 2.0 ** -126, 0.5, 1.0, 2.0, 2.0 ** 127]
    assert math.isnan(decoded[6])
    codes = torch.arange(16, dtype=torch.uint8)
    assert reference.e2m1_to_f32(codes).tolist() == [
        0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    assert reference.mxfp4_to_f32(torch.tensor([[0x71, 0x9A]], dtype=torch.uint8)).tolist() == [
        [0.5, 6.0, -1.0, -0.5]]


@pytest.mark.parametrize("padded", [False, True])
def test_dequantize_hand_values(padded):
    # Block 0: scale byte 125 (2^-2), codes 0x2 (1.0) and 0xF (-6.0); block 1: byte 130 (2^3),
    # codes 0x1 (0.5) and 0x8 (-0.0); the rest 0.
    data = torch.zeros(1, 1, 32, dtype=torch.uint8)
    data[0, 0, 0], data[0, 0, 16] = 0xF2, 0x81
    scale_shape = (256, 8) if padded else (1, 2)
    scales = torch.full(scale_shape, 0xFF if padded else 0, dtype=torch.uint8)
    scales[0, :2] = torch.tensor([125, 130], dtype=torch.uint8)
    values = reference.dequantize_mxfp4(data.view(reference.FP4X2_DTYPE),
                                        scales.view(reference.E8M0_DTYPE), (1, 1, 64),
                                        dtype=torch.float32).flatten()
    assert values[:2].tolist() == [0.25, -1.5]
    assert values[32:34].tolist() == [4.0, -0.0] and math.copysign(1, values[33]) < 0
    assert bool((values[2:32] == 0).all()) and bool((values[34:] == 0).all())


@pytest.mark.parametrize("ties", ["even", "away"])
def test_round_trip_error_is_within_half_a_step(ties):
    x = torch.randn(64, 1, 576, generator=torch.Generator().manual_seed(9)).to(torch.bfloat16)
    data, scales = reference.quantize_mxfp4(x, **GENERATIONS[ties])
    back = reference.dequantize_mxfp4(data, scales, tuple(x.shape), dtype=torch.float32)
    block_scale = reference.e8m0_to_f32(scales[:64, :18]).repeat_interleave(32, dim=1)
    error = (back.view(64, 576) - x.float().view(64, 576)).abs() / block_scale
    # Steps are 0.5 below 2, 1 up to 4, 2 up to 6; above 6 saturation costs up to 2.
    assert error.max() <= 2.0
    assert (error <= 0.25 + 1e-6).float().mean() > 0.5


def test_fp8_per_tensor():
    x = torch.randn(10, 16, 576, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    data, scale = reference.quantize_fp8(x)
    fp8_max = torch.finfo(reference.FP8_DTYPE).max
    assert data.dtype == reference.FP8_DTYPE == torch.float8_e4m3fn
    assert scale.dtype == torch.float32 and scale.shape == (1,)
    # The scale is computed in bf16, as upstream (amax / fp8_max rounded to bf16).
    assert scale.item() == (x.abs().max() / fp8_max).float().item()
    assert data.float().abs().max() == fp8_max
    assert torch.allclose(data.float() * scale, x.float(), rtol=0.07, atol=1e-3)


def test_fp8_of_zeros_has_a_tiny_scale():
    data, scale = reference.quantize_fp8(torch.zeros(4, 576, dtype=torch.bfloat16))
    assert scale.item() > 0 and bool((data.float() == 0).all())

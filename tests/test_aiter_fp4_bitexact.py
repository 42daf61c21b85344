"""Our MXFP4 quantizer produces aiter's bytes.

Older generation (ties away from zero, padded scales): compared with the PyPI wheel's own
Triton `dynamic_mxfp4_quant` (aiter/utility/fp4_utils.py of amd-aiter
0.1.7.post2.dev18), loaded by file path and run by the Triton interpreter on CPU.
The interpreter run happens in a subprocess (aiter_contract.run_wheel_quantizer) so
that TRITON_INTERPRET=1 is in place before Triton is imported there, whatever this
pytest process imported before.

Current generation (ties to even, scales trimmed to (rows, N//32)): aiter's newer
kernel is not in any wheel we can install, so it is compared with bytes worked out by
hand from aiter's rule (as reference.py's _block_scale_exponents states it).

The wheel lives in $AITER_WHEEL_DIR (default .ci/aiter_wheel, filled by tools/setup.sh).
Without it the wheel tests skip on a developer machine and FAIL in CI (CI=true).
"""
from __future__ import annotations

import os

import pytest
import torch

from tools import aiter_contract as ac
import reference

BF16 = torch.bfloat16
# (batch, rows per batch, width): rows 1, 37, 300 (not a multiple of 256, > 256) and
# 256 x 64 (two blocks a row: scale columns padded from 2 to 8).
SHAPES = [(1, 1, 576), (37, 1, 576), (3, 100, 576), (1, 256, 64)]

# Exact ties between E2M1 values at scale 1 (block amax 6 gives exponent 0), and 6.
TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]


# ---------------------------------------------------------------- inputs


def edge_blocks() -> torch.Tensor:
    """32-blocks that hit every special case of the scale and rounding rules, flat."""
    def block(values):
        row = torch.zeros(32, dtype=torch.float32)
        row[: len(values)] = torch.tensor(values, dtype=torch.float32)
        return row

    ties = TIES + [-v for v in TIES]
    return torch.cat([
        block(ties),                                   # ties at scale 2^0
        block([v * 2.0 ** -3 for v in ties]),          # ties at scale 2^-3
        block([v * 2.0 ** 5 for v in ties]),           # ties at scale 2^5
        block([6.5, -6.90625, 1.0, 6.0]),              # saturation at 6
        block([]),                                     # all zero
        -block([]),                                    # all negative zero
        block([-0.0, 0.0, -1e-30, 1.0]),               # signed zeros next to normals
        block([1e-38, -2.0 ** -130, 2.0 ** -133]),     # fp32/bf16 subnormals and tiny
        block([1.75 * 2.0 ** -126, 2.0 ** -126]),      # smallest normals: exponent -127
        block([1.5 * 2.0 ** 127, -(2.0 ** 100)]),      # huge
        block([1.75 * 2.0 ** 127, 2.0 ** 126]),        # amax rounds to inf: exponent 127
        block([1.0, 1e-12, -1e-20, 3e-5]),             # tiny next to normal
    ])


def make_input(shape: tuple[int, int, int], seed: int) -> torch.Tensor:
    """Unit randn (as the leaderboard's inputs) with edge rows spread through it: every
    7th row is a window of the edge blocks, starting at a different block each time."""
    batch, rows, width = shape
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch * rows, width, generator=generator)
    edges = edge_blocks()
    num_edge_blocks = edges.numel() // 32
    for row in range(0, batch * rows, 7):
        start = 32 * ((row // 7) % num_edge_blocks)
        x[row] = edges[(start + torch.arange(width)) % edges.numel()]
    return x.to(BF16).view(batch, rows, width)


# ---------------------------------------------------------------- the wheel


def require_wheel():
    path = ac.wheel_fp4_utils_path()
    if path.is_file():
        return
    message = (f"aiter wheel not unpacked at {ac.wheel_dir()} (set {ac.WHEEL_DIR_ENV}; "
               "tools/setup.sh runs: python -m pip install --no-deps --target "
               f".ci/aiter_wheel amd-aiter=={ac.WHEEL_VERSION})")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("CI must run the aiter bit-exactness test: " + message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def wheel_results(tmp_path_factory):
    """(input, wheel data bytes, wheel scale bytes) per shape: ONE interpreter run."""
    require_wheel()
    inputs = [make_input(shape, seed=1000 + i) for i, shape in enumerate(SHAPES)]
    flat = [x.reshape(-1, x.shape[-1]) for x in inputs]
    outputs = ac.run_wheel_quantizer(flat, tmp_path_factory.mktemp("wheel"))
    return {shape: (x, data, scales) for shape, x, (data, scales) in zip(SHAPES, inputs, outputs)}


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


def first_difference(ours: torch.Tensor, theirs: torch.Tensor) -> str:
    index = tuple(int(i) for i in (ours != theirs).nonzero()[0])
    return f"first difference at {index}: ours {int(ours[index]):#04x}, aiter {int(theirs[index]):#04x}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_legacy_data_bytes_match_wheel(wheel_results, shape):
    x, wheel_data, _ = wheel_results[shape]
    data, _ = reference.quantize_mxfp4(x, ties="away", padded=True)
    ours = as_bytes(data).reshape(wheel_data.shape)
    assert torch.equal(ours, wheel_data), first_difference(ours, wheel_data)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_legacy_scales_match_wheel(wheel_results, shape):
    x, _, wheel_scales = wheel_results[shape]
    _, scales = reference.quantize_mxfp4(x, ties="away", padded=True)
    ours = as_bytes(scales)
    assert ours.shape == wheel_scales.shape  # rows to a multiple of 256, cols of 8
    rows, blocks = x.shape[0] * x.shape[1], x.shape[2] // 32
    valid = (slice(0, rows), slice(0, blocks))
    assert torch.equal(ours[valid], wheel_scales[valid]), first_difference(
        ours[valid], wheel_scales[valid])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_legacy_scale_padding(wheel_results, shape):
    """The pad region is NOT the same and needn't be: readers must trim to [rows, N//32].

    Ours is 0xFF everywhere (e8m0 NaN, so an untrimmed read shows up). The wheel's kernel
    writes the pad COLUMNS of valid rows with the scale of an all-zero block (0x00; it
    loads the missing values masked, which read as 0 here), and never writes the pad
    ROWS (torch.empty: whatever memory held)."""
    x, _, wheel_scales = wheel_results[shape]
    _, scales = reference.quantize_mxfp4(x, ties="away", padded=True)
    rows, blocks = x.shape[0] * x.shape[1], x.shape[2] // 32
    ours = as_bytes(scales)
    pad = torch.ones_like(ours, dtype=torch.bool)
    pad[:rows, :blocks] = False
    assert bool((ours[pad] == 0xFF).all())
    assert bool((wheel_scales[:rows, blocks:] == 0).all())


def test_ties_really_differ_between_generations(wheel_results):
    """Guards the comparison's power: the inputs hold ties that ties-to-even rounds
    differently, so a quantizer with the wrong tie rule fails the tests above."""
    x, wheel_data, _ = wheel_results[(37, 1, 576)]
    even, _ = reference.quantize_mxfp4(x, ties="even", padded=True)
    differing = (as_bytes(even).reshape(wheel_data.shape) != wheel_data).sum().item()
    assert differing > 0


# ---------------------------------------------------------------- current generation


# Hand-worked from aiter's rule: amax as f32 bits + 0x200000, mantissa
# cleared, exponent = floor(log2) - 2 clamped to [-127, 127], scale byte = exponent +
# 127; values / 2^exponent rounded to the nearest of 0, .5, 1, 1.5, 2, 3, 4, 6 (ties to
# even code), saturating at 6; sign in bit 3 (kept for values that round to zero); two
# codes a byte, even index in the low nibble.
# Each case: (the first values of a 32-block, scale byte, expected leading data bytes
# with ties to even, the same with ties away).
TIE_ROW = TIES + [-v for v in TIES]
# codes even: .25->0 .75->2 1.25->2 1.75->4 2.5->4 3.5->6 5->6 6->7 (negatives | 8)
TIE_BYTES_EVEN = [0x20, 0x42, 0x64, 0x76, 0xA8, 0xCA, 0xEC, 0xFE]
# codes away: .25->1 .75->2 1.25->3 1.75->4 2.5->5 3.5->6 5->7 6->7
TIE_BYTES_AWAY = [0x21, 0x43, 0x65, 0x77, 0xA9, 0xCB, 0xED, 0xFF]
HAND_CASES = {
    # amax 6: 6 + 0x200000-bits rounds to 4 (not 8): exponent 0, byte 127.
    "ties_scale_1": (TIE_ROW, 127, TIE_BYTES_EVEN, TIE_BYTES_AWAY),
    # amax 0.75 -> 0.5: exponent -3, byte 124; same codes.
    "ties_scale_1/8": ([v / 8 for v in TIE_ROW], 124, TIE_BYTES_EVEN, TIE_BYTES_AWAY),
    # amax 6.90625 -> 4: exponent 0; 6.5 and -6.90625 saturate (7, 0xF); 1.0 -> 2.
    "saturation": ([6.5, -6.90625, 1.0], 127, [0xF7, 0x02], [0xF7, 0x02]),
    # amax 0: log2 = -inf, clamped to -127 -> byte 0.
    "zeros": ([0.0, 0.0], 0, [0x00], [0x00]),
    # -0.0 keeps its sign: code 8.
    "negative_zeros": ([-0.0, -0.0, 0.0, -0.0], 0, [0x88, 0x80], [0x88, 0x80]),
    # amax 1.75 * 2^-126 -> 2^-125: exponent -127 (clamped), byte 0;
    # 1.75 * 2^-126 * 2^127 = 3.5 (tie: even 4.0 code 6, away 4.0 code 6);
    # 2^-126 * 2^127 = 2 (code 4).
    "smallest_normals": ([1.75 * 2.0 ** -126, 2.0 ** -126], 0, [0x46], [0x46]),
    # amax 1.5 * 2^127 -> 2^127: exponent 125, byte 252; 1.5 * 4 = 6 (7);
    # -2^100 / 2^125 rounds to -0 (8).
    "huge": ([1.5 * 2.0 ** 127, -(2.0 ** 100)], 252, [0x87], [0x87]),
    # amax 1.75 * 2^127 rounds to inf: exponent 127 (clamped), byte 254;
    # 1.75 (tie 1.5/2: even 2.0 code 4; away 2.0 code 4); 2^126 / 2^127 = 0.5 (code 1).
    "amax_rounds_to_inf": ([1.75 * 2.0 ** 127, 2.0 ** 126], 254, [0x14], [0x14]),
    # amax 1.25 -> 1: exponent -2, byte 125; 0.3125 * 4 = 1.25 (tie 1/1.5: even 1.0
    # code 2, away 1.5 code 3); 1.25 * 4 = 5 (tie 4/6: even 4 code 6, away 6 code 7).
    "ties_scale_1/4": ([0.3125, 1.25], 125, [0x62], [0x73]),
}


def hand_row(values: list[float]) -> torch.Tensor:
    """One 576-wide bf16 row: the case in block 0, zeros elsewhere."""
    row = torch.zeros(576, dtype=torch.float32)
    row[: len(values)] = torch.tensor(values, dtype=torch.float32)
    assert torch.equal(row.to(BF16).float(), row), "hand values must be exact in bf16"
    return row.to(BF16)


@pytest.mark.parametrize("ties", ["even", "away"])
def test_hand_worked_bytes(ties):
    names = list(HAND_CASES)
    x = torch.stack([hand_row(HAND_CASES[n][0]) for n in names]).view(len(names), 1, 576)
    data, scales = reference.quantize_mxfp4(x, ties=ties, padded=(ties == "away"))
    data = as_bytes(data).reshape(len(names), 288)
    scales = as_bytes(scales)
    for i, name in enumerate(names):
        _, scale_byte, even_bytes, away_bytes = HAND_CASES[name]
        expected = torch.zeros(288, dtype=torch.uint8)
        expected[: len(even_bytes)] = torch.tensor(even_bytes if ties == "even" else away_bytes,
                                                   dtype=torch.uint8)
        assert data[i].tolist() == expected.tolist(), f"{name}: data bytes"
        # Blocks 1..17 hold zeros: scale byte 0.
        assert scales[i, :18].tolist() == [scale_byte] + [0] * 17, f"{name}: scale bytes"


def test_current_generation_is_trimmed():
    x = make_input((3, 100, 576), seed=7)
    data, scales = reference.quantize_mxfp4(x, ties="even", padded=False)
    assert data.shape == (3, 100, 288)
    assert scales.shape == (300, 18)
    assert data.dtype == getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    assert scales.dtype == getattr(torch, "float8_e8m0fnu", torch.uint8)


@pytest.mark.skipif(not (reference.HAVE_AITER and torch.cuda.is_available()),
                    reason="needs ROCm's real aiter on an AMD GPU (its current quantizer)")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_current_generation_matches_aiters_own_quantizer(shape):
    """Where aiter's current dynamic_mxfp4_quant runs (an MI355X), our bytes equal its own."""
    from aiter.utility.fp4_utils import dynamic_mxfp4_quant
    x = make_input(shape, seed=2000).cuda()
    data, scales = dynamic_mxfp4_quant(x.reshape(-1, x.shape[-1]))
    ours_data, ours_scales = reference.quantize_mxfp4(x, ties="even", padded=False)
    rows, blocks = x.shape[0] * x.shape[1], x.shape[2] // 32
    theirs_data, ours_data = as_bytes(data).reshape(rows, -1), as_bytes(ours_data).reshape(rows, -1)
    assert torch.equal(ours_data, theirs_data), first_difference(ours_data, theirs_data)
    theirs_scales, ours_scales = as_bytes(scales)[:rows, :blocks], as_bytes(ours_scales)
    assert torch.equal(ours_scales, theirs_scales), first_difference(ours_scales, theirs_scales)

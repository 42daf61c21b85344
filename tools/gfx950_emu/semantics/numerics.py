"""Bit-exact number formats and arithmetic, vectorized over lanes (numpy), as the gfx950
instructions the kernels use define them. Registers hold uint32 bits; these helpers turn
bits into values and back.

fp32 arithmetic is numpy's float32 (IEEE round-to-nearest-even, denormals kept: the kernels
run with .amdhsa_float_denorm_mode_32 3). A fused multiply-add is computed exactly: the
product of two floats is exact in float64, the sum is made exact with its error term
(TwoSum) and rounded to float32 once (fma_f32)."""
from __future__ import annotations

import numpy as np

U32 = np.uint32
F32 = np.float32

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                       dtype=np.float64)


def lanes(x, dtype=None) -> np.ndarray:
    """x as a row of 64 lanes: an array already of 64 (cast to dtype if given), else x
    broadcast (a scalar operand). Cheaper than np.broadcast_to for the common case."""
    if type(x) is np.ndarray and x.shape == (64,):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)
    return np.full(64, x, dtype=dtype if dtype is not None else np.asarray(x).dtype)


def f32(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=U32).view(F32)


def bits32(values) -> np.ndarray:
    return np.asarray(values, dtype=F32).view(U32)


def round_f64_to_f32(value: np.ndarray, error: np.ndarray | None = None) -> np.ndarray:
    """float32 nearest to value + error (error: the exact remainder of a float64 sum, same
    sign conventions as TwoSum), ties to even: a float64 that lands on a float32 midpoint
    is moved to the side its remainder lies on."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = value.astype(F32)
        if error is None:
            return r
        finite = np.isfinite(r) & (error != 0)
        if not finite.any():
            return r
        up = np.nextafter(r, F32(np.inf))
        down = np.nextafter(r, F32(-np.inf))
        r64 = r.astype(np.float64)
        # the float32 neighbours of `value` on each side of r
        lo = np.where(r64 <= value, r64, down.astype(np.float64))
        hi = np.where(r64 <= value, up.astype(np.float64), r64)
        midpoint = finite & ((lo + hi) * 0.5 == value)
        if midpoint.any():
            pick_hi = error > 0
            fixed = np.where(pick_hi, hi, lo).astype(F32)
            r = np.where(midpoint, fixed, r)
        return r


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray, exponent=0) -> np.ndarray:
    """(a * b + c) * 2^exponent rounded once to float32 (a, b, c float32 arrays; exponent an
    int or an int array). The float64 sum of the exact product and c rounds to the right
    float32 unless it lands exactly on a float32 midpoint (or in the float32 subnormals),
    where its lost remainder decides."""
    scale = np.exp2(np.asarray(exponent, dtype=np.float64))
    p = a.astype(np.float64) * b.astype(np.float64) * scale   # exact (a power of two)
    cs = c.astype(np.float64) * scale
    s = p + cs
    r = s.astype(F32)
    low = s.view(np.uint64) & np.uint64(0x1FFF_FFFF)  # the 29 mantissa bits float32 drops
    suspect = (low == np.uint64(0x1000_0000)) | (np.abs(r) < F32(1.1754944e-38))
    if not suspect.any():
        return r
    s, e = two_sum(p, cs)
    out = round_f64_to_f32(s, np.where(np.isfinite(s), e, 0.0))
    special = ~np.isfinite(s)
    if special.any():
        out = np.where(special, s.astype(F32), out)
    return out


def bf16_bits_to_f32(bits16: np.ndarray) -> np.ndarray:
    return f32(np.asarray(bits16, dtype=U32) << U32(16))


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even; NaN stays NaN (quiet)."""
    b = bits32(x).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    nan = np.isnan(x)
    return np.where(nan, (b >> 16) | 0x40, rounded).astype(U32) & U32(0xFFFF)


def f16_bits_to_f32(bits16: np.ndarray) -> np.ndarray:
    return np.asarray(bits16, dtype=np.uint16).view(np.float16).astype(F32)


# ---- OCP e4m3fn (fp8) and e2m1 (fp4), e8m0 scales ----
def _fp8_fields(code: np.ndarray, man_bits: int, bias: int):
    """(sign as +-1.0, exponent field, mantissa field, the value as a normal or subnormal
    number) of 8-bit codes with 1 sign, 7 - man_bits exponent and man_bits mantissa bits."""
    code = np.asarray(code, dtype=np.int64) & 0xFF
    sign = np.where(code & 0x80, -1.0, 1.0)
    exp = (code >> man_bits) & ((1 << (7 - man_bits)) - 1)
    man = code & ((1 << man_bits) - 1)
    fraction = man / float(1 << man_bits)
    normal = sign * (1.0 + fraction) * np.exp2(exp - float(bias))
    subnormal = sign * fraction * 2.0 ** (1 - bias)
    return sign, exp, man, np.where(exp == 0, subnormal, normal)


def e4m3_bits_to_f64(code: np.ndarray) -> np.ndarray:
    """e4m3fn: no infinity; S.1111.111 is NaN."""
    _, exp, man, value = _fp8_fields(code, 3, 7)
    return np.where((exp == 15) & (man == 7), np.nan, value)


def bf8_bits_to_f64(code: np.ndarray) -> np.ndarray:
    """e5m2 (bf8): IEEE-like, exponent 31 holds the infinities and NaNs."""
    sign, exp, man, value = _fp8_fields(code, 2, 15)
    value = np.where((exp == 31) & (man == 0), sign * np.inf, value)
    return np.where((exp == 31) & (man != 0), np.nan, value)


def e2m1_to_f64(code: np.ndarray) -> np.ndarray:
    return E2M1_VALUES[np.asarray(code, dtype=np.int64) & 0xF]


def e8m0_to_f64(code: np.ndarray) -> np.ndarray:
    """2^(s - 127); 0xFF is NaN (OCP MX)."""
    code = np.asarray(code, dtype=np.int64) & 0xFF
    return np.where(code == 0xFF, np.nan, np.exp2(code.astype(np.float64) - 127.0))


def f64_to_e4m3_bits(x: np.ndarray, saturate: bool) -> np.ndarray:
    """float64 (already exact: a float32 times a power of two) -> e4m3fn code, round to
    nearest, ties to the even code; beyond 448 (past the tie at 464 with the NaN code's
    place) and +-Inf: +-448 if saturate (MODE.FP16_OVFL, as the CDNA4 ISA guide states), else
    NaN (0x7F with the sign); NaN -> NaN."""
    x = np.asarray(x, dtype=np.float64)
    sign = np.where(np.signbit(x), 0x80, 0).astype(np.int64)
    mag = np.abs(x)
    fraction, k = np.frexp(mag)                        # mag = fraction * 2^k, fraction in [0.5, 1)
    exponent = k.astype(np.int64) - 1                  # mag = (2 fraction) * 2^exponent
    subnormal = exponent < -6
    # normal: 3 mantissa bits rounded to even (a carry into the exponent is the next code);
    # subnormal: multiples of 2^-9 (code 8 is the smallest normal, 2^-6)
    mantissa = np.rint((2.0 * fraction - 1.0) * 8.0).astype(np.int64)
    normal_code = ((exponent + 7) << 3) + mantissa
    sub_code = np.rint(mag * 512.0).astype(np.int64)
    code = np.where(subnormal, sub_code, normal_code)
    code = np.where(mag == 0, 0, code)
    code = np.where(code > 0x7E, 0x7E if saturate else 0x7F, code)
    code = np.where(np.isinf(x), 0x7E if saturate else 0x7F, code)
    code = np.where(np.isnan(x), 0x7F, code)
    return (code | sign).astype(np.uint32)

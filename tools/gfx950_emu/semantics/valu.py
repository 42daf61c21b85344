"""Vector ALU: VOP1, VOP2, VOP3, VOPC, VOP3P, with the DPP and SDWA encodings, vectorized
over the 64 lanes. Each mnemonic's semantics follow AMD's CDNA4 pseudocode (compared lane
by lane with it in tests/test_gfx950_emu_pcode_cross.py); every write honours EXEC.

Operand kinds: b32/u32/i32/f32, 16-bit u16/i16/b16 (the low half; on gfx9 a 16-bit VALU
result zeroes the high half of its destination), 24-bit u24/i24 (the low 24 bits), 64-bit
u64/i64/b64 (a register pair)."""
from __future__ import annotations

import numpy as np

from ..listing import Const
from ..registry import base_mnemonic, check_modifiers, register
from ..reports import NotImplementedInstruction
from ..state import pack_mask, unpack_mask
from . import numerics as nm
from .operands import MASK32, U32, U64, scalar_writer, sgpr_index, vector_reader, vector_writer, vgpr_row

I32, F32 = np.int32, np.float32
LANES = np.arange(64)


# ---- typed views of bits ----
def _view(bits, kind: str):
    if kind in ("b32", "u32"):
        return bits
    if kind == "i32":
        return bits.view(I32)
    if kind == "f32":
        return bits.view(F32)
    if kind in ("u16", "b16"):
        return bits & U32(0xFFFF)
    if kind == "i16":
        return ((bits & U32(0xFFFF)).astype(I32) ^ I32(0x8000)) - I32(0x8000)
    if kind == "u24":
        return bits & U32(0xFFFFFF)
    if kind == "i24":
        return ((bits & U32(0xFFFFFF)).astype(I32) ^ I32(0x800000)) - I32(0x800000)
    if kind in ("u64", "b64"):
        return bits
    if kind == "i64":
        return bits.view(np.int64)
    raise NotImplementedInstruction(f"operand kind {kind}")


def _bits(value, kind: str):
    if kind == "f32":
        return np.asarray(value, dtype=F32).view(U32)
    if kind in ("u64", "b64", "i64"):
        return np.asarray(value).astype(U64)
    if kind in ("u16", "b16", "i16"):
        return np.asarray(value).astype(U32) & U32(0xFFFF)
    return np.asarray(value).astype(U32)


def _width(kind: str) -> int:
    return 64 if kind.endswith("64") else 32


# ---- float semantics that are not plain numpy ----
def _quiet(bits):
    return bits | U32(0x0040_0000)


def _is_snan(bits):
    return ((bits & U32(0x7F80_0000)) == U32(0x7F80_0000)) & ((bits & U32(0x007F_FFFF)) != 0) & \
        ((bits & U32(0x0040_0000)) == 0)


def max_f32_bits(a, b):
    """V_MAX_F32 with IEEE mode on: a signalling NaN comes back quieted, a quiet NaN loses to
    a number, +0 beats -0, else the larger (S0 on ties)."""
    a = nm.lanes(a, U32)
    b = nm.lanes(b, U32)
    fa, fb = a.view(F32), b.view(F32)
    out = np.where(fa >= fb, a, b)
    na, nb = np.isnan(fa), np.isnan(fb)
    if na.any() or nb.any():
        out = np.where(na, b, out)
        out = np.where(nb & ~na, a, out)
        out = np.where(_is_snan(b), _quiet(b), out)
        out = np.where(_is_snan(a), _quiet(a), out)
    zero_pair = (fa == fb) & (a != b)       # +0 and -0 (the only unequal bits that compare equal)
    if zero_pair.any():
        out = np.where(zero_pair, U32(0), out)
    return out


def _exponent(bits):
    return (np.asarray(bits, dtype=U32) >> U32(23)) & U32(0xFF)


DEFAULT_NAN = U32(0xFFC00000)   # AMD's NaN (V_DIV_FIXUP_F32's 0/0)


def _ldexp_bits(f, n):
    return (np.asarray(f, dtype=F32).astype(np.float64) * 2.0 ** n).astype(F32).view(U32)


def div_scale_f32(s0, s1, s2):
    """V_DIV_SCALE_F32 -> (D bits, VCC lanes), the pseudocode's cases in order (S1 the
    denominator, S2 the numerator); D is S0 where no case writes it."""
    b0 = nm.lanes(s0, U32)
    f0, f1, f2 = b0.view(F32), nm.lanes(s1, U32).view(F32), nm.lanes(s2, U32).view(F32)
    e1, e2 = _exponent(f1.view(U32)).astype(np.int64), _exponent(f2.view(U32)).astype(np.int64)
    # "S2.f32 / S1.f32 == DENORM": the float32 quotient (rounded) is a denormal;
    # "1.0 / 64'F(S1.f32) == DENORM.f64" never holds for a float32 S1
    quotient = np.abs(f2 / f1)
    q_denorm = (quotient != 0) & (quotient < F32(1.1754944e-38))
    zero = (f2 == 0) | (f1 == 0)
    big = ~zero & (e2 - e1 >= 96)
    denorm1 = ~zero & ~big & (e1 == 0)
    scale_num = ~zero & ~big & ~denorm1 & q_denorm
    tiny_num = ~zero & ~big & ~denorm1 & ~q_denorm & (e2 <= 23)
    if not (zero | big | denorm1 | scale_num | tiny_num).any():
        return b0, np.zeros(64, dtype=bool)
    up = _ldexp_bits(f0, 64)
    out = b0.copy()
    out = np.where(zero, DEFAULT_NAN, out)
    out = np.where(big & (f0 == f1), up, out)
    out = np.where(denorm1, up, out)
    out = np.where(scale_num & (f0 == f2), up, out)
    out = np.where(tiny_num, up, out)
    return out, big | scale_num


def div_fixup_f32(s0, s1, s2):
    """V_DIV_FIXUP_F32 (S0 the quotient, S1 the denominator, S2 the numerator)."""
    f0, f1, f2 = (nm.lanes(x, U32).view(F32) for x in (s0, s1, s2))
    b1, b2 = f1.view(U32), f2.view(U32)
    sign = ((b1 ^ b2) & U32(0x8000_0000))
    e1, e2 = _exponent(b1).astype(np.int64), _exponent(b2).astype(np.int64)
    # the last branch, sign_out ? -|S0| : |S0|, with a NaN quotient (an overflowed scaled
    # quotient in the division sequence) giving +-inf: the reading under which the sequence
    # divides correctly (tools/gfx950_emu/pcode/oracle.py READINGS, after AMD's rocjitsu)
    out = np.where(np.isnan(f0), U32(0x7F80_0000), f0.view(U32) & U32(0x7FFF_FFFF)) | sign
    inf = U32(0x7F80_0000) | sign
    zero = sign
    overflow = U32(0x7F80_0000) | sign         # OVERFLOW_F32: +-inf
    underflow = U32(0) | sign                  # UNDERFLOW_F32: +-0
    usual = np.isfinite(f0) & np.isfinite(f1) & np.isfinite(f2) & (f1 != 0) & (f2 != 0) & (e2 - e1 >= -150) & \
        (e1 != 255)
    if usual.all():
        return out
    conds = [
        (np.isnan(f2), _quiet(b2)),
        (np.isnan(f1), _quiet(b1)),
        ((f1 == 0) & (f2 == 0), np.full(64, 0xFFC0_0000, dtype=U32)),
        (np.isinf(f1) & np.isinf(f2), np.full(64, 0xFFC0_0000, dtype=U32)),
        ((f1 == 0) | np.isinf(f2), inf),
        (np.isinf(f1) | (f2 == 0), zero),
        (e2 - e1 < -150, underflow),
        (e1 == 255, overflow),
    ]
    taken = np.zeros(64, dtype=bool)
    result = out.copy()
    for cond, value in conds:
        hit = cond & ~taken
        result = np.where(hit, value, result)
        taken |= hit
    return result


# ---- the operation table: mnemonic -> (source kinds, destination kind, fn over typed values) ----
def _u(fn):
    return fn   # float ops: IEEE results, no numpy warnings (the run sets np.errstate once)


def _sh32(x):
    return x & U32(31)


OPS = {
    "v_mov_b32": (("b32",), "b32", lambda a: a),
    "v_mov_b64": (("b64",), "b64", lambda a: a),
    "v_not_b32": (("b32",), "b32", lambda a: ~a),
    "v_bfrev_b32": (("b32",), "b32", lambda a: _bitreverse(a)),
    "v_add_u32": (("u32", "u32"), "u32", lambda a, b: a + b),
    "v_sub_u32": (("u32", "u32"), "u32", lambda a, b: a - b),
    "v_subrev_u32": (("u32", "u32"), "u32", lambda a, b: b - a),
    "v_and_b32": (("b32", "b32"), "b32", lambda a, b: a & b),
    "v_or_b32": (("b32", "b32"), "b32", lambda a, b: a | b),
    "v_xor_b32": (("b32", "b32"), "b32", lambda a, b: a ^ b),
    "v_lshlrev_b32": (("u32", "b32"), "b32", lambda a, b: b << _sh32(a)),
    "v_lshrrev_b32": (("u32", "b32"), "b32", lambda a, b: b >> _sh32(a)),
    "v_ashrrev_i32": (("u32", "i32"), "i32", lambda a, b: b >> _sh32(a).astype(I32)),
    "v_lshlrev_b16": (("u16", "b16"), "b16", lambda a, b: b << (a & U32(15))),
    "v_lshrrev_b16": (("u16", "b16"), "b16", lambda a, b: b >> (a & U32(15))),
    "v_ashrrev_i64": (("u32", "i64"), "i64", lambda a, b: b >> (np.asarray(a, dtype=np.int64) & 63)),
    "v_lshlrev_b64": (("u32", "b64"), "b64", lambda a, b: b << (U64(a) & U64(63)) if np.ndim(a) == 0
                      else b << (a.astype(U64) & U64(63))),
    "v_max_i32": (("i32", "i32"), "i32", np.maximum),
    "v_min_i32": (("i32", "i32"), "i32", np.minimum),
    "v_min_u32": (("u32", "u32"), "u32", np.minimum),
    "v_max_u32": (("u32", "u32"), "u32", np.maximum),
    "v_alignbit_b32": (("u32", "u32", "u32"), "u32",
                       lambda a, b, c: ((((np.asarray(a, dtype=U64) << U64(32)) | np.asarray(b, dtype=U64))
                                         >> (np.asarray(c, dtype=U64) & U64(31))) & U64(MASK32)).astype(U32)),
    "v_max_u16": (("u16", "u16"), "u16", np.maximum),
    "v_add_u16": (("u16", "u16"), "u16", lambda a, b: a + b),
    "v_sub_u16": (("u16", "u16"), "u16", lambda a, b: a - b),
    "v_max3_u16": (("u16", "u16", "u16"), "u16", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_max3_i32": (("i32", "i32", "i32"), "i32", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_med3_i32": (("i32", "i32", "i32"), "i32", lambda a, b, c: np.maximum(np.minimum(a, b),
                                                                           np.minimum(np.maximum(a, b), c))),
    "v_mul_u32_u24": (("u24", "u24"), "u32", lambda a, b: (a.astype(U64) * b).astype(U32)
                      if np.ndim(a) else (np.uint64(a) * b).astype(U32)),
    "v_mul_i32_i24": (("i24", "i24"), "i32", lambda a, b: (np.asarray(a, dtype=np.int64) * b).astype(I32)),
    "v_mul_lo_u32": (("u32", "u32"), "u32", lambda a, b: (np.asarray(a, dtype=U64) * b).astype(U32)),
    "v_mul_hi_i32": (("i32", "i32"), "i32",
                     lambda a, b: ((np.asarray(a, dtype=np.int64) * b) >> np.int64(32)).astype(I32)),
    "v_mad_u32_u24": (("u24", "u24", "u32"), "u32",
                      lambda a, b, c: (np.asarray(a, dtype=U64) * b + c).astype(U32)),
    "v_mad_i32_i24": (("i24", "i24", "i32"), "i32",
                      lambda a, b, c: (np.asarray(a, dtype=np.int64) * b + c).astype(I32)),
    "v_add3_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: a + b + c),
    "v_add_lshl_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a + b) << _sh32(c)),
    "v_lshl_add_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a << _sh32(b)) + c),
    "v_lshl_or_b32": (("b32", "u32", "b32"), "b32", lambda a, b, c: (a << _sh32(b)) | c),
    "v_and_or_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: (a & b) | c),
    "v_or3_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: a | b | c),
    "v_xad_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a ^ b) + c),
    "v_lshl_add_u64": (("u64", "u32", "u64"), "u64",
                       lambda a, b, c: (a << (np.asarray(b, dtype=U64) & U64(7))) + c),
    "v_bfe_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: _bfe_u32(a, b, c)),
    "v_bfe_i32": (("u32", "u32", "u32"), "i32", lambda a, b, c: _bfe_i32(a, b, c)),
    "v_perm_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: _perm(a, b, c)),
    # floats
    "v_add_f32": (("f32", "f32"), "f32", _u(lambda a, b: a + b)),
    "v_sub_f32": (("f32", "f32"), "f32", _u(lambda a, b: a - b)),
    "v_mul_f32": (("f32", "f32"), "f32", _u(lambda a, b: a * b)),
    "v_fma_f32": (("f32", "f32", "f32"), "f32", _u(lambda a, b, c: nm.fma_f32(*_lanes(a, b, c)))),
    "v_ldexp_f32": (("f32", "i32"), "f32",
                    _u(lambda a, b: np.ldexp(np.asarray(a, dtype=np.float64),
                                             np.clip(np.asarray(b, dtype=np.int64), -400, 400)).astype(F32))),
    # the transcendentals: exact results rounded once (the hardware's are within 1 ulp), with
    # denormal inputs and results flushed to signed zero, as the CDNA4 ISA guide notes
    "v_exp_f32": (("f32",), "f32", _u(lambda a: _flushed(np.exp2, a))),
    "v_log_f32": (("f32",), "f32", _u(lambda a: _flushed(np.log2, a))),
    "v_rcp_f32": (("f32",), "f32", _u(lambda a: _flushed(np.reciprocal, a))),
    "v_rcp_iflag_f32": (("f32",), "f32", _u(lambda a: _flushed(np.reciprocal, a))),
    "v_cvt_f32_u32": (("u32",), "f32", lambda a: np.asarray(a).astype(F32)),
    "v_cvt_f32_i32": (("i32",), "f32", lambda a: np.asarray(a).astype(F32)),
    "v_cvt_u32_f32": (("f32",), "u32", _u(lambda a: _cvt_u32_f32(a))),
    "v_cvt_i32_f32": (("f32",), "i32", _u(lambda a: _cvt_i32_f32(a))),
    "v_cvt_pk_f16_f32": (("f32", "f32"), "b32", lambda a, b: _f32_to_f16_bits(a) | (_f32_to_f16_bits(b) << U32(16))),
    "v_cvt_pk_bf16_f32": (("f32", "f32"), "b32",
                          lambda a, b: nm.f32_to_bf16_bits(np.asarray(a)) | (nm.f32_to_bf16_bits(np.asarray(b)) << U32(16))),
}

# bit-level float ops (inputs and outputs as bits)
def maximum_f32_bits(a, b):
    """IEEE 754-2019 maximum (v_maximum_f32, which V_MAXIMUM3_F32's pseudocode calls): NaN if
    either is (S0's, quieted, if both), -0 < +0, else the larger."""
    a, b = nm.lanes(a, U32), nm.lanes(b, U32)
    fa, fb = a.view(F32), b.view(F32)
    out = np.where(fa > fb, a, b)
    both_zero = (fa == 0) & (fb == 0)
    out = np.where(both_zero, a & b, out)          # +0 unless both are -0
    out = np.where(np.isnan(fb), _quiet(b), out)
    return np.where(np.isnan(fa), _quiet(a), out)


def minimum_f32_bits(a, b):
    """IEEE 754-2019 minimum: NaN if either is, -0 < +0, else the smaller."""
    a, b = nm.lanes(a, U32), nm.lanes(b, U32)
    fa, fb = a.view(F32), b.view(F32)
    out = np.where(fa < fb, a, b)
    both_zero = (fa == 0) & (fb == 0)
    out = np.where(both_zero, a | b, out)          # -0 if either is -0
    out = np.where(np.isnan(fb), _quiet(b), out)
    return np.where(np.isnan(fa), _quiet(a), out)


BIT_OPS = {
    "v_maximum3_f32": (("f32", "f32", "f32"), lambda a, b, c: maximum_f32_bits(maximum_f32_bits(a, b), c)),
    "v_minimum3_f32": (("f32", "f32", "f32"), lambda a, b, c: minimum_f32_bits(minimum_f32_bits(a, b), c)),
    "v_max_f32": (("f32", "f32"), lambda a, b: max_f32_bits(a, b)),
    "v_max3_f32": (("f32", "f32", "f32"), lambda a, b, c: max_f32_bits(max_f32_bits(a, b), c)),
    "v_div_fixup_f32": (("f32", "f32", "f32"), div_fixup_f32),
}

COMPARES = {
    "eq": np.equal, "ne": np.not_equal, "gt": np.greater, "lt": np.less,
    "ge": np.greater_equal, "le": np.less_equal,
    "neq": lambda a, b: ~np.equal(a, b), "nlt": lambda a, b: ~np.less(a, b),
    "nle": lambda a, b: ~np.less_equal(a, b), "ngt": lambda a, b: ~np.greater(a, b),
    "nge": lambda a, b: ~np.greater_equal(a, b), "lg": lambda a, b: np.less(a, b) | np.greater(a, b),
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
}


_TINY = np.float32(1.1754944e-38)


def _flush(x):
    """Denormal float32 values to zero of the same sign."""
    return np.where(np.abs(x) < _TINY, np.copysign(np.float32(0), x), x).astype(F32)


def _flushed(fn, a):
    a = _flush(np.asarray(a, dtype=F32))
    return _flush(fn(a.astype(np.float64)).astype(F32))


def _lanes(*xs):
    return [nm.lanes(np.asarray(x)) for x in xs]


def _bitreverse(a):
    a = np.asarray(a, dtype=U32)
    b = a.view(np.uint8).reshape(a.shape + (4,)) if a.ndim else np.array([a]).view(np.uint8)
    r = np.unpackbits(b, bitorder="little").reshape(-1, 32)[:, ::-1]
    out = np.packbits(r, axis=1, bitorder="little").view(U32).reshape(-1)
    return out if a.ndim else out[0]


def _bfe_u32(a, b, c):
    off = np.asarray(b, dtype=U32) & U32(31)
    width = np.asarray(c, dtype=U32) & U32(31)
    mask = ((U64(1) << width.astype(U64)) - U64(1)).astype(U32)
    return (np.asarray(a, dtype=U32) >> off) & mask


def _bfe_i32(a, b, c):
    width = np.asarray(c, dtype=U32) & U32(31)
    field = _bfe_u32(a, b, c).astype(np.int64)
    top = np.where(width > 0, np.int64(1) << np.maximum(width.astype(np.int64) - 1, 0), 0)
    return np.where(width > 0, (field ^ top) - top, 0).astype(I32)


def _perm(s0, s1, sel):
    """V_PERM_B32: bytes of {S0, S1} (S1 the low four) picked by each byte of S2."""
    s0, s1, sel = _lanes(np.asarray(s0, dtype=U32), np.asarray(s1, dtype=U32), np.asarray(sel, dtype=U32))
    data = (s0.astype(U64) << U64(32)) | s1.astype(U64)
    out = np.zeros(64, dtype=U32)
    for j in range(4):
        s = (sel >> U32(8 * j)) & U32(0xFF)
        picked = ((data >> (np.minimum(s, 7).astype(U64) * U64(8))) & U64(0xFF)).astype(U32)
        sign_of = {8: 1, 9: 3, 10: 5, 11: 7}
        for code, byte in sign_of.items():
            bit = ((data >> U64(8 * byte + 7)) & U64(1)).astype(U32) * U32(0xFF)
            picked = np.where(s == code, bit, picked)
        picked = np.where(s == 12, U32(0), picked)
        picked = np.where(s >= 13, U32(0xFF), picked)
        out |= picked << U32(8 * j)
    return out


def _f32_to_f16_bits(a):
    """float32 -> f16 bits, round to nearest even; a NaN quieted, its sign and the top of
    its payload kept."""
    a = np.asarray(a, dtype=F32)
    bits = a.astype(np.float16).view(np.uint16).astype(U32)
    raw = a.view(U32)
    nan = ((raw >> U32(16)) & U32(0x8000)) | U32(0x7E00) | ((raw >> U32(13)) & U32(0x3FF))
    return np.where(np.isnan(a), nan, bits)


def _cvt_i32_f32(a):
    """Truncation toward zero, saturating at the int32 range; NaN gives 0."""
    a = np.asarray(a, dtype=np.float64)
    out = np.clip(np.trunc(np.nan_to_num(a, nan=0.0)), -2147483648.0, 2147483647.0)
    return out.astype(np.int64).astype(I32)


def _cvt_u32_f32(a):
    a = np.asarray(a, dtype=np.float64)
    out = np.where(np.isnan(a), 0, np.clip(np.trunc(np.nan_to_num(a, nan=0.0)), 0, 4294967295.0))
    return out.astype(np.uint64).astype(U32)


# ---- DPP ----
def _dpp_source(ins):
    """(source lane of each lane, whether it is valid) for the DPP control of `ins`."""
    m = ins.modifiers
    row_lane = LANES % 16
    controls = [k for k in ("quad_perm", "row_shr", "row_shl", "row_bcast") if k in m]
    if len(controls) != 1:
        raise NotImplementedInstruction(f"DPP controls {controls}")
    control = controls[0]
    if control == "quad_perm":
        perm = np.array(m["quad_perm"])
        return (LANES & ~3) | perm[LANES & 3], np.ones(64, dtype=bool)
    if control == "row_shr":
        n = m["row_shr"]
        return LANES - n, row_lane >= n
    if control == "row_shl":
        n = m["row_shl"]
        return LANES + n, row_lane + n < 16
    if m["row_bcast"] == 15:
        src = 16 * (LANES // 16) - 1
        return src, LANES >= 16
    if m["row_bcast"] == 31:
        return np.full(64, 31), LANES >= 32
    raise NotImplementedInstruction(f"row_bcast:{m['row_bcast']}")


def _dpp_write_mask(ins):
    m = ins.modifiers
    row_mask, bank_mask = m.get("row_mask", 0xF), m.get("bank_mask", 0xF)
    rows = (row_mask >> (LANES // 16)) & 1
    banks = (bank_mask >> ((LANES // 4) % 4)) & 1
    return (rows & banks).astype(bool)


# ---- SDWA ----
_SELECT = {"DWORD": (0, 32), "WORD_0": (0, 16), "WORD_1": (16, 16), "BYTE_0": (0, 8), "BYTE_1": (8, 8),
           "BYTE_2": (16, 8), "BYTE_3": (24, 8)}


def _sdwa_select(read, sel: str, signed: bool):
    shift, width = _SELECT[sel]
    if width == 32:
        return read
    mask = U32((1 << width) - 1)

    def selected(wave):
        x = (np.asarray(read(wave), dtype=U32) >> U32(shift)) & mask
        if signed:
            top = U32(1 << (width - 1))
            x = ((x ^ top).astype(I32) - I32(top)).view(U32)
        return x
    return selected


# ---- the generic compile ----
_VOP3_MODS = {"op_sel"}
_DPP_MODS = {"quad_perm", "row_shr", "row_shl", "row_bcast", "row_mask", "bank_mask", "bound_ctrl"}
_SDWA_MODS = {"dst_sel", "dst_unused", "src0_sel", "src1_sel"}


def _source_readers(ins, kinds, first_source, encoding):
    readers = []
    for i, kind in enumerate(kinds):
        op = ins.operands[first_source + i]
        read_kind = "b32" if kind in ("u16", "i16", "b16", "u24", "i24") else ("f32" if kind == "f32" else kind)
        reader = vector_reader(op, read_kind if _width(kind) == 32 else ("b64" if kind != "f64" else "f64"))
        if encoding == "_sdwa":
            sel = ins.modifiers.get(f"src{i}_sel", "DWORD")
            reader = _sdwa_select(reader, sel, signed=op.sext or kind.startswith("i"))
        elif op.sext:
            raise NotImplementedInstruction("sext() outside SDWA")
        readers.append(reader)
    if encoding == "_dpp":
        readers[0] = _dpp_reader(ins, readers[0])
    return readers


def _dpp_reader(ins, read):
    """src0 as DPP reads it: lane l takes its source lane's value; where the source lane is
    out of the row pattern or inactive, 0 with bound_ctrl:1, else lane l is not written
    (the writer reads wave.dpp_writes)."""
    src, valid = _dpp_source(ins)
    src = np.clip(src, 0, 63)
    zero_fill = ins.modifiers.get("bound_ctrl", 0) == 1
    all_lanes = np.ones(64, dtype=bool)

    def permuted(wave):
        x = nm.lanes(read(wave))
        ok = valid & wave.exec[src]
        out = x[src]
        if zero_fill:
            wave.dpp_writes = all_lanes
            return np.where(ok, out, U32(0))
        wave.dpp_writes = ok
        return out
    return permuted


def _vector_destination(ins, kind, encoding):
    width = _width(kind)
    write = vector_writer(ins.operands[0], width)
    if encoding == "_dpp":
        enabled = _dpp_write_mask(ins)
        row = vgpr_row(ins.operands[0])

        def write_dpp(wave, bits):
            mask = enabled & wave.exec & wave.dpp_writes
            np.copyto(wave.v[row], np.asarray(bits, dtype=U32), where=mask, casting="unsafe")
        return write_dpp
    if encoding == "_sdwa":
        sel = ins.modifiers.get("dst_sel", "DWORD")
        unused = ins.modifiers.get("dst_unused", "UNUSED_PAD")
        if unused != "UNUSED_PAD":
            raise NotImplementedInstruction(f"dst_unused:{unused}")
        shift, bits_width = _SELECT[sel]
        if bits_width == 32:
            return write
        mask = U32((1 << bits_width) - 1)
        return lambda wave, bits: write(wave, (np.asarray(bits, dtype=U32) & mask) << U32(shift))
    return write


_VIEWS = {
    "b32": None, "u32": None, "u64": None, "b64": None,
    "i32": lambda x: x.view(I32), "f32": lambda x: x.view(F32), "i64": lambda x: x.view(np.int64),
}


def _viewer(kind):
    """fn(bits) -> the typed values (None where the bits are the values)."""
    if kind in _VIEWS:
        return _VIEWS[kind]
    return lambda x: _view(x, kind)


def _typed_reader(read, kind):
    view = _viewer(kind)
    if view is None:
        return read
    return lambda wave: view(read(wave))


def _to_bits(kind):
    if kind == "f32":
        return lambda v: np.asarray(v, dtype=F32).view(U32)
    if kind in ("u32", "b32", "i32"):
        return lambda v: v.astype(U32) if type(v) is np.ndarray else np.asarray(v).astype(U32)
    return lambda v: _bits(v, kind)


def _compile_elementwise(ins, kernel):
    base, encoding = base_mnemonic(ins.mnemonic)
    kinds, out_kind, fn = OPS[base]
    allowed = {"_dpp": _DPP_MODS, "_sdwa": _SDWA_MODS}.get(encoding, set())
    check_modifiers(ins, allowed)
    if len(ins.operands) != 1 + len(kinds):
        raise NotImplementedInstruction(f"{len(ins.operands)} operands")
    readers = [_typed_reader(r, k) for r, k in zip(_source_readers(ins, kinds, 1, encoding), kinds)]
    write = _vector_destination(ins, out_kind, encoding)
    to_bits = _to_bits(out_kind)

    if len(kinds) == 1:
        r0, = readers

        def run1(wave):
            write(wave, to_bits(fn(r0(wave))))
        return run1, 1
    if len(kinds) == 2:
        r0, r1 = readers

        def run2(wave):
            write(wave, to_bits(fn(r0(wave), r1(wave))))
        return run2, 1
    r0, r1, r2 = readers

    def run3(wave):
        write(wave, to_bits(fn(r0(wave), r1(wave), r2(wave))))
    return run3, 1


def _compile_bit_op(ins, kernel):
    base, encoding = base_mnemonic(ins.mnemonic)
    kinds, fn = BIT_OPS[base]
    check_modifiers(ins, set())
    readers = _source_readers(ins, kinds, 1, encoding)
    write = _vector_destination(ins, "b32", encoding)

    def run(wave):
        write(wave, fn(*[r(wave) for r in readers]))
    return run, 1


def _register_table():
    for name in OPS:
        register(name)(_compile_elementwise)
    for name in BIT_OPS:
        register(name)(_compile_bit_op)


_register_table()


# ---- compares ----
def _compare_parts(base):
    _, _, cond, kind = base.split("_")
    return cond, kind


def _mask_writer(ins):
    op = ins.operands[0]
    index = sgpr_index(op)
    if op.value.count != 2:
        raise NotImplementedInstruction("a compare result needs an SGPR pair")

    def write(wave, lanes):
        wave.set_mask64(index, pack_mask(lanes & wave.exec))
    return write


def _compile_compare(ins, kernel):
    base, encoding = base_mnemonic(ins.mnemonic)
    cond, kind = _compare_parts(base)
    check_modifiers(ins, _SDWA_MODS - {"dst_sel", "dst_unused"} if encoding == "_sdwa" else set())
    readers = _source_readers(ins, (kind, kind), 1, encoding)
    fn = COMPARES[cond]
    write = _mask_writer(ins)

    def run(wave):
        lanes = fn(_view(readers[0](wave), kind), _view(readers[1](wave), kind))
        write(wave, nm.lanes(lanes))
    return run, 1


for _kind in ("u16", "i16", "u32", "i32", "u64", "i64", "f32"):
    for _cond in ("eq", "ne", "lt", "le", "gt", "ge") if _kind != "f32" else \
            ("eq", "lt", "le", "gt", "ge", "neq", "nlt", "nle", "ngt", "nge", "lg", "o", "u"):
        register(f"v_cmp_{_cond}_{_kind}")(_compile_compare)


# ---- instructions with masks, carries, lanes ----
def _mask_reader(op):
    index = sgpr_index(op)
    return lambda wave: unpack_mask(wave.mask64(index))


@register("v_cndmask_b32")
def _cndmask(ins, kernel):
    check_modifiers(ins, set())
    r0 = vector_reader(ins.operands[1], "f32" if (ins.operands[1].neg or ins.operands[1].abs) else "b32")
    r1 = vector_reader(ins.operands[2], "f32" if (ins.operands[2].neg or ins.operands[2].abs) else "b32")
    mask = _mask_reader(ins.operands[3])
    write = vector_writer(ins.operands[0])

    def run(wave):
        write(wave, np.where(mask(wave), r1(wave), r0(wave)))
    return run, 1


@register("v_sub_co_u32", "v_subb_co_u32")
def _sub_co(ins, kernel):
    """a - b (v_subb: minus the borrow-in mask, the fifth operand), the borrow out to the
    second destination (a mask)."""
    check_modifiers(ins, set())
    write = vector_writer(ins.operands[0])
    carry = _mask_writer(_InsView(ins, 1))
    ra, rb = vector_reader(ins.operands[2], "u32"), vector_reader(ins.operands[3], "u32")
    borrow_in = _mask_reader(ins.operands[4]) if base_mnemonic(ins.mnemonic)[0] == "v_subb_co_u32" else None

    def run(wave):
        r = np.asarray(ra(wave), dtype=np.int64) - np.asarray(rb(wave), dtype=np.int64)
        if borrow_in is not None:
            r = r - borrow_in(wave).astype(np.int64)
        write(wave, (r & MASK32).astype(U32))
        carry(wave, nm.lanes(r < 0))
    return run, 2


class _InsView:
    """An instruction seen with operand `index` first (for the second destination of
    carry-out and scale instructions)."""

    def __init__(self, ins, index):
        self.operands = (ins.operands[index],)
        self.text = ins.text


def _mad64_operands(ins, factor_code):
    """(write D, write the carry mask, read A, read B, read C) of a 64-bit multiply-add:
    D = A * B + C, A and B read as `factor_code`, C as 64 bits."""
    check_modifiers(ins, set())
    return (vector_writer(ins.operands[0], 64), _mask_writer(_InsView(ins, 1)),
            vector_reader(ins.operands[2], factor_code), vector_reader(ins.operands[3], factor_code),
            vector_reader(ins.operands[4], "u64"))


@register("v_mad_u64_u32")
def _mad_u64_u32(ins, kernel):
    write, carry, ra, rb, rc = _mad64_operands(ins, "u32")

    def run(wave):
        a = nm.lanes(ra(wave), U64)
        b = np.asarray(rb(wave), dtype=U64)
        c = np.asarray(rc(wave), dtype=U64)
        prod = a * b                    # < 2^64: exact
        total = prod + c
        write(wave, total)
        carry(wave, total < prod)
    return run, 2


@register("v_mad_i64_i32")
def _mad_i64_i32(ins, kernel):
    write, carry, ra, rb, rc = _mad64_operands(ins, "b32")

    def run(wave):
        a = nm.lanes(ra(wave), U32).view(I32).astype(object)
        b = nm.lanes(rb(wave), U32).view(I32).astype(object)
        c = nm.lanes(rc(wave), U64).view(np.int64).astype(object)
        total = a * b + c
        write(wave, np.array([int(t) & 0xFFFF_FFFF_FFFF_FFFF for t in total], dtype=U64))
        carry(wave, np.array([not -(1 << 63) <= int(t) < (1 << 63) for t in total]))
    return run, 2


@register("v_div_scale_f32")
def _div_scale(ins, kernel):
    check_modifiers(ins, set())
    write = vector_writer(ins.operands[0])
    vcc = _mask_writer(_InsView(ins, 1))
    readers = [vector_reader(op, "f32") for op in ins.operands[2:5]]

    def run(wave):
        d, lanes = div_scale_f32(*[r(wave) for r in readers])
        write(wave, d)
        vcc(wave, lanes)
    return run, 2


@register("v_div_fmas_f32")
def _div_fmas(ins, kernel):
    """fma(S0, S1, S2), and where VCC is set (V_DIV_SCALE_F32 scaled an operand by 2^64)
    the scaling undone within the fma's one rounding: times 2^64 if S2's exponent is above
    127, else 2^-64. (The pseudocode in tinygrad's wheel reads `2.0F ** 32`; the division
    probe of tests/test_gfx950_emu_probes.py and AMD's rocjitsu reject that reading:
    tools/gfx950_emu/pcode/oracle.py READINGS.)"""
    check_modifiers(ins, set())
    write = vector_writer(ins.operands[0])
    readers = [vector_reader(op, "f32") for op in ins.operands[1:4]]

    def run(wave):
        a, b, c = (nm.lanes(r(wave), U32).view(F32) for r in readers)
        vcc = unpack_mask(wave.mask64(106))
        exponent = np.where(vcc, np.where(_exponent(c.view(U32)) > 127, 64, -64), 0)
        write(wave, nm.fma_f32(a, b, c, exponent).view(U32))
    return run, 1


@register("v_fmac_f32")
def _fmac(ins, kernel):
    check_modifiers(ins, set())
    write = vector_writer(ins.operands[0])
    ra, rb = vector_reader(ins.operands[1], "f32"), vector_reader(ins.operands[2], "f32")
    rd = vector_reader(ins.operands[0], "f32")

    def run(wave):
        a, b, c = _lanes(_view(ra(wave), "f32"), _view(rb(wave), "f32"), _view(rd(wave), "f32"))
        write(wave, nm.fma_f32(a, b, c).view(U32))
    return run, 1


@register("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def _mbcnt(ins, kernel):
    check_modifiers(ins, set())
    hi = "_hi_" in ins.mnemonic
    ra, rb = vector_reader(ins.operands[1], "b32"), vector_reader(ins.operands[2], "u32")
    write = vector_writer(ins.operands[0])
    below = np.array([(1 << lane) - 1 for lane in range(64)], dtype=object)
    part = np.array([int(((b >> 32) if hi else b) & MASK32) for b in below], dtype=np.uint64)

    def run(wave):
        mask = np.asarray(ra(wave), dtype=np.uint64) & part
        counts = np.array([bin(int(m)).count("1") for m in nm.lanes(mask)], dtype=U32)
        write(wave, counts + rb(wave))
    return run, 1


@register("v_readlane_b32")
def _readlane(ins, kernel):
    check_modifiers(ins, set())
    dst = scalar_writer(ins.operands[0])
    row = vgpr_row(ins.operands[1])
    lane_op = ins.operands[2].value
    if isinstance(lane_op, Const):
        lane = lane_op.value & 63
        return (lambda wave: dst(wave, int(wave.v[row][lane]))), 1
    index = sgpr_index(ins.operands[2])
    return (lambda wave: dst(wave, int(wave.v[row][int(wave.s[index]) & 63]))), 1


@register("v_readfirstlane_b32")
def _readfirstlane(ins, kernel):
    check_modifiers(ins, set())
    dst = scalar_writer(ins.operands[0])
    read = vector_reader(ins.operands[1], "b32")

    def run(wave):
        active = np.flatnonzero(wave.exec)
        lane = int(active[0]) if active.size else 0
        dst(wave, int(nm.lanes(read(wave))[lane]))
    return run, 1


@register("v_accvgpr_read_b32", "v_accvgpr_write_b32")
def _accvgpr(ins, kernel):
    check_modifiers(ins, set())
    write = vector_writer(ins.operands[0])
    read = vector_reader(ins.operands[1], "b32")
    return (lambda wave: write(wave, read(wave))), 1


@register("v_permlane16_swap_b32", "v_permlane32_swap_b32")
def _permlane_swap(ins, kernel):
    check_modifiers(ins, set())
    dst, src = vgpr_row(ins.operands[0]), vgpr_row(ins.operands[1])
    if "16" in ins.mnemonic:
        a = np.array([p * 32 + lane for p in range(2) for lane in range(16)])
        b = a + 16
    else:
        a = np.arange(32)
        b = a + 32

    def run(wave):
        tmp = wave.v[src][a].copy()
        wave.v[src][a] = wave.v[dst][b]
        wave.v[dst][b] = tmp
    return run, 2


@register("v_bitop3_b32", "v_bitop3_b16")
def _bitop3(ins, kernel):
    check_modifiers(ins, {"bitop3"})
    table = ins.modifiers.get("bitop3", 0)
    readers = [vector_reader(op, "b32") for op in ins.operands[1:4]]
    write = vector_writer(ins.operands[0])
    half = ins.mnemonic.endswith("b16")

    def run(wave):
        s0, s1, s2 = (np.asarray(r(wave), dtype=U32) for r in readers)
        out = np.zeros(64, dtype=U32)
        for i in range(8):
            if table >> i & 1:
                out |= (s0 if i & 4 else ~s0) & (s1 if i & 2 else ~s1) & (s2 if i & 1 else ~s2)
        write(wave, out & U32(0xFFFF) if half else out)
    return run, 1


# ---- packed f32 (VOP3P) ----
def _pk_halves(read, sel_lo: int, sel_hi: int):
    def halves(wave):
        x = nm.lanes(read(wave), U64)
        lo = (x & U64(MASK32)).astype(U32)
        hi = (x >> U64(32)).astype(U32)
        return (hi if sel_lo else lo).view(F32), (hi if sel_hi else lo).view(F32)
    return halves


def _compile_pk(ins, kernel):
    check_modifiers(ins, {"op_sel", "op_sel_hi"})
    n = len(ins.operands) - 1
    op_sel = ins.modifiers.get("op_sel", (0,) * n)
    op_sel_hi = ins.modifiers.get("op_sel_hi", (1,) * n)
    for op in ins.operands[1:]:
        if isinstance(op.value, Const) or op.neg or op.abs:
            raise NotImplementedInstruction("packed operand that is not a register pair")
    srcs = [_pk_halves(vector_reader(op, "b64"), op_sel[i], op_sel_hi[i]) for i, op in enumerate(ins.operands[1:])]
    write = vector_writer(ins.operands[0], 64)
    base = ins.mnemonic
    fn = {"v_pk_mul_f32": lambda a, b: a * b, "v_pk_add_f32": lambda a, b: a + b,
          "v_pk_fma_f32": lambda a, b, c: nm.fma_f32(a, b, c)}[base]

    def run(wave):
        parts = [s(wave) for s in srcs]
        lo = fn(*[p[0] for p in parts]).astype(F32)
        hi = fn(*[p[1] for p in parts]).astype(F32)
        write(wave, lo.view(U32).astype(U64) | (hi.view(U32).astype(U64) << U64(32)))
    return run, 1


register("v_pk_mul_f32", "v_pk_add_f32", "v_pk_fma_f32")(_compile_pk)


# ---- gfx950 conversions ----
@register("v_cvt_scalef32_pk_bf16_fp4")
def _cvt_pk_bf16_fp4(ins, kernel):
    """D = two bf16: the nibbles of byte OPSEL[1:0] of S0, times 2^(exponent(S1) - 127)
    (NaN for exponent 255)."""
    check_modifiers(ins, {"op_sel"})
    op_sel = ins.modifiers.get("op_sel", (0, 0, 0))
    byte = op_sel[0] | (op_sel[1] << 1)
    if len(op_sel) > 2 and op_sel[2]:
        raise NotImplementedInstruction("op_sel on the scale operand")
    r0, r1 = vector_reader(ins.operands[1], "b32"), vector_reader(ins.operands[2], "f32")
    write = vector_writer(ins.operands[0])

    def run(wave):
        src = (np.asarray(r0(wave), dtype=U32) >> U32(8 * byte)) & U32(0xFF)
        scale = _exponent(r1(wave)).astype(np.int64)
        factor = np.exp2(scale - 127.0)
        factor = np.where(scale == 255, np.nan, factor)   # e8m0 0xFF is NaN (OCP MX; AMD's host reference)
        lo = nm.e2m1_to_f64(src & U32(0xF)) * factor
        hi = nm.e2m1_to_f64(src >> U32(4)) * factor
        bits = nm.f32_to_bf16_bits(lo.astype(F32)) | (nm.f32_to_bf16_bits(hi.astype(F32)) << U32(16))
        write(wave, bits)
    return run, 1


@register("v_cvt_scalef32_pk_f32_fp8", "v_cvt_scalef32_pk_f16_fp8")
def _cvt_pk_f32_fp8(ins, kernel):
    """D = the two e4m3 bytes of the 16-bit half of S0 that OPSEL[0] picks, times
    2^(exponent(S1) - 127): two f32 (two registers, exact) or two f16 (one register)."""
    half_precision = "_f16_" in ins.mnemonic
    check_modifiers(ins, {"op_sel"})
    op_sel = ins.modifiers.get("op_sel", (0, 0, 0))
    if any(op_sel[1:]):
        raise NotImplementedInstruction("op_sel beyond the source half")
    shift = U32(16 * op_sel[0])
    r0, r1 = vector_reader(ins.operands[1], "b32"), vector_reader(ins.operands[2], "f32")
    write = vector_writer(ins.operands[0], 32 if half_precision else 64)

    def run(wave):
        half = (nm.lanes(r0(wave), U32) >> shift) & U32(0xFFFF)
        scale = _exponent(r1(wave)).astype(np.float64)
        factor = np.where(scale == 255, np.nan, np.exp2(scale - 127.0))   # e8m0 0xFF: NaN
        lo = nm.e4m3_bits_to_f64(half & U32(0xFF)) * factor
        hi = nm.e4m3_bits_to_f64(half >> U32(8)) * factor
        # a NaN (an e4m3 NaN byte, a NaN scale) comes out as AMD's default NaN
        if half_precision:
            lo16 = np.where(np.isnan(lo), U32(0xFE00), lo.astype(np.float16).view(np.uint16).astype(U32))
            hi16 = np.where(np.isnan(hi), U32(0xFE00), hi.astype(np.float16).view(np.uint16).astype(U32))
            write(wave, lo16 | (hi16 << U32(16)))
        else:
            lo32 = np.where(np.isnan(lo), DEFAULT_NAN, lo.astype(F32).view(U32))
            hi32 = np.where(np.isnan(hi), DEFAULT_NAN, hi.astype(F32).view(U32))
            write(wave, lo32.astype(U64) | (hi32.astype(U64) << U64(32)))
    return run, 1


@register("v_cvt_scalef32_pk_fp8_f32")
def _cvt_pk_fp8_f32(ins, kernel):
    """Two f32 (S0, S1) divided by 2^(exponent(S2) - 127) to e4m3fn, into the half of D that
    OPSEL[3] picks; the other half kept."""
    check_modifiers(ins, {"op_sel"})
    op_sel = ins.modifiers.get("op_sel", (0, 0, 0, 0))
    if any(op_sel[:3]):
        raise NotImplementedInstruction("op_sel on a source of v_cvt_scalef32_pk_fp8_f32")
    high = len(op_sel) > 3 and op_sel[3]
    r0, r1, r2 = (vector_reader(op, "f32") for op in ins.operands[1:4])
    row = vgpr_row(ins.operands[0])

    def run(wave):
        exponent = _exponent(r2(wave)).astype(np.float64)
        scale = np.where(exponent == 255, np.nan, np.exp2(exponent - 127.0))   # e8m0 0xFF: NaN
        a = nm.lanes(r0(wave), U32).view(F32).astype(np.float64) / scale
        b = nm.lanes(r1(wave), U32).view(F32).astype(np.float64) / scale
        saturate = bool(wave.mode >> 23 & 1)   # MODE.FP16_OVFL: finite overflow saturates, else NaN
        pair = nm.f64_to_e4m3_bits(a, saturate) | (nm.f64_to_e4m3_bits(b, saturate) << U32(8))
        old = wave.v[row]
        new = (old & U32(0x0000FFFF)) | (pair << U32(16)) if high else (old & U32(0xFFFF0000)) | pair
        np.copyto(wave.v[row], new, where=wave.exec)
    return run, 1

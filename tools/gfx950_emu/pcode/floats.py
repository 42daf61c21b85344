"""Binary floating point on bit patterns, computed exactly with Python integers and rounded
once, to nearest, ties to even (IEEE 754-2019 roundTiesToEven; the kernels run in that mode),
subnormals kept (the kernels run with .amdhsa_float_denorm_mode_32 3: nothing is flushed).

A finite value is held as (sign, m, e) meaning (-1)**sign * m * 2**e with m >= 0 an integer,
so +, -, *, fused multiply-add and ldexp are exact before their one rounding, and / is exact
to a sticky bit. 2**x and log2(x) are exact where the result is representable (integer x,
x a power of two) and otherwise computed to 60 decimal digits (Python's decimal module
rounds exp and ln correctly at that precision) and then rounded: such a result is
irrational, never a tie, and a wrong rounding would need it within 1e-55 (relative) of a
rounding boundary.

NaN results (the pseudocode says nothing of their bits; these are this module's reading):
an operation with a NaN operand returns the first NaN operand made quiet (sign and payload
kept, as IEEE 754 recommends); an invalid operation (inf - inf, 0 * inf, 0 / 0, inf / inf,
log2 of a negative number) returns the format's default NaN, the sign and quiet bits set
(0xffc00000 for f32): the NaN AMD's own pseudocode writes for 0/0 in V_DIV_FIXUP_F32 /
_F16 / _F64 (32'F(0xffc00000), 16'F(0xfe00), 64'F(0xfff8000000000000)), and the one AMD's
rocjitsu emulator produces for invalid operations in its division helpers. Converting a NaN between formats keeps its sign, its quiet
bit and the top of its payload, and does not quiet it (the pseudocode quiets with
cvtToQuietNAN where it means to)."""
from __future__ import annotations

import dataclasses
import decimal


@dataclasses.dataclass(frozen=True)
class Format:
    name: str
    ebits: int
    mbits: int
    ieee: bool = True          # exponent all ones is inf / NaN; False: finite-only formats

    @property
    def width(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:     # exponent of the smallest normal
        return 1 - self.bias

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def exp_mask(self) -> int:
        return ((1 << self.ebits) - 1) << self.mbits

    @property
    def quiet_bit(self) -> int:
        return 1 << (self.mbits - 1)

    @property
    def default_nan(self) -> int:
        return self.sign_bit | self.exp_mask | self.quiet_bit

    @property
    def inf(self) -> int:
        return self.exp_mask


F16 = Format("f16", 5, 10)
BF16 = Format("bf16", 8, 7)
F32 = Format("f32", 8, 23)
F64 = Format("f64", 11, 52)
# OCP 8-bit and 4-bit formats (OCP "OCP 8-bit Floating Point Specification (OFP8)" rev 1.0
# and "OCP Microscaling Formats (MX) Specification" v1.0): E4M3 has no infinity, its only
# NaNs are S.1111.111; E2M1 has neither.
E4M3 = Format("fp8", 4, 3, ieee=False)
E2M1 = Format("fp4", 2, 1, ieee=False)

FINITE, INF, NAN = 0, 1, 2


def decode(fmt: Format, bits: int):
    """(kind, sign, m, e): a finite value (-1)**sign * m * 2**e, or INF, or NAN."""
    sign = (bits >> (fmt.width - 1)) & 1
    field = (bits >> fmt.mbits) & ((1 << fmt.ebits) - 1)
    frac = bits & ((1 << fmt.mbits) - 1)
    if fmt.ieee and field == (1 << fmt.ebits) - 1:
        return (NAN if frac else INF), sign, frac, 0
    if fmt is E4M3 and field == 15 and frac == 7:
        return NAN, sign, frac, 0
    if field == 0:
        return FINITE, sign, frac, fmt.emin - fmt.mbits
    return FINITE, sign, frac | (1 << fmt.mbits), field - fmt.bias - fmt.mbits


def is_nan(fmt: Format, bits: int) -> bool:
    return decode(fmt, bits)[0] == NAN


def is_signaling_nan(fmt: Format, bits: int) -> bool:
    return is_nan(fmt, bits) and fmt.ieee and not bits & fmt.quiet_bit


def quiet(fmt: Format, bits: int) -> int:
    return bits | fmt.quiet_bit


def round_finite(fmt: Format, sign: int, m: int, e: int, sticky: bool = False,
                 unbounded: bool = False) -> int:
    """The bits of (-1)**sign * (m * 2**e + a positive amount below half of m's last unit,
    if sticky), rounded to nearest even. Past the largest finite: infinity (IEEE formats)
    or, with unbounded, the caller gets the rounded magnitude's bits unchecked (E4M3's
    saturation is decided by its converter)."""
    if m == 0:
        if sticky:
            raise ValueError("round_finite: a sticky bit needs the significand's bits")
        return sign * fmt.sign_bit
    top = e + m.bit_length() - 1                   # exponent of the leading bit
    quantum = max(top, fmt.emin) - fmt.mbits         # exponent of the result's last unit
    shift = quantum - e
    if shift > 0:
        q = m >> shift
        rem = m & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and (sticky or q & 1)):
            q += 1
    else:
        if sticky:
            raise ValueError("round_finite: a sticky bit below the result's precision")
        q = m << -shift
    if q >> (fmt.mbits + 1):                         # rounding carried into a new binade
        q >>= 1
        quantum += 1
    if q >> fmt.mbits:
        field = quantum + fmt.mbits + fmt.bias
        frac = q & ((1 << fmt.mbits) - 1)
    else:
        field, frac = 0, q
    if not unbounded and fmt.ieee and field >= (1 << fmt.ebits) - 1:
        return sign * fmt.sign_bit | fmt.inf
    return sign * fmt.sign_bit | (field << fmt.mbits) | frac


def round_ratio(fmt: Format, sign: int, num: int, den: int, e: int = 0, unbounded: bool = False) -> int:
    """(-1)**sign * num / den * 2**e rounded once (num, den > 0 integers)."""
    if num == 0:
        return sign * fmt.sign_bit
    k = fmt.mbits + 4 + den.bit_length() - num.bit_length()
    if k >= 0:
        q, r = divmod(num << k, den)
    else:
        q, r = divmod(num, den << -k)
    return round_finite(fmt, sign, q, e - k, sticky=r != 0, unbounded=unbounded)


def convert(src: Format, bits: int, dst: Format) -> int:
    """A value of src as dst: exact or rounded once; NaN kept NaN (not quieted)."""
    if src is dst:
        return bits
    kind, sign, m, e = decode(src, bits)
    if kind == NAN:
        if not dst.ieee:
            raise ValueError(f"convert: {dst.name} has no NaN encoding rule here")
        shift = dst.mbits - src.mbits
        frac = m << shift if shift >= 0 else m >> -shift
        if frac == 0:
            frac = dst.quiet_bit
        return sign * dst.sign_bit | dst.exp_mask | frac
    if kind == INF:
        return sign * dst.sign_bit | dst.inf
    return round_finite(dst, sign, m, e)


def add(fmt: Format, a: int, b: int) -> int:
    ka, sa, ma, ea = decode(fmt, a)
    kb, sb, mb, eb = decode(fmt, b)
    if ka == NAN or kb == NAN:
        return quiet(fmt, a if ka == NAN else b)
    if ka == INF or kb == INF:
        if ka == INF and kb == INF and sa != sb:
            return fmt.default_nan
        return a if ka == INF else b
    return _add_exact(fmt, sa, ma, ea, sb, mb, eb)


def _add_exact(fmt: Format, sa, ma, ea, sb, mb, eb) -> int:
    e = min(ea, eb)
    x, y = ma << (ea - e), mb << (eb - e)
    total = (y - x if sa else x + y) if not sb else (x - y if not sa else -(x + y))
    if total == 0:   # an exact zero: -0 only from (-0) + (-0) (roundTiesToEven)
        both_zero = ma == 0 and mb == 0
        return fmt.sign_bit if (both_zero and sa and sb) else 0
    return round_finite(fmt, int(total < 0), abs(total), e)


def sub(fmt: Format, a: int, b: int) -> int:
    if is_nan(fmt, b):
        return add(fmt, a, b) if not is_nan(fmt, a) else quiet(fmt, a)
    return add(fmt, a, b ^ fmt.sign_bit)


def mul(fmt: Format, a: int, b: int) -> int:
    ka, sa, ma, ea = decode(fmt, a)
    kb, sb, mb, eb = decode(fmt, b)
    if ka == NAN or kb == NAN:
        return quiet(fmt, a if ka == NAN else b)
    sign = sa ^ sb
    if ka == INF or kb == INF:
        if (ka == FINITE and ma == 0) or (kb == FINITE and mb == 0):
            return fmt.default_nan
        return sign * fmt.sign_bit | fmt.inf
    return round_finite(fmt, sign, ma * mb, ea + eb)


def div(fmt: Format, a: int, b: int) -> int:
    ka, sa, ma, ea = decode(fmt, a)
    kb, sb, mb, eb = decode(fmt, b)
    if ka == NAN or kb == NAN:
        return quiet(fmt, a if ka == NAN else b)
    sign = sa ^ sb
    if ka == INF:
        return fmt.default_nan if kb == INF else sign * fmt.sign_bit | fmt.inf
    if kb == INF:
        return sign * fmt.sign_bit
    if mb == 0:
        return fmt.default_nan if ma == 0 else sign * fmt.sign_bit | fmt.inf
    return round_ratio(fmt, sign, ma, mb, ea - eb)


def fma(fmt: Format, a: int, b: int, c: int, scale: int = 0) -> int:
    """(a * b + c) * 2**scale with one rounding."""
    ka, sa, ma, ea = decode(fmt, a)
    kb, sb, mb, eb = decode(fmt, b)
    kc, sc, mc, ec = decode(fmt, c)
    if ka == NAN or kb == NAN or kc == NAN:
        return quiet(fmt, a if ka == NAN else b if kb == NAN else c)
    sp = sa ^ sb
    if ka == INF or kb == INF:
        if (ka == FINITE and ma == 0) or (kb == FINITE and mb == 0):
            return fmt.default_nan
        if kc == INF and sc != sp:
            return fmt.default_nan
        return sp * fmt.sign_bit | fmt.inf
    if kc == INF:
        return c
    return _add_exact(fmt, sp, ma * mb, ea + eb + scale, sc, mc, ec + scale)


def ldexp(fmt: Format, a: int, n: int) -> int:
    """a * 2**n rounded once."""
    kind, sign, m, e = decode(fmt, a)
    if kind == NAN:
        return quiet(fmt, a)
    if kind == INF or m == 0:
        return a
    return round_finite(fmt, sign, m, e + n)


def from_int(fmt: Format, value: int) -> int:
    if value == 0:
        return 0
    return round_finite(fmt, int(value < 0), abs(value), 0)


def to_int_toward_zero(fmt: Format, bits: int, lo: int, hi: int) -> int:
    """Truncation toward zero, clamped to [lo, hi]; NaN gives 0 (the saturating reading of
    AMD's f32_to_u32 / f32_to_i32, the ISA guide's notes on V_CVT_U32_F32 / V_CVT_I32_F32)."""
    kind, sign, m, e = decode(fmt, bits)
    if kind == NAN:
        return 0
    if kind == INF:
        return lo if sign else hi
    mag = m << e if e >= 0 else m >> -e
    value = -mag if sign else mag
    return min(max(value, lo), hi)


def compare(fa: Format, a: int, fb: Format, b: int) -> int | None:
    """-1, 0, 1 for a <, ==, > b (numerically, -0 == +0); None if either is NaN."""
    if fa is fb and fa.ieee:      # one format: the sign-magnitude bits order the values
        magnitude = fa.sign_bit - 1
        if (a & magnitude) > fa.exp_mask or (b & magnitude) > fa.exp_mask:
            return None
        x = -(a & magnitude) if a & fa.sign_bit else a
        y = -(b & magnitude) if b & fa.sign_bit else b
        return (x > y) - (x < y)
    ka, sa, ma, ea = decode(fa, a)
    kb, sb, mb, eb = decode(fb, b)
    if ka == NAN or kb == NAN:
        return None
    va = _ordinal(ka, sa, ma, ea)
    vb = _ordinal(kb, sb, mb, eb)
    if va[0] != vb[0]:
        return -1 if va[0] < vb[0] else 1
    if va[0] != 0:
        return 0
    x, ex, y, ey = va[1], va[2], vb[1], vb[2]
    e = min(ex, ey)
    x <<= ex - e
    y <<= ey - e
    return (x > y) - (x < y)


def _ordinal(kind, sign, m, e):
    if kind == INF:
        return (-1 if sign else 1, 0, 0)
    return (0, -m if sign else m, e)


_DEC = decimal.Context(prec=60, Emax=10**6, Emin=-10**6)
_LN2 = _DEC.ln(decimal.Decimal(2))


def exp2(fmt: Format, x: int) -> int:
    """2**x, x in fmt."""
    kind, sign, m, e = decode(fmt, x)
    if kind == NAN:
        return quiet(fmt, x)
    if kind == INF:
        return 0 if sign else fmt.inf
    if m == 0:
        return convert(F64, 0x3FF0000000000000, fmt)
    if e >= 0 or m % (1 << -e) == 0:       # an integer power: exact
        n = (m << e if e >= 0 else m >> -e) * (-1 if sign else 1)
        if n > (1 << 20):
            return fmt.inf
        if n < -(1 << 20):
            return 0
        return round_finite(fmt, 0, 1, n)
    xv = decimal.Decimal(-m if sign else m) * _DEC.power(decimal.Decimal(2), e)
    if xv > 2000:
        return fmt.inf
    if xv < -2000:
        return 0
    num, den = _DEC.exp(_DEC.multiply(xv, _LN2)).as_integer_ratio()
    return round_ratio(fmt, 0, num, den)


def log2(fmt: Format, x: int) -> int:
    kind, sign, m, e = decode(fmt, x)
    if kind == NAN:
        return quiet(fmt, x)
    if kind == FINITE and m == 0:
        return fmt.sign_bit | fmt.inf
    if sign:
        return fmt.default_nan
    if kind == INF:
        return fmt.inf
    if m & (m - 1) == 0:                   # a power of two: an integer result
        return from_int(fmt, e + m.bit_length() - 1)
    value = _DEC.divide(_DEC.ln(decimal.Decimal(m)), _LN2) + e
    num, den = value.as_integer_ratio()
    return round_ratio(fmt, int(num < 0), abs(num), den)

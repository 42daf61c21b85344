"""The functions and named constants AMD's pseudocode calls, as this interpreter defines them.

Source. The pseudocode itself is AMD's ("AMD Instinct CDNA4 Instruction Set Architecture
Reference Guide", https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/
instruction-set-architectures/amd-instinct-cdna4-instruction-set-architecture.pdf, linked
from rocm.docs.amd.com reference/gpu-arch/mi350; the per-instruction text is the one
tinygrad's wheel carries). The guides use these functions without a chapter that defines
them: no public definition of exponent, f32_to_fp8_scale, fp4_to_bf16_scale, CalcDsAddr,
UNDERFLOW_F32, ... was found (searched: AMD's CDNA3/CDNA4/RDNA3/RDNA4 guide texts as
public copies hold them). So each definition below says what it rests on:
- [IEEE] IEEE 754-2019 (roundTiesToEven, subnormals kept: the kernels' float mode);
- [OCP] the OCP Microscaling Formats (MX) v1.0 and OFP8 rev 1.0 specifications (E2M1,
  E4M3, E8M0 encodings);
- [name] what the function's name and its use in the pseudocode fix, e.g. exponent() must
  be the biased exponent field, since V_CVT_SCALEF32_PK_BF16_FP4 takes the E8M0 scale
  byte s as exponent(S1.f32) of the float 2**(s-127);
- [reading] a choice where nothing public decides, named as such, made as Triton's gfx950
  lowering (and torch, its oracle) needs it, and tested in tests/test_gfx950_pcode.py.
Functions not listed here raise PcodeUndefined naming them."""
from __future__ import annotations

import math

from . import floats as fp
from .values import (BF16, ENCODING_TYPES, F16, F32, F64, I32, I64, U1, U32, U64,
                           FloatType, IntType, PcodeTypeError, bits_of, boolean)


class PcodeUndefined(NotImplementedError):
    """A function, constant or state the pseudocode uses that has no public definition
    (or that this interpreter does not model): never guessed."""


def _float_arg(name, value) -> FloatType:
    t = value[0]
    if not isinstance(t, FloatType):
        raise PcodeTypeError(f"{name}() takes a float, got {t}")
    return t


def _int_arg(name, value) -> int:
    t, v = value
    if not isinstance(t, IntType):
        raise PcodeTypeError(f"{name}() takes an integer, got {t}")
    return v


# ---------------------------------------------------------------- classification [IEEE]

def isNAN(ctx, x):
    t = _float_arg("isNAN", x)
    return boolean(fp.is_nan(t.fmt, x[1]))


def isSignalNAN(ctx, x):
    t = _float_arg("isSignalNAN", x)
    return boolean(fp.is_signaling_nan(t.fmt, x[1]))


def isQuietNAN(ctx, x):
    t = _float_arg("isQuietNAN", x)
    return boolean(fp.is_nan(t.fmt, x[1]) and not fp.is_signaling_nan(t.fmt, x[1]))


def cvtToQuietNAN(ctx, x):
    """The NaN with its quiet bit set (sign, payload kept) [IEEE]; other values unchanged."""
    t = _float_arg("cvtToQuietNAN", x)
    return (t, fp.quiet(t.fmt, x[1])) if fp.is_nan(t.fmt, x[1]) else x


def sign(ctx, x):
    """The sign bit of a float [name]; for an integer, whether it is negative."""
    t, v = x
    if isinstance(t, FloatType):
        return (U1, (v >> (t.width - 1)) & 1)
    return boolean(v < 0)


def abs_(ctx, x):
    """A float with its sign bit cleared (NaN too, as the VOP3 abs modifier) [IEEE abs];
    an integer's magnitude, wrapped to its type (abs of the most negative is itself)."""
    t, v = x
    if isinstance(t, FloatType):
        return (t, v & ~t.fmt.sign_bit)
    return (t, t.wrap(-v if v < 0 else v))


def exponent(ctx, x):
    """The biased exponent field, as a signed 32-bit int [name] (see the module's note:
    the E8M0 scale of V_CVT_SCALEF32_* is exponent() of the scale as f32; zero and
    subnormals give 0, inf and NaN the all-ones field)."""
    t = _float_arg("exponent", x)
    return (I32, (x[1] >> t.fmt.mbits) & ((1 << t.fmt.ebits) - 1))


# ---------------------------------------------------------------- arithmetic [IEEE]

def fma(ctx, a, b, c):
    t = _float_arg("fma", a)
    if b[0] is not t or c[0] is not t:
        raise PcodeTypeError(f"fma() of {a[0]}, {b[0]}, {c[0]}: one float type expected")
    return (t, fp.fma(t.fmt, a[1], b[1], c[1]))


def fma_scaled(ctx, a, b, c, n):
    """(a * b + c) * 2**n rounded once. Not an AMD function: the line READINGS puts in
    V_DIV_FMAS_F32's text uses it (pcode.READINGS says why)."""
    t = _float_arg("fma_scaled", a)
    if b[0] is not t or c[0] is not t:
        raise PcodeTypeError(f"fma_scaled() of {a[0]}, {b[0]}, {c[0]}: one float type expected")
    return (t, fp.fma(t.fmt, a[1], b[1], c[1], _int_arg("fma_scaled", n)))


def ldexp(ctx, x, n):
    """x * 2**n, rounded once [IEEE scaleB]."""
    t = _float_arg("ldexp", x)
    return (t, fp.ldexp(t.fmt, x[1], _int_arg("ldexp", n)))


def pow_(ctx, base, x):
    """pow(2.0, x) = 2**x correctly rounded [IEEE exp2]; the pseudocode of the kernels'
    instructions calls pow only with base 2 (V_EXP_F32): other bases raise."""
    t = _float_arg("pow", x)
    if not isinstance(base[0], FloatType) or fp.compare(base[0].fmt, base[1], fp.F64, 0x4000000000000000) != 0:
        raise PcodeUndefined("pow() with a base other than 2.0")
    return (t, fp.exp2(t.fmt, x[1]))


def log2(ctx, x):
    """log2(x) correctly rounded [IEEE log2]: -inf at +-0, NaN below 0."""
    t = _float_arg("log2", x)
    return (t, fp.log2(t.fmt, x[1]))


def sqrt(ctx, x):
    """The square root correctly rounded [IEEE]; -0 gives -0, below 0 the default NaN."""
    t = _float_arg("sqrt", x)
    fmt = t.fmt
    kind, s, m, e = fp.decode(fmt, x[1])
    if kind == fp.NAN:
        return (t, fp.quiet(fmt, x[1]))
    if kind == fp.FINITE and m == 0:
        return x
    if s:
        return (t, fmt.default_nan)
    if kind == fp.INF:
        return x
    if e % 2:
        m, e = m << 1, e - 1
    extra = 2 * (fmt.mbits + 4)
    root = math.isqrt(m << extra)
    exact = root * root == m << extra
    return (t, fp.round_finite(fmt, 0, root, (e - extra) // 2, sticky=not exact))


# ---------------------------------------------------------------- conversions

def _convert(x, dst: FloatType, name: str):
    t = _float_arg(name, x)
    return (dst, fp.convert(t.fmt, x[1], dst.fmt))


def f32_to_f64(ctx, x):
    return _convert(x, F64, "f32_to_f64")


def f64_to_f32(ctx, x):
    return _convert(x, F32, "f64_to_f32")


def f16_to_f32(ctx, x):
    return _convert(x, F32, "f16_to_f32")


def _convert_quieted(x, dst: FloatType, name: str):
    t = _float_arg(name, x)
    bits = fp.convert(t.fmt, x[1], dst.fmt)
    if fp.is_nan(dst.fmt, bits):
        bits = fp.quiet(dst.fmt, bits)
    return (dst, bits)


def f32_to_f16(ctx, x):
    """Round to nearest even; a NaN stays NaN with its sign and top payload bits, quieted
    [reading: IEEE 754 6.2, a conversion of a signaling NaN delivers a quiet one; as
    f32_to_bf16 and the emulator's v_cvt_pk_f16_f32]."""
    return _convert_quieted(x, F16, "f32_to_f16")


def bf16_to_f32(ctx, x):
    return _convert(x, F32, "bf16_to_f32")


def f32_to_bf16(ctx, x):
    """Round to nearest even [IEEE; torch's bfloat16 rounding]; a NaN stays NaN with its
    sign and top payload bits, quieted [reading: torch writes its own NaN pattern, so the
    tests compare NaN-ness there, not bits]."""
    return _convert_quieted(x, BF16, "f32_to_bf16")


def u32_to_f32(ctx, x):
    return (F32, fp.from_int(fp.F32, _int_arg("u32_to_f32", x) & 0xFFFFFFFF))


def i32_to_f32(ctx, x):
    return (F32, fp.from_int(fp.F32, I32.wrap(_int_arg("i32_to_f32", x))))


def f32_to_u32(ctx, x):
    """Truncation toward zero, clamped to [0, 2**32-1], NaN to 0 [the RDNA3/RDNA4 guides'
    notes on V_CVT_U32_F32: "out-of-range floating point values (including infinity)
    saturate. NAN is converted to 0"; the CDNA entries carry no notes]."""
    t = _float_arg("f32_to_u32", x)
    return (U32, fp.to_int_toward_zero(t.fmt, x[1], 0, 0xFFFFFFFF))


def f32_to_i32(ctx, x):
    """Truncation toward zero, clamped to the i32 range, NaN to 0 [reading, as f32_to_u32]."""
    t = _float_arg("f32_to_i32", x)
    return (I32, fp.to_int_toward_zero(t.fmt, x[1], -(1 << 31), (1 << 31) - 1))


def signext(ctx, x):
    """The same number as a signed 64-bit int [name]: a signed operand keeps its sign, an
    unsigned one its value."""
    return (I64, I64.wrap(_int_arg("signext", x)))


def signext_from_bit(ctx, x, n):
    """x's low n bits sign-extended from bit n-1, in x's type [name]; n = 0 gives 0."""
    t, v = x
    width = _int_arg("signext_from_bit", n)
    if width == 0:
        return (t, 0)
    field = v & ((1 << width) - 1)
    if field >> (width - 1):
        field -= 1 << width
    return (t, t.wrap(field))


# ---------------------------------------------------------------- scaled conversions

def _e8m0_scale(name, scale) -> int | None:
    """The E8M0 exponent (scale - 127), or None for 0xFF, E8M0's NaN [OCP MX v1.0 5.4.1]."""
    s = _int_arg(name, scale) & 0xFF
    return None if s == 0xFF else s - 127


def _field(name, x, encoding):
    t, v = x
    if t is not ENCODING_TYPES[encoding]:
        raise PcodeTypeError(f"{name}() takes a .{encoding} field, got {t}")
    return v


def fp4_to_bf16_scale(ctx, x, scale):
    """E2M1 (sign bit 3; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 [OCP MX v1.0 5.3.3]) times
    2**(scale - 127), rounded to bf16 [name: the scaled conversions multiply by the block
    scale on the way up, as the MX spec's decoding does]; a scale of 0xFF (E8M0 NaN) gives
    NaN [OCP: an element of a block whose scale is NaN is NaN]."""
    v = _field("fp4_to_bf16_scale", x, "fp4")
    exp = _e8m0_scale("fp4_to_bf16_scale", scale)
    if exp is None:
        return (BF16, BF16.fmt.default_nan)
    kind, s, m, e = fp.decode(fp.E2M1, v)
    return (BF16, fp.round_finite(BF16.fmt, s, m, e + exp))


def _fp8_scaled(name: str, x, scale, dst: FloatType):
    v = _field(name, x, "fp8")
    exp = _e8m0_scale(name, scale)
    kind, s, m, e = fp.decode(fp.E4M3, v)
    if exp is None or kind == fp.NAN:
        return (dst, dst.fmt.default_nan)
    return (dst, fp.round_finite(dst.fmt, s, m, e + exp))


def fp8_to_f32_scale(ctx, x, scale):
    """E4M3 [OCP OFP8: 0x7F / 0xFF NaN, no infinity] times 2**(scale - 127), rounded to f32
    (exact but past f32's range) [as fp4_to_bf16_scale: the scaled conversions multiply by
    the block scale on the way up]; a scale of 0xFF (E8M0's NaN) gives NaN [OCP]."""
    return _fp8_scaled("fp8_to_f32_scale", x, scale, F32)


def fp8_to_f16_scale(ctx, x, scale):
    """As fp8_to_f32_scale, rounded to f16 (E4M3 times 2**(scale - 127) may leave f16's range)."""
    return _fp8_scaled("fp8_to_f16_scale", x, scale, F16)


def f32_to_fp8_scale(ctx, x, scale):
    """x / 2**(scale - 127) to E4M3 [OCP OFP8], rounded once to nearest even [IEEE]. The
    division by the scale is the direction MLIR's arith.scaling_truncf lowers to this
    instruction with (llvm-project mlir/lib/Conversion/ArithToAMDGPU). Past the largest
    finite value (448), with MODE.FP16_OVFL set, as the kernels set it: +-448, infinity
    included; with it clear: NaN (0x7F with x's sign) [reading: FP16_OVFL is the MODE bit
    that "selects finite overflow behavior for f32->f8" (ROCm/rocm-systems PR 9030, AMD's
    rocjitsu emulator), which Triton sets for every kernel with an f32 -> fp8 cast; the
    saturated values are those of torch 2.13's float8_e4m3fn conversion (2.11 gives NaN
    there); tests/test_gfx950_pcode.py checks the rest against torch; what the hardware gives
    for an infinite source is not public]. NaN gives 0x7F
    with x's sign; a scale of 0xFF (E8M0's NaN) gives NaN [OCP]."""
    t = _float_arg("f32_to_fp8_scale", x)
    exp = _e8m0_scale("f32_to_fp8_scale", scale)
    kind, s, m, e = fp.decode(t.fmt, x[1])
    nan = ENCODING_TYPES["fp8"], (s << 7) | 0x7F
    if exp is None or kind == fp.NAN:
        return nan
    if kind == fp.INF:
        return (ENCODING_TYPES["fp8"], (s << 7) | 0x7E) if ctx.wave_mode["FP16_OVFL"] else nan
    magnitude = fp.round_finite(fp.E4M3, 0, m, e - exp, unbounded=True)
    if magnitude > 0x7E:
        return (ENCODING_TYPES["fp8"], (s << 7) | 0x7E) if ctx.wave_mode["FP16_OVFL"] else nan
    return (ENCODING_TYPES["fp8"], (s << 7) | magnitude)


# ---------------------------------------------------------------- addresses [reading]
# The address units' rules are prose in the guides' memory chapters, not pseudocode. The
# global, buffer and scalar ones read their operands from the inputs themselves (RAW_HELPERS:
# the `.b32` the pseudocode puts on them is the encoding field, not the address width, and
# an operand the encoding leaves out, such as SOFFSET or SADDR "off", is simply not given),
# and compute the plain address sum. Range checks (buffer num_records, LDS size, apertures) are not part of the
# pseudocode and are not applied: the emulator decides which lanes access memory.

def CalcDsAddr(ctx, addr, offset0, offset1):
    """LDS byte address: ADDR + {OFFSET1, OFFSET0}, modulo 2**32 (no M0 clamp: gfx9 and
    later LDS instructions do not use M0)."""
    a = bits_of(addr)
    return (U32, (a + ((bits_of(offset1) & 0xFF) << 8 | (bits_of(offset0) & 0xFF))) & 0xFFFFFFFF)


def _register(ctx, name, default=None):
    cell = ctx.regs.get(name)
    if cell is None:
        if default is None:
            raise PcodeUndefined(f"the address needs input {name}")
        return default
    return cell.bits


def CalcGlobalAddr(ctx):
    """SADDR (64-bit SGPR pair) + ADDR (u32 VGPR) + OFFSET when SADDR is given; ADDR (a
    64-bit VGPR pair) + OFFSET when it is not ("off"); OFFSET is the signed 13-bit field
    (0 if not given)."""
    off = _register(ctx, "OFFSET", 0) & 0x1FFF
    off -= (off & 0x1000) << 1
    if "SADDR" in ctx.regs:
        base = ctx.regs["SADDR"].bits + (_register(ctx, "ADDR") & 0xFFFFFFFF)
    else:
        base = _register(ctx, "ADDR")
    return (U64, (base + off) & ((1 << 64) - 1))


def CalcBufferAddr(ctx):
    """base + SOFFSET + OFFSET + (offen: VADDR's offset) + (idxen: VADDR's index * stride),
    from the descriptor SRSRC (base bits 47:0, stride 61:48); VADDR holds the index then the
    offset when both are used; SOFFSET and OFFSET are 0 if not given; swizzled or add_tid
    descriptors raise (the kernels use neither)."""
    desc = _register(ctx, "SRSRC")
    base, stride = desc & ((1 << 48) - 1), (desc >> 48) & 0x3FFF
    if (desc >> 63) & 1 or (desc >> 119) & 1:
        raise PcodeUndefined("CalcBufferAddr: swizzle_enable / add_tid_enable descriptors")
    offen, idxen = ctx.modifiers.get("offen", 0), ctx.modifiers.get("idxen", 0)
    vaddr = _register(ctx, "VADDR") if (offen or idxen) else 0
    index = vaddr & 0xFFFFFFFF if idxen else 0
    voff = ((vaddr >> 32) if idxen else vaddr) & 0xFFFFFFFF if offen else 0
    total = base + (_register(ctx, "SOFFSET", 0) & 0xFFFFFFFF) + (_register(ctx, "OFFSET", 0) & 0xFFF) \
        + voff + index * stride
    return (U64, total & ((1 << 64) - 1))


def CalcScalarGlobalAddr(ctx):
    """SBASE (64-bit SGPR pair) + OFFSET (signed 21-bit, 0 if not given) + SOFFSET if given."""
    off = _register(ctx, "OFFSET", 0) & 0x1FFFFF
    off -= (off & 0x100000) << 1
    return (U64, (_register(ctx, "SBASE") + off + (_register(ctx, "SOFFSET", 0) & 0xFFFFFFFF)) & ((1 << 64) - 1))


RAW_HELPERS = {"CalcGlobalAddr", "CalcBufferAddr", "CalcScalarGlobalAddr"}


def nop(ctx):
    return (U32, 0)


def _undefined(name):
    def helper(ctx, *args):
        raise PcodeUndefined(f"{name}() has no public definition")
    return helper


HELPERS = {
    "isNAN": isNAN, "isSignalNAN": isSignalNAN, "isQuietNAN": isQuietNAN,
    "cvtToQuietNAN": cvtToQuietNAN, "sign": sign, "abs": abs_, "exponent": exponent,
    "fma": fma, "fma_scaled": fma_scaled, "ldexp": ldexp, "pow": pow_, "log2": log2, "sqrt": sqrt,
    "f32_to_f64": f32_to_f64, "f64_to_f32": f64_to_f32, "f16_to_f32": f16_to_f32,
    "f32_to_f16": f32_to_f16, "bf16_to_f32": bf16_to_f32, "f32_to_bf16": f32_to_bf16,
    "u32_to_f32": u32_to_f32, "i32_to_f32": i32_to_f32, "f32_to_u32": f32_to_u32,
    "f32_to_i32": f32_to_i32, "signext": signext, "signext_from_bit": signext_from_bit,
    "fp4_to_bf16_scale": fp4_to_bf16_scale, "f32_to_fp8_scale": f32_to_fp8_scale,
    "fp8_to_f32_scale": fp8_to_f32_scale, "fp8_to_f16_scale": fp8_to_f16_scale,
    "CalcDsAddr": CalcDsAddr, "CalcGlobalAddr": CalcGlobalAddr,
    "CalcBufferAddr": CalcBufferAddr, "CalcScalarGlobalAddr": CalcScalarGlobalAddr,
    "nop": nop, "HwRegWriteMask": _undefined("HwRegWriteMask"),
}


class DenormClass:
    """DENORM.f32 / DENORM.f64: `x == DENORM.f32` tests whether x is a subnormal of that
    format [name: the V_DIV_SCALE pseudocode compares a value with it], not a value."""
    __slots__ = ("type",)

    def __init__(self, t: FloatType):
        self.type = t


def named_constant(name: str, member: str | None):
    """The value of a named constant, optionally viewed in a format (`NAN.f32`)."""
    t = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64}.get(member) if member else None
    if member and t is None:
        raise PcodeUndefined(f"{name}.{member}")
    if name == "NAN":       # [reading] the default NaN of floats.py (0xffc00000 as f32)
        t = t or F32
        return (t, t.fmt.default_nan)
    if name == "INF":       # [IEEE] +infinity; a double unless viewed
        t = t or F64
        return (t, t.fmt.inf)
    if name == "DENORM":
        if t is None:
            raise PcodeUndefined("DENORM without a format")
        return (DenormClass(t), 0)
    if name in ("UNDERFLOW_F32", "UNDERFLOW_F64") and not member:
        # [reading] V_DIV_FIXUP's result when exponent(S2) - exponent(S1) < -150 (-1075):
        # the quotient is then below half the smallest subnormal, so the correctly rounded
        # quotient, which LLVM's division expansion that Triton emits relies on, is +0
        # (the pseudocode applies the sign). Not defined publicly.
        t = F32 if name.endswith("F32") else F64
        return (t, 0)
    if name == "PI" and not member:
        return (F64, 0x400921FB54442D18)
    if name == "ROUND_NEAREST_EVEN" and not member:
        return (U32, 0)
    raise PcodeUndefined(f"the constant {name}{'.' + member if member else ''} has no public definition")


CONSTANT_NAMES = {"NAN", "INF", "DENORM", "UNDERFLOW_F32", "UNDERFLOW_F64", "OVERFLOW_F32",
                  "OVERFLOW_F64", "PI", "ROUND_NEAREST_EVEN", "ROUND_TOWARD_ZERO",
                  "ROUND_UP", "ROUND_DOWN", "MAX_FLOAT_F32", "WAVE32", "WAVE64"}

"""Types and values of the pseudocode language.

A value is a pair (type, v): for an integer type v is the number it means (negative for a
signed type's negative values, 0..2**w-1 otherwise); for a float type v is its bit pattern.

Types: integers of any width, unsigned (`u32`, `32'U`), signed (`i32`, `32'I`) or untyped
bits (`b32`, `32'B`: arithmetic treats them as unsigned); floats f16, bf16, f32, f64; and
the small float encodings the conversions take (fp8 = OCP E4M3, bf8 = E5M2, fp6, bf6,
fp4 = E2M1), which are bit fields here: only the conversion helpers decode them.

Integer arithmetic follows C, which the pseudocode's own casts assume (`64'U(S0.u32) +
64'U(S1.u32)` to keep a carry, `32'I(... >> 32U)` to take a high half): operands narrower
than 32 bits are promoted to a signed 32-bit int; then the narrower operand converts to
the wider type, unsigned winning at equal width; results wrap to the type's width. A
comparison compares the numbers (no C unsigned wrap of a negative operand)."""
from __future__ import annotations

import functools

from . import floats as fp


class PcodeTypeError(TypeError):
    """An operation the pseudocode language gives no meaning to (e.g. a float used where
    an integer is needed, an assignment that could be a bit copy or a value conversion)."""


class IntType:
    __slots__ = ("kind", "width", "mask", "name", "signed", "half", "size")

    def __init__(self, kind: str, width: int, name: str | None = None):
        self.kind = kind          # "u", "i" or "b"
        self.width = width
        self.mask = (1 << width) - 1
        self.name = name or f"{kind}{width}"
        self.signed = kind == "i"
        self.size = 1 << width                 # wrap(): n & mask, minus size if >= half
        self.half = 1 << (width - 1) if self.signed else self.size

    def __repr__(self):
        return self.name

    def wrap(self, n: int) -> int:
        n &= self.mask
        return n - self.size if n >= self.half else n


class FloatType:
    __slots__ = ("fmt", "width", "name")

    def __init__(self, fmt: fp.Format):
        self.fmt = fmt
        self.width = fmt.width
        self.name = fmt.name

    def __repr__(self):
        return self.name


@functools.lru_cache(maxsize=None)
def int_type(kind: str, width: int) -> IntType:
    return IntType(kind, width)


F16 = FloatType(fp.F16)
BF16 = FloatType(fp.BF16)
F32 = FloatType(fp.F32)
F64 = FloatType(fp.F64)
FLOAT_TYPES = {"f16": F16, "bf16": BF16, "f32": F32, "f64": F64}
FLOAT_BY_WIDTH = {16: F16, 32: F32, 64: F64}
# small float encodings: bit fields with a name (the conversion helpers check it)
ENCODING_TYPES = {"fp8": IntType("b", 8, "fp8"), "bf8": IntType("b", 8, "bf8"),
                  "fp6": IntType("b", 6, "fp6"), "bf6": IntType("b", 6, "bf6"),
                  "fp4": IntType("b", 4, "fp4")}

U1, U32, U64, I32, I64 = int_type("u", 1), int_type("u", 32), int_type("u", 64), int_type("i", 32), int_type("i", 64)


@functools.lru_cache(maxsize=None)
def type_named(name: str):
    """The type a view names (`u32`, `i24`, `b128`, `f32`, `bf16`, `fp4`, ...), or None."""
    if name in FLOAT_TYPES:
        return FLOAT_TYPES[name]
    if name in ENCODING_TYPES:
        return ENCODING_TYPES[name]
    if len(name) > 1 and name[0] in "uib" and name[1:].isdigit() and int(name[1:]) > 0:
        return int_type(name[0], int(name[1:]))
    return None


def cast_type(width: int, code: str):
    """The type of a cast or declaration such as 32'U, 64'F, 16'BF."""
    if code == "F":
        if width not in FLOAT_BY_WIDTH:
            raise PcodeTypeError(f"{width}'F: no float format of that width")
        return FLOAT_BY_WIDTH[width]
    if code == "BF":
        if width != 16:
            raise PcodeTypeError(f"{width}'BF: only 16'BF (bfloat16) exists")
        return BF16
    if code in "UIB":
        return int_type(code.lower(), width)
    raise PcodeTypeError(f"{width}'{code}: unknown type code")


# ---------------------------------------------------------------- bits and views

def bits_of(value) -> int:
    t, v = value
    return v & t.mask if isinstance(t, IntType) else v


def view(value, t):
    """The same bits read as type t (the `.u32` of the language): a narrower value widens
    by its sign for a signed integer, by zeros otherwise; a wider one keeps its low bits."""
    src, v = value
    if isinstance(src, IntType):
        bits = v if (v < 0 and t.width > src.width) else v & src.mask
    else:
        bits = v
    bits &= (1 << t.width) - 1
    return (t, t.wrap(bits)) if isinstance(t, IntType) else (t, bits)


def truth(value) -> bool:
    t, v = value
    if isinstance(t, FloatType):
        kind, _, m, _ = fp.decode(t.fmt, v)
        return kind != fp.FINITE or m != 0
    return v != 0


def boolean(flag: bool):
    return (U1, 1 if flag else 0)


# ---------------------------------------------------------------- C promotion

def promoted(t: IntType) -> IntType:
    return I32 if t.width < 32 else t


@functools.lru_cache(maxsize=None)
def common_int_type(a: IntType, b: IntType) -> IntType:
    a, b = promoted(a), promoted(b)
    if a.width != b.width:
        wide, narrow = (a, b) if a.width > b.width else (b, a)
        return wide
    if a.signed and b.signed:
        return a
    return int_type("u", a.width)


def common_float_type(a, b):
    """Mixed floats compute in the wider format (f64 > f32 > f16, bf16); an integer operand
    converts to the float's type."""
    if isinstance(a, IntType):
        return b
    if isinstance(b, IntType) or a is b:
        return a
    order = {F64: 3, F32: 2, F16: 1, BF16: 1}
    if order[a] == order[b]:
        raise PcodeTypeError(f"no common type of {a} and {b}")
    return a if order[a] > order[b] else b


def to_float(value, t: FloatType) -> int:
    """The bits of value as float type t (a float converts by value; an integer by value)."""
    src, v = value
    if src is t:
        return v
    if isinstance(src, FloatType):
        return fp.convert(src.fmt, v, t.fmt)
    if src.name in ENCODING_TYPES:
        raise PcodeTypeError(f"a {src.name} field used as a number: only the conversion helpers decode it")
    return fp.from_int(t.fmt, v)


# ---------------------------------------------------------------- stores

def stored_bits(value, t) -> int:
    """The bits that assigning value to a location of type t writes. Integer to integer:
    the number wrapped to t; float to float: converted by value; a float to a bit type
    (`b32`) or a bit field to a float: the bits as they are. An integer to a float or a
    float to u/i would be a bit copy or a conversion, which the language does not say:
    PcodeTypeError."""
    src, v = value
    if isinstance(t, IntType):
        if isinstance(src, IntType):
            return v & t.mask
        if t.kind == "b":
            return v & t.mask
        raise PcodeTypeError(f"a {src} value stored as {t}: write f32_to_u32(...) or .b32")
    if isinstance(src, FloatType):
        return to_float(value, t)
    if src.kind == "b" and src.width == t.width:
        return v & src.mask
    raise PcodeTypeError(f"a {src} value stored as {t}: write a cast such as 32'F(...)")

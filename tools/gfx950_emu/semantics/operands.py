"""Reading and writing operands: constants materialized for the operand's type, scalar
registers as Python ints, vector registers as uint32 rows of 64 lanes (uint64 for 64-bit
operands), the float input modifiers -x and |x| as sign-bit operations (what the hardware
does), and exec-masked vector writes."""
from __future__ import annotations

import struct

import numpy as np

from ..listing import Const, Operand, Reg
from ..reports import NotImplementedInstruction
from . import numerics as nm

U32, U64 = np.uint32, np.uint64
MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFF_FFFF_FFFF_FFFF


def const_bits(const: Const, kind: str) -> int:
    """The bits an inline constant or literal supplies to an operand of `kind`
    (b32/u32/i32/f32, b64/u64/i64/f64, b16/u16/i16/f16)."""
    width = int(kind[1:])
    value = const.value
    if isinstance(value, float):
        if kind == "f64" or (width == 64):
            return struct.unpack("<Q", struct.pack("<d", value))[0]
        if width == 16:
            return int(np.array(value, dtype=np.float16).view(np.uint16))
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if const.literal and width == 64:
        if kind == "f64":  # a 32-bit literal supplies the high half of a double
            return (value & MASK32) << 32
        return value & MASK32
    if width == 16:
        return value & 0xFFFF
    return value & (MASK64 if width == 64 else MASK32)


def sign_mask(kind: str) -> int:
    return {"f32": 0x8000_0000, "f64": 0x8000_0000_0000_0000, "f16": 0x8000}[kind]


def scalar_reader(op: Operand, kind: str = "b32"):
    """fn(wave) -> int bits, for SALU sources (and VALU scalar sources via vector_reader)."""
    width = int(kind[1:])
    v = op.value
    if op.neg or op.abs:
        raise NotImplementedInstruction("input modifiers on a scalar operand")
    if isinstance(v, Const):
        bits = const_bits(v, kind)
        return lambda wave: bits
    if isinstance(v, Reg) and v.file == "s":
        i = v.index
        if width == 64:
            return lambda wave: int(wave.s[i]) | (int(wave.s[i + 1]) << 32)
        return lambda wave: int(wave.s[i])
    raise NotImplementedInstruction(f"scalar operand {v}")


def vector_reader(op: Operand, kind: str):
    """fn(wave) -> bits of every lane: a uint32 (or uint64 for 64-bit kinds) row, or a
    numpy scalar for an SGPR or constant (broadcast by numpy). Float kinds apply -x, |x|."""
    width = int(kind[1:])
    v = op.value
    if (op.neg or op.abs) and not kind.startswith("f"):
        raise NotImplementedInstruction(f"input modifier on a {kind} operand")
    if isinstance(v, Const):
        bits = const_bits(v, kind)
        value = U64(bits) if width == 64 else U32(bits)
        base = lambda wave: value  # noqa: E731
    elif isinstance(v, Reg) and v.file in "va":
        row = v.row
        if width == 64:
            base = lambda wave: wave.v[row].astype(U64) | (wave.v[row + 1].astype(U64) << U64(32))  # noqa: E731
        else:
            base = lambda wave: wave.v[row]  # noqa: E731
    elif isinstance(v, Reg) and v.file == "s":
        i = v.index
        if width == 64:
            base = lambda wave: U64(int(wave.s[i]) | (int(wave.s[i + 1]) << 32))  # noqa: E731
        else:
            base = lambda wave: wave.s[i]  # noqa: E731
    else:
        raise NotImplementedInstruction(f"vector operand {v}")
    if not (op.neg or op.abs):
        return base
    dtype = U64 if width == 64 else U32
    sign = dtype(sign_mask(kind))
    if op.abs and op.neg:
        return lambda wave: (base(wave) & ~sign) | sign
    if op.abs:
        return lambda wave: base(wave) & ~sign
    return lambda wave: base(wave) ^ sign


def vgpr_row(op: Operand) -> int:
    v = op.value
    if not (isinstance(v, Reg) and v.file in "va"):
        raise NotImplementedInstruction(f"expected a vector register, got {v}")
    return v.row


def sgpr_index(op: Operand) -> int:
    v = op.value
    if not (isinstance(v, Reg) and v.file == "s"):
        raise NotImplementedInstruction(f"expected a scalar register, got {v}")
    return v.index


def vector_writer(op: Operand, width: int = 32):
    """fn(wave, bits) writing the active lanes of a vector destination (uint64 bits for a
    64-bit one, split over two rows)."""
    row = vgpr_row(op)
    if width == 64:
        def write64(wave, bits):
            bits = nm.lanes(bits, U64)
            lo = (bits & U64(MASK32)).astype(U32)
            hi = (bits >> U64(32)).astype(U32)
            if wave.exec_all:
                wave.v[row] = lo
                wave.v[row + 1] = hi
            else:
                np.copyto(wave.v[row], lo, where=wave.exec)
                np.copyto(wave.v[row + 1], hi, where=wave.exec)
        return write64

    def write32(wave, bits):
        if wave.exec_all:
            wave.v[row] = bits
        else:
            np.copyto(wave.v[row], np.asarray(bits, dtype=U32), where=wave.exec, casting="unsafe")
    return write32


def scalar_writer(op: Operand, width: int = 32):
    """fn(wave, int) writing an SGPR (pair): exec's cached mask follows."""
    i = sgpr_index(op)
    from ..listing import EXEC, M0
    touches_exec = i <= EXEC + 1 and i + width // 32 > EXEC
    touches_m0 = i <= M0 < i + width // 32
    if width == 64:
        def write64(wave, value):
            wave.s[i] = value & MASK32
            wave.s[i + 1] = (value >> 32) & MASK32
            if touches_exec:
                wave.exec_changed()
        return write64
    if touches_m0:
        def write_m0(wave, value):
            wave.s[i] = value & MASK32
            wave.m0_written = True
        return write_m0

    def write32(wave, value):
        wave.s[i] = value & MASK32
        if touches_exec:
            wave.exec_changed()
    return write32

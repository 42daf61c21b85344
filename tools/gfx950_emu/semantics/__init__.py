"""The instructions' semantics, vectorized over a wave's 64 lanes: each module registers the
mnemonics it implements (registry.register) when imported, and importing this package
imports them all. Scalar ALU and program control (salu), vector ALU (valu), memory: global,
buffer, scalar and LDS loads, stores and atomics, waits and cache control (memops), the
matrix instructions (mfma); the operand readers and writers (operands) and the number
formats (numerics) they share."""
from . import memops, mfma, salu, valu  # noqa: F401

"""Matrix instructions (MFMA) of gfx950 used by the kernels: 16x16 outputs over K = 32
(bf16, fp8) and K = 128 (f8f6f4, plain and with e8m0 block scales).

Register layout (for 16x16xK, KL = K / 4 elements a lane, in register order: bytes, bf16
halves or e2m1 nibbles, lowest first): lane l holds row l % 16 of A and column l % 16 of
B; with g = l // 16, element e is k = KL g + e, except for the 8-bit formats of the K = 128
instruction, whose 32 bytes are two runs of 16: k = 16 g + e for e < 16, 64 + 16 g + (e - 16)
after (what Triton's gfx950 lowering, tested on silicon, loads there: the emulator's probe
tests check it against torch with an e2m1 operand, whose 32 nibbles a lane are one run). The
16x16 result's lane l holds column l % 16, rows 4 g + r in register r. With block scales,
row i's (column j's) scale for the 32 elements of k block b is in lane i + 16 b (j + 16 b),
in the byte of its scale register that op_sel (bit 0) and op_sel_hi (bit 1) select.

Numerics: the products are exact in float64 and summed there, C added, and the result
rounded to float32 once (to nearest even; denormals kept); AMD does not document the
summation order, so the hardware's result may differ from this by a few rounding steps
(docs/gfx950.md). A finite result beyond float32 is clamped to +-FLT_MAX when MODE.FP16_OVFL
(bit 23) is set, else it is +-Inf. An MFMA ignores EXEC (every lane takes part)
(AMD's CDNA4 ISA guide, the MFMA chapter: sources/compute.md section 1)."""
from __future__ import annotations

import numpy as np

from ..listing import Const
from ..registry import check_modifiers, register
from ..reports import NotImplementedInstruction
from . import numerics as nm
from .operands import U32, vector_reader

# cbsz / blgp codes of the f8f6f4 operands -> (decoder of a [64, bytes] array -> [64, elements], bits an element)
FORMATS = {0: "fp8", 1: "bf8", 4: "fp4"}


def _decode(raw: np.ndarray, fmt: str) -> np.ndarray:
    """raw [64, nbytes] uint8 -> element values [64, n] float64 in register order."""
    if fmt == "fp8":
        return nm.e4m3_bits_to_f64(raw)
    if fmt == "bf8":
        return nm.bf8_bits_to_f64(raw)
    if fmt == "fp4":
        lo, hi = raw & 0xF, raw >> 4
        nibbles = np.stack([lo, hi], axis=-1).reshape(raw.shape[0], -1)
        return nm.e2m1_to_f64(nibbles)
    if fmt == "bf16":
        halves = raw.view(np.uint16).astype(np.uint32)
        return nm.bf16_bits_to_f32(halves).astype(np.float64)
    if fmt == "f16":
        return raw.view(np.float16).astype(np.float64)
    raise NotImplementedInstruction(f"MFMA operand format {fmt}")


def _register_bytes(wave, row: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(wave.v[row:row + count].T).view(np.uint8)


def k_index(kl: int, split_runs: bool) -> np.ndarray:
    """[4 lane groups, KL elements] -> k."""
    g = np.arange(4)[:, None]
    e = np.arange(kl)[None, :]
    if split_runs:
        return 16 * g + (e % 16) + 64 * (e // 16)
    return kl * g + e


def a_matrix(values: np.ndarray, split_runs: bool = False) -> np.ndarray:
    """[64 lanes, KL] -> A [16, 4 KL]."""
    kl = values.shape[1]
    out = np.empty((16, 4 * kl))
    out[:, k_index(kl, split_runs)] = values.reshape(4, 16, kl).transpose(1, 0, 2)
    return out


def b_matrix(values: np.ndarray, split_runs: bool = False) -> np.ndarray:
    """[64 lanes, KL] -> B [4 KL, 16]."""
    return a_matrix(values, split_runs).T


def block_scales(codes: np.ndarray) -> np.ndarray:
    """e8m0 codes of the 64 lanes -> [16 rows (or columns), 4 blocks of 32] factors."""
    return nm.e8m0_to_f64(codes).reshape(4, 16).T


def d_registers(d: np.ndarray) -> np.ndarray:
    """D [16, 16] -> [4 registers, 64 lanes]."""
    return d.reshape(4, 4, 16).transpose(1, 0, 2).reshape(4, 64)


def c_matrix(regs: np.ndarray) -> np.ndarray:
    """[4 registers, 64 lanes] -> C [16, 16]."""
    return regs.reshape(4, 4, 16).transpose(1, 0, 2).reshape(16, 16)


FLT_MAX = float(np.finfo(np.float32).max)

_SHAPES = {
    "v_mfma_f32_16x16x32_bf16": (32, "bf16", "bf16"),
    "v_mfma_f32_16x16x32_f16": (32, "f16", "f16"),
    "v_mfma_f32_16x16x32_fp8_fp8": (32, "fp8", "fp8"),
    "v_mfma_f32_16x16x128_f8f6f4": (128, None, None),
    "v_mfma_scale_f32_16x16x128_f8f6f4": (128, None, None),
}
_ELEMENT_BITS = {"bf16": 16, "f16": 16, "fp8": 8, "bf8": 8, "fp4": 4}


def _compile_mfma(ins, kernel):
    scaled = ins.mnemonic.startswith("v_mfma_scale")
    check_modifiers(ins, {"cbsz", "blgp"} | ({"op_sel", "op_sel_hi"} if scaled else set()))
    k, fmt_a, fmt_b = _SHAPES[ins.mnemonic]
    if fmt_a is None:
        fmt_a = FORMATS.get(ins.modifiers.get("cbsz", 0))
        fmt_b = FORMATS.get(ins.modifiers.get("blgp", 0))
        if fmt_a is None or fmt_b is None:
            raise NotImplementedInstruction(f"cbsz/blgp {ins.modifiers}")
    elif "cbsz" in ins.modifiers or "blgp" in ins.modifiers:
        raise NotImplementedInstruction("cbsz/blgp broadcast on a non-f8f6f4 MFMA")
    kl = k // 4
    d, a, b, c = ins.operands[:4]
    for op, fmt in ((a, fmt_a), (b, fmt_b)):
        need = kl * _ELEMENT_BITS[fmt] // 32
        if op.value.count != need:
            raise NotImplementedInstruction(f"{fmt} operand of {op.value.count} registers (expects {need})")
    if d.value.count != 4:
        raise NotImplementedInstruction("MFMA result of other than 4 registers")
    a_row, a_n = a.value.row, a.value.count
    b_row, b_n = b.value.row, b.value.count
    d_row = d.value.row
    c_const = isinstance(c.value, Const)
    if c_const and c.value.value != 0:
        raise NotImplementedInstruction("MFMA accumulator constant other than 0")
    c_row = None if c_const else c.value.row
    scale_readers = None
    if scaled:
        op_sel = ins.modifiers.get("op_sel", (0, 0, 0))
        op_sel_hi = ins.modifiers.get("op_sel_hi", (0, 0, 0))
        bytes_ = (op_sel[0] | (op_sel_hi[0] << 1), op_sel[1] | (op_sel_hi[1] << 1))
        scale_readers = (vector_reader(ins.operands[4], "b32"), vector_reader(ins.operands[5], "b32"))

    split_a = k == 128 and _ELEMENT_BITS[fmt_a] == 8
    split_b = k == 128 and _ELEMENT_BITS[fmt_b] == 8

    def run(wave):
        a_values = a_matrix(_decode(_register_bytes(wave, a_row, a_n), fmt_a), split_a)
        b_values = b_matrix(_decode(_register_bytes(wave, b_row, b_n), fmt_b), split_b)
        if scale_readers is not None:
            codes = [(nm.lanes(r(wave), U32) >> U32(8 * bytes_[i])) & U32(0xFF)
                     for i, r in enumerate(scale_readers)]
            a_values = a_values * np.repeat(block_scales(codes[0]), 32, axis=1)
            b_values = b_values * np.repeat(block_scales(codes[1]), 32, axis=1).T
        acc = a_values @ b_values
        if c_row is not None:
            acc = acc + c_matrix(wave.v[c_row:c_row + 4].view(np.float32)).astype(np.float64)
        out = d_registers(acc.astype(np.float32)).view(U32)
        if wave.exec_all:
            wave.v[d_row:d_row + 4] = out
        else:
            raise NotImplementedInstruction("MFMA with a partial EXEC")
    return run, 1


register(*_SHAPES)(_compile_mfma)

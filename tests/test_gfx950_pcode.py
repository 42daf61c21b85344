"""tools/gfx950_emu/pcode, AMD's gfx950 pseudocode run per lane, checked against values
that do not come from it: hand-computed integer results, numpy / torch float arithmetic
and conversions, the E2M1 table, IEEE rounding checked with exact fractions, LLVM's
division sequence against numpy's division. Host logic: runs on the CPU everywhere."""
import math
import random
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from tools.gfx950_emu import pcode
from tools.gfx950_emu.pcode import NoPcode, UnsupportedModifier, evaluate, execute
from tools.gfx950_emu.pcode.helpers import PcodeUndefined
from tools.gfx950_emu.pcode.interpreter import PcodeRuntimeError
from tools.gfx950_emu.pcode.kernel_opcodes import KERNEL_OPCODES, NO_PCODE, PROSE
from tools.gfx950_emu.pcode.lang import PcodeSyntaxError

pytestmark = [pytest.mark.gfx950_emulator, pytest.mark.fast]


def f32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def from_f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def d0(opcode, inputs, **kw) -> int:
    return evaluate(opcode, inputs, **kw)["D0"]


# ---------------------------------------------------------------- coverage of the kernels' opcodes

def test_every_kernel_opcode_with_pseudocode_parses_and_compiles():
    assert len(KERNEL_OPCODES) == 186 and len(set(KERNEL_OPCODES)) == 186
    have = set(pcode.opcodes_with_pcode())
    assert {op for op in KERNEL_OPCODES if op not in have} == NO_PCODE
    for op in NO_PCODE:
        with pytest.raises(NoPcode):
            pcode.pcode_text(op)
    prose = set()
    for op in KERNEL_OPCODES:
        if op in NO_PCODE:
            continue
        try:
            pcode.program(op)
        except PcodeSyntaxError:
            prose.add(op)
    assert prose == PROSE


def test_the_evaluator_raises_for_what_it_does_not_know():
    with pytest.raises(NoPcode):
        evaluate("v_mfma_scale_f32_16x16x128_f8f6f4", {})
    with pytest.raises(PcodeSyntaxError):
        evaluate("ds_swizzle_b32", {})
    with pytest.raises(PcodeRuntimeError, match="input S1 not given"):
        evaluate("v_add_u32", {"S0": 1})
    with pytest.raises(ValueError, match="reads no such register"):
        evaluate("v_add_u32", {"S0": 1, "S1": 2, "SO": 3})
    with pytest.raises(ValueError, match="wider than"):
        evaluate("s_mov_b32", {"SCC": 2, "S0": 0})
    with pytest.raises(UnsupportedModifier, match="DPP"):
        evaluate("v_add_f32", {"S0": 0, "S1": 0}, modifiers={"row_shr": 1})
    with pytest.raises(UnsupportedModifier):
        evaluate("v_add_f32", {"S0": 0, "S1": 0}, modifiers={"clamp": 1})
    with pytest.raises(PcodeUndefined):   # HwRegWriteMask / WAVE_STATUS: not defined publicly
        evaluate("s_setreg_imm32_b32", {"SIMM16": 1, "SIMM32": 0})
    with pytest.raises(PcodeRuntimeError, match="register file"):
        evaluate("v_readlane_b32", {"S1": 3}, lane=0)


# ---------------------------------------------------------------- integers, hand-computed

def test_scalar_alu():
    assert evaluate("s_bfe_u32", {"S0": 0x12345678, "S1": (8 << 16) | 4}) == {"D0": 0x67, "SCC": 1}
    assert evaluate("s_bfe_u32", {"S0": 0x12345678, "S1": (40 << 16) | 28}) == {"D0": 0x1, "SCC": 1}
    assert evaluate("s_bfe_u32", {"S0": 0x0F, "S1": (4 << 16) | 4}) == {"D0": 0, "SCC": 0}
    assert evaluate("s_add_u32", {"S0": 0xFFFFFFFF, "S1": 2}) == {"D0": 1, "SCC": 1}
    assert evaluate("s_addc_u32", {"S0": 0xFFFFFFFE, "S1": 1, "SCC": 1}) == {"D0": 0, "SCC": 1}
    assert evaluate("s_add_i32", {"S0": 0x7FFFFFFF, "S1": 1}) == {"D0": 0x80000000, "SCC": 1}
    assert evaluate("s_sub_i32", {"S0": 0x80000000, "S1": 1}) == {"D0": 0x7FFFFFFF, "SCC": 1}
    assert evaluate("s_abs_i32", {"S0": 0x80000000}) == {"D0": 0x80000000, "SCC": 1}
    assert evaluate("s_mul_hi_i32", {"S0": 0xFFFFFFFF, "S1": 5})["D0"] == 0xFFFFFFFF   # -5 >> 32
    assert evaluate("s_mul_hi_u32", {"S0": 0xFFFFFFFF, "S1": 5})["D0"] == 4
    assert evaluate("s_ashr_i32", {"S0": 0x80000010, "S1": 36})["D0"] == 0xF8000001   # shift 36 & 31
    assert evaluate("s_bcnt1_i32_b64", {"S0": 0xF0000000_0000000F}) == {"D0": 8, "SCC": 1}
    assert evaluate("s_movk_i32", {"S0": 0x8001})["D0"] == 0xFFFF8001
    assert evaluate("s_cmpk_lg_i32", {"S0": 0xFFFFFFFF, "S1": 0xFFFF}) == {"SCC": 0}
    assert evaluate("s_cmp_lt_i32", {"S0": 0xFFFFFFFF, "S1": 0}) == {"SCC": 1}
    assert evaluate("s_cmp_ge_u32", {"S0": 0xFFFFFFFF, "S1": 0}) == {"SCC": 1}
    assert evaluate("s_cselect_b64", {"S0": 7, "S1": 9, "SCC": 0}) == {"D0": 9}
    assert evaluate("s_and_saveexec_b64", {"S0": 0b1100, "EXEC": 0b1010}) == {"D0": 0b1010, "EXEC": 0b1000, "SCC": 1}
    assert evaluate("s_lshl_b64", {"S0": 3, "S1": 63})["D0"] == 1 << 63


# (opcode, inputs, expected result): simple instructions, hand-computed.
SIMPLE_CASES = [
    ("s_addk_i32", {"D0": 0x7FFFFFFF, "S0": 0x0001}, {"D0": 0x80000000, "SCC": 1}),
    ("s_addk_i32", {"D0": 5, "S0": 0xFFFE}, {"D0": 3, "SCC": 0}),
    ("s_and_b32", {"S0": 0xF0F0, "S1": 0x0FF0}, {"D0": 0x00F0, "SCC": 1}),
    ("s_and_b64", {"S0": 1 << 63, "S1": 1 << 62}, {"D0": 0, "SCC": 0}),
    ("s_andn2_b64", {"S0": 0xFF, "S1": 0x0F}, {"D0": 0xF0, "SCC": 1}),
    ("s_or_b32", {"S0": 0x1, "S1": 0x10}, {"D0": 0x11, "SCC": 1}),
    ("s_or_b64", {"S0": 1 << 40, "S1": 1}, {"D0": (1 << 40) | 1, "SCC": 1}),
    ("s_xor_b32", {"S0": 0xFF, "S1": 0xFF}, {"D0": 0, "SCC": 0}),
    ("s_not_b32", {"S0": 0xFFFFFFFF}, {"D0": 0, "SCC": 0}),
    ("s_lshl_b32", {"S0": 3, "S1": 33}, {"D0": 6, "SCC": 1}),              # shift is S1[4:0]
    ("s_lshr_b32", {"S0": 0x80000000, "S1": 31}, {"D0": 1, "SCC": 1}),
    ("s_max_i32", {"S0": 0xFFFFFFFF, "S1": 1}, {"D0": 1, "SCC": 0}),
    ("s_min_i32", {"S0": 0xFFFFFFFF, "S1": 1}, {"D0": 0xFFFFFFFF, "SCC": 1}),
    ("s_min_u32", {"S0": 0xFFFFFFFF, "S1": 1}, {"D0": 1, "SCC": 0}),
    ("s_mul_i32", {"S0": 0xFFFFFFFF, "S1": 0xFFFFFFFF}, {"D0": 1}),
    ("s_mov_b32", {"S0": 0x12345678}, {"D0": 0x12345678}),
    ("s_mov_b64", {"S0": 0x1234_5678_9ABC_DEF0}, {"D0": 0x1234_5678_9ABC_DEF0}),
    ("s_cselect_b32", {"S0": 7, "S1": 9, "SCC": 1}, {"D0": 7}),
    ("s_cmp_eq_u32", {"S0": 4, "S1": 4}, {"SCC": 1}),
    ("s_cmp_lg_u32", {"S0": 4, "S1": 4}, {"SCC": 0}),
    ("s_cmp_ge_i32", {"S0": 0x80000000, "S1": 0}, {"SCC": 0}),
    ("s_cmp_gt_i32", {"S0": 0, "S1": 0xFFFFFFFF}, {"SCC": 1}),
    ("s_cbranch_execnz", {"PC": 0x40, "SIMM16": 2, "EXEC": 1}, {"PC": 0x40 + 8 + 4}),
    ("s_cbranch_scc0", {"PC": 0x40, "SIMM16": 2, "SCC": 1}, {"PC": 0x44}),
    ("v_cmp_eq_u32", {"S0": 3, "S1": 3}, {"D0": 1}),
    ("v_cmp_gt_i32", {"S0": 0, "S1": 0xFFFFFFFF}, {"D0": 1}),
    ("v_cmp_lt_i32", {"S0": 0, "S1": 0xFFFFFFFF}, {"D0": 0}),
    ("v_lshrrev_b32", {"S0": 36, "S1": 0x100}, {"D0": 0x10}),              # shift is S0[4:0]
    ("v_max_i32", {"S0": 0xFFFFFFFF, "S1": 0}, {"D0": 0}),
    ("v_mov_b32", {"S0": 0xCAFE}, {"D0": 0xCAFE}),
    ("v_mov_b64", {"S0": 1 << 60}, {"D0": 1 << 60}),
    ("v_xor_b32", {"S0": 0xFF00, "S1": 0x0FF0}, {"D0": 0xF0F0}),
]


@pytest.mark.parametrize("opcode, inputs, expect", SIMPLE_CASES, ids=[c[0] for c in SIMPLE_CASES])
def test_simple_instructions(opcode, inputs, expect):
    assert evaluate(opcode, inputs) == expect


def test_scalar_branches():
    assert evaluate("s_branch", {"PC": 0x100, "SIMM16": 0xFFFE}) == {"PC": 0x100 - 8 + 4}
    assert evaluate("s_cbranch_scc1", {"PC": 0x100, "SIMM16": 3, "SCC": 1}) == {"PC": 0x100 + 12 + 4}
    assert evaluate("s_cbranch_scc1", {"PC": 0x100, "SIMM16": 3, "SCC": 0}) == {"PC": 0x104}
    assert evaluate("s_cbranch_execz", {"PC": 0, "SIMM16": 1, "EXEC": 0}) == {"PC": 8}   # EXECZ derived
    assert evaluate("s_cbranch_vccnz", {"PC": 0, "SIMM16": 1, "VCC": 1 << 40}) == {"PC": 8}
    assert evaluate("s_nop", {"SIMM16": 5}) == {}


def test_vector_integer_alu():
    # v_perm_b32: bytes 0-3 of {S0, S1} are S1's, 4-7 S0's; 8-11 replicate a sign; 12 is 0; 13+ 0xff
    s0, s1 = 0x8122_3344, 0xD566_F788
    assert d0("v_perm_b32", {"S0": s0, "S1": s1, "S2": 0x00_01_04_07}) == 0x88_F7_44_81
    assert d0("v_perm_b32", {"S0": s0, "S1": s1, "S2": 0x0B_0A_09_08}) == 0xFF_00_FF_FF
    assert d0("v_perm_b32", {"S0": s0, "S1": s1, "S2": 0x0C_0D_FF_05}) == 0x00_FF_FF_33
    # v_mbcnt: the bits of S0 below this lane, plus S1
    assert d0("v_mbcnt_lo_u32_b32", {"S0": 0xFFFFFFFF, "S1": 5}, lane=10) == 15
    assert d0("v_mbcnt_lo_u32_b32", {"S0": 0xFFFFFFFF, "S1": 0}, lane=40) == 32
    assert d0("v_mbcnt_hi_u32_b32", {"S0": 0xFFFFFFFF, "S1": 32}, lane=40) == 40
    assert d0("v_mbcnt_hi_u32_b32", {"S0": 0xFFFFFFFF, "S1": 3}, lane=20) == 3
    assert d0("v_med3_i32", {"S0": 5, "S1": 0xFFFFFFFF, "S2": 3}) == 3
    assert d0("v_med3_i32", {"S0": 0xFFFFFFF0, "S1": 0xFFFFFFFF, "S2": 0x7FFFFFFF}) == 0xFFFFFFFF
    assert d0("v_max3_i32", {"S0": 0xFFFFFFFF, "S1": 0x80000000, "S2": 0xFFFFFFFE}) == 0xFFFFFFFF
    assert d0("v_max3_u16", {"S0": 0xFFFF, "S1": 2, "S2": 0x8000}) == 0xFFFF
    out = evaluate("v_mad_u64_u32", {"S0": 0xFFFFFFFF, "S1": 0xFFFFFFFF, "S2": (1 << 64) - 1})
    assert out == {"D0": ((1 << 65) - (1 << 33)) & ((1 << 64) - 1), "D1": 1}
    assert evaluate("v_mad_u64_u32", {"S0": 3, "S1": 4, "S2": 5}) == {"D0": 17, "D1": 0}
    assert d0("v_lshl_add_u64", {"S0": 0xFFFF_FFFF_0000_0001, "S1": 4, "S2": 0x10}) == 0xFFFF_FFF0_0000_0020
    assert d0("v_lshl_add_u64", {"S0": 1, "S1": 9, "S2": 0}) == 2          # shift is S1[2:0]
    assert d0("v_lshl_add_u32", {"S0": 3, "S1": 33, "S2": 1}) == 7          # shift is S1[4:0]
    assert d0("v_lshl_or_b32", {"S0": 1, "S1": 31, "S2": 1}) == 0x80000001
    assert d0("v_add_lshl_u32", {"S0": 0xFFFFFFFF, "S1": 2, "S2": 4}) == 0x10
    assert d0("v_add3_u32", {"S0": 0xFFFFFFFF, "S1": 0xFFFFFFFF, "S2": 3}) == 1
    assert d0("v_xad_u32", {"S0": 0xF0, "S1": 0xFF, "S2": 1}) == 0x10
    assert d0("v_and_or_b32", {"S0": 0xFF00, "S1": 0x0FF0, "S2": 1}) == 0x0F01
    assert d0("v_or3_b32", {"S0": 1, "S1": 2, "S2": 4}) == 7
    assert d0("v_bfe_u32", {"S0": 0xABCD, "S1": 4, "S2": 8}) == 0xBC
    assert d0("v_bfe_i32", {"S0": 0xF0, "S1": 4, "S2": 4}) == 0xFFFFFFFF
    assert d0("v_bfe_i32", {"S0": 0x70, "S1": 4, "S2": 4}) == 7
    assert d0("v_bfe_i32", {"S0": 0x70, "S1": 4, "S2": 0}) == 0
    assert d0("v_bfrev_b32", {"S0": 0x0000_0013}) == 0xC800_0000
    assert d0("v_mul_i32_i24", {"S0": 0x00FF_FFFF, "S1": 3}) == 0xFFFF_FFFD   # -1 * 3
    assert d0("v_mul_u32_u24", {"S0": 0xFF00_0002, "S1": 3}) == 6
    assert d0("v_mad_u32_u24", {"S0": 0x0100_0002, "S1": 3, "S2": 1}) == 7
    assert d0("v_mul_hi_i32", {"S0": 0x8000_0000, "S1": 2}) == 0xFFFF_FFFF
    assert d0("v_mul_lo_u32", {"S0": 0x1_0001, "S1": 0x1_0001}) == 0x0002_0001
    assert d0("v_ashrrev_i32", {"S0": 4, "S1": 0x8000_0000}) == 0xF800_0000
    assert d0("v_lshrrev_b16", {"S0": 4, "S1": 0xF0F0}) == 0x0F0F
    assert d0("v_lshlrev_b16", {"S0": 20, "S1": 0x0F0F}) == 0xF0F0    # shift is S0[3:0]
    assert d0("v_lshlrev_b64", {"S0": 36, "S1": 1}) == 1 << 36
    assert d0("v_max_u16", {"S0": 0x8000, "S1": 0x7FFF}) == 0x8000
    assert d0("v_min_u32", {"S0": 0xFFFFFFFF, "S1": 0x7FFFFFFF}) == 0x7FFFFFFF
    assert d0("v_min_i32", {"S0": 0xFFFFFFFF, "S1": 0x7FFFFFFF}) == 0xFFFFFFFF
    assert d0("v_not_b32", {"S0": 0x0F0F0F0F}) == 0xF0F0F0F0


def test_v_bitop3_truth_table():
    """bitop3:N is the truth table indexed by (S0 bit << 2) | (S1 bit << 1) | S2 bit."""
    a, b, c = 0xF0F0_1234, 0xCCCC_5678, 0xAAAA_9ABC
    rng = random.Random(7)
    for table in [0xF0, 0xCC, 0xAA, 0x96, 0x80, 0xFE, 0x01, 0xE8] + [rng.randrange(256) for _ in range(8)]:
        expect = 0
        for bit in range(32):
            index = ((a >> bit) & 1) << 2 | ((b >> bit) & 1) << 1 | ((c >> bit) & 1)
            expect |= ((table >> index) & 1) << bit
        assert d0("v_bitop3_b32", {"S0": a, "S1": b, "S2": c}, modifiers={"bitop3": table}) == expect
        out16 = d0("v_bitop3_b16", {"S0": a & 0xFFFF, "S1": b & 0xFFFF, "S2": c & 0xFFFF},
                   modifiers={"bitop3": table})
        assert out16 == expect & 0xFFFF
    with pytest.raises(PcodeRuntimeError, match="INST"):
        evaluate("v_bitop3_b32", {"S0": a, "S1": b, "S2": c})


def test_vector_compares_and_carries():
    assert evaluate("v_cmp_gt_i64", {"S0": 5, "S1": (1 << 64) - 1}, lane=3) == {"D0": 1 << 3}
    out = execute("v_cmp_gt_u32", {"S0": 1, "S1": 2, "D0": 0xFF}, lane=2)
    assert out.values == {"D0": 0xFB} and out.masks == {"D0": 1 << 2}
    assert evaluate("v_cmp_lt_i16", {"S0": 0xFFFF, "S1": 0x0001}, lane=0) == {"D0": 1}
    assert evaluate("v_cmp_gt_i16", {"S0": 0x0001_8000, "S1": 0x0000_7FFF}, lane=0) == {"D0": 0}
    assert evaluate("v_cmp_ne_u32", {"S0": 4, "S1": 4}, lane=63) == {"D0": 0}
    assert evaluate("v_sub_co_u32", {"S0": 1, "S1": 2}, lane=5) == {"D0": 0xFFFFFFFF, "VCC": 1 << 5}
    assert evaluate("v_subb_co_u32", {"S0": 5, "S1": 5, "VCC": 1 << 5}, lane=5) == {"D0": 0xFFFFFFFF, "VCC": 1 << 5}
    assert evaluate("v_subb_co_u32", {"S0": 5, "S1": 4, "VCC": 1 << 5}, lane=5) == {"D0": 0, "VCC": 0}
    assert d0("v_cndmask_b32", {"S0": 11, "S1": 22, "VCC": 1 << 9}, lane=9) == 22
    assert d0("v_cndmask_b32", {"S0": 11, "S1": 22, "VCC": 1 << 9}, lane=8) == 11


def test_cross_lane_instructions():
    vgpr = np.arange(64 * 512, dtype=np.uint32).reshape(64, 512)
    assert evaluate("v_readlane_b32", {"S1": 64 + 5, "SRC0": 7}, vgpr=vgpr) == {"D0": 5 * 512 + 7}
    assert evaluate("v_readfirstlane_b32", {"EXEC": 0b1000, "SRC0": 2}, vgpr=vgpr) == {"D0": 3 * 512 + 2}
    assert evaluate("v_readfirstlane_b32", {"EXEC": 0, "SRC0": 2}, vgpr=vgpr) == {"D0": 2}
    swapped = evaluate("v_permlane32_swap_b32", {"SRC0": 1, "VDST": 2}, vgpr=vgpr)
    assert len(swapped) == 64
    assert swapped["VGPR[0][1]"] == vgpr[32][2] and swapped["VGPR[32][2]"] == vgpr[0][1]
    swapped = evaluate("v_permlane16_swap_b32", {"SRC0": 1, "VDST": 2}, vgpr=vgpr)
    assert swapped["VGPR[33][1]"] == vgpr[49][2] and swapped["VGPR[49][2]"] == vgpr[33][1]
    assert "VGPR[16][1]" not in swapped
    # ds_bpermute: lane i reads lane (ADDR[i] + OFFSET) / 4 % 64 of DATA0, if that lane is in EXEC
    regs = np.zeros((64, 512), dtype=np.uint32)
    regs[:, 3] = [((63 - i) * 4) for i in range(64)]     # ADDR register 3: reverse the lanes
    regs[:, 4] = [1000 + i for i in range(64)]           # DATA0 register 4
    exec_mask = (1 << 64) - 1 - (1 << 62)
    out = evaluate("ds_bpermute_b32", {"ADDR": 3, "DATA0": 4, "VDST": 5, "OFFSET": 0, "EXEC": exec_mask}, vgpr=regs)
    assert out["VGPR[0][5]"] == 1063 and out["VGPR[63][5]"] == 1000
    assert out["VGPR[1][5]"] == 0                        # its source lane 62 is not in EXEC
    assert "VGPR[62][5]" not in out                      # lane 62 itself writes nothing


def test_memory_instructions():
    memory = {a: a & 0xFF for a in range(0x100, 0x140)}
    out = evaluate("ds_read2_b32", {"ADDR": 0x100, "OFFSET0": 1, "OFFSET1": 3}, memory=memory)
    assert out == {"RETURN_DATA": 0x0F0E0D0C_07060504}
    out = evaluate("ds_write_b32", {"ADDR": 0x100, "OFFSET": 8, "DATA": 0xAABBCCDD}, memory=memory)
    assert out == {"MEM[0x108].b32": 0xAABBCCDD}
    assert memory[0x108] == 8                             # the caller's memory is not changed
    desc = 0x100 | (0 << 48) | (0x7FFFFFFE << 64)         # base 0x100, stride 0, num_records
    out = evaluate("buffer_load_dword", {"VADDR": 0x10, "SRSRC": desc, "SOFFSET": 4, "OFFSET": 8},
                   memory=memory, modifiers={"offen": 1})
    assert out == {"VDATA": 0x1F1E1D1C}
    out = evaluate("global_load_dwordx2", {"ADDR": 0x20, "SADDR": 0x100, "OFFSET": 0x1FFC}, memory=memory)
    assert out == {"VDATA": 0x23222120_1F1E1D1C}          # OFFSET is a signed 13-bit field: -4
    out = evaluate("s_load_dword", {"SBASE": 0x120, "OFFSET": 4}, memory=memory)
    assert out == {"SDATA": 0x27262524}
    out = evaluate("global_atomic_add", {"ADDR": 0x104, "DATA": 1}, memory=memory)
    assert out == {"RETURN_DATA": 0x07060504, "MEM[0x104].b32": 0x07060505}


def _word(memory, address, count):
    return sum(memory[address + i] << (8 * i) for i in range(count))


def test_every_kernel_memory_instruction_moves_the_bytes_it_names():
    memory = {a: (a * 7 + 3) & 0xFF for a in range(0x1000)}
    desc = 0x200 | (0x7FFFFFFE << 64)
    buffer = {"VADDR": 0x10, "SRSRC": desc, "SOFFSET": 0, "OFFSET": 4}
    at = 0x200 + 0x10 + 4
    for opcode, count in [("buffer_load_dword", 4), ("buffer_load_dwordx2", 8), ("buffer_load_dwordx4", 16)]:
        out = evaluate(opcode, buffer, memory=memory, modifiers={"offen": 1})
        assert out == {"VDATA": _word(memory, at, count)}, opcode
    assert evaluate("buffer_load_ubyte", buffer, memory=memory, modifiers={"offen": 1}) == {"VDATA": memory[at]}
    data = 0x0011_2233_4455_6677_8899_AABB_CCDD_EEFF
    for opcode, width in [("buffer_store_dword", 32), ("buffer_store_short", 16)]:
        out = evaluate(opcode, {**buffer, "VDATA": data}, modifiers={"offen": 1})
        assert out == {f"MEM[{at:#x}].b{width}": data & ((1 << width) - 1)}, opcode
    out = evaluate("buffer_store_dwordx4", {**buffer, "VDATA": data}, modifiers={"offen": 1})
    assert out == {f"MEM[{at + 4 * i:#x}].b32": (data >> (32 * i)) & 0xFFFFFFFF for i in range(4)}
    for opcode, count in [("global_load_dword", 4), ("global_load_dwordx4", 16)]:
        assert evaluate(opcode, {"ADDR": 0x300, "OFFSET": 8}, memory=memory) == {"VDATA": _word(memory, 0x308, count)}
    for opcode, count in [("global_store_dword", 1), ("global_store_dwordx2", 2), ("global_store_dwordx4", 4)]:
        out = evaluate(opcode, {"ADDR": 0x10, "SADDR": 0x300, "VDATA": data})
        assert out == {f"MEM[{0x310 + 4 * i:#x}].b32": (data >> (32 * i)) & 0xFFFFFFFF for i in range(count)}
    for opcode, count in [("s_load_dwordx2", 8), ("s_load_dwordx4", 16), ("s_load_dwordx8", 32)]:
        assert evaluate(opcode, {"SBASE": 0x400, "OFFSET": 0x10}, memory=memory) == {"SDATA": _word(memory, 0x410, count)}
    lds = {"ADDR": 0x100, "OFFSET0": 2, "OFFSET1": 5}
    assert evaluate("ds_read_b32", {"ADDR": 0x100, "OFFSET": 12}, memory=memory) == {"RETURN_DATA": _word(memory, 0x10C, 4)}
    assert evaluate("ds_read_b128", {"ADDR": 0x100, "OFFSET": 16}, memory=memory) == {"RETURN_DATA": _word(memory, 0x110, 16)}
    assert evaluate("ds_read2_b64", lds, memory=memory) == {
        "RETURN_DATA": _word(memory, 0x100 + 16, 8) | _word(memory, 0x100 + 40, 8) << 64}
    assert evaluate("ds_read2st64_b32", lds, memory=memory) == {
        "RETURN_DATA": _word(memory, 0x100 + 512, 4) | _word(memory, 0x100 + 1280, 4) << 32}
    assert evaluate("ds_read2st64_b64", {**lds, "OFFSET1": 3}, memory=memory) == {
        "RETURN_DATA": _word(memory, 0x100 + 1024, 8) | _word(memory, 0x100 + 1536, 8) << 64}
    stores = {"ADDR": 0x100, "OFFSET0": 1, "OFFSET1": 3, "DATA": 0x1111_2222_3333_4444, "DATA2": 0x5555_6666_7777_8888}
    assert evaluate("ds_write2_b32", stores) == {"MEM[0x104].b32": 0x33334444, "MEM[0x10c].b32": 0x77778888}
    assert evaluate("ds_write2_b64", stores) == {"MEM[0x108].b32": 0x33334444, "MEM[0x10c].b32": 0x11112222,
                                                 "MEM[0x118].b32": 0x77778888, "MEM[0x11c].b32": 0x55556666}
    assert evaluate("ds_write2st64_b32", stores) == {"MEM[0x200].b32": 0x33334444, "MEM[0x400].b32": 0x77778888}
    assert evaluate("ds_write2st64_b64", stores) == {"MEM[0x300].b32": 0x33334444, "MEM[0x304].b32": 0x11112222,
                                                     "MEM[0x700].b32": 0x77778888, "MEM[0x704].b32": 0x55556666}
    assert evaluate("ds_write_b64", {"ADDR": 0x100, "OFFSET": 8, "DATA": 0x1111_2222_3333_4444}) == {
        "MEM[0x108].b32": 0x33334444, "MEM[0x10c].b32": 0x11112222}
    assert evaluate("ds_write_b128", {"ADDR": 0x100, "OFFSET": 0, "DATA": data}) == {
        f"MEM[{0x100 + 4 * i:#x}].b32": (data >> (32 * i)) & 0xFFFFFFFF for i in range(4)}
    assert evaluate("ds_write_b16", {"ADDR": 0x100, "DATA": 0xABCD_1234}) == {"MEM[0x100].b16": 0x1234}
    assert evaluate("ds_write_b8", {"ADDR": 0x100, "DATA": 0xABCD_1234}) == {"MEM[0x100].b8": 0x34}


# ---------------------------------------------------------------- floats against numpy / torch

def _nearest_check(exact: Fraction, result: int):
    """result (f32 bits) is the float32 nearest to exact, ties to even (numpy's nextafter
    gives the neighbours; the comparison is exact)."""
    r = np.float32(from_f32(result))
    assert math.isfinite(r), (exact, result)
    below = np.nextafter(r, np.float32(-np.inf), dtype=np.float32)
    above = np.nextafter(r, np.float32(np.inf), dtype=np.float32)
    err = abs(Fraction(float(r)) - exact)
    for n in (below, above):
        if math.isfinite(n):
            other = abs(Fraction(float(n)) - exact)
            assert err < other or (err == other and (result & 1) == 0), (exact, result)


def _random_f32(rng: random.Random, count: int) -> list:
    values = [rng.getrandbits(32) for _ in range(count)]
    values += [f32(x) for x in (0.0, -0.0, 1.0, -1.0, 2.5e-45, -1e-40, 3.4e38, float("inf"), float("-inf"))]
    values += [0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF]
    return values


@pytest.mark.parametrize("opcode, fn", [("v_add_f32", np.add), ("v_sub_f32", np.subtract),
                                        ("v_mul_f32", np.multiply)])
def test_binary_float_ops_match_numpy(opcode, fn):
    rng = random.Random(1)
    a_values, b_values = _random_f32(rng, 150), _random_f32(rng, 150)
    rng.shuffle(b_values)
    # the same exponents, so that sums cancel and round
    a_values += [f32(rng.uniform(1, 2)) for _ in range(40)]
    b_values += [f32(-rng.uniform(1, 2)) for _ in range(40)]
    with np.errstate(all="ignore"):
        for a, b in zip(a_values, b_values):
            expect = fn(np.uint32(a).view(np.float32), np.uint32(b).view(np.float32))
            got = d0(opcode, {"S0": a, "S1": b})
            if np.isnan(expect):
                assert math.isnan(from_f32(got)) and got & 0x00400000, (hex(a), hex(b))
            else:
                assert got == int(np.float32(expect).view(np.uint32)), (opcode, hex(a), hex(b))


def test_fma_is_rounded_once():
    rng = random.Random(2)
    cases = [(f32(rng.uniform(-4, 4)), f32(rng.uniform(-4, 4)), f32(rng.uniform(-16, 16))) for _ in range(150)]
    cases += [(f32(1 + 2 ** -23), f32(1 - 2 ** -23), f32(-1.0)),     # exact product -2**-46
              (f32(1 + 2 ** -12), f32(1 + 2 ** -12), f32(-1.0)),
              (0x00000003, f32(0.5), 0x00000001), (f32(3.0), f32(2 ** -149 / 3 * 2), 0)]
    for a, b, c in cases:
        exact = Fraction(from_f32(a)) * Fraction(from_f32(b)) + Fraction(from_f32(c))
        got = d0("v_fma_f32", {"S0": a, "S1": b, "S2": c})
        _nearest_check(exact, got)
        assert d0("v_fmac_f32", {"S0": a, "S1": b, "D0": c}) == got
    # a product of opposite-sign zeros plus -0; a signalling NaN operand comes out quiet
    assert d0("v_fma_f32", {"S0": f32(-0.0), "S1": f32(1.0), "S2": f32(-0.0)}) == f32(-0.0)
    assert d0("v_fma_f32", {"S0": f32(0.0), "S1": f32(-1.0), "S2": f32(0.0)}) == f32(0.0)
    assert d0("v_fma_f32", {"S0": f32(2.0), "S1": 0x7F800001, "S2": f32(1.0)}) == 0x7FC00001
    # the neg modifier on a source (v_fma_f32 v, -v, v, v)
    got = d0("v_fma_f32", {"S0": f32(3.0), "S1": f32(2.0), "S2": f32(1.0)}, modifiers={"neg": [1, 0, 0]})
    assert got == f32(-5.0)


def test_packed_f32_ops_and_their_op_sel():
    rng = random.Random(3)
    for _ in range(30):
        x = np.array([rng.uniform(-100, 100) for _ in range(6)], dtype=np.float32)
        s0 = int(x[0:2].view(np.uint64)[0])
        s1 = int(x[2:4].view(np.uint64)[0])
        s2 = int(x[4:6].view(np.uint64)[0])
        prod = int((x[0:2] * x[2:4]).view(np.uint64)[0])
        assert d0("v_pk_mul_f32", {"S0": s0, "S1": s1}) == prod
        assert d0("v_pk_add_f32", {"S0": s0, "S1": s1}) == int((x[0:2] + x[2:4]).view(np.uint64)[0])
        # op_sel:[1,0]: the low result takes S0's high half; op_sel_hi:[0,1]: the high one S0's low
        swapped = np.array([x[1] * x[2], x[0] * x[3]], dtype=np.float32)
        got = d0("v_pk_mul_f32", {"S0": s0, "S1": s1}, modifiers={"op_sel": [1, 0], "op_sel_hi": [0, 1]})
        assert got == int(swapped.view(np.uint64)[0])
        # op_sel_hi:[0,0,1]: both products take S0's and S1's low halves (a broadcast)
        exact = [Fraction(float(x[0])) * Fraction(float(x[2])) + Fraction(float(x[4 + i])) for i in range(2)]
        got = d0("v_pk_fma_f32", {"S0": s0, "S1": s1, "S2": s2}, modifiers={"op_sel_hi": [0, 0, 1]})
        _nearest_check(exact[0], got & 0xFFFFFFFF)
        _nearest_check(exact[1], got >> 32)


def test_v_max_f32_nans_and_signed_zeros_as_the_pseudocode_says():
    snan, qnan, one, two = 0x7F800001, 0x7FC00002, f32(1.0), f32(2.0)
    assert d0("v_max_f32", {"S0": snan, "S1": one}) == 0x7FC00001          # IEEE mode: quieted sNaN
    assert d0("v_max_f32", {"S0": one, "S1": snan}) == 0x7FC00001
    assert d0("v_max_f32", {"S0": qnan, "S1": one}) == one                 # a quiet NaN loses
    assert d0("v_max_f32", {"S0": one, "S1": qnan}) == one
    assert d0("v_max_f32", {"S0": snan, "S1": one, "WAVE_MODE.IEEE": 0}) == one
    assert d0("v_max_f32", {"S0": f32(0.0), "S1": f32(-0.0)}) == f32(0.0)
    assert d0("v_max_f32", {"S0": f32(-0.0), "S1": f32(0.0)}) == f32(0.0)
    assert d0("v_max_f32", {"S0": f32(-1.0), "S1": two}) == two
    assert d0("v_max_f32", {"S0": f32(-3.0), "S1": two}, modifiers={"abs": [1, 1]}) == f32(3.0)
    assert d0("v_max3_f32", {"S0": f32(-1.0), "S1": f32(-7.0), "S2": f32(5.0)},
              modifiers={"abs": [0, 1, 1]}) == f32(7.0)
    assert d0("v_max3_f32", {"S0": qnan, "S1": f32(-7.0), "S2": f32(-9.0)}) == f32(-7.0)


def test_float_compares_with_nan():
    nan, one = 0x7FC00000, f32(1.0)
    for opcode, on_nan in [("v_cmp_gt_f32", 0), ("v_cmp_lt_f32", 0), ("v_cmp_neq_f32", 1), ("v_cmp_nlt_f32", 1),
                           ("v_cmp_o_f32", 0), ("v_cmp_u_f32", 1)]:
        assert d0(opcode, {"S0": nan, "S1": one}) == on_nan, opcode
    assert d0("v_cmp_gt_f32", {"S0": f32(2.0), "S1": one}) == 1
    assert d0("v_cmp_lt_f32", {"S0": f32(-0.0), "S1": f32(0.0)}) == 0
    assert d0("v_cmp_neq_f32", {"S0": f32(-0.0), "S1": f32(0.0)}) == 0


def test_conversions_between_f32_and_u32():
    for x in [0.0, 1.5, 2.999, 4294967040.0, 1e10, -3.0, float("inf"), float("nan")]:
        expect = 0 if math.isnan(x) or x < 0 else 0xFFFFFFFF if x >= 2 ** 32 else int(x)
        assert d0("v_cvt_u32_f32", {"S0": f32(x)}) == expect, x
    for n in [0, 1, 0xFFFFFFFF, 0x01000001, 0x7FFFFFC0, 123456789]:
        assert d0("v_cvt_f32_u32", {"S0": n}) == int(np.float32(n).view(np.uint32)), n


def test_v_cvt_pk_bf16_f32_matches_torch():
    rng = random.Random(4)
    values = _random_f32(rng, 200) + [f32(1 + 2 ** -8), f32(1 + 3 * 2 ** -8), f32(-(1 + 2 ** -8)), 0x3F808000,
                                      0x3F818000, 0x7F7FFFFF, 0x00008000, 0x00018000]
    values = [v for v in values if not math.isnan(from_f32(v))]
    expect = torch.tensor(values, dtype=torch.int64).to(torch.int32).view(torch.float32).to(torch.bfloat16)
    expect = expect.view(torch.int16).to(torch.int64) & 0xFFFF
    for i in range(0, len(values) - 1, 2):
        got = d0("v_cvt_pk_bf16_f32", {"S0": values[i], "S1": values[i + 1]})
        assert got == int(expect[i]) | int(expect[i + 1]) << 16, (hex(values[i]), hex(values[i + 1]))
    got = d0("v_cvt_pk_bf16_f32", {"S0": 0x7F800001, "S1": 0xFFC00000})
    assert got & 0x7F80 == 0x7F80 and got & 0x7F and got >> 16 == 0xFFC0   # NaN stays NaN


def _torch_fp8(values: np.ndarray) -> list:
    """torch's float8_e4m3fn codes of values within E4M3's range (|v| < 464, which round to at
    most 448); past it, +-448 (0x7E with the sign), the reading under MODE.FP16_OVFL
    (pcode/helpers.py f32_to_fp8_scale): torch's own conversion changed there between versions
    (2.11 gives NaN, 2.13 saturates), so it is no oracle for those."""
    codes = torch.from_numpy(values.astype(np.float32)).to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    return [(0xFE if v < 0 else 0x7E) if abs(v) >= 464 else code for code, v in zip(codes, values.tolist())]


def test_v_cvt_scalef32_pk_fp8_f32_matches_torch_float8_e4m3fn():
    rng = random.Random(5)
    values = [rng.uniform(-480, 480) for _ in range(120)] + [rng.uniform(-0.02, 0.02) for _ in range(60)]
    values += [448, 464, 464.0001, 479, 480, 1000, -1e30, float("inf"), float("-inf"), 0.0, -0.0,
               2 ** -9, 2 ** -10, 3 * 2 ** -11, 2 ** -6 * 1.0625, 0.5 * (1 + 1 / 16)]
    for scale_exponent in (0, 3, -5, 20):
        x = np.array(values, dtype=np.float32)
        expect = _torch_fp8(x / np.float32(2.0 ** scale_exponent))
        for i in range(0, len(values) - 1, 2):
            inputs = {"S0": int(x[i:i + 1].view(np.uint32)[0]), "S1": int(x[i + 1:i + 2].view(np.uint32)[0]),
                      "S2": f32(2.0 ** scale_exponent), "D0": 0xDEAD_BEEF}
            out = execute("v_cvt_scalef32_pk_fp8_f32", inputs)
            assert out.values["D0"] == 0xDEAD_0000 | expect[i + 1] << 8 | expect[i], (values[i], values[i + 1])
            assert out.masks["D0"] == 0xFFFF
            high = evaluate("v_cvt_scalef32_pk_fp8_f32", inputs, modifiers={"op_sel": [0, 0, 0, 1]})["D0"]
            assert high == 0xBEEF | (expect[i + 1] << 8 | expect[i]) << 16
    assert _torch_fp8(np.array([np.nan], dtype=np.float32)) == [0x7F]
    assert d0("v_cvt_scalef32_pk_fp8_f32", {"S0": 0x7FC00000, "S1": 0xFFC00000, "S2": f32(1.0)}) == 0xFF7F
    # MODE.FP16_OVFL clear (the kernels set it): overflow is NaN, not +-448; in range unchanged
    plain = {"S2": f32(1.0), "WAVE_MODE.FP16_OVFL": 0}
    assert d0("v_cvt_scalef32_pk_fp8_f32", {"S0": f32(1000.0), "S1": f32(-float("inf")), **plain}) == 0xFF7F
    assert d0("v_cvt_scalef32_pk_fp8_f32", {"S0": f32(463.0), "S1": f32(-2.0), **plain}) == 0xC07E


def test_v_cvt_scalef32_pk_bf16_fp4_is_the_e2m1_table_times_the_scale():
    table = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    scales = (127, 0, 1, 100, 127 + 60, 254)
    values = [(-1.0 if nibble & 8 else 1.0) * table[nibble & 7] * 2.0 ** (s - 127) for s in scales for nibble in range(16)]
    expect = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).view(torch.int16).tolist()
    expect = [e & 0xFFFF for e in expect]
    for k, s in enumerate(scales):
        scale_bits = s << 23 if s else 0x00400000        # 2**(s-127) as f32 (s = 0: a subnormal)
        assert from_f32(scale_bits) == 2.0 ** (s - 127)
        for byte in range(256):
            for sel in (range(4) if k == 0 else (byte % 4,)):   # every byte position once per scale
                word = (byte << (8 * sel)) | (0x5A5A5A5A & ~(0xFF << (8 * sel)))
                got = d0("v_cvt_scalef32_pk_bf16_fp4", {"S0": word, "S1": scale_bits},
                         modifiers={"op_sel": [sel & 1, sel >> 1, 0]})
                low, high = expect[16 * k + (byte & 0xF)], expect[16 * k + (byte >> 4)]
                assert got == low | high << 16, (s, byte, sel)
    nan_scale = d0("v_cvt_scalef32_pk_bf16_fp4", {"S0": 0x22, "S1": 0x7F800000})   # E8M0 0xFF: NaN
    assert nan_scale & 0x7F80 == 0x7F80 and nan_scale & 0x7F


# ---------------------------------------------------------------- division, exp2, log2, rcp

def _llvm_fdiv(n: int, d: int, lane: int = 0, literal: bool = False) -> int:
    """LLVM's f32 division expansion, as in the kernels' listings (submission.py's 1 / x):
    v_div_scale, v_rcp, two Newton steps with v_fma / v_fmac, v_div_fmas, v_div_fixup.
    literal: AMD's text of the v_div_* instructions without pcode.READINGS."""
    neg0 = {"neg": [1, 0, 0]}
    scale = evaluate("v_div_scale_f32", {"S0": d, "S1": d, "S2": n}, lane=lane, literal=literal)
    den = scale.get("D0", d)      # AMD's text leaves D0 unwritten when nothing is scaled
    rcp = d0("v_rcp_f32", {"S0": den})
    scaled = evaluate("v_div_scale_f32", {"S0": n, "S1": d, "S2": n}, lane=lane, literal=literal)
    num, vcc = scaled.get("D0", n), scaled["VCC"]
    if literal:
        vcc = (vcc & 1) << lane   # the text's VCC = 0x1LL, as this lane's bit
    err = d0("v_fma_f32", {"S0": den, "S1": rcp, "S2": f32(1.0)}, modifiers=neg0)
    rcp = d0("v_fmac_f32", {"S0": err, "S1": rcp, "D0": rcp})
    q = d0("v_mul_f32", {"S0": num, "S1": rcp})
    t = d0("v_fma_f32", {"S0": den, "S1": q, "S2": num}, modifiers=neg0)
    q = d0("v_fmac_f32", {"S0": t, "S1": rcp, "D0": q})
    t = d0("v_fma_f32", {"S0": den, "S1": q, "S2": num}, modifiers=neg0)
    q = d0("v_div_fmas_f32", {"S0": t, "S1": rcp, "S2": q, "VCC": vcc}, lane=lane, literal=literal)
    return d0("v_div_fixup_f32", {"S0": q, "S1": d, "S2": n}, literal=literal)


def _f32_quotient(n: int, d: int) -> int | None:
    """numpy's float32 n / d as bits, None for NaN."""
    with np.errstate(all="ignore"):
        q = np.uint32(n).view(np.float32) / np.uint32(d).view(np.float32)
    return None if np.isnan(q) else int(np.float32(q).view(np.uint32))


def _subnormal_quotient_pairs(rng, count):
    pairs = []
    for _ in range(count):
        d = np.float32(rng.uniform(1, 2) * 2.0 ** rng.randrange(0, 30))
        n = np.float32(rng.uniform(1, 2) * 2.0 ** rng.randrange(-149, -127) * float(d))
        pairs.append((int(n.view(np.uint32)), int(d.view(np.uint32))))
    return pairs


def test_the_division_sequence_gives_the_correctly_rounded_quotient():
    rng = random.Random(6)
    pairs = [(f32(1.0), rng.getrandbits(32)) for _ in range(60)] + [(rng.getrandbits(32), rng.getrandbits(32))
                                                                    for _ in range(60)]
    pairs += _subnormal_quotient_pairs(rng, 150)
    specials = [f32(x) for x in (0.0, -0.0, 1.0, 3.0, 1e-40, 1e-45, 3e38, 1e30, 1e-30, float("inf"))] + [0x7FC00000]
    pairs += [(a, b) for a in specials for b in specials]
    for n, d in pairs:
        expect, got = _f32_quotient(n, d), _llvm_fdiv(n, d, lane=rng.randrange(64))
        if expect is None:
            assert math.isnan(from_f32(got)), (hex(n), hex(d))
        else:
            assert got == expect, (hex(n), hex(d), hex(got))


def test_the_division_readings_are_needed():
    """pcode.READINGS' changes to V_DIV_FMAS_F32 and V_DIV_FIXUP_F32: AMD's text as it stands
    gives wrong quotients, and so would the fixed scale with a second rounding."""
    assert {"v_div_scale_f32", "v_div_fmas_f32", "v_div_fixup_f32"} <= set(pcode.READINGS)
    assert pcode.readings("v_div_fmas_f32_e64") == pcode.READINGS["v_div_fmas_f32"]
    huge = (f32(-2e31), f32(7e-32))                      # N/D = -2.9e62: -inf (past 2**64 * the largest)
    big = (f32(1e30), f32(1e-5))                         # N/D = 1e35: denominator scaled
    tiny = (f32(1e-30), f32(1e10))                       # N/D = 1e-40, subnormal: numerator scaled
    for n, d in (huge, big, tiny):
        assert _llvm_fdiv(n, d) == _f32_quotient(n, d)
    assert _llvm_fdiv(*big, literal=True) != _f32_quotient(*big)            # 2**32, not 2**64
    assert _llvm_fdiv(*tiny, literal=True) != _f32_quotient(*tiny)
    assert math.isnan(from_f32(_llvm_fdiv(*huge, literal=True)))            # the text's +-abs(NaN)
    # the same scale applied after a first rounding: some subnormal quotients come out one ulp off
    rounded_twice = 0
    for n, d in _subnormal_quotient_pairs(random.Random(13), 400):
        vcc = evaluate("v_div_scale_f32", {"S0": n, "S1": d, "S2": n})["VCC"]
        assert vcc == 1
        den = d0("v_div_scale_f32", {"S0": d, "S1": d, "S2": n})
        rcp = d0("v_rcp_f32", {"S0": den})
        q = d0("v_mul_f32", {"S0": d0("v_div_scale_f32", {"S0": n, "S1": d, "S2": n}), "S1": rcp})
        num = d0("v_div_scale_f32", {"S0": n, "S1": d, "S2": n})
        t = d0("v_fma_f32", {"S0": den, "S1": q, "S2": num}, modifiers={"neg": [1, 0, 0]})
        q = d0("v_fmac_f32", {"S0": t, "S1": rcp, "D0": q})
        t = d0("v_fma_f32", {"S0": den, "S1": q, "S2": num}, modifiers={"neg": [1, 0, 0]})
        once = d0("v_div_fmas_f32", {"S0": t, "S1": rcp, "S2": q, "VCC": 1})
        twice = d0("v_mul_f32", {"S0": d0("v_fma_f32", {"S0": t, "S1": rcp, "S2": q}), "S1": f32(2.0 ** -64)})
        assert d0("v_div_fixup_f32", {"S0": once, "S1": d, "S2": n}) == _f32_quotient(n, d)
        rounded_twice += d0("v_div_fixup_f32", {"S0": twice, "S1": d, "S2": n}) != _f32_quotient(n, d)
    assert rounded_twice > 0


def test_v_div_scale_readings():
    """D0 is S0 where no branch scales it; VCC is this lane's bit."""
    out = execute("v_div_scale_f32", {"S0": f32(3.0), "S1": f32(3.0), "S2": f32(1.0), "VCC": 0xFF}, lane=2)
    assert out.values == {"D0": f32(3.0), "VCC": 0xFB} and out.masks["VCC"] == 1 << 2
    out = execute("v_div_scale_f32", {"S0": f32(1e-40), "S1": f32(1e-40), "S2": f32(1.0)}, lane=7)
    assert out.values["D0"] == f32(from_f32(f32(1e-40)) * 2.0 ** 64)   # a subnormal denominator is scaled
    out = evaluate("v_div_scale_f32", {"S0": f32(1.0), "S1": f32(1e30), "S2": f32(1.0)}, lane=7)
    assert out == {"D0": f32(1.0), "VCC": 0}
    out = evaluate("v_div_scale_f32", {"S0": f32(3e38), "S1": f32(1e-10), "S2": f32(3e38)}, lane=7)
    assert out == {"D0": f32(3e38), "VCC": 1 << 7}               # N/D near the largest float


def test_exp2_log2_rcp_are_the_correctly_rounded_functions():
    """The pseudocode says pow(2.0F, S0), log2(S0), 1.0F / S0 (the hardware approximates; the
    pseudocode does not): each against numpy's float64 function rounded to float32 (a float64
    result a few ulps from a float32 rounding boundary would make numpy's the wrong one; the
    seeds used have none), and 1 / x against numpy's float32 division."""
    rng = random.Random(8)
    xs = [rng.uniform(-150, 130) for _ in range(150)] + [0.5, -0.5, 1e-30, 127.99, -149.5, -150.0, 0.0]
    for x in xs:
        x32 = np.float32(x)
        with np.errstate(over="ignore"):
            expect = np.float32(np.exp2(np.float64(x32)))
        assert d0("v_exp_f32", {"S0": f32(float(x32))}) == int(expect.view(np.uint32)), x
    ys = [rng.uniform(0, 10) * 10.0 ** rng.randrange(-44, 38) for _ in range(150)] + [1.0, 2.0, 0.5, 3.0]
    for y in ys:
        y32 = np.float32(y)
        if y32 == 0:
            continue
        expect = np.float32(np.log2(np.float64(y32)))
        assert d0("v_log_f32", {"S0": f32(float(y32))}) == int(expect.view(np.uint32)), y
    with np.errstate(all="ignore"):
        for bits in _random_f32(rng, 150):
            expect = np.float32(1.0) / np.uint32(bits).view(np.float32)
            got = d0("v_rcp_f32", {"S0": bits})
            if np.isnan(expect):
                assert math.isnan(from_f32(got))
            else:
                assert got == int(expect.view(np.uint32)), hex(bits)
                assert d0("v_rcp_iflag_f32", {"S0": bits}) == got
    specials = {("v_exp_f32", float("-inf")): 0.0, ("v_exp_f32", float("inf")): float("inf"),
                ("v_exp_f32", 128.0): float("inf"), ("v_log_f32", 0.0): float("-inf"),
                ("v_log_f32", -0.0): float("-inf"), ("v_log_f32", float("inf")): float("inf"),
                ("v_rcp_f32", -0.0): float("-inf")}
    for (opcode, x), expect in specials.items():
        assert d0(opcode, {"S0": f32(x)}) == f32(expect), (opcode, x)
    assert math.isnan(from_f32(d0("v_log_f32", {"S0": f32(-1.0)})))


def test_v_ldexp_f32_reads_its_pseudocode_literally():
    """`S0.f32 * 2.0F ** S1.i32`: 2**n is a float32 first, so it equals ldexp only while 2**n
    is representable (-149 <= n <= 127); past that it is inf or 0 (this is AMD's text, not
    necessarily the hardware's: the emulator's comparisons should keep n in that range)."""
    rng = random.Random(9)
    for _ in range(100):
        x, n = np.float32(rng.uniform(-1e3, 1e3)), rng.randrange(-149, 128)
        expect = np.ldexp(np.float64(x), n).astype(np.float32)
        with np.errstate(all="ignore"):
            assert d0("v_ldexp_f32", {"S0": f32(float(x)), "S1": n & 0xFFFFFFFF}) == int(np.float32(expect).view(np.uint32))
    assert d0("v_ldexp_f32", {"S0": f32(2.0 ** -140), "S1": 200}) == f32(float("inf"))
    assert d0("v_ldexp_f32", {"S0": f32(2.0 ** 100), "S1": (-160) & 0xFFFFFFFF}) == 0


def test_ds_byte_and_short_accesses_ignore_the_offset_as_the_text_says():
    """AMD's text of DS_READ_U8 / DS_READ_U16 / DS_WRITE_B8 / DS_WRITE_B16(_D16_HI) addresses
    MEM[ADDR] with no OFFSET (the other DS entries add it): evaluate() follows the text, so a
    caller passes ADDR = address + instruction offset for these."""
    for opcode in ("ds_read_u8", "ds_read_u16", "ds_write_b8", "ds_write_b16", "ds_write_b16_d16_hi"):
        assert "OFFSET" not in pcode.input_names(opcode) and "ADDR" in pcode.input_names(opcode)
    assert "OFFSET" in pcode.input_names("ds_read_b32")
    memory = {0x40: 0x81, 0x41: 0x7F}
    assert evaluate("ds_read_u8", {"ADDR": 0x41}, memory=memory) == {"RETURN_DATA": 0x7F}
    assert evaluate("ds_read_u16", {"ADDR": 0x40}, memory=memory) == {"RETURN_DATA": 0x7F81}
    assert evaluate("ds_write_b16_d16_hi", {"ADDR": 0x40, "DATA": 0xBEEF_0000}) == {"MEM[0x40].b16": 0xBEEF}


# ---------------------------------------------------------------- SDWA and the API's shape

def test_sdwa_selects_and_places_fields():
    # v_or_b32_sdwa dst_sel:BYTE_1 dst_unused:UNUSED_PAD: the low byte of the result in bits 15:8
    out = evaluate("v_or_b32", {"S0": 0x12, "S1": 0x0340},
                   modifiers={"dst_sel": "BYTE_1", "dst_unused": "UNUSED_PAD", "src0_sel": "DWORD", "src1_sel": "DWORD"})
    assert out == {"D0": 0x5200}
    assert d0("v_and_b32", {"S0": 0xABCD_1234, "S1": 0xFF0F}, modifiers={"src0_sel": "WORD_1"}) == 0xAB0D
    assert d0("v_sub_u32", {"S0": 0x100, "S1": 0x1234_5678}, modifiers={"src1_sel": "BYTE_0"}) == 0x100 - 0x78
    assert d0("v_lshlrev_b32", {"S0": 4, "S1": 0x0000_0101}, modifiers={"src1_sel": "BYTE_0"}) == 0x10
    assert evaluate("v_cmp_ne_u32", {"S0": 0x1200, "S1": 0}, lane=4, modifiers={"src0_sel": "BYTE_0"}) == {"D0": 0}
    assert evaluate("v_cmp_lt_i16", {"S0": 0xFFFF_0001, "S1": 0}, lane=4, modifiers={"src0_sel": "WORD_1"}) == {"D0": 1 << 4}
    preserved = evaluate("v_or_b32", {"S0": 0x1, "S1": 0x2, "D0": 0xAABBCCDD},
                         modifiers={"dst_sel": "WORD_1", "dst_unused": "UNUSED_PRESERVE"})
    assert preserved == {"D0": 0x0003CCDD}
    signed = evaluate("v_or_b32", {"S0": 0x80, "S1": 0}, modifiers={"dst_sel": "BYTE_1", "dst_unused": "UNUSED_SEXT"})
    assert signed == {"D0": 0xFFFF8000}
    with pytest.raises(UnsupportedModifier):
        evaluate("v_or_b32", {"S0": 1, "S1": 2}, modifiers={"dst_sel": "BYTE_1"})


def test_evaluate_takes_numpy_integers_and_is_quick_enough():
    assert d0("v_add_u32", {"S0": np.uint32(0xFFFFFFFF), "S1": np.uint64(2)}) == 1
    assert pcode.input_names("v_fmac_f32") == {"S0", "S1", "D0"}
    assert pcode.input_names("v_cvt_scalef32_pk_bf16_fp4") >= {"S0", "S1"}
    assert "v_add_f32" in pcode.opcodes_with_pcode() and "D0.f32 = S0.f32 + S1.f32" in pcode.pcode_text("v_add_f32_e32")

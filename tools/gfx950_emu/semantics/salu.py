"""Scalar ALU (SOP1, SOP2, SOPC, SOPK) and program control (SOPP): the semantics of AMD's
CDNA4 pseudocode (tinygrad's wheel carries it; tests/test_gfx950_emu_pcode_cross.py
compares every mnemonic here with it), on Python ints."""
from __future__ import annotations

import re

from ..listing import Label
from ..registry import check_modifiers, register
from ..reports import NotImplementedInstruction
from ..state import BARRIER, END
from .operands import MASK32, MASK64, scalar_reader, scalar_writer


def _s32(x: int) -> int:
    x &= MASK32
    return x - (1 << 32) if x & 0x8000_0000 else x


def _s64(x: int) -> int:
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


# ---- SOP2 / SOP1: name -> (source kinds, destination width, fn(a, b, scc) -> (result, scc or None)) ----
def _add_u32(a, b, scc):
    r = a + b
    return r & MASK32, int(r > MASK32)


def _addc_u32(a, b, scc):
    r = a + b + scc
    return r & MASK32, int(r > MASK32)


def _add_i32(a, b, scc):
    r = _s32(a) + _s32(b)
    return r & MASK32, int(not -(1 << 31) <= r < (1 << 31))


def _sub_i32(a, b, scc):
    r = _s32(a) - _s32(b)
    return r & MASK32, int(not -(1 << 31) <= r < (1 << 31))


def _logic(op):
    return lambda a, b, scc: (op(a, b), int(op(a, b) != 0))


SOP2 = {
    "s_add_u32": (("b32", "b32"), 32, _add_u32),
    "s_addc_u32": (("b32", "b32"), 32, _addc_u32),
    "s_add_i32": (("b32", "b32"), 32, _add_i32),
    "s_sub_i32": (("b32", "b32"), 32, _sub_i32),
    "s_and_b32": (("b32", "b32"), 32, _logic(lambda a, b: a & b)),
    "s_or_b32": (("b32", "b32"), 32, _logic(lambda a, b: a | b)),
    "s_xor_b32": (("b32", "b32"), 32, _logic(lambda a, b: a ^ b)),
    "s_and_b64": (("b64", "b64"), 64, _logic(lambda a, b: a & b)),
    "s_or_b64": (("b64", "b64"), 64, _logic(lambda a, b: a | b)),
    "s_andn2_b64": (("b64", "b64"), 64, _logic(lambda a, b: a & ~b & MASK64)),
    "s_andn2_b32": (("b32", "b32"), 32, _logic(lambda a, b: a & ~b & MASK32)),
    "s_lshl_b32": (("b32", "b32"), 32, _logic(lambda a, b: (a << (b & 31)) & MASK32)),
    "s_lshr_b32": (("b32", "b32"), 32, _logic(lambda a, b: a >> (b & 31))),
    "s_ashr_i32": (("b32", "b32"), 32, _logic(lambda a, b: (_s32(a) >> (b & 31)) & MASK32)),
    "s_lshl_b64": (("b64", "b32"), 64, _logic(lambda a, b: (a << (b & 63)) & MASK64)),
    "s_bfe_u32": (("b32", "b32"), 32,
                  _logic(lambda a, b: (a >> (b & 31)) & ((1 << ((b >> 16) & 0x7F)) - 1) & MASK32)),
    "s_min_i32": (("b32", "b32"), 32, lambda a, b, scc: (a if _s32(a) < _s32(b) else b, int(_s32(a) < _s32(b)))),
    "s_max_i32": (("b32", "b32"), 32, lambda a, b, scc: (a if _s32(a) >= _s32(b) else b, int(_s32(a) >= _s32(b)))),
    "s_min_u32": (("b32", "b32"), 32, lambda a, b, scc: (a if a < b else b, int(a < b))),
    "s_mul_i32": (("b32", "b32"), 32, lambda a, b, scc: ((_s32(a) * _s32(b)) & MASK32, None)),
    "s_mul_hi_u32": (("b32", "b32"), 32, lambda a, b, scc: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (("b32", "b32"), 32, lambda a, b, scc: (((_s32(a) * _s32(b)) >> 32) & MASK32, None)),
    "s_cselect_b32": (("b32", "b32"), 32, lambda a, b, scc: (a if scc else b, None)),
    "s_cselect_b64": (("b64", "b64"), 64, lambda a, b, scc: (a if scc else b, None)),
}

SOP1 = {
    "s_mov_b32": ("b32", 32, lambda a, scc: (a, None)),
    "s_mov_b64": ("b64", 64, lambda a, scc: (a, None)),
    "s_not_b32": ("b32", 32, lambda a, scc: ((~a) & MASK32, int((~a) & MASK32 != 0))),
    "s_abs_i32": ("b32", 32, lambda a, scc: (abs(_s32(a)) & MASK32, int(abs(_s32(a)) & MASK32 != 0))),
    "s_bcnt1_i32_b64": ("b64", 32, lambda a, scc: (bin(a).count("1"), int(a != 0))),
    "s_brev_b32": ("b32", 32, lambda a, scc: (int(f"{a:032b}"[::-1], 2), None)),
}

_CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}
SOPC = {f"s_cmp_{name}_{kind}": (lambda f, signed: (lambda a, b: f(_s32(a), _s32(b)) if signed else f(a, b)))(f, kind == "i32")
        for name, f in _CMP.items() for kind in ("u32", "i32")}


def _compile_sop(ins, kernel):
    """SOP1 and SOP2: fn(the sources..., SCC) -> (result, the new SCC or None to keep it)."""
    check_modifiers(ins, set())
    if ins.mnemonic in SOP2:
        kinds, width, fn = SOP2[ins.mnemonic]
    else:
        kind, width, fn = SOP1[ins.mnemonic]
        kinds = (kind,)
    dst = scalar_writer(ins.operands[0], width)
    readers = [scalar_reader(operand, kind) for operand, kind in zip(ins.operands[1:], kinds)]

    def run(wave):
        result, scc = fn(*[read(wave) for read in readers], wave.scc)
        dst(wave, result)
        if scc is not None:
            wave.scc = scc
    return run, 1


def _compile_sopc(ins, kernel):
    check_modifiers(ins, set())
    fn = SOPC[ins.mnemonic]
    ra = scalar_reader(ins.operands[0])
    rb = scalar_reader(ins.operands[1])

    def run(wave):
        wave.scc = int(fn(ra(wave), rb(wave)))
    return run, 0


register(*SOP2, *SOP1)(_compile_sop)
register(*SOPC)(_compile_sopc)


@register("s_and_saveexec_b64")
def _and_saveexec(ins, kernel):
    check_modifiers(ins, set())
    dst = scalar_writer(ins.operands[0], 64)
    ra = scalar_reader(ins.operands[1], "b64")

    def run(wave):
        old = wave.mask64(126)
        new = ra(wave) & old
        dst(wave, old)
        wave.set_mask64(126, new)
        wave.scc = int(new != 0)
    return run, 1


def _simm16(ins, index=1) -> int:
    value = ins.operands[index].value.value
    return value


@register("s_movk_i32")
def _movk(ins, kernel):
    dst = scalar_writer(ins.operands[0])
    imm = _s16(_simm16(ins)) & MASK32
    return (lambda wave: dst(wave, imm)), 1


def _s16(x: int) -> int:
    x &= 0xFFFF
    return x - 0x10000 if x & 0x8000 else x


@register("s_addk_i32")
def _addk(ins, kernel):
    dst = scalar_writer(ins.operands[0])
    ra = scalar_reader(ins.operands[0])
    imm = _s16(_simm16(ins))

    def run(wave):
        r = _s32(ra(wave)) + imm
        dst(wave, r & MASK32)
        wave.scc = int(not -(1 << 31) <= r < (1 << 31))
    return run, 1


@register("s_mulk_i32")
def _mulk(ins, kernel):
    dst = scalar_writer(ins.operands[0])
    ra = scalar_reader(ins.operands[0])
    imm = _s16(_simm16(ins))
    return (lambda wave: dst(wave, (_s32(ra(wave)) * imm) & MASK32)), 1


def _cmpk(ins, kernel):
    """SOPK compares: SCC = S0 <cond> SIMM16, the immediate sign-extended for the i32 forms
    and zero-extended for the u32 forms, S0 read as the same kind."""
    check_modifiers(ins, set())
    _, cond, kind = ins.mnemonic.rsplit("_", 2)
    ra = scalar_reader(ins.operands[0])
    signed = kind == "i32"
    imm = _s16(_simm16(ins)) if signed else _simm16(ins) & 0xFFFF
    compare = _CMP[cond]

    def run(wave):
        a = ra(wave)
        wave.scc = int(compare(_s32(a) if signed else a, imm))
    return run, 0


register(*(f"s_cmpk_{cond}_{kind}" for cond in _CMP for kind in ("u32", "i32")))(_cmpk)


# ---- SOPP: control ----
def _target(ins, kernel) -> int:
    label = ins.operands[0].value
    if not isinstance(label, Label):
        raise NotImplementedInstruction("branch without a label")
    return kernel.labels[label.name]


@register("s_branch")
def _branch(ins, kernel):
    target = _target(ins, kernel)

    def run(wave):
        wave.pc = target
    return run, 0


_CONDITIONS = {
    "s_cbranch_scc0": lambda w: w.scc == 0,
    "s_cbranch_scc1": lambda w: w.scc == 1,
    "s_cbranch_vccnz": lambda w: (int(w.s[106]) | int(w.s[107])) != 0,
    "s_cbranch_vccz": lambda w: (int(w.s[106]) | int(w.s[107])) == 0,
    "s_cbranch_execz": lambda w: (int(w.s[126]) | int(w.s[127])) == 0,
    "s_cbranch_execnz": lambda w: (int(w.s[126]) | int(w.s[127])) != 0,
}


def _cbranch(ins, kernel):
    target = _target(ins, kernel)
    cond = _CONDITIONS[ins.mnemonic]

    def run(wave):
        if cond(wave):
            wave.pc = target
    return run, 0


register(*_CONDITIONS)(_cbranch)


@register("s_endpgm")
def _endpgm(ins, kernel):
    return (lambda wave: END), 0


@register("s_barrier")
def _barrier(ins, kernel):
    return (lambda wave: BARRIER), 0


@register("s_nop")
def _nop(ins, kernel):
    return (lambda wave: None), 0


_WAITCNT = re.compile(r"^(vmcnt|expcnt|lgkmcnt)\((\d+)\)$")


@register("s_waitcnt")
def _waitcnt(ins, kernel):
    counts = {}
    for op in ins.operands:
        m = _WAITCNT.match(op.value) if isinstance(op.value, str) else None
        if not m:
            raise NotImplementedInstruction(f"s_waitcnt operand {op.value}")
        counts[m.group(1)] = int(m.group(2))
    vmcnt, lgkmcnt = counts.get("vmcnt"), counts.get("lgkmcnt")

    def run(wave):
        wave.wait(vmcnt, lgkmcnt)
    return run, 0


_HWREG = re.compile(r"^hwreg\((HW_REG_MODE),\s*(\d+),\s*(\d+)\)$")


@register("s_setreg_imm32_b32")
def _setreg(ins, kernel):
    m = _HWREG.match(ins.operands[0].value) if isinstance(ins.operands[0].value, str) else None
    if not m:
        raise NotImplementedInstruction(f"s_setreg of {ins.operands[0].value}: only HW_REG_MODE is emulated")
    offset, size = int(m.group(2)), int(m.group(3))
    value = ins.operands[1].value.value & MASK32
    mask = ((1 << size) - 1) << offset

    def run(wave):
        wave.mode = (wave.mode & ~mask) | ((value << offset) & mask)
    return run, 0

"""The emulator's scalar and vector ALU semantics against AMD's own pseudocode: every distinct
form (mnemonic, operand kinds, modifiers) of every SALU / VALU instruction in the gfx950
kernels the project compiles (the offered specializations and every form forced,
tools/gfx950_cases.py) runs
in the emulator on random and special inputs and, lane by lane, through AMD's pseudocode
(tools/gfx950_emu/pcode, with its documented READINGS); every destination bit must agree.

Left to other tests: memory, LDS and MFMA instructions (their own semantics tests and the
probe kernels), DPP forms (the pseudocode does not pick source lanes; their base operation
is checked here through its other encodings, the lane selection by the probes), and the
instructions with no pseudocode (tools/gfx950_emu/pcode's coverage). The transcendentals
(v_exp_f32, v_log_f32, v_rcp_f32) flush denormals in the emulator, as the CDNA4 guide's notes
say, where the pseudocode's pow / log2 / 1.0 / x do not: they are compared away from the
denormals."""
import os
import re
import zlib

import numpy as np
import pytest

from conftest import EMULATES_COMPILED_GFX950, on_pinned_triton_line
from tools.gfx950_emu import pcode
from tools.gfx950_emu.listing import Const, Reg
from tools.gfx950_emu.semantics.operands import const_bits
from tools.gfx950_emu.single import run_instructions

pytestmark = EMULATES_COMPILED_GFX950

SKIP_PREFIXES = ("buffer_", "global_", "ds_", "s_load", "v_mfma", "s_waitcnt", "s_barrier", "s_branch", "s_cbranch",
                 "s_endpgm", "s_nop", "s_setreg", "v_accvgpr")
WHOLE_WAVE = ("v_permlane16_swap", "v_permlane32_swap")   # test_permlane_swaps_match_amds_pseudocode
TRANSCENDENTAL = {"v_exp_f32", "v_log_f32", "v_rcp_f32", "v_rcp_iflag_f32"}
SPECIAL_F32 = np.array([0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000,
                        0x7F800001, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x00800000, 0x3F000000, 0x4B800000],
                       dtype=np.uint32)


def _instances():
    """One Instruction of each distinct form in the offered gfx950 specializations."""
    from tools import gfx950_cases as cases
    seen = {}
    calls = [t.offered.calls[t.call_index] for t in cases.offered_targets()]
    calls += [call for _, _, call in cases.forced_form_calls()]
    for call in calls:
        listing = cases.compile_for_gfx950(call).listing
        for ins in listing.instructions:
            if ins.mnemonic.startswith(SKIP_PREFIXES + WHOLE_WAVE) or ins.mnemonic.endswith("_dpp"):
                continue
            shape = re.sub(r"\b([sva])\d+\b", r"\1", ins.text)
            shape = re.sub(r"\b([sva])\[\d+:\d+\]", r"\1[]", shape)
            seen.setdefault(shape, ins)
    return [seen[k] for k in sorted(seen)]


# compiled at collection: not on a Triton line where the module skips
INSTANCES = _instances() if os.environ.get("TRITON_INTERPRET") != "1" and on_pinned_triton_line() else []


# ---- operands -> pseudocode inputs ----
VOP3B = {"v_sub_co_u32", "v_subb_co_u32", "v_div_scale_f32", "v_mad_u64_u32", "v_mad_i64_i32"}


def _roles(ins, base, encoding):
    """Names the pseudocode gives the instruction's operands, in order (None: a destination
    compared after the run, 'MASK': a condition register read as VCC)."""
    n = len(ins.operands)
    if base.startswith("v_cmp"):
        return ["D0"] + ["S0", "S1"][: n - 1]
    if base.startswith("s_cmpk"):
        return ["S0", "SIMM16"]
    if base.startswith("s_cmp"):
        return ["S0", "S1"]
    if base in ("s_movk_i32",):
        return ["D0", "SIMM16"]
    if base in ("s_addk_i32", "s_mulk_i32"):
        return ["D0", "SIMM16"]
    if base == "v_cndmask_b32":
        return ["D0", "S0", "S1", "VCC"]
    if base in VOP3B:
        return ["D0", "VCC_OUT", "S0", "S1", "S2" if base != "v_subb_co_u32" else "VCC"][:n]
    return ["D0", "S0", "S1", "S2"][:n]


def _width(op):
    return 64 if isinstance(op.value, Reg) and op.value.count == 2 else 32


def _kind_of(base, role):
    """The pseudocode type a source is read as, for placing special values."""
    if re.search(r"_f32($|_)", base) or base.startswith(("v_pk_", "v_cvt_scalef32_pk_fp8", "v_div_", "v_max3_f32")):
        return "f32"
    return "int"


def _random_sources(ins, roles, rng):
    """Per operand index: 64 lane values (uint64 for 64-bit registers) for the registers and
    the constant's bits for constants."""
    base = re.sub(r"_(e32|e64|sdwa)$", "", ins.mnemonic)
    values, by_register = {}, {}
    for i, (op, role) in enumerate(zip(ins.operands, roles)):
        if isinstance(op.value, Reg) and op.value in by_register:   # one register, one value
            values[i] = by_register[op.value]
            continue
        if role == "VCC_OUT" or (role == "D0" and base not in ("v_fmac_f32", "s_addk_i32", "s_mulk_i32",
                                                              "v_cvt_scalef32_pk_fp8_f32")):
            continue
        if isinstance(op.value, Reg):
            width = 64 if op.value.count == 2 else 32
            raw = rng.integers(0, 2 ** 32, (64, 2), dtype=np.uint64)
            if _kind_of(base, role) == "f32" and role.startswith("S"):
                pick = rng.random(64) < 0.3
                raw[pick, 0] = rng.choice(SPECIAL_F32, int(pick.sum()))
                pick = rng.random(64) < 0.5
                raw[pick, 0] = np.float32(rng.standard_normal(int(pick.sum())) * 4).view(np.uint32)
                raw[:, 1] = raw[:, 0] if width == 64 and base.startswith("v_pk_") is False else raw[:, 1]
            if base in TRANSCENDENTAL:
                raw[:, 0] = np.float32(rng.uniform(-60, 60, 64)).view(np.uint32)
            if base == "v_ldexp_f32" and role == "S1":   # AMD's text, S0 * 2.0F ** n, is ldexp for these n
                raw[:, 0] = rng.integers(-149, 128, 64).astype(np.int64).astype(np.uint32).astype(np.uint64)
            if op.value.file == "s":
                raw[:] = raw[0]   # a scalar: the same in every lane
            values[i] = raw[:, 0] | (raw[:, 1] << np.uint64(32)) if width == 64 else raw[:, 0]
            by_register[op.value] = values[i]
        elif isinstance(op.value, Const):
            wide = role == "S0" and re.search(r"_[bui]64$", base) is not None
            kind = ("f" if isinstance(op.value.value, float) else "b") + ("64" if wide else "32")
            values[i] = np.full(64, const_bits(op.value, kind), dtype=np.uint64)
    return values


def _modifiers(ins):
    mods = {}
    n = len(ins.operands)
    neg = [int(op.neg) for op in ins.operands[1:]]
    absolute = [int(op.abs) for op in ins.operands[1:]]
    if any(neg):
        mods["neg"] = neg
    if any(absolute):
        mods["abs"] = absolute
    sext = [int(op.sext) for op in ins.operands[1:]]
    if any(sext):
        mods["sext"] = sext[:2]
    for name in ("op_sel", "op_sel_hi", "bitop3", "src0_sel", "src1_sel", "dst_sel", "dst_unused"):
        if name in ins.modifiers:
            mods[name] = list(ins.modifiers[name]) if isinstance(ins.modifiers[name], tuple) else ins.modifiers[name]
    del n
    return mods


def _setup(ins, roles, values, rng):
    """(sgprs, vgprs, exec) to run `ins` with those operand values; the inputs must avoid
    the destination registers."""
    sgprs, vgprs = {}, {}
    for i, value in values.items():
        op = ins.operands[i].value
        if not isinstance(op, Reg):
            continue
        if op.file == "s":
            v = int(value[0])
            for k in range(op.count):
                sgprs[op.index + k] = (v >> (32 * k)) & 0xFFFFFFFF
        else:
            for k in range(op.count):
                vgprs[op.row + k] = ((value >> np.uint64(32 * k)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    exec_mask = (1 << 64) - 1
    if 126 in sgprs:   # EXEC read as a scalar source (SALU): run with those bits
        exec_mask = sgprs.pop(126) | (sgprs.pop(127, 0) << 32)
    return sgprs, vgprs, exec_mask


@pytest.mark.parametrize("ins", INSTANCES, ids=[i.text for i in INSTANCES])
def test_alu_instruction_matches_amds_pseudocode(ins):
    base = re.sub(r"_(e32|e64|sdwa)$", "", ins.mnemonic)
    if base not in pcode.opcodes_with_pcode():
        pytest.skip(f"{base} has no pseudocode in AMD's table")
    roles = _roles(ins, base, ins.mnemonic[len(base):])
    rng = np.random.default_rng(zlib.crc32(ins.text.encode()))   # the same inputs every run
    values = _random_sources(ins, roles, rng)
    sgprs, vgprs, exec_mask = _setup(ins, roles, values, rng)
    scc = int(rng.integers(0, 2))
    vcc_in = int(rng.integers(0, 2 ** 63))
    if "VCC" in roles[1:] or base in ("v_cndmask_b32", "v_subb_co_u32", "v_div_fmas_f32"):
        mask_op = ins.operands[roles.index("VCC")] if "VCC" in roles else None
        index = mask_op.value.index if mask_op is not None else 106
        sgprs[index], sgprs[index + 1] = vcc_in & 0xFFFFFFFF, vcc_in >> 32
    mode = 0x3F0 | (1 << 23)   # the kernels' MODE: IEEE, denormals kept, FP16_OVFL set by their s_setreg
    wave, machine = run_instructions([ins.text], sgprs=sgprs, vgprs=vgprs, exec_mask=exec_mask, scc=scc, mode=mode)
    mods = _modifiers(ins)
    dst = ins.operands[0].value if ins.operands else None
    mismatches = []
    for lane in range(64):
        inputs = {}
        for i, role in enumerate(roles):
            if i in values and role.startswith(("S", "D0")):
                inputs[role] = int(values[i][lane])
            if role == "SIMM16":
                inputs["S0" if base in ("s_movk_i32", "s_addk_i32", "s_mulk_i32") else "S1"] = \
                    ins.operands[i].value.value & 0xFFFF
        if base in ("s_addk_i32", "s_mulk_i32"):
            inputs["D0"] = sgprs.get(dst.index, 0)
        needed = pcode.input_names(base)
        if "SCC" in needed:
            inputs["SCC"] = scc
        if "VCC" in needed:
            inputs["VCC"] = vcc_in
        if "EXEC" in needed:
            inputs["EXEC"] = exec_mask
        if "D0" in needed and "D0" not in inputs and isinstance(dst, Reg):
            inputs["D0"] = 0x7FBADBAD if dst.file != "s" else 0
        vgpr = None
        if base in ("v_readlane_b32", "v_readfirstlane_b32"):
            src = ins.operands[1].value
            vgpr = np.zeros((64, 512), dtype=np.uint32)
            vgpr[:, src.row] = vgprs[src.row]
            inputs["SRC0"] = src.row
            inputs["S0"] = int(vgprs[src.row][lane])
        inputs = {k: v for k, v in inputs.items() if k in needed}
        try:
            got = pcode.evaluate(base, inputs, lane=lane, vgpr=vgpr, modifiers=mods)
        except pcode.PCODE_ERRORS as error:
            if "v_maximum_f32" in str(error) or "v_minimum_f32" in str(error):
                pytest.skip(f"{base}: AMD's pseudocode calls a function it does not define ({error}); "
                            "the emulator's IEEE 754-2019 reading is the probe kernels' to check")
            raise
        for name, bits in got.items():
            emulated = _emulated(wave, ins, roles, name, lane, base)
            if emulated is None:
                continue
            expected = bits
            if name == "VCC" or (name == "D0" and base.startswith("v_cmp")):
                expected = (bits >> lane) & 1
            if base in TRANSCENDENTAL:
                e, g = np.array([expected], dtype=np.uint32).view(np.float32)[0], \
                    np.array([emulated], dtype=np.uint32).view(np.float32)[0]
                ok = (np.isnan(e) and np.isnan(g)) or abs(float(e) - float(g)) <= abs(float(np.spacing(np.float32(e))))
            else:
                ok = emulated == expected or _both_nan(ins, base, emulated, expected)
            if not ok:
                mismatches.append((lane, name, hex(emulated), hex(expected), {k: hex(v) for k, v in inputs.items()}))
    assert not mismatches, f"{ins.text}: {len(mismatches)} lane results differ, e.g. {mismatches[:3]}"


def _both_nan(ins, base, a, b):
    """NaN payloads: the pseudocode's readings and the emulator's numpy may pick different
    quiet NaNs where AMD's text does not fix the bits (conversions); NaN-ness must agree."""
    if not (base.startswith("v_cvt_pk_bf16") or base.startswith("v_cvt_scalef32")):
        return False
    fa = [(a >> s) & 0xFFFF for s in (0, 16)]
    fb = [(b >> s) & 0xFFFF for s in (0, 16)]
    return all((x == y) or ((x & 0x7F80) == 0x7F80 and x & 0x7F and (y & 0x7F80) == 0x7F80 and y & 0x7F)
               for x, y in zip(fa, fb))


def _emulated(wave, ins, roles, name, lane, base):
    """The emulator's value of the pseudocode's output `name` for this lane (None: not a
    destination of this encoding)."""
    dst = ins.operands[0].value if ins.operands else None
    if name == "SCC":
        return wave.scc
    if name == "VCC":
        if "VCC_OUT" in roles:
            index = ins.operands[roles.index("VCC_OUT")].value.index
        else:
            index = 106
        return (wave.mask64(index) >> lane) & 1
    if name == "D1" and "VCC_OUT" in roles:
        index = ins.operands[roles.index("VCC_OUT")].value.index
        return (wave.mask64(index) >> lane) & 1
    if name == "D0" and isinstance(dst, Reg):
        if base.startswith("v_cmp"):
            return (wave.mask64(dst.index) >> lane) & 1
        if dst.file == "s":
            return wave.mask64(dst.index) if dst.count == 2 else int(wave.s[dst.index])
        if dst.count == 2:
            return int(wave.v[dst.row][lane]) | (int(wave.v[dst.row + 1][lane]) << 32)
        return int(wave.v[dst.row][lane])
    return None


@pytest.mark.parametrize("opcode", ["v_permlane16_swap_b32", "v_permlane32_swap_b32"])
def test_permlane_swaps_match_amds_pseudocode(opcode):
    # Whole-wave instructions: one pseudocode run moves every lane of both registers.
    rng = np.random.default_rng(7)
    dst, src = rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32), \
        rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32)
    wave, _ = run_instructions([f"{opcode}_e32 v3, v5"], vgprs={3: dst, 5: src})
    vgpr = np.zeros((64, 512), dtype=np.uint32)
    vgpr[:, 3], vgpr[:, 5] = dst, src
    needed = pcode.input_names(opcode)
    inputs = {k: v for k, v in {"VDST": 3, "SRC0": 5, "S0": int(src[0]), "D0": int(dst[0])}.items() if k in needed}
    written = pcode.evaluate(opcode, inputs, lane=0, vgpr=vgpr)
    want_dst, want_src = dst.copy(), src.copy()
    for key, bits in written.items():
        lane, reg = (int(x) for x in re.match(r"VGPR\[(\d+)\]\[(\d+)\]", key).groups())
        (want_dst if reg == 3 else want_src)[lane] = bits
    assert np.array_equal(wave.v[3], want_dst) and np.array_equal(wave.v[5], want_src)

"""AMD's own statement of what gfx950 (CDNA4) instructions compute, run per lane: the
pseudocode of the CDNA4 ISA guide, as tinygrad's wheel carries it
(`tinygrad.runtime.autogen.amd.cdna.str_pcode.PCODE`, tinygrad==0.14.0 in
requirements.txt), parsed (lang), given its meaning (interpreter, values,
floats: exact integers of any width, IEEE floats rounded once, subnormals kept) and
its helper functions (helpers, each with what it rests on).

    evaluate("v_add_f32", {"S0": 0x3F800000, "S1": 0x40000000})  ->  {"D0": 0x40400000}

The emulator's tests compare its vectorized semantics with this, lane by lane. Each
opcode's program is parsed and compiled once (cached); a run is a walk of closures.

What a run takes:
- inputs: the operands as raw bit patterns, by the names the pseudocode uses: S0, S1, S2
  (64-bit operands whole), D0 (the destination's previous bits, for instructions that
  write part of it or read it, e.g. v_fmac_f32), VCC and EXEC (64-bit masks; VCC is also
  the e64 forms' SGPR-pair condition or carry), SCC, M0, SIMM16, SIMM32, OPSEL, PC, the
  memory operands (ADDR, DATA, DATA2, VADDR, SRSRC, SOFFSET, SADDR, SBASE, OFFSET...),
  SRC0 / VDST (register numbers, with vgpr=), and the MODE bits "WAVE_MODE.IEEE" and
  "WAVE_MODE.FP16_OVFL" (both default 1, as the kernels run: ieee_mode 1 in their
  descriptors, FP16_OVFL set by their first s_setreg_imm32_b32).
  `input_names(opcode)` lists what an opcode's pseudocode reads.
- lane: laneId (0..63).
- vgpr: a [64][512] array-like of uint32 for the cross-lane instructions (v_readlane,
  v_readfirstlane, v_permlane*_swap, ds_bpermute); without it VGPR[laneId][SRC0.u32] is S0
  and VGPR[laneId][VDST.u32] is D0.
- memory: a mapping of byte address -> byte for MEM[...] (the result lists the bytes
  written; the mapping is not changed).
- modifiers: the encoding's per-lane operand modifiers the kernels use (the pseudocode
  describes the operation on the modified operands; these are the ISA guides' operand
  rules, applied before and after it):
    "neg", "abs": per source flags [s0, s1, s2] on float operands (the sign bit of the
      type the pseudocode reads the source as);
    "op_sel", "op_sel_hi": per source flags; for the packed VOP3P instructions (v_pk_*)
      the half of each 64-bit source that the low and the high result take (op_sel_hi
      defaults to all ones, as the assembler prints nothing then); for an instruction
      whose pseudocode reads OPSEL (v_cvt_scalef32_*) they are its OPSEL bits;
    "bitop3": V_BITOP3's truth table (the encoding's OMOD:ABS:NEG fields, INST.* here);
    SDWA: "src0_sel", "src1_sel" (BYTE_0..BYTE_3, WORD_0, WORD_1, DWORD), "sext" [s0, s1],
      "dst_sel", "dst_unused" (UNUSED_PAD, UNUSED_SEXT, UNUSED_PRESERVE);
    "offen", "idxen": the buffer address operand's meaning; "sc0", "sc1", "nt": cache
      policy, no effect on values.
  DPP is not per lane (it picks the source lane, and its masks decide which lanes write):
  the caller passes the selected lane's value as S0. clamp and omod are not supported.

What a run returns (`evaluate`): the registers the pseudocode wrote, with their bits
(untouched bits of a register partly written are those of its input, 0 if none was
given), VGPR entries written as "VGPR[lane][reg]", memory writes as "MEM[0x...].bN".
`execute` also returns which bits of each register were written and the program's
variables.

Where AMD's text cannot be taken literally (V_DIV_SCALE_F32 leaves D0 unwritten and sets
VCC as a whole; V_DIV_FMAS_F32's 2**32 and V_DIV_FIXUP_F32's NaN give wrong quotients),
READINGS says what runs instead and why; `literal=True` runs the text as it stands. The
text of DS_READ_U8/U16 and DS_WRITE_B8/B16(_D16_HI) has no OFFSET: pass ADDR with the
instruction's offset added.

Errors are never guesses: an opcode with no pseudocode (NoPcode), text that is not code, a
helper or constant with no public definition, an input the pseudocode reads but was not
given (PCODE_ERRORS), a modifier it does not know (UnsupportedModifier), an input it does
not read (ValueError): each says which.

Cost: about 10-30 microseconds a lane for most instructions, a few hundred for those whose
pseudocode loops (s_bcnt1, v_perm, v_mbcnt); bench/pcode_throughput.py measures it."""
from __future__ import annotations

import dataclasses
import functools
import operator
import re

from . import interpreter, lang
from .interpreter import Cell, Context, PcodeRuntimeError
from .helpers import PcodeUndefined
from .lang import PcodeSyntaxError
from .values import FloatType, IntType, PcodeTypeError, bits_of, type_named

# Every error this module raises for a program it cannot run (catch them together).
PCODE_ERRORS = (PcodeSyntaxError, PcodeUndefined, PcodeRuntimeError, PcodeTypeError)


class NoPcode(LookupError):
    """The opcode has no pseudocode entry in AMD's tables (e.g. the MFMAs with a scale,
    ds_read_*_tr_*, s_barrier)."""


class UnsupportedModifier(ValueError):
    """A modifier this evaluator does not apply (and will not ignore)."""


_ENCODING_SUFFIX = re.compile(r"_(e32|e64|dpp|sdwa)$")


def mnemonic(opcode: str) -> str:
    """The lowercase mnemonic without its encoding suffix (v_add_f32_e32 -> v_add_f32)."""
    return _ENCODING_SUFFIX.sub("", opcode.strip().lower())


@functools.lru_cache(maxsize=1)
def _sources() -> dict[str, tuple[str, tuple[str, ...]]]:
    """mnemonic -> (pseudocode text, the encodings' enum members that carry it)."""
    from tinygrad.runtime.autogen.amd.cdna.str_pcode import PCODE
    found: dict[str, tuple[str, list[str]]] = {}
    for member, text in PCODE.items():
        name = mnemonic(member.name)
        where = f"{type(member).__name__}.{member.name}"
        if name in found and found[name][0] != text:
            raise ValueError(f"{name}: different pseudocode in {found[name][1]} and {where}")
        found.setdefault(name, (text, []))[1].append(where)
    return {name: (text, tuple(where)) for name, (text, where) in found.items()}


def opcodes_with_pcode() -> list[str]:
    return sorted(_sources())


def pcode_text(opcode: str) -> str:
    """AMD's pseudocode of the opcode, as the table holds it."""
    name = mnemonic(opcode)
    if name not in _sources():
        raise NoPcode(f"{name}: AMD's CDNA pseudocode tables have no entry for it")
    return _sources()[name][0]


def encodings(opcode: str) -> tuple[str, ...]:
    """The enum members (encoding class.name) whose pseudocode this is."""
    pcode_text(opcode)
    return _sources()[mnemonic(opcode)][1]


# Where AMD's text, read literally, leaves a result unsaid or cannot be what the hardware
# does: what this evaluator does instead, and why. `readings(opcode)` lists them;
# evaluate(..., literal=True) runs AMD's text without them; tests cover each.
READINGS = {
    "v_div_scale_f32": (
        "D0 = S0 where no branch writes D0 (the ISA text: the instruction scales its first input "
        "'if required'; LLVM's division expansion relies on the unscaled pass-through)",
        "VCC = 0x0LL / 0x1LL set this lane's VCC bit (VOP3SD's SDST is a lane mask; the "
        "pseudocode is written for one lane)",
    ),
    "v_div_fmas_f32": (
        "with VCC set, the result is fma(S0, S1, S2) * 2**64 when the quotient S2 is >= 2.0 "
        "(exponent(S2) > 127) and * 2**-64 otherwise, rounded once (fma_scaled), not AMD's "
        "text's 2**32 * fma(...): V_DIV_SCALE_F32 sets VCC in two cases, the denominator scaled "
        "by 2**64 (N/D near the largest float: the scaled quotient is >= 2**31) and the "
        "numerator scaled by 2**64 (N/D subnormal: the scaled quotient is < 2**-62), and only "
        "these factors give back N/D; rounding once is what makes a subnormal quotient "
        "correctly rounded, which LLVM relies on when it emits this sequence for IEEE division "
        "(tests/test_gfx950_pcode.py shows both the text's 2**32 and a second rounding failing); "
        "AMD's rocjitsu emulator (ROCm/rocm-systems emulation/rocjitsu, division.h: 'the public "
        "pseudocode's ... fixed FMAS factors do not reproduce these instructions', measured on "
        "gfx1100 / gfx1201) selects the same factor by exponent(S2) > bias and rounds once; "
        "tinygrad's emulator also scales by 2**+-64",
    ),
    "v_div_fixup_f32": (
        "a NaN quotient S0 reaching the last branch gives +-infinity, not AMD's text's "
        "+-abs(NaN): with S1, S2 finite and nonzero, the quotient of LLVM's division sequence is "
        "NaN there only when the scaled quotient overflowed (inf - inf in the Newton steps), "
        "i.e. |S2 / S1| is past the f32 range, whose correctly rounded value is +-infinity "
        "(tests/test_gfx950_pcode.py shows the text's NaN); AMD's rocjitsu emulator gives "
        "the overflow (+-infinity) for any infinite or NaN quotient there, and tinygrad's "
        "emulator makes the same change",
    ),
}
# Not a reading, a warning for comparisons with an emulator: rocjitsu's V_DIV_SCALE (division.h,
# measured on RDNA3/RDNA4) also scales where this text does not: a denominator with exponent
# field >= 253 (the text's `1.0 / 64'F(S1.f32) == DENORM.f64` is never true for an f32
# denominator), an exponent difference <= -96 rather than a subnormal S2 / S1, a numerator
# exponent field up to 24 rather than 23, and its 0 / 0 NaN is 0xffc00000. LLVM's sequence
# gives the correctly rounded quotient with either; the single instruction differs there.
# The replacements READINGS describes that are changes to the text: opcode -> (AMD's line, ours).
_REPLACED_LINES = {
    "v_div_fmas_f32": ("D0.f32 = 2.0F ** 32 * fma(S0.f32, S1.f32, S2.f32)",
                       "D0.f32 = fma_scaled(S0.f32, S1.f32, S2.f32, exponent(S2.f32) > 127 ? 64 : -64)"),
    "v_div_fixup_f32": ("D0.f32 = sign_out ? -abs(S0.f32) : abs(S0.f32)",
                        "D0.f32 = isNAN(64'F(S0.f32)) ? (sign_out ? -INF.f32 : +INF.f32) "
                        ": (sign_out ? -abs(S0.f32) : abs(S0.f32))"),
}
_D0_DEFAULTS_TO_S0 = {"v_div_scale_f32"}
_VCC_IS_LANE_BIT = {"v_div_scale_f32"}


def readings(opcode: str) -> tuple[str, ...]:
    return READINGS.get(mnemonic(opcode), ())


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    run: object                 # the compiled body: run(ctx)
    scope: object
    reads: frozenset            # register names the pseudocode reads
    source_types: dict          # "S0" -> set of types it is viewed as
    reads_opsel: bool
    packed: bool                # a VOP3P instruction (op_sel picks halves)
    allowed_inputs: frozenset   # reads and the general operand names
    derived_flags: tuple        # (EXECZ, EXEC), (VCCZ, VCC) where read: derived if not given
    literal: bool               # AMD's text without READINGS


_NOT_INPUTS = {"laneId", "VGPR", "MEM", "WAVE_MODE", "INST", "ROUND_MODE", "WAVE_STATUS",
               "HW_REGISTERS", "SGPR"}


def _target_reads(target):
    """The expressions a store target evaluates (indices, slice bounds), not its root."""
    if isinstance(target, tuple):
        for t in target:
            yield from _target_reads(t)
    elif isinstance(target, lang.Concat):
        yield from _target_reads(target.parts)
    elif isinstance(target, lang.Member):
        yield from _target_reads(target.base)
    elif isinstance(target, lang.Slice):
        yield target.hi
        yield target.lo
        yield from _target_reads(target.base)
    elif isinstance(target, lang.Index):
        yield target.index
        yield from _target_reads(target.base)


def _read_expressions(body, params=()):
    """(expression, the scope it is in): what a body reads."""
    scope = interpreter.Scope(body, params)
    for stmt in interpreter._walk_statements(body):
        if isinstance(stmt, lang.Assign):
            yield stmt.value, scope
            yield tuple(_target_reads(stmt.target)), scope
            if stmt.op != "=":
                yield stmt.target, scope
        elif isinstance(stmt, lang.Lambda):
            yield from _read_expressions(stmt.body, stmt.params)
        elif isinstance(stmt, lang.If):
            yield tuple(c for c, _ in stmt.branches), scope
        elif isinstance(stmt, lang.For):
            yield (stmt.lo, stmt.hi), scope
        elif isinstance(stmt, (lang.Return, lang.ExprStmt)):
            yield (stmt.value if isinstance(stmt, lang.Return) else stmt.expr), scope


def _reads_and_views(body):
    """The registers a program reads, and the types it views S0, S1, S2 as."""
    reads, source_types = set(), {}
    for expr, scope in _read_expressions(body):
        for node in interpreter._walk_expressions(expr):
            if isinstance(node, lang.Name) and scope.kind(node.name) == "register" \
                    and node.name not in _NOT_INPUTS:
                reads.add("D0" if node.name == "D" else node.name)
            if isinstance(node, lang.Member):
                root = interpreter._root_name(node.base)
                t = type_named(node.member)
                if root in ("S0", "S1", "S2") and t is not None:
                    source_types.setdefault(root, set()).add(t)
            if interpreter._is_vgpr(node):   # without vgpr=, these are the operands S0 / D0
                alias = {"SRC0": "S0", "VDST": "D0"}.get(interpreter._root_name(node.index))
                if alias:
                    reads.add(alias)
    for stmt in interpreter._walk_statements(body):   # a VDST-aliased D0 is read-modify-write
        if isinstance(stmt, lang.Assign):
            for node in interpreter._walk_expressions(stmt.target):
                if interpreter._is_vgpr(node) and interpreter._root_name(node.index) == "VDST":
                    reads.add("D0")
    return frozenset(reads), source_types


@functools.lru_cache(maxsize=None)
def program(opcode: str, literal: bool = False) -> Program:
    """The opcode's pseudocode, parsed and compiled (once); with literal, AMD's text as it
    stands (no READINGS)."""
    name = mnemonic(opcode)
    text = pcode_text(name)
    if not literal and name in _REPLACED_LINES:
        old, new = _REPLACED_LINES[name]
        if old not in text:
            raise ValueError(f"{name}: the line READINGS replaces is no longer in AMD's text")
        text = text.replace(old, new)
    try:
        body = lang.parse(text)
        run, scope = interpreter.Compiler(set(_sources())).program(body)
    except (PcodeSyntaxError, PcodeTypeError, PcodeUndefined) as error:
        raise type(error)(f"{name}: {error}") from None
    reads, source_types = _reads_and_views(body)
    packed = any(w.startswith("VOP3POp.") for w in encodings(name))
    derived = tuple((flag, mask) for flag, mask in (("EXECZ", "EXEC"), ("VCCZ", "VCC")) if flag in reads)
    return Program(name, run, scope, reads, source_types, "OPSEL" in reads, packed,
                   reads | _GENERAL_INPUTS, derived, literal)


def input_names(opcode: str) -> frozenset:
    """The registers the opcode's pseudocode reads (inputs it may need)."""
    return program(opcode).reads


@dataclasses.dataclass
class Outcome:
    values: dict        # register / "VGPR[l][r]" / "MEM[0x..].bN" -> bits
    masks: dict         # register / "VGPR[l][r]" -> the bits the pseudocode wrote
    variables: dict     # the program's scalar variables at the end -> bits


# MODE bits a run may set (default 1: the kernels' descriptors set ieee_mode, and each of
# them sets FP16_OVFL, MODE bit 23, with s_setreg_imm32_b32 hwreg(HW_REG_MODE, 23, 1), 1).
_MODE_INPUTS = {"WAVE_MODE.IEEE", "WAVE_MODE.FP16_OVFL"}
_GENERAL_INPUTS = {"S0", "S1", "S2", "D0", "D1", "VCC", "EXEC", "SCC", "M0", "PC", "SRC0", "VDST",
                   "OPSEL", "SIMM16", "SIMM32"} | _MODE_INPUTS
_CACHE_POLICY = {"sc0", "sc1", "nt"}
_DPP = {"quad_perm", "row_shl", "row_shr", "row_ror", "row_bcast", "row_mask", "bank_mask",
        "bound_ctrl", "row_mirror", "row_half_mirror", "wave_shl", "wave_shr", "wave_rol", "wave_ror"}
_SDWA_SELECT = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8),
                "WORD_0": (0, 16), "WORD_1": (16, 16), "DWORD": (0, 32)}


def evaluate(opcode: str, inputs: dict, *, lane: int = 0, vgpr=None, modifiers: dict | None = None,
             memory=None, literal: bool = False) -> dict:
    """The registers (and VGPR entries, memory bytes) the instruction writes in this lane,
    as raw bit patterns. See the module docstring for the arguments."""
    ctx = _run(opcode, inputs, lane, vgpr, modifiers, memory, literal)
    regs, values = ctx.regs, {}
    for name in ctx.written:
        cell = regs.get(name) or _vgpr_cell_named(ctx, name)
        values[name] = cell.bits & ((1 << cell.width) - 1)
    for address, width, bits in ctx.memory_log:
        values[f"MEM[{address:#x}].b{width}"] = bits
    return values


def execute(opcode: str, inputs: dict, *, lane: int = 0, vgpr=None, modifiers: dict | None = None,
            memory=None, literal: bool = False) -> Outcome:
    """As evaluate(), with which bits of each register the pseudocode wrote and the
    program's variables at the end."""
    ctx = _run(opcode, inputs, lane, vgpr, modifiers, memory, literal)
    values, masks = {}, {}
    for name, mask in ctx.written.items():
        cell = ctx.regs.get(name) or _vgpr_cell_named(ctx, name)
        values[name] = cell.bits & ((1 << cell.width) - 1)
        masks[name] = mask
    for address, width, bits in ctx.memory_log:
        values[f"MEM[{address:#x}].b{width}"] = bits
    variables = {n: c.bits for n, c in ctx.locals.items() if isinstance(c, Cell) and c.bits is not None}
    return Outcome(values, masks, variables)


def _vgpr_cell_named(ctx: Context, name: str) -> Cell:
    return next(c for c in ctx.vgpr_cells.values() if c.name == name)


def _run(opcode, inputs, lane, vgpr, modifiers, memory, literal) -> Context:
    prog = program(opcode, literal)
    if lane.__class__ is not int or not 0 <= lane < 64:
        raise ValueError(f"lane {lane!r}: a wave64 lane is 0..63")
    regs, wave_mode = _input_registers(prog, inputs)
    if modifiers:
        mods = dict(modifiers)
        inst_fields = _apply_source_modifiers(prog, regs, mods)
    else:
        mods, inst_fields = {}, {}
        if prog.reads_opsel and "OPSEL" not in regs:
            regs["OPSEL"] = Cell(0, 4, name="OPSEL")   # no op_sel printed: the field is 0
    ctx = Context(regs, lane, vgpr, memory, wave_mode, inst_fields, mods, _call_instruction)
    prog.run(ctx)
    if prog.name in READINGS and not literal:
        _apply_readings(prog, ctx, lane, inputs)
    if mods:
        _apply_sdwa_destination(prog, ctx, mods, inputs)
    return ctx


def _input_registers(prog: Program, inputs: dict):
    regs, wave_mode = {}, {"IEEE": 1, "FP16_OVFL": 1}
    allowed, widths = prog.allowed_inputs, interpreter.REGISTER_WIDTHS
    for name, bits in inputs.items():
        if name not in allowed:
            raise ValueError(f"input {name!r}: {prog.name}'s pseudocode reads no such register "
                             f"(it reads {sorted(prog.reads)})")
        if bits.__class__ is not int:
            if isinstance(bits, bool) or not hasattr(bits, "__index__"):
                raise ValueError(f"input {name}={bits!r}: inputs are int bit patterns")
            bits = operator.index(bits)
        if bits < 0:
            raise ValueError(f"input {name}={bits!r}: inputs are non-negative bit patterns")
        if name in _MODE_INPUTS:
            wave_mode[name.split(".")[1]] = bits & 1
            continue
        width = widths.get(name, 64)
        if bits >> width:
            raise ValueError(f"input {name}={bits:#x} is wider than {width} bits")
        regs[name] = Cell(bits, width, name=name)
    for flag, mask in prog.derived_flags:
        if flag not in regs and mask in regs:
            regs[flag] = Cell(int(regs[mask].bits == 0), 1, name=flag)
    return regs, wave_mode


def _padded(flags, count: int, default: int) -> list:
    flags = [int(f) for f in flags] if flags is not None else []
    if len(flags) > count:
        raise UnsupportedModifier(f"{len(flags)} op_sel entries for {count} sources")
    return flags + [default] * (count - len(flags))


def _opsel_field(op_sel) -> int:
    """OPSEL as LLVM prints it for a VOP3 instruction: one entry per source, then one for
    the destination, which is OPSEL[3] (op_sel:[0,0,1] on a two-source instruction sets
    encoding bit 14; checked with llvm-mc-22 -mcpu=gfx950 -show-encoding)."""
    if not op_sel:
        return 0
    flags = [int(f) for f in op_sel]
    if len(flags) > 4:
        raise UnsupportedModifier(f"op_sel with {len(flags)} entries")
    return sum(f << i for i, f in enumerate(flags[:-1])) | (flags[-1] << 3)


def _flags(mods: dict, key: str, count: int, default: int):
    value = mods.pop(key, None)
    if value is None:
        return [default] * count
    value = [int(v) for v in value]
    return value + [default] * (count - len(value))


def _apply_source_modifiers(prog: Program, regs: dict, mods: dict) -> dict:
    """Modify the source operands in place as the encoding's modifiers say; returns the
    INST.* fields (bitop3)."""
    unknown = [m for m in mods if m in _DPP]
    if unknown:
        raise UnsupportedModifier(f"DPP {unknown}: DPP selects the source lane and the lanes that write; "
                                  "pass the selected lane's value as S0 and apply its masks outside evaluate()")
    inst_fields = {}
    if "bitop3" in mods:
        if "neg" in mods or "abs" in mods:
            raise UnsupportedModifier("bitop3 occupies the neg / abs fields")
        table = int(mods.pop("bitop3"))
        # bitop3:N is TTBL = N: the encoding's OMOD (N[7:6]), ABS (N[5:3]) and NEG (N[2:0])
        # fields, which the pseudocode concatenates (checked with llvm-mc-22 -show-encoding)
        inst_fields = {"NEG": table & 7, "ABS": (table >> 3) & 7, "OMOD": (table >> 6) & 3}
    op_sel, op_sel_hi = mods.pop("op_sel", None), mods.pop("op_sel_hi", None)
    if prog.packed:
        _select_packed_halves(prog, regs, _padded(op_sel, 3, 0), _padded(op_sel_hi, 3, 1))
    elif op_sel_hi is not None:
        raise UnsupportedModifier(f"op_sel_hi on {prog.name}, which is not a packed instruction")
    elif prog.reads_opsel:   # the encoding's OPSEL field
        if "OPSEL" in regs and op_sel is not None:
            raise ValueError("OPSEL given both as an input and as op_sel")
        if "OPSEL" not in regs:
            regs["OPSEL"] = Cell(_opsel_field(op_sel), 4, name="OPSEL")
    elif op_sel is not None and any(op_sel):
        raise UnsupportedModifier(f"op_sel on {prog.name}, whose pseudocode does not read OPSEL")
    neg, abs_ = _flags(mods, "neg", 3, 0), _flags(mods, "abs", 3, 0)
    for k in range(3):
        if neg[k] or abs_[k]:
            _float_modifier(prog, regs, f"S{k}", neg[k], abs_[k])
    _sdwa_sources(regs, mods)
    for key in list(mods):
        if key in _CACHE_POLICY or key in ("offen", "idxen", "dst_sel", "dst_unused"):
            continue
        raise UnsupportedModifier(f"modifier {key!r} is not applied by this evaluator")
    return inst_fields


def _select_packed_halves(prog: Program, regs: dict, op_sel, op_sel_hi):
    half = 32 if any(isinstance(t, FloatType) and t.width == 32 for ts in prog.source_types.values()
                     for t in ts) or "f32" in prog.name else 16
    mask = (1 << half) - 1
    for k in range(3):
        name = f"S{k}"
        if name not in regs or (not op_sel[k] and op_sel_hi[k]):
            continue
        bits = regs[name].bits
        halves = (bits & mask, (bits >> half) & mask)
        regs[name] = Cell(halves[op_sel_hi[k]] << half | halves[op_sel[k]], regs[name].width, name=name)


def _float_modifier(prog: Program, regs: dict, name: str, neg: int, abs_: int):
    if prog.packed:
        raise UnsupportedModifier("neg / abs on packed sources (neg_lo / neg_hi) are not applied")
    types = prog.source_types.get(name, set())
    floats = {t for t in types if isinstance(t, FloatType)}
    if len(floats) == 1:
        width = floats.pop().width
    elif prog.name == "v_cndmask_b32" and types == {type_named("u32")}:
        width = 32    # the ISA allows float modifiers on its 32-bit float operands
    else:
        raise UnsupportedModifier(f"neg / abs on {name} of {prog.name}, read as {sorted(map(str, types))}")
    if name not in regs:
        raise PcodeRuntimeError(f"input {name} not given (the modifier applies to it)")
    sign = 1 << (width - 1)
    bits = regs[name].bits
    if abs_:
        bits &= ~sign
    if neg:
        bits ^= sign
    regs[name] = Cell(bits, regs[name].width, name=name)


def _sdwa_sources(regs: dict, mods: dict):
    sext = _flags(mods, "sext", 2, 0)
    for k in range(2):
        sel = mods.pop(f"src{k}_sel", None)
        if sel is None:
            continue
        if sel not in _SDWA_SELECT:
            raise UnsupportedModifier(f"src{k}_sel:{sel}")
        name = f"S{k}"
        if name not in regs:
            raise PcodeRuntimeError(f"input {name} not given (src{k}_sel applies to it)")
        offset, width = _SDWA_SELECT[sel]
        field = (regs[name].bits >> offset) & ((1 << width) - 1)
        if sext[k] and field >> (width - 1):
            field |= ((1 << 32) - 1) ^ ((1 << width) - 1)
        regs[name] = Cell(field, regs[name].width, name=name)


def _apply_sdwa_destination(prog: Program, ctx: Context, mods: dict, inputs: dict):
    """SDWA's dst_sel: the result's low byte / word placed in the selected field; the other
    bits zero (UNUSED_PAD), the field's sign (UNUSED_SEXT) or the old D0 (UNUSED_PRESERVE)."""
    sel, unused = mods.get("dst_sel"), mods.get("dst_unused")
    if sel is None:
        if unused is not None:
            raise UnsupportedModifier("dst_unused without dst_sel")
        return
    if unused is None:
        raise UnsupportedModifier("dst_sel without dst_unused (the listings print both)")
    if sel not in _SDWA_SELECT or unused not in ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"):
        raise UnsupportedModifier(f"dst_sel:{sel} dst_unused:{unused}")
    if "D0" not in ctx.written:
        raise UnsupportedModifier(f"dst_sel on {prog.name}, which writes no D0")
    offset, width = _SDWA_SELECT[sel]
    cell = ctx.regs["D0"]
    field = cell.bits & ((1 << width) - 1)
    if unused == "UNUSED_PRESERVE":
        if "D0" not in inputs:
            raise PcodeRuntimeError("dst_unused:UNUSED_PRESERVE keeps the old D0: give input D0")
        keep = ((1 << 32) - 1) ^ (((1 << width) - 1) << offset)
        result = (inputs["D0"] & keep) | (field << offset)
    else:
        result = field << offset
        if unused == "UNUSED_SEXT" and field >> (width - 1):
            result |= ((1 << 32) - 1) ^ ((1 << (offset + width)) - 1)
    cell.bits = result
    ctx.written["D0"] = (1 << 32) - 1


def _apply_readings(prog: Program, ctx: Context, lane: int, inputs: dict):
    """READINGS, applied after the pseudocode ran."""
    if prog.name in _D0_DEFAULTS_TO_S0 and "D0" not in ctx.written:
        width = 32 if prog.name.endswith("f32") else 64
        source = ctx.register("S0", for_write=False)
        ctx.register("D0", for_write=True).bits = source.bits & ((1 << width) - 1)
        ctx.written["D0"] = (1 << width) - 1
    if prog.name in _VCC_IS_LANE_BIT and "VCC" in ctx.written:
        cell = ctx.regs["VCC"]
        cell.bits = (inputs.get("VCC", 0) & ~(1 << lane)) | ((cell.bits & 1) << lane)
        ctx.written["VCC"] = 1 << lane


def _call_instruction(name: str, values, caller: Context):
    """Another instruction's pseudocode called as a function (v_max_i32(a, b) in V_MED3_I32):
    its S0, S1, ... are the arguments' bits; its value is D0 as its last write typed it."""
    prog = program(name)
    regs = {f"S{i}": Cell(bits_of(v), 64, name=f"S{i}") for i, v in enumerate(values)}
    ctx = Context(regs, caller.lane, None, None, caller.wave_mode, {}, {}, _call_instruction)
    prog.run(ctx)
    t = ctx.last_type.get("D0")
    if t is None:
        raise PcodeRuntimeError(f"{name} called as a function wrote no typed D0")
    bits = ctx.regs["D0"].bits & ((1 << t.width) - 1)
    return (t, t.wrap(bits)) if isinstance(t, IntType) else (t, bits)

"""A gfx950 kernel as Triton emitted it: the AMDGCN text (`CompiledKernel.asm["amdgcn"]`) read
into instructions with parsed operands and modifiers, branch labels, the kernel descriptor
(.amdhsa_* directives) and the code object metadata (argument offsets and sizes).

The text is LLVM's own printing of the instructions that the code object holds, so nothing
is re-assembled: every mnemonic, operand and modifier the text carries is parsed here into
a fixed form, and anything not in that form raises ListingError naming the line."""
from __future__ import annotations

import dataclasses
import re

import yaml

# Hardware SGPR numbers of the named scalar registers (gfx9 encoding).
SPECIAL_SGPRS = {
    "vcc": (106, 2), "vcc_lo": (106, 1), "vcc_hi": (107, 1),
    "exec": (126, 2), "exec_lo": (126, 1), "exec_hi": (127, 1),
    "m0": (124, 1), "flat_scratch": (102, 2), "xnack_mask": (104, 2),
}
VCC, M0, EXEC = 106, 124, 126
NUM_SGPRS = 128
AGPR_BASE = 256  # a wave's register file here: v0..v255 then a0..a255

INLINE_FLOATS = {0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 0.15915494}


class ListingError(ValueError):
    """The text holds something this reader does not know: never skipped or guessed."""


@dataclasses.dataclass(frozen=True)
class Reg:
    """A register range: file "s" (SGPR numbers as the hardware encodes them, vcc and exec
    included), "v" (VGPR) or "a" (AGPR, stored after the VGPRs at AGPR_BASE)."""
    file: str
    index: int
    count: int

    @property
    def row(self) -> int:
        """Its first row in a wave's vector register file (v and a only)."""
        return self.index + (AGPR_BASE if self.file == "a" else 0)


@dataclasses.dataclass(frozen=True)
class Const:
    """An inline constant or a literal: `value` an int (bits or a small integer) or a float
    (an inline float constant, whose bits depend on the operand's width)."""
    value: int | float
    literal: bool


@dataclasses.dataclass(frozen=True)
class Label:
    name: str


@dataclasses.dataclass(frozen=True)
class Operand:
    """One source or destination, with the float input modifiers -x and |x|."""
    value: Reg | Const | Label | str   # str: `off`, a waitcnt or hwreg expression
    neg: bool = False
    abs: bool = False
    sext: bool = False                 # SDWA: the selected field sign-extended


@dataclasses.dataclass(frozen=True)
class Instruction:
    mnemonic: str           # as printed, encoding suffix included ("v_add_f32_e32")
    operands: tuple         # Operand, in printed order
    modifiers: dict         # name -> value (True for flags)
    text: str               # the instruction as printed
    line: int               # 1-based line in the listing
    source: str             # "submission.py:1402" from the latest .loc, or ""


@dataclasses.dataclass
class Kernel:
    name: str
    instructions: list      # Instruction, in program order
    labels: dict            # label -> index of the instruction after it
    descriptor: dict        # .amdhsa_* directive -> int
    metadata: dict          # the amdhsa.kernels entry of the code object metadata
    text: str

    @property
    def arguments(self) -> list:
        """The kernel arguments in order: dicts with .offset, .size, .value_kind."""
        return self.metadata[".args"]


_WAITCNT = re.compile(r"^(vmcnt|expcnt|lgkmcnt)\((\d+)\)$")
_REG = re.compile(r"^([sva])(\d+)$")
_RANGE = re.compile(r"^([sva])\[(\d+):(\d+)\]$")
_INT = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_FLOAT = re.compile(r"^-?\d+\.\d+(e[-+]?\d+)?$")
_LIST = re.compile(r"^\[([\d,]+)\]$")

# Modifiers by how their value reads: flags, integers, lists of bits, names.
_FLAG_MODIFIERS = {"offen", "idxen", "lds", "sc0", "sc1", "nt", "clamp"}
_INT_MODIFIERS = {"offset", "offset0", "offset1", "cbsz", "abid", "blgp", "row_shr", "row_shl", "row_ror",
                  "row_bcast", "row_mask", "bank_mask", "bound_ctrl", "bitop3", "mul", "div", "wave_shr",
                  "wave_shl"}
_LIST_MODIFIERS = {"op_sel", "op_sel_hi", "neg_lo", "neg_hi", "quad_perm"}
_NAME_MODIFIERS = {"dst_sel", "dst_unused", "src0_sel", "src1_sel"}


def _split_fields(text: str) -> list[str]:
    """Comma-separated fields at the top level (not inside (), [] or ||)."""
    fields, depth, current = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            fields.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    fields.append("".join(current).strip())
    return [f for f in fields if f]


def _parse_int(token: str) -> int:
    negative = token.startswith("-")
    body = token[1:] if negative else token
    value = int(body, 16) if body.startswith(("0x", "0X")) else int(body)
    return -value if negative else value


def parse_operand(token: str) -> Operand:
    if token.startswith("sext(") and token.endswith(")"):
        inner = parse_operand(token[5:-1])
        return Operand(inner.value, inner.neg, inner.abs, sext=True)
    neg = abs_ = False
    if token.startswith("-") and not _INT.match(token) and not _FLOAT.match(token):
        neg, token = True, token[1:]
    if token.startswith("|") and token.endswith("|"):
        abs_, token = True, token[1:-1]
    if token in SPECIAL_SGPRS:
        index, count = SPECIAL_SGPRS[token]
        return Operand(Reg("s", index, count), neg, abs_)
    m = _REG.match(token)
    if m:
        return Operand(Reg(m.group(1), int(m.group(2)), 1), neg, abs_)
    m = _RANGE.match(token)
    if m:
        lo, hi = int(m.group(2)), int(m.group(3))
        if hi < lo:
            raise ListingError(f"register range {token}")
        return Operand(Reg(m.group(1), lo, hi - lo + 1), neg, abs_)
    if _INT.match(token):
        value = _parse_int(token)
        return Operand(Const(value, literal=not -16 <= value <= 64), neg, abs_)
    if _FLOAT.match(token):
        value = float(token)
        if value not in INLINE_FLOATS:
            raise ListingError(f"float constant {token} is not an inline constant")
        return Operand(Const(value, literal=False), neg, abs_)
    if token.startswith(".L"):
        return Operand(Label(token), neg, abs_)
    if token == "off" or token.startswith("hwreg(") or _WAITCNT.match(token):
        return Operand(token, neg, abs_)
    raise ListingError(f"operand {token!r}")


def _parse_modifier(token: str, modifiers: dict) -> bool:
    """Adds a `name` or `name:value` modifier; False if `token` is not one."""
    name, _, value = token.partition(":")
    if not value:
        if name in _FLAG_MODIFIERS:
            modifiers[name] = True
            return True
        return False
    if name in _INT_MODIFIERS:
        if name == "offset" and value.startswith("swizzle("):
            modifiers["swizzle"] = value
            return True
        modifiers[name] = _parse_int(value)
    elif name in _LIST_MODIFIERS:
        m = _LIST.match(value)
        if not m:
            raise ListingError(f"modifier {token!r}")
        modifiers[name] = tuple(int(x) for x in m.group(1).split(","))
    elif name in _NAME_MODIFIERS:
        modifiers[name] = value
    else:
        return False
    return True


def parse_instruction(text: str, line: int = 0, source: str = "") -> Instruction:
    """One instruction as LLVM prints it: `mnemonic op, op, op modifier modifier:value`."""
    mnemonic, _, rest = text.strip().partition(" ")
    operands, modifiers = [], {}
    fields = _split_fields(rest)
    if mnemonic == "s_waitcnt":  # `s_waitcnt vmcnt(0) lgkmcnt(0)`: counters, no commas
        fields = rest.split()
    for i, field in enumerate(fields):
        tokens = field.split() if not field.startswith("hwreg(") else [field]
        if i < len(fields) - 1 and len(tokens) > 1:
            raise ListingError(f"line {line}: field {field!r} of {text!r}")
        head, *tail = tokens
        if not tail and _parse_modifier(head, modifiers):
            continue
        operands.append(parse_operand(head))
        for token in tail:
            if not _parse_modifier(token, modifiers):
                raise ListingError(f"line {line}: unknown modifier {token!r} in {text.strip()!r}")
    return Instruction(mnemonic, tuple(operands), modifiers, text.strip(), line, source)


def _descriptor(lines: list[str]) -> dict:
    out, inside = {}, False
    for line in lines:
        t = line.strip()
        if t.startswith(".amdhsa_kernel "):
            inside = True
        elif t.startswith(".end_amdhsa_kernel"):
            inside = False
        elif inside and t.startswith(".amdhsa_"):
            key, value = t.split(None, 1)
            out[key] = int(value, 0)
    return out


def _metadata(text: str) -> dict:
    m = re.search(r"\.amdgpu_metadata\n(.*?)\n\s*\.end_amdgpu_metadata", text, re.S)
    if not m:
        raise ListingError("no .amdgpu_metadata block")
    doc = yaml.safe_load(m.group(1))
    kernels = doc["amdhsa.kernels"]
    if len(kernels) != 1:
        raise ListingError(f"{len(kernels)} kernels in one listing")
    return kernels[0]


def read_listing(text: str) -> Kernel:
    """The listing's one kernel: its instructions from the entry label to .Lfunc_end0."""
    lines = text.split("\n")
    metadata = _metadata(text)
    name = metadata[".name"]
    files, source = {}, ""
    instructions, labels = [], {}
    inside = False
    for number, raw in enumerate(lines, 1):
        code = raw.split(";", 1)[0].strip()
        if not code:
            continue
        if code.startswith(".file"):
            m = re.match(r'\.file\s+(\d+)\s+"[^"]*"\s+"([^"]*)"', code)
            if m:
                files[int(m.group(1))] = m.group(2).rsplit("/", 1)[-1]
            continue
        if code == f"{name}:":
            inside = True
            continue
        if not inside:
            continue
        if code.startswith(".Lfunc_end"):
            break
        if code.startswith(".loc"):
            parts = code.split()
            source = f"{files.get(int(parts[1]), '?')}:{parts[2]}" if parts[2] != "0" else ""
            continue
        if code.endswith(":"):
            labels[code[:-1]] = len(instructions)
            continue
        if code.startswith("."):
            continue  # .p2align, .cfi_*, other assembler directives
        instructions.append(parse_instruction(code, number, source))
    if not instructions:
        raise ListingError(f"no instructions found for kernel {name}")
    for ins in instructions:
        for op in ins.operands:
            if isinstance(op.value, Label) and op.value.name not in labels:
                raise ListingError(f"line {ins.line}: branch to unknown label {op.value.name}")
    return Kernel(name, instructions, labels, _descriptor(lines), metadata, text)

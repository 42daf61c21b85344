"""Every line of inline assembly in submission.py, tied on a CPU to what gfx950 makes of it.

No MI355X is here, the interpreter runs the bit-operation decode in place of the convert
instruction, and the H200 refuses it: a wrong byte select in the inline asm would pass
every kernel test and show only on the leaderboard's GPU (where the verifier would reject
the MXFP4 forms that use it). What ties the lines down, without the hardware:

1. The encoding. Triton's bundled LLVM (triton._C.libtriton.llvm, the backend that turns
   every Triton kernel into gfx950 code) translates the instruction's intrinsic,
   llvm.amdgcn.cvt.scalef32.pk.bf16.fp4(src, scale, byte), for each byte index 0..3; the
   operand order and op_sel it prints for byte j must be those of the template line that
   writes result j, since the decode reads result j as byte j of the word
   (submission._e2m1_words_to_pairs). Every inline-asm call in submission.py (tl's,
   Gluon's, any callee named like inline asm) is read from its syntax tree, so a new block,
   in a Triton or a Gluon kernel, is checked as it lands; an instruction this file cannot
   tie to LLVM fails the test. The Hopper forms' PTX (functions named _hopper_*, sm_90
   alone) is not AMDGPU assembly: ptxas reads it when the sm_90 compile test builds them.
   The mapping of byte index to op_sel is not fixed across LLVM versions: LLVM's
   llvm/llvm-project#151286 (July 2025) changed it for gfx950's scaled converts to byte j =
   OPSEL[1:0] = j, and older Triton upcasts swapped byte indices 1 and 2 to match the
   earlier encoding. Hence the two checks below on what Triton itself emits.
2. The result's element order. LLVM stores element 0 of the intrinsic's <2 x bfloat> from
   the low 16 bits of the result register (test_llvm_keeps_element_0_in_the_low_half), and
   Triton's own hardware upcast on gfx950 takes element 0 of byte j's pair as element 2j,
   the byte's low nibble (Triton 3.6, third_party/amd/lib/TritonAMDGPUToLLVM/Utility.h,
   upcast8xMxfp4_HW, called from UpcastMXFPToLLVM.cpp for tl.dot_scaled's upcast), so the
   low half of result j is the even column, as the decode assumes.
3. The scale operand. Triton's upcast passes the e8m0 byte s as the fp32 bits s << 23
   (2^(s-127)); the argument the template reads as the scale must be built with << 23:
   in the function of the call, or, where it is that function's parameter, at every call
   of the function, either there or in every store into the shared-memory table the
   argument is loaded from (a table of scales written shifted, read by the convert).
The last two are checked on Triton's own compile (test_triton_upcast_...: a tl.dot_scaled
of bf16 by e2m1, compiled for gfx950), which also calls byte j for result j in plain
order with the same operand forms as ours.

The in-kernel combine's per-wave fences (submission._wave_fence: Triton 3.6 has no fence
operation) are blocks of buffer_wbl2 / buffer_inv / s_waitcnt with no operand: each must be,
line for line, what Triton's LLVM emits for gfx950 for an LLVM fence at agent scope
(release or acquire) with a global and an LDS access in flight before it.
"""
import ast
import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import pinned_triton_codegen
from tools.mutants import mutated_source

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = ROOT / "submission.py"
UPCAST_SCRIPT = ROOT / "tests" / "triton_mxfp4_upcast.py"

CONVERT = "v_cvt_scalef32_pk_bf16_fp4"
INTRINSIC = "llvm.amdgcn.cvt.scalef32.pk.bf16.fp4"
INLINE_ASM_CALL = "inline_asm_elementwise"
# Immediates that mark which register holds which intrinsic operand in LLVM's output.
SRC_MARK, SCALE_MARK = "0x5ec0de", "0x5ca1e"


# ------------------------------------------------------------------------------------
# LLVM's own encoding of the intrinsic on gfx950
# ------------------------------------------------------------------------------------
def translate_for_gfx950(ir: str) -> str:
    from triton._C.libtriton import llvm
    llvm.init_targets()
    args = (ir, "amdgcn-amd-amdhsa", "gfx950", "", [], False, False)  # enable_fp_fusion, is_object
    try:
        return llvm.translate_to_asm(*args)
    except TypeError:  # Triton 3.8 on: a canonicalize_gep flag follows (False, as its AMD backend passes)
        return llvm.translate_to_asm(*args, False)


def _intrinsic_ir(byte: int, use: str) -> str:
    # src and scale come out of marked moves, so their registers can be told apart.
    return f"""
declare <2 x bfloat> @{INTRINSIC}(i32, float, i32 immarg)
define void @convert(ptr addrspace(1) %out) {{
  %src = call i32 asm sideeffect "v_mov_b32 $0, {SRC_MARK}", "=v"()
  %scale = call float asm sideeffect "v_mov_b32 $0, {SCALE_MARK}", "=v"()
  %pair = call <2 x bfloat> @{INTRINSIC}(i32 %src, float %scale, i32 {byte})
  {use}
  ret void
}}"""


_MODIFIER = re.compile(r"\s+(\w+):(\[[^\]]*\]|\S+)")


@dataclasses.dataclass(frozen=True)
class Instruction:
    mnemonic: str
    operands: tuple   # as written, modifiers removed
    modifiers: tuple  # sorted (name, value) pairs, spaces removed, op_sel:[0,0,0] dropped


def parse_instruction(text: str) -> Instruction:
    mnemonic, _, rest = text.strip().partition(" ")
    rest = " " + rest.strip()
    modifiers = {name: value.replace(" ", "") for name, value in _MODIFIER.findall(rest)}
    if modifiers.get("op_sel", "").strip("[]").replace("0", "").replace(",", "") == "":
        modifiers.pop("op_sel", None)  # all zeros: the default encoding
    operands = tuple(part.strip() for part in _MODIFIER.sub("", rest).split(",") if part.strip())
    return Instruction(mnemonic, operands, tuple(sorted(modifiers.items())))


def _instructions(asm: str) -> list[Instruction]:
    return [parse_instruction(line.split(";")[0]) for line in asm.splitlines()
            if line.split(";")[0].strip() and not line.strip().startswith((".", ";"))
            and not line.split(";")[0].strip().endswith(":")]


def _marked_register(instructions, mark: str) -> str:
    found = [i.operands[0] for i in instructions if i.mnemonic == "v_mov_b32" and i.operands[1:] == (mark,)]
    assert len(found) == 1, f"LLVM's output lost the marker {mark}"
    return found[0]


@functools.lru_cache(maxsize=None)
def llvm_convert_forms() -> dict:
    """byte index -> (operand roles in order, modifiers) of CONVERT as LLVM emits the
    intrinsic for gfx950, e.g. 1 -> (("result", "src", "scale"), (("op_sel", "[1,0,0]"),))."""
    forms = {}
    for byte in range(4):
        instructions = _instructions(translate_for_gfx950(
            _intrinsic_ir(byte, "store <2 x bfloat> %pair, ptr addrspace(1) %out")))
        converts = [i for i in instructions if i.mnemonic == CONVERT]
        assert len(converts) == 1, f"byte {byte}: expected one {CONVERT}, got {converts}"
        roles = {_marked_register(instructions, SRC_MARK): "src", _marked_register(instructions, SCALE_MARK): "scale"}
        operands = converts[0].operands
        forms[byte] = (("result",) + tuple(roles.get(op, f"unknown {op}") for op in operands[1:]),
                       converts[0].modifiers)
    return forms


def test_llvm_gives_each_byte_its_own_encoding():
    forms = llvm_convert_forms()
    assert all(roles == ("result", "src", "scale") for roles, _ in forms.values()), forms
    assert len({modifiers for _, modifiers in forms.values()}) == 4, forms


def test_llvm_keeps_element_0_in_the_low_half():
    # Element 0 of the pair is stored from the result register's low 16 bits, element 1
    # from its high 16 bits: the uint32 the inline asm returns holds element 0 low.
    stores = {}
    for element in (0, 1):
        use = (f"%value = extractelement <2 x bfloat> %pair, i32 {element}\n"
               "  store bfloat %value, ptr addrspace(1) %out")
        instructions = _instructions(translate_for_gfx950(_intrinsic_ir(0, use)))
        result = next(i.operands[0] for i in instructions if i.mnemonic == CONVERT)
        stores[element] = [i.mnemonic for i in instructions
                           if i.mnemonic.startswith("global_store") and result in i.operands]
    assert stores == {0: ["global_store_short"], 1: ["global_store_short_d16_hi"]}, stores


# ------------------------------------------------------------------------------------
# The inline asm of a source file, read from its syntax tree
# ------------------------------------------------------------------------------------
@dataclasses.dataclass
class InlineAsm:
    line: int               # the call's line in the source
    function: ast.AST       # the function the call is in (None at module level)
    arguments: dict         # parameter name -> expression node
    tree: ast.AST = None    # the whole source's syntax tree


_PARAMETERS = ("asm", "constraints", "args", "dtype", "is_pure", "pack")


def _callee_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def inline_asm_calls(source: str) -> tuple[list[InlineAsm], list[str]]:
    """Every call of an inline-asm function in `source`, and a problem for each call whose
    name says inline asm that this file does not know how to read."""
    tree = ast.parse(source)
    calls, problems = [], []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee_name(node)
        if name == INLINE_ASM_CALL:
            arguments = dict(zip(_PARAMETERS, node.args))
            arguments.update({k.arg: k.value for k in node.keywords})
            calls.append(InlineAsm(node.lineno, _innermost_function(node, tree), arguments, tree))
        elif "asm" in name.lower():
            problems.append(f"line {node.lineno}: a call of {name!r} looks like inline asm, which this test "
                            f"cannot read (only {INLINE_ASM_CALL})")
    return calls, problems


def _innermost_function(target: ast.AST, tree: ast.AST):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(n is target for n in ast.walk(node)):
            if best is None or any(n is node for n in ast.walk(best)):
                best = node
    return best


def _module_constant(tree: ast.AST, name: str):
    """The literal a module-level `name = <literal>` or `name = tl.constexpr(<literal>)`
    assigns (the asm text both kernel languages share), or None."""
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and len(value.args) == 1 and ast.unparse(value.func).endswith("constexpr"):
                value = value.args[0]
            try:
                return ast.literal_eval(value)
            except ValueError:
                return None
    return None


def _literal(call: InlineAsm, name: str):
    node = call.arguments.get(name)
    if isinstance(node, ast.Name):
        return _module_constant(call.tree, node.id)
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _definitions(function, expression: ast.AST) -> list[ast.AST]:
    """`expression` and, transitively, every value assigned in `function` to a name it uses."""
    assigned = {}
    for node in ast.walk(function) if function is not None else ():
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    seen, pending, names_done = [], [expression], set()
    while pending:
        node = pending.pop()
        seen.append(node)
        for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - names_done:
            names_done.add(name)
            pending.extend(assigned.get(name, []))
    return seen


def _shifts_by_23(nodes) -> bool:
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.LShift) and isinstance(n.right, ast.Constant)
               and n.right.value == 23 for node in nodes for n in ast.walk(node))


def _receiver_root(node: ast.AST) -> str | None:
    """The name an attribute/call chain starts from: `x` of `x.permute(...).slice(...).load`."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _loaded_tables(nodes) -> set[str]:
    """The names of the shared-memory tables read by the `.load(...)` calls among `nodes`."""
    return {root for node in nodes for n in ast.walk(node) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "load" and (root := _receiver_root(n.func.value))}


def _table_stores(tree: ast.AST, table: str) -> list[bool]:
    """For every store into `table` in the source (`table....store(x)`): whether its value
    is built with << 23 in its function."""
    return [_shifts_by_23(_definitions(function, n.args[0])) for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef) for n in ast.walk(function)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "store"
            and _receiver_root(n.func.value) == table and n.args]


def _tables_written_shifted(tree: ast.AST, tables: set[str]) -> bool:
    """Whether some of `tables` are written in the source and every store into those is built
    with << 23 (tables no store writes, views of buffers written under other names, such as
    the code words beside the scales, do not count)."""
    stores = [shifted for table in tables for shifted in _table_stores(tree, table)]
    return bool(stores) and all(stores)


def _scale_parameter_built_by_23(call: InlineAsm, scale_arg: ast.AST) -> tuple[bool, str]:
    """Where the scale operand is a parameter of the call's function: (whether every call of
    that function passes a value built with << 23, in the calling function or in every store
    of the shared-memory table it is loaded from; the calls that do not)."""
    function = call.function
    if function is None or not isinstance(scale_arg, ast.Name):
        return False, "not a parameter"
    names = [a.arg for a in function.args.args]
    if scale_arg.id not in names:
        return False, "not a parameter"
    position = names.index(scale_arg.id)
    callers = [(caller, n) for caller in ast.walk(call.tree) if isinstance(caller, ast.FunctionDef)
               for n in ast.walk(caller) if isinstance(n, ast.Call) and _callee_name(n) == function.name]
    unbuilt = []
    for caller, site in callers:
        argument = next((k.value for k in site.keywords if k.arg == scale_arg.id), None)
        if argument is None and position < len(site.args):
            argument = site.args[position]
        definitions = _definitions(caller, argument) if argument is not None else []
        tables = _loaded_tables(definitions)
        if not (_shifts_by_23(definitions) or _tables_written_shifted(call.tree, tables)):
            unbuilt.append(f"line {site.lineno}")
    return bool(callers) and not unbuilt, ", ".join(unbuilt) or "no calls"


def convert_block_problems(call: InlineAsm, lines: list[Instruction], outputs: list[str]) -> list[str]:
    """The CONVERT lines of one inline-asm call against LLVM's encoding (module docstring)."""
    where = f"line {call.line}"
    problems = []
    forms = llvm_convert_forms()
    byte_of_modifiers = {modifiers: byte for byte, (_, modifiers) in forms.items()}
    roles = forms[0][0]
    n_out = len(outputs)
    src_inputs, scale_inputs, written = set(), set(), []
    for number, line in enumerate(lines):
        if line.mnemonic != CONVERT:
            continue
        if len(line.operands) != len(roles) or not all(re.fullmatch(r"\$\d+", op) for op in line.operands):
            problems.append(f"{where}: {CONVERT} line {number} operands {line.operands}: expected "
                            f"{len(roles)} operands $k ({roles})")
            continue
        by_role = dict(zip(roles, (int(op[1:]) for op in line.operands)))
        if by_role["result"] >= n_out or by_role["src"] < n_out or by_role["scale"] < n_out:
            problems.append(f"{where}: {CONVERT} line {number}: ${by_role['result']} must be an output, "
                            f"${by_role['src']} and ${by_role['scale']} inputs ({n_out} outputs)")
            continue
        src_inputs.add(by_role["src"] - n_out)
        scale_inputs.add(by_role["scale"] - n_out)
        byte = byte_of_modifiers.get(line.modifiers)
        if byte is None:
            problems.append(f"{where}: {CONVERT} line {number} modifiers {dict(line.modifiers)} are no byte "
                            f"select LLVM emits for gfx950 ({ {b: dict(m) for b, (_, m) in forms.items()} })")
        elif byte != by_role["result"]:
            problems.append(f"{where}: {CONVERT} line {number} writes result ${by_role['result']} from byte {byte} "
                            f"(modifiers {dict(line.modifiers)}; LLVM: byte {by_role['result']} is "
                            f"{dict(forms[by_role['result']][1])}): the decode reads result j as byte j")
        written.append(by_role["result"])
    if sorted(written) != list(range(n_out)):
        problems.append(f"{where}: the {CONVERT} lines write results {sorted(written)}, expected each of "
                        f"0..{n_out - 1} once")
    if len(src_inputs) != 1 or len(scale_inputs) != 1 or src_inputs == scale_inputs:
        problems.append(f"{where}: every {CONVERT} line must read the same word input and the same, "
                        f"other, scale input (got words {sorted(src_inputs)}, scales {sorted(scale_inputs)})")
        return problems
    args = call.arguments.get("args")
    if not isinstance(args, (ast.List, ast.Tuple)):
        return problems + [f"{where}: args must be a literal list to tell the word from the scale"]
    src_arg, scale_arg = args.elts[src_inputs.pop()], args.elts[scale_inputs.pop()]
    if not _shifts_by_23(_definitions(call.function, scale_arg)):
        built, calls = _scale_parameter_built_by_23(call, scale_arg)
        if not built:
            problems.append(f"{where}: the scale operand ({ast.unparse(scale_arg)}) is not built as e8m0 << 23, "
                            f"the fp32 2^(s-127) Triton's upcast passes (as a parameter: {calls})")
    if _shifts_by_23(_definitions(call.function, src_arg)):
        problems.append(f"{where}: the word operand ({ast.unparse(src_arg)}) is built as a shifted scale: "
                        "word and scale swapped?")
    if _literal(call, "pack") != 1:
        problems.append(f"{where}: pack must be 1 (one 4-byte word a lane)")
    return problems


# ------------------------------------------------------------------------------------
# Fences: LLVM's own sequence for an agent-scope fence on gfx950
# ------------------------------------------------------------------------------------
FENCE_MNEMONICS = ("buffer_wbl2", "buffer_inv", "s_waitcnt")


def _fence_ir(ordering: str) -> str:
    # A global and an LDS access of every thread in flight before the fence (so that LLVM
    # emits every wait the fence needs), their values used after an acquire.
    before = ("  store i32 %t, ptr addrspace(1) %gp\n  store i32 %t, ptr addrspace(3) %lp\n" if ordering == "release"
              else "  %a = load i32, ptr addrspace(1) %gp\n  %b = load i32, ptr addrspace(3) %lp\n")
    after = "" if ordering == "release" else "  %c = add i32 %a, %b\n  store i32 %c, ptr addrspace(1) %gp\n"
    return f"""declare i32 @llvm.amdgcn.workitem.id.x()
define amdgpu_kernel void @fence(ptr addrspace(1) %p, ptr addrspace(3) %l) {{
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %gp = getelementptr i32, ptr addrspace(1) %p, i32 %t
  %lp = getelementptr i32, ptr addrspace(3) %l, i32 %t
{before}  fence syncscope("agent") {ordering}
{after}  ret void
}}"""


@functools.lru_cache(maxsize=None)
def llvm_fences() -> dict:
    """ordering -> the instructions LLVM emits for gfx950 for `fence syncscope("agent")
    ordering` (the run of fence instructions that holds its cache operation)."""
    fences = {}
    for ordering in ("release", "acquire"):
        instructions = _instructions(translate_for_gfx950(_fence_ir(ordering)))
        cache = next(i for i, ins in enumerate(instructions) if ins.mnemonic.startswith("buffer_"))
        first = cache
        while first > 0 and instructions[first - 1].mnemonic in FENCE_MNEMONICS:
            first -= 1
        last = cache
        while last + 1 < len(instructions) and instructions[last + 1].mnemonic in FENCE_MNEMONICS:
            last += 1
        fences[ordering] = tuple(instructions[first:last + 1])
    return fences


def test_llvm_fences_are_the_gfx942_memory_model_sequences():
    # AMDGPUUsage, memory model GFX942 (which covers gfx950): release at agent scope is
    # buffer_wbl2 sc1 then waits; acquire is the waits then buffer_inv sc1.
    fences = llvm_fences()
    assert [i.mnemonic for i in fences["release"]] == ["buffer_wbl2", "s_waitcnt"], fences
    assert [i.mnemonic for i in fences["acquire"]] == ["s_waitcnt", "buffer_inv"], fences
    assert all(("sc1", ) == i.operands for i in fences["release"] + fences["acquire"] if i.mnemonic != "s_waitcnt")


def fence_block_problems(call: InlineAsm, lines: list[Instruction], outputs: list[str]) -> list[str]:
    """A block of fence instructions: LLVM's agent-scope release or acquire, line for line."""
    fences = llvm_fences()
    if tuple(lines) in fences.values():
        return []
    return [f"line {call.line}: the fence block {[f'{i.mnemonic} {i.operands}' for i in lines]} is not what LLVM "
            f"emits for an agent-scope fence on gfx950 "
            f"({ {k: [f'{i.mnemonic} {i.operands}' for i in v] for k, v in fences.items()} })"]


# Instructions this file can tie to LLVM: mnemonic -> the check of a block's lines.
TIES = {CONVERT: convert_block_problems, **{mnemonic: fence_block_problems for mnemonic in FENCE_MNEMONICS}}


# The Hopper forms' functions (submission.py section 2.4): their inline asm is NVIDIA PTX, for
# sm_90 alone, which ptxas reads when tests/test_sm90_compile.py compiles them.
PTX_FUNCTIONS = re.compile(r"_hopper_")


def inline_asm_problems(source: str) -> tuple[list[str], int]:
    """(Every problem found in the AMDGPU inline asm of `source`, the number of its lines read)."""
    calls, problems = inline_asm_calls(source)
    lines_read = 0
    for call in calls:
        if call.function is not None and PTX_FUNCTIONS.match(call.function.name):
            continue
        where = f"line {call.line}"
        template, constraints = _literal(call, "asm"), _literal(call, "constraints")
        if not isinstance(template, str) or not isinstance(constraints, str):
            problems.append(f"{where}: the asm template and constraints must be string literals (or module constants of one) to be checked")
            continue
        if ";" in template:
            problems.append(f"{where}: ';' in the template (AMDGPU assembly reads the rest of the line as a comment)")
        lines = [parse_instruction(text) for text in template.split("\n") if text.strip()]
        lines_read += len(lines)
        parts = [part.strip() for part in constraints.split(",")]
        outputs = [part for part in parts if part.startswith("=")]
        if parts[:len(outputs)] != outputs:
            problems.append(f"{where}: constraints {constraints!r}: outputs must come first")
        dtype = call.arguments.get("dtype")
        n_dtypes = len(dtype.elts) if isinstance(dtype, (ast.Tuple, ast.List)) else 1
        if n_dtypes != len(outputs):
            problems.append(f"{where}: {n_dtypes} dtypes for {len(outputs)} outputs")
        problems += _early_clobber_problems(where, lines, outputs)
        unknown = sorted({line.mnemonic for line in lines} - set(TIES))
        if unknown:
            problems.append(f"{where}: no LLVM tie for {unknown}: teach tests/test_gfx950_inline_asm.py what "
                            "LLVM emits for it before using it")
        for check in dict.fromkeys(TIES[mnemonic] for mnemonic in sorted({line.mnemonic for line in lines} & set(TIES))):
            problems += check(call, lines, outputs)
    return problems, lines_read


def _early_clobber_problems(where: str, lines: list[Instruction], outputs: list[str]) -> list[str]:
    # An output written before a later line reads an input must not share its register.
    problems = []
    n_out = len(outputs)
    for number, line in enumerate(lines):
        written = [int(op[1:]) for op in line.operands[:1] if re.fullmatch(r"\$\d+", op) and int(op[1:]) < n_out]
        later_reads = any(re.fullmatch(r"\$\d+", op) and int(op[1:]) >= n_out
                          for after in lines[number + 1:] for op in after.operands[1:])
        for k in written:
            if later_reads and "&" not in outputs[k]:
                problems.append(f"{where}: output ${k} is written before later lines read the inputs: its "
                                f"constraint {outputs[k]!r} needs '&' (early clobber)")
    return problems


def _submission_source() -> str:
    return SUBMISSION.read_text()


def test_every_inline_asm_line_of_the_submission_is_tied_to_llvm():
    problems, lines_read = inline_asm_problems(_submission_source())
    assert not problems, "\n".join(problems)
    # The file has the gfx950 convert block today; a test that found nothing would prove nothing.
    assert lines_read >= 4 and CONVERT in _submission_source()


# Deliberate slips of the convert's inline asm (tools/mutants.py), each applied to a copy of
# submission.py's source: mutant -> what the problem found must say.
MUTANTS = {
    "convert_op_sel_1_2_swapped": "writes result $1 from byte 2",
    "convert_op_sel_0_3_swapped": "writes result $0 from byte 3",
    "convert_operands_swapped": "not built as e8m0 << 23",
    "convert_arguments_swapped": "not built as e8m0 << 23",
    "convert_scale_not_in_the_exponent": "not built as e8m0 << 23",
    "convert_outputs_not_early_clobber": "early clobber",
    "convert_line_without_llvm_tie": "no LLVM tie for ['v_lshrrev_b32']",
    "gluon_convert_wrong_byte": "writes result $0 from byte 1",
    "inline_asm_under_another_name": "a call of 'inline_asm' looks like inline asm",
    # the Gluon convert takes its scale as a parameter, built shifted by its callers
    "gluon_caller_scale_unshifted": "not built as e8m0 << 23",
    "gluon_scale_table_unshifted": "not built as e8m0 << 23",
    "wave_fence_without_its_store_wait": "is not what LLVM emits for an agent-scope fence",
}


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_deliberate_slip_in_the_inline_asm_is_caught(name):
    problems, _ = inline_asm_problems(mutated_source(name, _submission_source()))
    assert any(MUTANTS[name] in problem for problem in problems), f"{name}: not caught as expected; found {problems}"


# ------------------------------------------------------------------------------------
# Triton's own gfx950 upcast (tl.dot_scaled, bf16 x e2m1), compiled here
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def triton_upcast(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton_cache"))
    proc = subprocess.run([sys.executable, str(UPCAST_SCRIPT)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def _intrinsic_calls(llir: str) -> list[tuple[str, str, str, int]]:
    """(result, word, scale, byte) of every call of the intrinsic, in order."""
    pattern = rf"(%\w+) = (?:tail )?call <2 x bfloat> @{re.escape(INTRINSIC)}\(i32 (%\w+), float (%\w+), i32 (\d)\)"
    return [(r, w, s, int(b)) for r, w, s, b in re.findall(pattern, llir)]


@pinned_triton_codegen("Triton's own upcast")
def test_triton_upcast_converts_byte_j_into_result_j_in_order(triton_upcast):
    calls = _intrinsic_calls(triton_upcast["llir"])
    assert calls and len(calls) % 4 == 0, "Triton's gfx950 upcast no longer calls the intrinsic per byte"
    for first in range(0, len(calls), 4):
        group = calls[first:first + 4]
        assert [byte for *_, byte in group] == [0, 1, 2, 3], group
        assert len({(word, scale) for _, word, scale, _ in group}) == 1, group
        for result, *_ in group:  # each pair taken apart as element 0, then element 1
            extracted = re.findall(rf"= extractelement <2 x bfloat> {re.escape(result)}, i64 (\d)", triton_upcast["llir"])
            assert extracted == ["0", "1"], (result, extracted)


@pinned_triton_codegen("Triton's own upcast")
def test_triton_upcast_passes_the_scale_as_e8m0_shifted_by_23(triton_upcast):
    llir = triton_upcast["llir"]
    for _, _, scale, _ in _intrinsic_calls(llir):
        bits = re.search(rf"{re.escape(scale)} = bitcast i32 (%\w+) to float", llir)
        assert bits, scale
        shifted = re.search(rf"{re.escape(bits.group(1))} = shl [\w ]*i32 (%\w+), 23\b", llir)
        assert shifted, f"{scale} is not a shift by 23"
        assert re.search(rf"{re.escape(shifted.group(1))} = zext i8 %\w+ to i32", llir), "not an e8m0 byte"


@pinned_triton_codegen("Triton's own upcast")
def test_triton_upcast_uses_our_operand_forms_and_differs_only_where_named(triton_upcast):
    converts = [i for i in _instructions(triton_upcast["amdgcn"]) if i.mnemonic == CONVERT]
    assert converts
    llvm_modifiers = {modifiers for _, modifiers in llvm_convert_forms().values()}
    groups = {}
    for line in converts:  # plain VGPRs: result, word, scale; modifiers only the byte's op_sel
        assert len(line.operands) == 3 and all(re.fullmatch(r"v\d+", op) for op in line.operands), line
        assert line.modifiers in llvm_modifiers, line
        groups.setdefault(line.operands[1:], []).append(line.modifiers)
    assert all(sorted(mods) == sorted(llvm_modifiers) for mods in groups.values()), groups
    # Where Triton's upcast differs from ours: it returns NaN for the e8m0 NaN scale byte
    # 0xFF; our convert multiplies by the scale bits 0xFF << 23 = +inf there, as our
    # bit-operation decode, the torch route and the verifier's exact attention do (2^128).
    # The cache's quantizer never writes 0xFF (its exponent is clamped to <= 127, so bytes
    # <= 254), and the output is non-finite either way.
    assert re.search(r"icmp eq i8 %\w+, -1", triton_upcast["llir"]) and "bfloat 0xR7FC0" in triton_upcast["llir"]
    assert "nan" not in _convert_functions_source().lower()


def _convert_functions_source() -> str:
    """The source of every function holding a CONVERT block."""
    source = _submission_source()
    calls, _ = inline_asm_calls(source)
    functions = [call.function for call in calls if CONVERT in (_literal(call, "asm") or "")]
    assert functions and None not in functions, "no convert block inside a function"
    return "\n".join(ast.get_source_segment(source, function) for function in functions)


def print_derivation() -> None:
    """What the checks above derive, for results/2026-12-01-cpu-convert-tie/."""
    print(f"{CONVERT} as Triton's bundled LLVM emits {INTRINSIC} for gfx950 (byte: operand roles, modifiers):")
    for byte, (roles, modifiers) in llvm_convert_forms().items():
        print(f"  byte {byte}: {', '.join(roles)}  {dict(modifiers) or 'no op_sel (= [0,0,0])'}")
    problems, lines_read = inline_asm_problems(_submission_source())
    print(f"submission.py: {lines_read} inline-asm lines read; problems: {problems or 'none'}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    upcast = json.loads(subprocess.run([sys.executable, str(UPCAST_SCRIPT)], env=env, cwd=ROOT, capture_output=True,
                                       text=True, check=True).stdout)
    print("Triton's own upcast (tl.dot_scaled, bf16 x e2m1, gfx950), first intrinsic calls (result, word, scale, byte):")
    for call in _intrinsic_calls(upcast["llir"])[:4]:
        print(f"  {call}")
    print("and their AMDGCN:")
    for line in [line.strip() for line in upcast["amdgcn"].splitlines() if CONVERT in line][:4]:
        print(f"  {line}")


if __name__ == "__main__":
    print_derivation()

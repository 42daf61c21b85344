"""From a listing's instruction to a function over a wave: the registry of every implemented
mnemonic, which the modules of the semantics subpackage fill as they are imported
(`@register("s_add_u32", ...)`). An instruction whose mnemonic, operand form or modifier is
not implemented raises NotImplementedInstruction with its text and line when its kernel is
compiled, before anything runs."""
from __future__ import annotations

from .listing import Reg
from .reports import NotImplementedInstruction
from .state import Compiled, reg_keys

REGISTRY: dict = {}   # mnemonic -> compile(ins, kernel) -> (fn, number of destination operands)
ENCODING_SUFFIXES = ("_e32", "_e64", "_dpp", "_sdwa")


def register(*mnemonics):
    def add(compile_fn):
        for name in mnemonics:
            if name in REGISTRY:
                raise ValueError(f"{name} registered twice")
            REGISTRY[name] = compile_fn
        return compile_fn
    return add


def base_mnemonic(mnemonic: str) -> tuple[str, str]:
    """("v_add_f32", "_e32") from "v_add_f32_e32"; ("", "") suffix when none."""
    for suffix in ENCODING_SUFFIXES:
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)], suffix
    return mnemonic, ""


def check_modifiers(ins, allowed: set):
    unknown = set(ins.modifiers) - allowed
    if unknown:
        raise NotImplementedInstruction(f"line {ins.line}: modifier(s) {sorted(unknown)} of `{ins.text}` "
                                        f"not implemented")


def compile_instruction(ins, kernel) -> Compiled:
    base, suffix = base_mnemonic(ins.mnemonic)
    compile_fn = REGISTRY.get(ins.mnemonic) or REGISTRY.get(base)
    if compile_fn is None:
        raise NotImplementedInstruction(f"line {ins.line}: instruction `{ins.mnemonic}` not implemented "
                                        f"(`{ins.text}`)")
    try:
        fn, n_dst = compile_fn(ins, kernel)
    except NotImplementedInstruction as error:
        raise NotImplementedInstruction(f"line {ins.line}: `{ins.text}`: {error}") from None
    writes, reads = set(), set()
    for i, op in enumerate(ins.operands):
        if isinstance(op.value, Reg):
            (writes if i < n_dst else reads).update(reg_keys(op.value))
    return Compiled(fn, frozenset(reads), frozenset(writes), ins)

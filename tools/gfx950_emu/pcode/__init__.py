"""The pseudocode oracle: AMD's own statement of what each gfx950 instruction computes (the
CDNA4 ISA guide's pseudocode, from tinygrad's wheel), parsed and run per lane, to check the
emulator's semantics against (tests/test_gfx950_emu_pcode_cross.py). The emulator itself
never imports it.

    lang.py         the pseudocode's syntax, parsed into an AST
    interpreter.py  its meaning: the AST compiled into closures over typed values
    values.py       the types (integers of any width, IEEE floats) and their conversions
    floats.py       IEEE arithmetic rounded once, subnormals kept
    helpers.py      the functions and constants the pseudocode calls, each with its source
    oracle.py       an opcode's program found, its operands and modifiers applied, run
    kernel_opcodes.py  the opcodes of the project's kernels, and where AMD's text has none
"""
from .lang import PcodeSyntaxError
from .oracle import (PCODE_ERRORS, READINGS, NoPcode, UnsupportedModifier, encodings, evaluate, execute,
                     input_names, mnemonic, opcodes_with_pcode, pcode_text, program, readings)

__all__ = ["PCODE_ERRORS", "READINGS", "NoPcode", "PcodeSyntaxError", "UnsupportedModifier", "encodings", "evaluate",
           "execute", "input_names", "mnemonic", "opcodes_with_pcode", "pcode_text", "program", "readings"]

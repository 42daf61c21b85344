"""The meaning of the pseudocode: an AST from lang.py compiled once into Python
closures, then run per lane on a Context (the registers, the lane, the register file and
memory a run may touch, the wave's mode).

Names. A name is one of: a register of the instruction (the operands S0, S1, S2, D0, D1,
SCC, VCC, EXEC, M0, PC, SIMM16, OPSEL, the memory operands ADDR, DATA, VDATA, ..., laneId,
and any other name the program reads without assigning: an input); a variable of the
program (a name it assigns that is not a register, a loop variable, a declared name it
assigns; lambdas get their own); a lambda; a named constant (helpers); or a function
(a helper in helpers.py, another instruction such as v_max_i32, or a lambda).

Registers hold bits. A read of a register no input set and nothing wrote is an error; a
write to one starts it at zero, and the bits each write covers are recorded, so a result
says which of its bits the instruction wrote. `D` is D0 (V_BITOP3's text says D).

VGPR[lane][reg] reads and writes the vgpr array a run is given ([64][512] of uint32); a
run given none reads VGPR[laneId][SRC0.u32] as S0 and VGPR[laneId][VDST.u32] as D0 (the
instruction's own operands, what a per-lane caller passes), and any other VGPR access is
an error. MEM[addr] reads and writes bytes of the memory a run is given (a mapping of byte
addresses to byte values), little-endian; writes go to an overlay that the result lists."""
from __future__ import annotations

import operator

from . import floats as fp
from . import helpers
from . import lang as ast
from .values import (F64, I32, I64, U1, U32, U64, FloatType, IntType,
                           PcodeTypeError, bits_of, boolean, cast_type, common_float_type,
                           common_int_type, int_type, promoted, stored_bits, to_float, truth,
                           type_named, view)


class PcodeRuntimeError(RuntimeError):
    """The program cannot run on the inputs given (an input missing, a cross-lane access
    without a register file, a division by zero, ...): the message says which."""


# The instruction's own registers: written names among these are results, never variables.
ARCH_REGISTERS = {
    "S0", "S1", "S2", "D0", "D1", "D", "SCC", "VCC", "EXEC", "M0", "PC", "SIMM16", "SIMM32",
    "OPSEL", "OPSEL_HI", "SRC0", "SRC1", "SRC2", "VDST", "VCCZ", "EXECZ", "laneId", "ADDR",
    "ADDR_BASE", "DATA", "DATA0", "DATA1", "DATA2", "OFFSET", "OFFSET0", "OFFSET1",
    "RETURN_DATA", "VDATA", "SDATA", "VADDR", "SRSRC", "SOFFSET", "SADDR", "SBASE",
    "TRAPSTS", "ROUND_MODE", "HW_REGISTERS", "SGPR", "VGPR", "MEM", "INST", "WAVE_MODE",
    "WAVE_STATUS",
}
# Widths of registers read or written without a type (others: 64 bits).
REGISTER_WIDTHS = {
    "SCC": 1, "VCCZ": 1, "EXECZ": 1, "laneId": 32, "M0": 32, "SIMM16": 16, "SIMM32": 32,
    "OPSEL": 4, "OPSEL_HI": 4, "OFFSET0": 8, "OFFSET1": 8, "OFFSET": 16,
    "SRC0": 32, "SRC1": 32, "SRC2": 32, "VDST": 32, "DATA0": 32,
    "RETURN_DATA": 1024, "VDATA": 1024, "SDATA": 1024, "DATA": 1024, "DATA2": 1024,
    "SRSRC": 128,
}
_BIT_REGISTERS = {"SCC", "VCCZ", "EXECZ"}   # untyped reads of these are u1 (booleans)


class Cell:
    """A location holding bits: a register, a variable, an array element, a VGPR entry, a
    memory access. `type` is a variable's type (None for registers: untyped bits)."""
    __slots__ = ("bits", "type", "width", "name", "declared", "value")

    def __init__(self, bits, width, type=None, name=None, declared=False, value=None):
        self.bits, self.width, self.type, self.name, self.declared = bits, width, type, name, declared
        self.value = value      # a variable's whole value, kept while no partial write changes it


class MemoryCell(Cell):
    __slots__ = ("address",)


class _Break(Exception):
    pass


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class Context:
    """One run: registers (name -> Cell), what was written (name -> bit mask), variables,
    lambdas, the lane, optional register file and memory, the wave's mode and the
    instruction's encoding fields (INST.*) and modifiers.""" 

    def __init__(self, registers, lane, vgpr, memory, wave_mode, inst_fields, modifiers, resolve_instruction):
        self.regs = registers
        registers["laneId"] = Cell(lane, 32, name=None)
        self.written = {}
        self.last_type = {}
        self.locals = {}
        self.lambdas = {}
        self.lane = lane
        self.vgpr = vgpr
        self.vgpr_cells = {}
        self.memory = memory
        self.memory_writes = {}   # byte address -> byte
        self.memory_log = []      # (address, width in bits, bits) per write
        self.wave_mode = wave_mode   # {"IEEE": 0/1, "FP16_OVFL": 0/1}: the MODE bits modelled
        self.inst_fields = inst_fields
        self.modifiers = modifiers
        self.resolve_instruction = resolve_instruction

    # -- registers
    def register(self, name: str, for_write: bool) -> Cell:
        if name == "D":
            name = "D0"
        cell = self.regs.get(name)
        if cell is None:
            if not for_write:
                raise PcodeRuntimeError(f"input {name} not given (the pseudocode reads it)")
            cell = self.regs[name] = Cell(0, REGISTER_WIDTHS.get(name, 64), name=name)
        return cell

    def note_write(self, cell: Cell, offset: int, width: int, t):
        if cell.name is None:
            return
        self.written[cell.name] = self.written.get(cell.name, 0) | (((1 << width) - 1) << offset)
        if offset == 0 and t is not None:
            self.last_type[cell.name] = t

    # -- register file
    def vgpr_cell(self, lane: int, reg: int) -> Cell:
        key = (lane, reg)
        cell = self.vgpr_cells.get(key)
        if cell is None:
            if not 0 <= lane < 64 or not 0 <= reg < 512:
                raise PcodeRuntimeError(f"VGPR[{lane}][{reg}] is outside the register file")
            cell = Cell(int(self.vgpr[lane][reg]) & 0xFFFFFFFF, 32, name=f"VGPR[{lane}][{reg}]")
            self.vgpr_cells[key] = cell
        return cell

    # -- memory
    def read_memory(self, address: int, width: int) -> int:
        if self.memory is None:
            raise PcodeRuntimeError("MEM read with no memory given")
        value = 0
        for i in range(width // 8):
            a = address + i
            byte = self.memory_writes.get(a)
            if byte is None:
                try:
                    byte = self.memory[a]
                except (KeyError, IndexError):
                    raise PcodeRuntimeError(f"MEM[{a:#x}] is not in the memory given") from None
            value |= (int(byte) & 0xFF) << (8 * i)
        return value

    def write_memory(self, address: int, width: int, bits: int):
        for i in range(width // 8):
            self.memory_writes[address + i] = (bits >> (8 * i)) & 0xFF
        self.memory_log.append((address, width, bits))


def _mask(width: int) -> int:
    return (1 << width) - 1


def _read_cell(ctx, cell: Cell):
    """The untyped value of a whole cell."""
    if cell.type is not None:
        t = cell.type
    elif cell.name in _BIT_REGISTERS:
        t = U1
    else:
        t = int_type("b", max(cell.width, 1))
    bits = cell.bits & _mask(t.width)
    return (t, t.wrap(bits)) if isinstance(t, IntType) else (t, bits)


def _store(ctx, cell: Cell, offset: int, width: int, t, value):
    """Write value into width bits of cell at offset, as type t (None: untyped)."""
    if t is None:
        vt = value[0]
        if not isinstance(vt, (IntType, FloatType)):
            raise PcodeTypeError(f"{vt!r} is not a value")
        width = min(vt.width, width) if width else vt.width
        bits = bits_of(value) & _mask(width)
    else:
        bits = stored_bits(value, t) & _mask(width)
    if offset + width > cell.width:
        if cell.name is not None and cell.name.startswith("VGPR"):
            raise PcodeRuntimeError(f"a write to bits {offset + width - 1}:{offset} of a 32-bit VGPR")
        cell.width = offset + width
        if cell.type is not None and isinstance(cell.type, IntType) and cell.type.kind == "b":
            cell.type = int_type("b", cell.width)
    m = _mask(width) << offset
    cell.bits = (cell.bits & ~m) | (bits << offset)
    cell.value = None
    if isinstance(cell, MemoryCell):
        ctx.write_memory(cell.address, cell.width, cell.bits)
    ctx.note_write(cell, offset, width, t)


# ---------------------------------------------------------------- arithmetic

_FLOAT_OPS = {"+": fp.add, "-": fp.sub, "*": fp.mul, "/": fp.div}
_COMPARISONS = {"==", "!=", "<>", "<", "<=", ">", ">="}
_TRUE, _FALSE = (U1, 1), (U1, 0)


def _ring_op(symbol, fn):
    """+ - * & | ^ on integers: the result mod 2**width of the common type is the same
    whether the operands convert first or not, so only the result wraps."""
    def op(a, b):
        ta, x = a
        tb, y = b
        if ta.__class__ is IntType and tb.__class__ is IntType:
            t = common_int_type(ta, tb)
            n = fn(x, y) & t.mask
            return (t, n - t.size if n >= t.half else n)
        return _float_op(symbol, a, b)
    return op


def _comparison(symbol, fn):
    def op(a, b):
        if a[0].__class__ is IntType and b[0].__class__ is IntType:
            return _TRUE if fn(a[1], b[1]) else _FALSE
        return boolean(_compare(symbol, a, b))
    return op


def _shift(symbol):
    def op(a, b):
        ta, x = a
        tb, n = b
        if ta.__class__ is not IntType or tb.__class__ is not IntType:
            raise PcodeTypeError(f"operator {symbol} on {ta!r} and {tb!r}")
        if n < 0:
            raise PcodeRuntimeError(f"shift by a negative count {n}")
        t = promoted(ta)
        x = t.wrap(x)
        return (t, t.wrap(x << n if symbol == "<<" else x >> n))
    return op


def _divide(symbol):
    def op(a, b):
        ta, tb = a[0], b[0]
        if ta.__class__ is not IntType or tb.__class__ is not IntType:
            if symbol == "%":
                raise PcodeTypeError(f"operator % on {ta!r} and {tb!r}")
            return _float_op(symbol, a, b)
        t = common_int_type(ta, tb)
        x, y = t.wrap(a[1]), t.wrap(b[1])
        if y == 0:
            raise PcodeRuntimeError("integer division by zero")
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)   # C: toward zero
        return (t, t.wrap(q if symbol == "/" else x - q * y))
    return op


def _pow(a, b):
    ta, tb = a[0], b[0]
    if ta.__class__ is IntType and tb.__class__ is IntType:
        t = common_int_type(ta, tb)
        if b[1] < 0:
            raise PcodeRuntimeError("an integer to a negative power")
        return (t, t.wrap(a[1] ** b[1]))
    return _power(a, b)


_BINARY = {
    "+": _ring_op("+", operator.add), "-": _ring_op("-", operator.sub),
    "*": _ring_op("*", operator.mul), "&": _ring_op("&", operator.and_),
    "|": _ring_op("|", operator.or_), "^": _ring_op("^", operator.xor),
    "==": _comparison("==", operator.eq), "!=": _comparison("!=", operator.ne),
    "<>": _comparison("<>", operator.ne), "<": _comparison("<", operator.lt),
    "<=": _comparison("<=", operator.le), ">": _comparison(">", operator.gt),
    ">=": _comparison(">=", operator.ge),
    "<<": _shift("<<"), ">>": _shift(">>"), "/": _divide("/"), "%": _divide("%"), "**": _pow,
}


def arith(op: str, a, b):
    return _BINARY[op](a, b)


def _float_op(op, a, b):
    ta, tb = a[0], b[0]
    if ta is tb and ta.__class__ is FloatType and op in _FLOAT_OPS:
        return (ta, _FLOAT_OPS[op](ta.fmt, a[1], b[1]))
    if not isinstance(ta, (IntType, FloatType)) or not isinstance(tb, (IntType, FloatType)):
        raise PcodeTypeError(f"operator {op} on {ta!r} and {tb!r}")
    fn = _FLOAT_OPS.get(op)
    if fn is None:
        raise PcodeTypeError(f"operator {op} on {ta} and {tb}")
    t = common_float_type(ta, tb)
    return (t, fn(t.fmt, to_float(a, t), to_float(b, t)))


def _power(base, exponent):
    """base ** exponent: 2.0 ** n for an integer n is the exact power rounded to base's
    format (`2.0F ** 32`); 2.0 ** x for a float x is exp2 (pow); other bases raise."""
    tb, te = base[0], exponent[0]
    if not isinstance(tb, FloatType) or fp.compare(tb.fmt, base[1], fp.F64, 0x4000000000000000) != 0:
        raise helpers.PcodeUndefined("** with a base other than 2.0")
    if isinstance(te, IntType):
        n = exponent[1]
        if n > (1 << 20):
            return (tb, tb.fmt.inf)
        if n < -(1 << 20):
            return (tb, 0)
        return (tb, fp.round_finite(tb.fmt, 0, 1, n))
    t = common_float_type(tb, te)
    return (t, fp.exp2(t.fmt, to_float(exponent, t)))


def _compare(op, a, b) -> bool:
    ta, tb = a[0], b[0]
    if isinstance(ta, helpers.DenormClass) or isinstance(tb, helpers.DenormClass):
        return _denorm_test(op, a, b)
    if isinstance(ta, IntType) and isinstance(tb, IntType):
        x, y = a[1], b[1]
        order = (x > y) - (x < y)
    else:
        fa, xa = _as_float(a)
        fb, xb = _as_float(b)
        order = fp.compare(fa, xa, fb, xb)
        if order is None:    # unordered: only != and <> hold
            return op in ("!=", "<>")
    return {"==": order == 0, "!=": order != 0, "<>": order != 0, "<": order < 0,
            "<=": order <= 0, ">": order > 0, ">=": order >= 0}[op]


def _as_float(value):
    t, v = value
    if isinstance(t, FloatType):
        return t.fmt, v
    if not isinstance(t, IntType) or abs(v) >= 1 << 53:
        raise PcodeTypeError(f"a {t!r} value compared with a float")
    return fp.F64, fp.from_int(fp.F64, v)


def _denorm_test(op, a, b) -> bool:
    marker, value = (a, b) if isinstance(a[0], helpers.DenormClass) else (b, a)
    t = marker[0].type
    if value[0] is not t:
        raise PcodeTypeError(f"a {value[0]!r} value compared with DENORM.{t.name}")
    kind, _, m, _ = fp.decode(t.fmt, value[1])
    subnormal = kind == fp.FINITE and 0 < m < (1 << t.fmt.mbits)
    if op == "==":
        return subnormal
    if op in ("!=", "<>"):
        return not subnormal
    raise PcodeTypeError(f"DENORM compared with {op}")


def _signed_zero_literal(node):
    """True for -0.0, False for +0.0 written with its sign; None otherwise. Comparing with
    such a literal compares the sign too: V_MAX_F32's text has one branch for (+0.0, -0.0)
    and one for (-0.0, +0.0), which IEEE equality (-0.0 == +0.0) could not tell apart."""
    if isinstance(node, ast.Unary) and node.op in "+-" and isinstance(node.operand, ast.Float):
        if float(node.operand.text) == 0.0:
            return node.op == "-"
    return None


def _is_zero_of_sign(value, negative: bool) -> bool:
    t, v = value
    if t.__class__ is not FloatType:
        raise PcodeTypeError(f"a {t!r} value compared with a signed zero")
    return v & ~t.fmt.sign_bit == 0 and bool(v & t.fmt.sign_bit) == negative


def _unary(op, value):
    t, v = value
    if op == "!":
        return boolean(not truth(value))
    if op == "+":
        return value
    if isinstance(t, FloatType):
        if op == "-":
            return (t, v ^ t.fmt.sign_bit)
        raise PcodeTypeError(f"operator {op} on {t}")
    if not isinstance(t, IntType):
        raise PcodeTypeError(f"operator {op} on {t!r}")
    p = promoted(t)
    return (p, p.wrap(-v if op == "-" else ~v))


def _cast(value, t):
    src, v = value
    if isinstance(t, FloatType):
        if isinstance(src, FloatType):
            return (t, fp.convert(src.fmt, v, t.fmt))
        return (t, bits_of(value) & _mask(t.width))       # 32'F(0xffc00000): the bits
    if isinstance(src, IntType):
        return (t, t.wrap(v))
    if t.kind == "b":
        return (t, v & t.mask)
    raise PcodeTypeError(f"{t.width}'{t.kind.upper()}() of a {src} value: a bit copy or a conversion?")


# ---------------------------------------------------------------- literals

def _int_literal(node: ast.Num):
    v, suffix, is_hex = node.value, node.suffix, node.is_hex
    if suffix == "":
        candidates = [I32, U32, I64, U64] if is_hex else [I32, I64, U64]
    elif suffix == "U":
        candidates = [U32, U64]
    elif suffix in ("LL", "L"):
        candidates = [I64, U64] if is_hex else [I64]
    else:
        candidates = [U64]
    for t in candidates:
        lo = -(1 << (t.width - 1)) if t.signed else 0
        if lo <= v <= (t.mask >> 1 if t.signed else t.mask):
            return (t, v)
    raise PcodeTypeError(f"literal {v} fits no type")


def _float_literal(node: ast.Float):
    from fractions import Fraction
    t = {16: helpers.F16, 32: helpers.F32, 64: F64}[node.width]
    q = Fraction(node.text)
    return (t, fp.round_ratio(t.fmt, 0, q.numerator, q.denominator) if q else 0)


# ---------------------------------------------------------------- the compiler

def _root_name(node):
    while isinstance(node, (ast.Member, ast.Slice, ast.Index)):
        node = node.base
    return node.name if isinstance(node, ast.Name) else None


def _is_vgpr(node) -> bool:
    return (isinstance(node, ast.Index) and isinstance(node.base, ast.Index)
            and isinstance(node.base.base, ast.Name) and node.base.base.name == "VGPR")


def _is_memory(node) -> bool:
    return isinstance(node, ast.Index) and isinstance(node.base, ast.Name) and node.base.name == "MEM"


def _walk_statements(body):
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            for _, b in stmt.branches:
                yield from _walk_statements(b)
            yield from _walk_statements(stmt.orelse)
        elif isinstance(stmt, ast.For):
            yield from _walk_statements(stmt.body)


def _walk_expressions(node):
    """Every expression node under node (statements included)."""
    if isinstance(node, tuple):
        for item in node:
            yield from _walk_expressions(item)
        return
    if node is None or isinstance(node, (str, int, bool)):
        return
    if isinstance(node, ast.Lambda):
        return
    yield node
    for field in node.__dataclass_fields__:
        child = getattr(node, field)
        if isinstance(child, (tuple,)) or hasattr(child, "__dataclass_fields__"):
            yield from _walk_expressions(child)


class Scope:
    """What the names of one body (the program, or a lambda's) are."""

    def __init__(self, body, params=()):
        assigned, declared, loops, lambdas = set(), {}, set(), set()
        for stmt in _walk_statements(body):
            if isinstance(stmt, ast.Assign):
                targets = stmt.target if isinstance(stmt.target, tuple) else (stmt.target,)
                for target in targets:
                    parts = target.parts if isinstance(target, ast.Concat) else (target,)
                    for part in parts:
                        name = _root_name(part)
                        if name is not None:
                            assigned.add(name)
            elif isinstance(stmt, ast.Declare):
                declared[stmt.name] = stmt
            elif isinstance(stmt, ast.For):
                loops.add(stmt.var)
            elif isinstance(stmt, ast.Lambda):
                lambdas.add(stmt.name)
        self.lambdas = lambdas
        self.declared = declared
        self.variables = (((assigned | loops) - ARCH_REGISTERS) | set(params)) - lambdas
        # a declared name the program never assigns is an input with that type (DS_BPERMUTE)
        self.declared_inputs = {n: d for n, d in declared.items() if n not in self.variables}

    def kind(self, name: str) -> str:
        if name in self.variables:
            return "variable"
        if name in self.lambdas:
            return "lambda"
        if name in helpers.CONSTANT_NAMES:
            return "constant"
        return "register"


class Compiler:
    def __init__(self, instruction_names):
        self.instruction_names = instruction_names   # names callable as instructions

    # -- programs
    def program(self, body):
        scope = Scope(body)
        return self.body(body, scope), scope

    def body(self, stmts, scope):
        fns = tuple(self.statement(s, scope) for s in stmts)
        if len(fns) == 1:
            return fns[0]

        def run(ctx):
            for fn in fns:
                fn(ctx)
        return run

    # -- statements
    def statement(self, node, scope):
        if isinstance(node, ast.Assign):
            return self.assign(node, scope)
        if isinstance(node, ast.If):
            branches = tuple((self.expr(c, scope), self.body(b, scope)) for c, b in node.branches)
            orelse = self.body(node.orelse, scope) if node.orelse else None

            def run_if(ctx):
                for cond, body in branches:
                    if truth(cond(ctx)):
                        body(ctx)
                        return
                if orelse is not None:
                    orelse(ctx)
            return run_if
        if isinstance(node, ast.For):
            lo, hi = self.expr(node.lo, scope), self.expr(node.hi, scope)
            body = self.body(node.body, scope)
            var = node.var
            declared = scope.declared.get(var)
            var_type = cast_type(declared.width, declared.code) if declared else None

            def run_for(ctx):
                first, last = lo(ctx), hi(ctx)
                t = var_type or (promoted(first[0]) if isinstance(first[0], IntType) else None)
                if not isinstance(t, IntType) or not isinstance(last[0], IntType):
                    raise PcodeTypeError("for bounds must be integers")
                cell = Cell(0, t.width, t)
                mask, locals_ = t.mask, ctx.locals
                try:
                    for i in range(first[1], last[1] + 1):   # the body may retype the variable
                        cell.bits, cell.type, cell.width, cell.value = i & mask, t, t.width, (t, t.wrap(i))
                        locals_[var] = cell
                        body(ctx)
                except _Break:
                    pass
            return run_for
        if isinstance(node, ast.Declare):
            t = cast_type(node.width, node.code)
            name, count = node.name, node.count
            if name in scope.declared_inputs:
                def declare_input(ctx):
                    cell = ctx.register(name, for_write=False)
                    cell.width, cell.type = t.width, t
                return declare_input

            def declare(ctx):
                if count is None:
                    ctx.locals[name] = Cell(0, t.width, t, declared=True)
                else:
                    ctx.locals[name] = [Cell(None, t.width, t, declared=True) for _ in range(count)]
            return declare
        if isinstance(node, ast.Return):
            value = self.expr(node.value, scope)

            def run_return(ctx):
                raise _Return(value(ctx))
            return run_return
        if isinstance(node, ast.Break):
            def run_break(ctx):
                raise _Break()
            return run_break
        if isinstance(node, ast.ExprStmt):
            value = self.expr(node.expr, scope)

            def run_expr(ctx):
                value(ctx)
            return run_expr
        if isinstance(node, ast.Lambda):
            inner = Scope(node.body, node.params)
            body = self.body(node.body, inner)
            params, name = node.params, node.name

            def define(ctx):
                ctx.lambdas[name] = (params, body)
            return define
        raise PcodeTypeError(f"unknown statement {node!r}")

    def assign(self, node, scope):
        value = self.expr(node.value, scope)
        if isinstance(node.target, tuple):
            stores = tuple(self.store(t, scope) for t in node.target)

            def chain(ctx):
                v = value(ctx)
                for store in stores:
                    store(ctx, v)
            return chain
        store = self.store(node.target, scope)
        if node.op == "=":
            return lambda ctx: store(ctx, value(ctx))
        op = node.op[:-1]
        current = self.expr(node.target, scope)
        return lambda ctx: store(ctx, arith(op, current(ctx), value(ctx)))

    # -- locations (for stores, and for reads of register/variable chains)
    def store(self, target, scope):
        if isinstance(target, ast.Concat):
            parts = tuple(self.store(p, scope) for p in target.parts)
            widths = tuple(self.static_width(p) for p in target.parts)

            def store_concat(ctx, value):
                bits = bits_of(value)
                shift = sum(widths)
                for store, width in zip(parts, widths):
                    shift -= width
                    store(ctx, (int_type("b", width), (bits >> shift) & _mask(width)))
            return store_concat
        if isinstance(target, ast.Name) and target.name == "ROUND_MODE":
            def store_round_mode(ctx, value):
                if bits_of(value) != 0:
                    raise helpers.PcodeUndefined("a rounding mode other than round-to-nearest-even")
            return store_round_mode
        if isinstance(target, ast.Name) and scope.kind(target.name) == "variable":
            name = target.name

            def store_variable(ctx, value):
                cell = ctx.locals.get(name)
                if cell is not None and cell.declared:
                    _store(ctx, cell, 0, cell.width, cell.type, value)
                    return
                t = value[0]
                if t.__class__ is not IntType and t.__class__ is not FloatType:
                    raise PcodeTypeError(f"{name} = a {t!r}")
                bits = value[1] & t.mask if t.__class__ is IntType else value[1]
                if cell is None or cell.__class__ is list:
                    ctx.locals[name] = Cell(bits, t.width, t, value=value)
                else:
                    cell.bits, cell.width, cell.type, cell.value = bits, t.width, t, value
            return store_variable
        if isinstance(target, ast.Index) and not _is_vgpr(target) and not _is_memory(target):
            base, view = target.base, None
            if isinstance(base, ast.Member) and isinstance(type_named(base.member), IntType):
                base, view = base.base, type_named(base.member)
            if (isinstance(base, ast.Name) and scope.kind(base.name) == "register"
                    and base.name in ARCH_REGISTERS - {"VGPR", "MEM", "SGPR", "HW_REGISTERS", "ROUND_MODE"}):
                return self.register_bit_store(base.name, view, self.expr(target.index, scope))
        if (isinstance(target, ast.Member) and isinstance(target.base, ast.Name)
                and scope.kind(target.base.name) == "register" and type_named(target.member) is not None
                and target.base.name in ARCH_REGISTERS - {"VGPR", "MEM", "SGPR", "HW_REGISTERS", "ROUND_MODE"}):
            return self.register_store(target.base.name, type_named(target.member))
        locate = self.locate(target, scope, for_write=True)

        def store_location(ctx, value):
            cell, offset, width, t = locate(ctx)
            _store(ctx, cell, offset, width, t, value)
        return store_location

    def register_store(self, name, t):
        """A fast path for the commonest store: a whole typed register (D0.u32 = ...)."""
        name = "D0" if name == "D" else name
        width = t.width
        mask = _mask(width)

        def store(ctx, value):
            cell = ctx.regs.get(name) or ctx.register(name, for_write=True)
            if width > cell.width:
                _store(ctx, cell, 0, width, t, value)
                return
            bits = (value[1] & mask) if value[0] is t and t.__class__ is IntType else \
                value[1] if value[0] is t else stored_bits(value, t) & mask
            cell.bits = (cell.bits & ~mask) | bits
            written = ctx.written
            written[name] = written.get(name, 0) | mask
            ctx.last_type[name] = t
        return store

    def register_bit_store(self, name, view, index):
        """A fast path: one bit of a register (D0.u64[laneId] = ..., VCC.u64[laneId] = ...)."""
        name = "D0" if name == "D" else name
        limit = view.width if view is not None else None

        def store(ctx, value):
            i = index(ctx)[1]
            cell = ctx.regs.get(name) or ctx.register(name, for_write=True)
            if not 0 <= i < min(limit or cell.width, cell.width):
                raise PcodeRuntimeError(f"bit {i} of {name}" + (f".{view}" if view else ""))
            bit = stored_bits(value, U1) & 1
            cell.bits = (cell.bits & ~(1 << i)) | (bit << i)
            written = ctx.written
            written[name] = written.get(name, 0) | (1 << i)
        return store

    def static_width(self, node) -> int:
        if isinstance(node, ast.Member):
            t = type_named(node.member)
            if t is not None:
                return t.width
        if isinstance(node, ast.Slice) and all(isinstance(x, ast.Num) for x in (node.hi, node.lo)):
            return abs(node.hi.value - node.lo.value) + 1
        raise PcodeTypeError("a concatenation target needs typed parts such as D0.u64")

    def locate(self, node, scope, for_write):
        """A function ctx -> (cell, bit offset, width, type or None) for a chain of
        views, slices and indices rooted at a register, a variable or a register file."""
        if isinstance(node, ast.Name):
            name, kind = node.name, scope.kind(node.name)
            if kind == "variable":
                def locate_variable(ctx):
                    cell = ctx.locals.get(name)
                    if cell is None:
                        if not for_write:
                            raise PcodeRuntimeError(f"{name} read before it is set")
                        cell = ctx.locals[name] = Cell(0, 0, None)
                    if isinstance(cell, list):
                        raise PcodeTypeError(f"the array {name} used whole")
                    return cell, 0, cell.width, None
                return locate_variable
            if kind == "register":
                if name in ("VGPR", "MEM", "SGPR", "HW_REGISTERS"):
                    raise PcodeTypeError(f"{name} used without an index")

                def locate_register(ctx):
                    cell = ctx.register(name, for_write)
                    return cell, 0, cell.width, None
                return locate_register
            raise PcodeTypeError(f"{name} is a {kind}, not a location")
        if isinstance(node, ast.Member):
            t = type_named(node.member)
            if t is None:
                raise PcodeTypeError(f".{node.member} is not a type")
            if _is_memory(node.base):
                address = self.expr(node.base.index, scope)

                def locate_memory(ctx):
                    a = bits_of(address(ctx))
                    cell = MemoryCell(0 if for_write else ctx.read_memory(a, t.width), t.width)
                    cell.address = a
                    return cell, 0, t.width, t
                return locate_memory
            base = self.locate(node.base, scope, for_write)

            def locate_view(ctx):
                cell, offset, width, _ = base(ctx)
                return cell, offset, t.width, t
            return locate_view
        if isinstance(node, ast.Slice):
            base = self.locate(node.base, scope, for_write)
            hi, lo = self.expr(node.hi, scope), self.expr(node.lo, scope)

            def locate_slice(ctx):
                cell, offset, width, _ = base(ctx)
                h, l = hi(ctx)[1], lo(ctx)[1]
                if h < l:
                    raise PcodeTypeError("a reversed slice as a location")
                w = h - l + 1
                return cell, offset + l, w, int_type("b", w)
            return locate_slice
        if isinstance(node, ast.Index):
            if _is_vgpr(node):
                return self.locate_vgpr(node, scope, for_write)
            if _is_memory(node):
                raise PcodeTypeError("MEM[addr] needs a type such as .b32")
            root = node.base.name if isinstance(node.base, ast.Name) else None
            if root in ("SGPR", "HW_REGISTERS"):
                def unsupported(ctx):
                    raise helpers.PcodeUndefined(f"{root}[...] (the wave's other state) is not modelled")
                return unsupported
            index = self.expr(node.index, scope)
            if root is not None and scope.kind(root) == "variable" and root in scope.declared \
                    and scope.declared[root].count is not None:
                def locate_element(ctx):
                    array = ctx.locals.get(root)
                    if not isinstance(array, list):
                        raise PcodeRuntimeError(f"{root} is not an array here")
                    i = index(ctx)[1]
                    if not 0 <= i < len(array):
                        raise PcodeRuntimeError(f"{root}[{i}] is outside the array")
                    cell = array[i]
                    if cell.bits is None:
                        if not for_write:
                            raise PcodeRuntimeError(f"{root}[{i}] read before it is set")
                        cell.bits = 0
                    return cell, 0, cell.width, cell.type
                return locate_element
            base = self.locate(node.base, scope, for_write)

            def locate_bit(ctx):
                cell, offset, width, _ = base(ctx)
                i = index(ctx)[1]
                if i < 0:
                    raise PcodeRuntimeError(f"bit {i}")
                return cell, offset + i, 1, U1
            return locate_bit
        if not for_write:
            value = self.expr(node, scope)

            def locate_value(ctx):
                v = value(ctx)
                t = v[0]
                if not isinstance(t, (IntType, FloatType)):
                    raise PcodeTypeError(f"a {t!r} value indexed")
                return Cell(bits_of(v), t.width, t), 0, t.width, t
            return locate_value
        raise PcodeTypeError(f"{type(node).__name__} is not a location")

    def locate_vgpr(self, node, scope, for_write):
        lane = self.expr(node.base.index, scope)
        reg = self.expr(node.index, scope)
        alias = {"SRC0": "S0", "VDST": "D0"}.get(_root_name(node.index))

        def locate(ctx):
            ln = lane(ctx)[1]
            if ctx.vgpr is None:
                if alias is None or ln != ctx.lane:
                    raise PcodeRuntimeError(f"VGPR[{ln}][...] needs the register file (vgpr=)")
                cell = ctx.register(alias, for_write)
            else:
                cell = ctx.vgpr_cell(ln, bits_of(reg(ctx)))
            return cell, 0, 32, None
        return locate

    # -- expressions
    def expr(self, node, scope):
        if isinstance(node, ast.Num):
            value = _int_literal(node)
            return lambda ctx: value
        if isinstance(node, ast.Sized):
            t = int_type({"U": "u", "I": "i", "": "b"}[node.sign], node.width)
            value = (t, t.wrap(node.value))
            return lambda ctx: value
        if isinstance(node, ast.Float):
            value = _float_literal(node)
            return lambda ctx: value
        if isinstance(node, ast.Name):
            return self.name(node.name, scope)
        if isinstance(node, ast.Member):
            return self.member(node, scope)
        if isinstance(node, (ast.Slice, ast.Index)):
            return self.chain_read(node, scope)
        if isinstance(node, ast.Concat):
            parts = tuple(self.expr(p, scope) for p in node.parts)

            def concat(ctx):
                bits, width = 0, 0
                for part in parts:
                    v = part(ctx)
                    t = v[0]
                    bits = (bits << t.width) | bits_of(v)
                    width += t.width
                return (int_type("b", width), bits)
            return concat
        if isinstance(node, ast.Unary):
            operand, op = self.expr(node.operand, scope), node.op
            return lambda ctx: _unary(op, operand(ctx))
        if isinstance(node, ast.Binary):
            left, right, op = self.expr(node.left, scope), self.expr(node.right, scope), node.op
            if op == "&&":
                return lambda ctx: boolean(truth(left(ctx)) and truth(right(ctx)))
            if op == "||":
                return lambda ctx: boolean(truth(left(ctx)) or truth(right(ctx)))
            if op in ("==", "!=", "<>"):
                for zero, other in ((node.right, left), (node.left, right)):
                    negative = _signed_zero_literal(zero)
                    if negative is not None:
                        equal = op == "=="
                        return lambda ctx: boolean(_is_zero_of_sign(other(ctx), negative) == equal)
            fn = _BINARY[op]
            return lambda ctx: fn(left(ctx), right(ctx))
        if isinstance(node, ast.Ternary):
            cond, then, other = (self.expr(n, scope) for n in (node.cond, node.then, node.other))
            return lambda ctx: then(ctx) if truth(cond(ctx)) else other(ctx)
        if isinstance(node, ast.Cast):
            t = cast_type(node.width, node.code)
            operand = self.expr(node.operand, scope)
            return lambda ctx: _cast(operand(ctx), t)
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        raise PcodeTypeError(f"unknown expression {node!r}")

    def name(self, name, scope):
        kind = scope.kind(name)
        if kind == "constant":
            def constant(ctx):
                if name.startswith("OVERFLOW_"):
                    raise helpers.PcodeUndefined(f"{name} has no public definition (for f32 the branch "
                                                 "that reads it cannot be reached)")
                return helpers.named_constant(name, None)
            return constant
        if name == "ROUND_MODE":
            return lambda ctx: (U32, 0)
        if kind == "lambda":
            raise PcodeTypeError(f"the lambda {name} used as a value")
        if kind == "variable":
            def read_variable(ctx):
                cell = ctx.locals.get(name)
                if cell is None or cell.__class__ is list:
                    raise PcodeRuntimeError(f"{name} read before it is set" if cell is None
                                            else f"the array {name} used whole")
                if cell.value is not None:
                    return cell.value
                t = cell.type
                if t.__class__ is IntType:
                    n = cell.bits & t.mask
                    return (t, n - t.size if n >= t.half else n)
                return _read_cell(ctx, cell)
            return read_variable
        locate = self.locate(ast.Name(name), scope, for_write=False)

        def read(ctx):
            cell, _, _, _ = locate(ctx)
            return _read_cell(ctx, cell)
        return read

    def member(self, node, scope):
        base, member = node.base, node.member
        if isinstance(base, ast.Name):
            kind = scope.kind(base.name)
            if kind == "constant":
                value = helpers.named_constant(base.name, member)
                return lambda ctx: value
            if base.name == "WAVE_MODE":
                if member not in ("IEEE", "FP16_OVFL"):
                    raise helpers.PcodeUndefined(f"WAVE_MODE.{member} is not modelled")
                return lambda ctx: (U1, ctx.wave_mode[member])
            if base.name == "INST":
                def inst_field(ctx):
                    if member not in ctx.inst_fields:
                        raise PcodeRuntimeError(f"INST.{member} not given (modifiers such as bitop3 set it)")
                    return (int_type("b", 8), ctx.inst_fields[member])
                return inst_field
            if base.name == "WAVE_STATUS":
                def wave_status(ctx):
                    raise helpers.PcodeUndefined(f"WAVE_STATUS.{member} is not modelled")
                return wave_status
        t = type_named(member)
        if t is None:
            raise PcodeTypeError(f".{member} is not a type")
        if isinstance(base, ast.Name) and scope.kind(base.name) == "register" and base.name not in (
                "VGPR", "MEM", "SGPR", "HW_REGISTERS"):
            return self.register_view(base.name, t)
        if _is_memory(base):
            locate_access = self.locate(node, scope, for_write=False)

            def read_memory(ctx):
                cell, _, _, _ = locate_access(ctx)
                return (t, t.wrap(cell.bits)) if isinstance(t, IntType) else (t, cell.bits)
            return read_memory
        if isinstance(base, (ast.Name, ast.Slice, ast.Index)):
            locate = self.locate(base, scope, for_write=False)

            def read_view(ctx):
                cell, offset, width, base_type = locate(ctx)
                if (t.width > width and offset == 0 and base_type is None
                        and isinstance(cell.type, IntType) and cell.type.signed):
                    return view(_read_cell(ctx, cell), t)   # a signed variable widens by its sign
                bits = (cell.bits >> offset) & _mask(min(width, t.width))
                return (t, t.wrap(bits)) if isinstance(t, IntType) else (t, bits)
            return read_view
        value = self.expr(base, scope)
        return lambda ctx: view(value(ctx), t)

    def register_view(self, name, t):
        """A fast path for the commonest read: a register as a type (S0.u32, S1.f32)."""
        name = "D0" if name == "D" else name
        if isinstance(t, IntType):
            mask, half, size = t.mask, t.half, t.size

            def read_int(ctx):
                cell = ctx.regs.get(name) or ctx.register(name, for_write=False)
                n = cell.bits & mask
                return (t, n - size if n >= half else n)
            return read_int
        mask = _mask(t.width)

        def read_float(ctx):
            cell = ctx.regs.get(name) or ctx.register(name, for_write=False)
            return (t, cell.bits & mask)
        return read_float

    def chain_read(self, node, scope):
        if isinstance(node, ast.Slice):
            base = self.expr(node.base, scope)
            hi, lo = self.expr(node.hi, scope), self.expr(node.lo, scope)

            def read_slice(ctx):
                bits = bits_of(base(ctx))
                h, l = hi(ctx)[1], lo(ctx)[1]
                if h >= l:
                    w = h - l + 1
                    return (int_type("b", w), (bits >> l) & _mask(w))
                w = l - h + 1                      # [0 : 31]: bits h..l, reversed
                field = (bits >> h) & _mask(w)
                return (int_type("b", w), int(format(field, f"0{w}b")[::-1], 2))
            return read_slice
        base, view_mask = node.base, None
        if isinstance(base, ast.Member) and isinstance(type_named(base.member), IntType):
            base, view_mask = base.base, type_named(base.member).mask     # S0.u32[31]
        if (isinstance(base, ast.Name) and scope.kind(base.name) in ("variable", "register")
                and base.name not in ("VGPR", "MEM", "SGPR", "HW_REGISTERS", "INST", "WAVE_MODE")
                and not (base.name in scope.declared and scope.declared[base.name].count is not None)):
            return self.bit_read(base.name, scope.kind(base.name), self.expr(node.index, scope), view_mask)
        locate = self.locate(node, scope, for_write=False)

        def read_location(ctx):
            cell, offset, width, t = locate(ctx)
            if t is None:
                if offset == 0 and width == cell.width:
                    return _read_cell(ctx, cell)
                t = int_type("b", width)
            bits = (cell.bits >> offset) & _mask(width)
            return (t, t.wrap(bits)) if isinstance(t, IntType) else (t, bits)
        return read_location

    def bit_read(self, name, kind, index, view_mask=None):
        """A fast path: one bit of a register or a variable, or of its view as an integer
        type (VCC[laneId], MaskedValue[i], S0.u32[31])."""
        name = "D0" if name == "D" else name

        def read_bit(ctx):
            if kind == "variable":
                cell = ctx.locals.get(name)
                if cell is None or cell.__class__ is list:
                    raise PcodeRuntimeError(f"{name} read before it is set")
            else:
                cell = ctx.regs.get(name) or ctx.register(name, for_write=False)
            i = index(ctx)[1]
            if i < 0:
                raise PcodeRuntimeError(f"bit {i}")
            bits = cell.bits if view_mask is None else cell.bits & view_mask
            return (U1, (bits >> i) & 1)
        return read_bit

    def call(self, node, scope):
        name = node.name
        args = tuple(self.expr(a, scope) for a in node.args)
        if scope.kind(name) == "lambda":
            def call_lambda(ctx):
                if name not in ctx.lambdas:
                    raise PcodeRuntimeError(f"{name} called before its definition")
                params, body = ctx.lambdas[name]
                if len(params) != len(args):
                    raise PcodeTypeError(f"{name} takes {len(params)} arguments")
                values = [a(ctx) for a in args]
                saved = ctx.locals
                ctx.locals = {p: Cell(bits_of(v), v[0].width, v[0], value=v) for p, v in zip(params, values)}
                try:
                    body(ctx)
                except _Return as r:
                    return r.value
                finally:
                    ctx.locals = saved
                raise PcodeRuntimeError(f"{name} ended without return")
            return call_lambda
        helper = helpers.HELPERS.get(name)
        if name in helpers.RAW_HELPERS:
            return lambda ctx: helper(ctx)
        if helper is not None:
            return lambda ctx: helper(ctx, *[a(ctx) for a in args])
        if name in self.instruction_names:
            def call_instruction(ctx):
                values = [a(ctx) for a in args]
                return ctx.resolve_instruction(name, values, ctx)
            return call_instruction

        def undefined(ctx):
            raise helpers.PcodeUndefined(f"{name}() is not defined here (no public definition, "
                                         "or not needed by the kernels' instructions)")
        return undefined

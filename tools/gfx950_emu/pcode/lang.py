"""The language of AMD's instruction pseudocode (the CDNA3/CDNA4 ISA guides' per-instruction
"operation" text, as tinygrad's wheel carries it): a lexer and a recursive-descent parser
into a small AST. Nothing here evaluates; interpreter.py gives the AST its meaning.

What the language has (every construct of the 1441 CDNA entries that are code):
- statements, separated by newlines or `;`: assignment (`=`, `+=`, `-=`, `|=`, `&=`, `^=`,
  `*=`, `<<=`, `>>=`; `a = b = v` sets both) to a variable, a typed view (`D0.f32`), a bit slice (`D0[31 : 16]`),
  a bit (`VCC.u64[laneId]`), an array element (`in[i]`), a register file entry
  (`VGPR[lane][reg]`, `MEM[addr].b32`) or a concatenation (`{ D1.u1, D0.u64 } = ...`);
  `if c then ... elsif c then ... else ... endif`; `for i in lo : hi do ... endfor`
  (both bounds inclusive); `declare name : 32'B` or `declare name : 8'B[8]` (an array);
  `return e`; `break`; a bare call (`nop()`); `NAME = lambda(a, b) ( statements )` or
  `NAME = lambda(a, b) ( expression )`;
- expressions: C's operators with C's precedence, `<>` for not-equal, `**` (power, above
  `*`), `c ? a : b`; literals `1`, `1U`, `1LL`, `1ULL`, `0x1f`, `2.0`, `2.0F`, sized
  `8'0xff`, `1'1U`, `16'4`, `16'0.5`; casts `32'U(e)`, `64'F(e)`, `16'BF(e)`; typed views `e.u32`,
  `e.f16`, `e.fp4`; fields `WAVE_MODE.IEEE`; bit slices `e[hi : lo]` (hi < lo reverses
  the bits) and `e[start +: width]`; indexing `e[i]`; concatenation `{ hi, ..., lo }`; calls `f(a, b)`;
  comments `// ...`.

Anything else (the prose some entries hold instead of code, e.g. DS_SWIZZLE_B32's table or
the MFMAs' one-line summaries) is a PcodeSyntaxError naming the line and the token."""
from __future__ import annotations

import dataclasses
import re


class PcodeSyntaxError(ValueError):
    """The text is not code of the pseudocode language (or uses a construct not listed in
    this module's docstring): the message names the line and the token."""


# ---------------------------------------------------------------- tokens

@dataclasses.dataclass(frozen=True)
class Token:
    kind: str    # NUM FLOAT SIZED CAST TYPE IDENT OP NL EOF
    text: str
    line: int
    value: object = None


_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r]+)
  | (?P<comment>//[^\n]*)
  | (?P<nl>\n)
  | (?P<cast>\d+'(?:BF|[FIUBH])(?=\s*\())
  | (?P<type>\d+'(?:BF|[FIUBH]))
  | (?P<sizedfloat>\d+'\d+\.\d+)
  | (?P<sized>\d+'(?:0x[0-9a-fA-F]+|\d+)[UI]?)
  | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?F?)
  | (?P<hex>0x[0-9a-fA-F]+(?:ULL|LL|U|L)?)
  | (?P<dec>\d+(?:ULL|LL|U|L)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><<=|>>=|\+:|\*\*|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|\|=|&=|\^=|\*=|[-+*/%&|^~!<>=?:;,.()\[\]{}])
""", re.VERBOSE)


def tokenize(text: str) -> list[Token]:
    tokens, line, pos = [], 1, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise PcodeSyntaxError(f"line {line}: unexpected character {text[pos]!r}")
        kind, s = m.lastgroup, m.group()
        pos = m.end()
        if kind in ("ws", "comment"):
            continue
        if kind == "nl":
            tokens.append(Token("NL", s, line))
            line += 1
            continue
        if kind == "cast" or kind == "type":
            width, code = s.split("'")
            tokens.append(Token("CAST" if kind == "cast" else "TYPE", s, line, (int(width), code)))
        elif kind == "sized":
            width, rest = s.split("'")
            sign = rest[-1] if rest[-1] in "UI" else ""
            digits = rest[:-1] if sign else rest
            tokens.append(Token("SIZED", s, line, (int(width), int(digits, 0), sign)))
        elif kind == "float":
            tokens.append(Token("FLOAT", s, line, (s.rstrip("F"), 32 if s.endswith("F") else 64)))
        elif kind == "sizedfloat":
            width, digits = s.split("'")
            tokens.append(Token("FLOAT", s, line, (digits, int(width))))
        elif kind in ("hex", "dec"):
            m2 = re.match(r"(0x[0-9a-fA-F]+|\d+)(ULL|LL|U|L)?$", s)
            tokens.append(Token("NUM", s, line, (int(m2.group(1), 0), m2.group(2) or "", kind == "hex")))
        elif kind == "ident":
            tokens.append(Token("IDENT", s, line))
        else:
            tokens.append(Token("OP", s, line))
    tokens.append(Token("EOF", "", line))
    return tokens


# ---------------------------------------------------------------- AST

@dataclasses.dataclass(frozen=True)
class Num:          # integer literal: value, C type suffix ("", "U", "LL", "ULL", "L"), hex?
    value: int
    suffix: str
    is_hex: bool


@dataclasses.dataclass(frozen=True)
class Sized:        # 8'0xff: width, value, "U" / "I" / "" (no suffix)
    width: int
    value: int
    sign: str


@dataclasses.dataclass(frozen=True)
class Float:        # 2.0 (width 64), 2.0F (32), 16'0.5 (16)
    text: str
    width: int


@dataclasses.dataclass(frozen=True)
class Name:
    name: str


@dataclasses.dataclass(frozen=True)
class Member:       # e.u32 (a typed view) or WAVE_MODE.IEEE (a field)
    base: object
    member: str


@dataclasses.dataclass(frozen=True)
class Index:        # e[i]
    base: object
    index: object


@dataclasses.dataclass(frozen=True)
class Slice:        # e[hi : lo]
    base: object
    hi: object
    lo: object


@dataclasses.dataclass(frozen=True)
class Concat:       # { hi, ..., lo }
    parts: tuple


@dataclasses.dataclass(frozen=True)
class Unary:
    op: str
    operand: object


@dataclasses.dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object


@dataclasses.dataclass(frozen=True)
class Ternary:
    cond: object
    then: object
    other: object


@dataclasses.dataclass(frozen=True)
class Cast:         # 32'U(e): width, code (F I U B BF H)
    width: int
    code: str
    operand: object


@dataclasses.dataclass(frozen=True)
class Call:
    name: str
    args: tuple


@dataclasses.dataclass(frozen=True)
class Assign:       # target may be a tuple of targets: `EXEC.u64[laneId] = D0.u64[laneId] = v`
    target: object
    op: str         # "=" or a compound operator such as "+="
    value: object
    line: int


@dataclasses.dataclass(frozen=True)
class If:
    branches: tuple  # ((cond, body), ...)
    orelse: tuple
    line: int


@dataclasses.dataclass(frozen=True)
class For:
    var: str
    lo: object
    hi: object
    body: tuple
    line: int


@dataclasses.dataclass(frozen=True)
class Declare:
    name: str
    width: int
    code: str
    count: int | None   # array length, None for a scalar
    line: int


@dataclasses.dataclass(frozen=True)
class Return:
    value: object
    line: int


@dataclasses.dataclass(frozen=True)
class Break:
    line: int


@dataclasses.dataclass(frozen=True)
class ExprStmt:
    expr: object
    line: int


@dataclasses.dataclass(frozen=True)
class Lambda:
    name: str
    params: tuple
    body: tuple
    line: int


# ---------------------------------------------------------------- parser

_BINARY_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5,
    "==": 6, "!=": 6, "<>": 6,
    "<": 7, "<=": 7, ">": 7, ">=": 7,
    "<<": 8, ">>": 8,
    "+": 9, "-": 9,
    "*": 10, "/": 10, "%": 10,
    "**": 11,
}
_RIGHT_ASSOCIATIVE = {"**"}
_ASSIGN_OPS = {"=", "+=", "-=", "|=", "&=", "^=", "*=", "<<=", ">>="}
_BLOCK_END = {"elsif", "else", "endif", "endfor"}


class _Parser:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0   # bracket depth: newlines inside brackets are not statement ends

    # -- token access (newlines are skipped inside brackets)
    def peek(self) -> Token:
        while self.depth > 0 and self.tokens[self.pos].kind == "NL":
            self.pos += 1
        return self.tokens[self.pos]

    def next(self) -> Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def error(self, what: str, tok: Token | None = None):
        tok = tok or self.peek()
        shown = tok.text if tok.kind != "NL" else "end of line"
        raise PcodeSyntaxError(f"line {tok.line}: {what} (at {shown!r})")

    def is_op(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind == "OP" and tok.text == text

    def is_word(self, text: str) -> bool:
        tok = self.peek()
        return tok.kind == "IDENT" and tok.text == text

    def expect_op(self, text: str) -> Token:
        if not self.is_op(text):
            self.error(f"expected {text!r}")
        return self.next()

    def expect_word(self, text: str) -> Token:
        if not self.is_word(text):
            self.error(f"expected {text!r}")
        return self.next()

    def expect_ident(self) -> str:
        tok = self.next()
        if tok.kind != "IDENT":
            self.error("expected a name", tok)
        return tok.text

    def open(self, text: str):
        self.expect_op(text)
        self.depth += 1

    def close(self, text: str):
        self.depth -= 1
        self.expect_op(text)

    def skip_separators(self):
        while self.peek().kind == "NL" or self.is_op(";"):
            self.next()

    # -- statements
    def program(self) -> tuple:
        body = self.block(stop=())
        if self.peek().kind != "EOF":
            self.error("unexpected text after the last statement")
        return body

    def block(self, stop) -> tuple:
        """Statements up to one of the stop words (left unconsumed), EOF, or a ')'."""
        body = []
        while True:
            self.skip_separators()
            tok = self.peek()
            if tok.kind == "EOF" or (tok.kind == "OP" and tok.text == ")"):
                return tuple(body)
            if tok.kind == "IDENT" and tok.text in _BLOCK_END:
                if tok.text not in stop:
                    self.error(f"{tok.text!r} without its opening statement")
                return tuple(body)
            body.append(self.statement())
            end = self.peek()
            if not (end.kind in ("NL", "EOF") or (end.kind == "OP" and end.text in (";", ")"))
                    or (end.kind == "IDENT" and end.text in _BLOCK_END)):
                self.error("expected the end of the statement")

    def statement(self):
        tok = self.peek()
        if tok.kind == "IDENT":
            if tok.text == "if":
                return self.if_statement()
            if tok.text == "for":
                return self.for_statement()
            if tok.text == "declare":
                return self.declare_statement()
            if tok.text == "return":
                self.next()
                return Return(self.expression(), tok.line)
            if tok.text == "break":
                self.next()
                return Break(tok.line)
        target = self.expression()
        nxt = self.peek()
        if nxt.kind == "OP" and nxt.text in _ASSIGN_OPS:
            self.next()
            if self.is_word("lambda"):
                return self.lambda_definition(target, tok.line)
            value = self.expression()
            if nxt.text == "=" and self.is_op("="):   # a chain: every target gets the value
                targets = [target]
                while self.is_op("="):
                    self.next()
                    targets.append(value)
                    value = self.expression()
                return Assign(tuple(targets), "=", value, tok.line)
            return Assign(target, nxt.text, value, tok.line)
        if isinstance(target, Call):
            return ExprStmt(target, tok.line)
        self.error("expected an assignment or a call")

    def if_statement(self):
        line = self.expect_word("if").line
        branches = []
        cond = self.expression()
        self.expect_word("then")
        branches.append((cond, self.block(stop=("elsif", "else", "endif"))))
        orelse = ()
        while True:
            if self.is_word("elsif"):
                self.next()
                cond = self.expression()
                self.expect_word("then")
                branches.append((cond, self.block(stop=("elsif", "else", "endif"))))
            elif self.is_word("else"):
                self.next()
                orelse = self.block(stop=("endif",))
            else:
                self.expect_word("endif")
                return If(tuple(branches), orelse, line)

    def for_statement(self):
        line = self.expect_word("for").line
        var = self.expect_ident()
        self.expect_word("in")
        lo = self.binary(1)
        self.expect_op(":")
        hi = self.binary(1)
        self.expect_word("do")
        body = self.block(stop=("endfor",))
        self.expect_word("endfor")
        return For(var, lo, hi, body, line)

    def declare_statement(self):
        line = self.expect_word("declare").line
        name = self.expect_ident()
        self.expect_op(":")
        tok = self.next()
        if tok.kind != "TYPE":
            self.error("expected a type such as 32'B", tok)
        width, code = tok.value
        count = None
        if self.is_op("["):
            self.open("[")
            size = self.next()
            if size.kind != "NUM":
                self.error("expected an array length", size)
            count = size.value[0]
            self.close("]")
        return Declare(name, width, code, count, line)

    def lambda_definition(self, target, line):
        if not isinstance(target, Name):
            self.error("a lambda must be bound to a plain name")
        self.expect_word("lambda")
        self.open("(")
        params = []
        while not self.is_op(")"):
            params.append(self.expect_ident())
            if not self.is_op(")"):
                self.expect_op(",")
        self.close(")")
        self.expect_op("(")
        saved, self.depth = self.depth, 0
        start = self.pos
        try:   # a body that is one expression: its value is returned
            self.depth = 1
            body = (Return(self.expression(), line),)
            self.depth = 0
            if not self.is_op(")"):
                raise PcodeSyntaxError("not a single expression")
        except PcodeSyntaxError:
            self.pos, self.depth = start, 0
            body = self.block(stop=())
        self.depth = saved
        self.expect_op(")")
        return Lambda(target.name, tuple(params), body, line)

    # -- expressions
    def expression(self):
        cond = self.binary(1)
        if self.is_op("?"):
            self.next()
            then = self.expression()
            self.expect_op(":")
            other = self.expression()
            return Ternary(cond, then, other)
        return cond

    def binary(self, min_prec: int):
        left = self.unary()
        while True:
            tok = self.peek()
            prec = _BINARY_PRECEDENCE.get(tok.text) if tok.kind == "OP" else None
            if prec is None or prec < min_prec:
                return left
            self.next()
            right = self.binary(prec if tok.text in _RIGHT_ASSOCIATIVE else prec + 1)
            left = Binary(tok.text, left, right)

    def unary(self):
        tok = self.peek()
        if tok.kind == "OP" and tok.text in ("-", "+", "~", "!"):
            self.next()
            return Unary(tok.text, self.unary())
        return self.postfix(self.primary())

    def primary(self):
        tok = self.next()
        if tok.kind == "NUM":
            return Num(*tok.value)
        if tok.kind == "SIZED":
            return Sized(*tok.value)
        if tok.kind == "FLOAT":
            return Float(*tok.value)
        if tok.kind == "CAST":
            width, code = tok.value
            self.open("(")
            operand = self.expression()
            self.close(")")
            return Cast(width, code, operand)
        if tok.kind == "IDENT":
            if self.is_op("("):
                self.open("(")
                args = []
                while not self.is_op(")"):
                    args.append(self.expression())
                    if not self.is_op(")"):
                        self.expect_op(",")
                self.close(")")
                return Call(tok.text, tuple(args))
            return Name(tok.text)
        if tok.kind == "OP" and tok.text == "(":
            self.depth += 1
            inner = self.expression()
            self.close(")")
            return inner
        if tok.kind == "OP" and tok.text == "{":
            self.depth += 1
            parts = [self.expression()]
            while self.is_op(","):
                self.next()
                parts.append(self.expression())
            self.close("}")
            return Concat(tuple(parts))
        self.error("expected a value", tok)

    def postfix(self, node):
        while True:
            if self.is_op("."):
                self.next()
                node = Member(node, self.expect_ident())
            elif self.is_op("["):
                self.open("[")
                first = self.binary(1)
                if self.is_op("?"):   # a conditional index: e[c ? a : b]
                    self.next()
                    then = self.binary(1)
                    self.expect_op(":")
                    first = Ternary(first, then, self.binary(1))
                if self.is_op(":"):
                    self.next()
                    second = self.binary(1)
                    self.close("]")
                    node = Slice(node, first, second)
                elif self.is_op("+:"):   # a part select: e[start +: width]
                    self.next()
                    width = self.binary(1)
                    self.close("]")
                    hi = Binary("-", Binary("+", first, width), Num(1, "", False))
                    node = Slice(node, hi, first)
                else:
                    self.close("]")
                    node = Index(node, first)
            else:
                return node


def parse(text: str) -> tuple:
    """The statements of one pseudocode entry; PcodeSyntaxError if it is not code."""
    return _Parser(text).program()

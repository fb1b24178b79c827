"""Conditions and arithmetic in the walker: which way a test (`[[ ]]`, `[ ]`, `(( ))`, `a && b`) or a `case` goes when
known values make it certain, and `$((...))` / array indexes on known integers.

What a test decides on known strings is shell_tests; this module turns tree-sitter nodes into its operands.
Anything uncertain is None (a test) or raises `_Unknown` (arithmetic).
"""

from __future__ import annotations

from offlint.sources import shell_tests
from offlint.sources.shell_values import _IFS, _join, _P, _Unknown

_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "**": lambda a, b: a**b if b >= 0 else 0, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b), "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "&&": lambda a, b: int(bool(a and b)), "||": lambda a, b: int(bool(a or b)),
}


class Conditions:
    """Deciding tests and `case` patterns on known values, and integer arithmetic; part of the walker."""

    def num(self, s: str, org=(), cond: str = "") -> int:
        why = self.why(s) or self.differs(org, cond)
        if why:
            raise _Unknown(why)
        return _int(s)

    def decide(self, nodes) -> tuple[bool | None, tuple[str, ...]]:
        """Whether a condition succeeds, when known values make it certain (None otherwise), with the variables
        whose default it took (the environment is assumed not to set them, as everywhere in offlint)."""
        stmts = [c for c in nodes if c.type != "comment"]
        if len(stmts) != 1:
            return None, ()
        seen, tok, saw_at = self.st.seen, self.tok, self.saw_at
        self.st.seen = {}
        try:
            verdict = self.status(stmts[0])
            return verdict, tuple(self.st.seen) if verdict is not None else ()
        finally:
            self.st.seen, self.tok, self.saw_at = seen, tok, saw_at

    def status(self, n) -> bool | None:
        if n.type == "negated_command":
            inner = self.named(n)
            v = self.status(inner[0]) if len(inner) == 1 else None
            return None if v is None else not v
        if n.type == "list":
            kids = list(n.children)
            while kids and kids[0].type == "list":
                kids[:1] = kids[0].children
            value, op = None, ""
            for c in kids:
                if not c.is_named:
                    op = c.type
                elif c.type != "comment":
                    v = self.status(c)
                    value = v if not op else _kleene(op, value, v)
            return value
        if n.type == "compound_statement" and n.children and n.children[0].type == "((":
            # `(( NUM_LAYERS >= 32 ))`: succeeds where the arithmetic is not 0 (round 5 of the recall study: a branch
            # on it had been left to the user's choice). An assignment in it (`(( i++ ))`) is not evaluated: unknown.
            exprs = self.named(n)
            if len(exprs) != 1 or self.masked_in(n):
                return None
            try:
                return self.arith(exprs[0]) != 0
            except _Unknown:
                return None
        if n.type != "test_command" or self.masked_in(n) or _holds(n, ("command_substitution", "process_substitution")):
            return None
        exprs = self.named(n)
        return self.texpr(exprs[0], n.children[0].type == "[[") if len(exprs) == 1 else None

    def texpr(self, e, double: bool) -> bool | None:
        """One test expression; `double`: inside `[[ ]]` (patterns, && and ||) rather than `[ ]`."""
        t = e.type
        kids = self.named(e)
        if t == "parenthesized_expression":
            return self.texpr(kids[0], double) if double and len(kids) == 1 else None
        op_n = e.child_by_field_name("operator")
        op = self.raw(op_n) if op_n is not None else ""
        if t == "unary_expression" and kids:
            if op == "!":
                v = self.texpr(kids[-1], double)
                return None if v is None else not v
            operand = self.operand(kids[-1], double)
            return None if operand is None else shell_tests.unary(op, operand)
        if t == "binary_expression":
            left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
            if left is None or right is None:
                return None
            if op in ("&&", "||"):
                return _kleene(op, self.texpr(left, double), self.texpr(right, double)) if double else None
            a = self.operand(left, double)
            if a is None:
                return None
            if op in ("==", "=", "!="):
                return shell_tests.binary(op, a, None, self.pattern(right, double))
            return shell_tests.binary(op, a, self.operand(right, double), None)
        operand = self.operand(e, double)  # `[[ $X ]]`: non-empty
        return None if operand is None else operand != ""

    _OPERANDS = ("word", "string", "raw_string", "simple_expansion", "expansion", "concatenation", "number",
                 "ansi_c_string", "extglob_pattern")

    def pieces(self, n, double: bool, quoted: bool) -> list[_P] | None:
        """An operand's expansion, when it is a plain word whose value is known on every path. In `[ ]` (not
        `double`) an unquoted expansion is split and globbed: blanks, glob characters or nothing there are left
        undecided."""
        if n.type not in self._OPERANDS:
            return None
        self.tok = -1
        pieces = self.exp(n, quoted)
        text, org, cond = _join(pieces, self.o(n.start_byte))
        if any(p.brk for p in pieces) or cond or self.why(text) or self.differs(org):
            return None
        if not double and (any(p.split and any(c in _IFS + "*?[" for c in p.text) for p in pieces)
                           or not any(p.quoted or p.text for p in pieces)):
            return None
        return pieces

    def operand(self, n, double: bool) -> str | None:
        pieces = self.pieces(n, double, double)
        return None if pieces is None else "".join(p.text for p in pieces)

    def pattern(self, n, double: bool) -> str | None:
        """The right side of `==`: a glob inside `[[ ]]` (its quoted parts match themselves), a string in `[ ]`."""
        if n.type == "regex" and double:  # how tree-sitter-bash gives some patterns after `=`: one plain token
            split = shell_tests.quoted_pieces(self.raw(n))
            return None if split is None else shell_tests.glob(split)
        pieces = self.pieces(n, double, False)
        if pieces is None:
            return None
        return shell_tests.glob([(p.text, p.quoted or not double) for p in pieces])

    def decide_case(self, subject, items) -> tuple[int | None, tuple[str, ...]]:
        """The index of the `case` item that runs (-1: none), when certain; with the defaults that took."""
        seen, tok, saw_at = self.st.seen, self.tok, self.saw_at
        self.st.seen = {}
        try:
            value = self.operand(subject, True) if subject is not None else None
            if value is None or self.masked_in(subject):
                return None, ()
            for k, (patterns, through) in enumerate(items):
                for p in patterns:
                    glob = self.pattern(p, True) if not self.masked_in(p) else None
                    if glob is None:
                        return None, ()
                    if shell_tests.matches(value, glob):
                        return (None, ()) if through else (k, tuple(self.st.seen))
            return -1, tuple(self.st.seen)
        finally:
            self.st.seen, self.tok, self.saw_at = seen, tok, saw_at

    def arith(self, n) -> int:
        """Integer arithmetic on known values, as in $((...)) and array indexes; raises _Unknown otherwise."""
        if n is None:
            raise _Unknown("empty arithmetic")
        self.deeper(n)
        try:
            return self._arith(n)
        finally:
            self.st.nesting -= 1

    def based(self, n, base: int) -> int:
        """`B#digits` in arithmetic (the prefix was blanked for the parser): the operand read in base B."""
        if n.type in ("variable_name", "word") and not self.raw(n)[:1].isdigit():
            v = self.get(self.raw(n))
            if v is None:
                raise _Unknown(self.unset_reason(self.raw(n)))
            self.note_read(v)  # (a bare name is its value, defaults and all, as `$NAME` is)
            s, org, cond = *v.scalar(), v.cond
        elif n.type in ("number", "word"):
            s, org, cond = self.raw(n), (), ""
        else:
            s, org, cond = _join(self.exp(n, True), self.o(n.start_byte))
        why = self.why(s) or self.differs(org, cond)
        if why:
            raise _Unknown(why)
        try:
            if not 2 <= base <= 36:
                raise ValueError
            return int(s.strip(), base)
        except ValueError:
            raise _Unknown(f"not a base-{base} number: {s.strip()!r}") from None

    def _arith(self, n) -> int:
        t = n.type
        if self.masked:
            why = self.masked_in(n)
            if why:
                raise _Unknown(why)
            base = self.masked.bases.get(n.start_byte)
            if base is not None and t in ("number", "word", "variable_name", "simple_expansion", "expansion"):
                return self.based(n, base)
        if t == "arithmetic_expansion":
            kids = [c for c in n.named_children if c.type != "comment"]
            if not kids:
                raise _Unknown("empty arithmetic")
            return self.arith(kids[-1])
        if t == "number":
            return _int(self.raw(n))
        if t in ("variable_name", "word"):
            name = self.raw(n)
            if name.lstrip("-").isdigit():
                return _int(name)
            v = self.get(name)
            if v is None:
                raise _Unknown(self.unset_reason(name))
            self.note_read(v)  # (`$((G*2))` with G=${G:-4}: the environment chooses it, as with `$((${G}*2))`)
            s, org = v.scalar()
            return self.num(s or "0", org, v.cond)
        if t in ("simple_expansion", "expansion", "string", "concatenation", "raw_string"):
            s, org, cond = _join(self.exp(n, True), self.o(n.start_byte))
            return self.num(s, org, cond)
        if t == "parenthesized_expression" and n.named_children:
            return self.arith(n.named_children[0])
        if t == "unary_expression" and n.named_children:
            x, op = self.arith(n.named_children[-1]), n.children[0].type
            ops = {"-": lambda: -x, "+": lambda: x, "!": lambda: int(not x), "~": lambda: ~x}
            if op in ops:
                return ops[op]()
        if t == "binary_expression":
            op_n = n.child_by_field_name("operator")
            op = op_n.type if op_n is not None else ""
            if op in _BINOPS or op in ("/", "%"):
                a, b = self.arith(n.child_by_field_name("left")), self.arith(n.child_by_field_name("right"))
                if op in ("/", "%"):
                    return _divmod0(a, b)[op == "%"]
                if op in ("<<", ">>", "**") and not 0 <= b < 4096:
                    raise _Unknown("exponent or shift out of range")
                return _BINOPS[op](a, b)
        if t == "ternary_expression":
            c = self.arith(n.child_by_field_name("condition"))
            return self.arith(n.child_by_field_name("consequence" if c else "alternative"))
        raise _Unknown(f"cannot evaluate {self.raw(n)[:40]!r}")


def _int(text: str) -> int:
    t = text.strip()
    try:
        if "#" in t:  # bash's `BASE#DIGITS`
            base, digits = t.split("#", 1)
            if not 2 <= int(base, 10) <= 36:
                raise ValueError
            return int(digits, int(base, 10))
        return int(t, 16) if t.lower().startswith(("0x", "-0x")) else int(t, 10)
    except ValueError:
        raise _Unknown(f"not an integer: {t!r}") from None


def _kleene(op: str, a: bool | None, b: bool | None) -> bool | None:
    """`a && b` / `a || b` with None for unknown."""
    if op == "&&":
        return False if a is False or b is False else (True if a and b else None)
    if op == "||":
        return True if a is True or b is True else (False if a is False and b is False else None)
    return None


def _holds(n, types: tuple[str, ...]) -> bool:
    """Whether a node has a descendant of one of `types`."""
    return next(_descendants(n, types), None) is not None


def _descendants(n, types: tuple[str, ...]):
    """The descendants of a node of one of `types` (iteratively)."""
    pending = list(n.children)
    while pending:
        c = pending.pop()
        if c.type in types:
            yield c
        pending.extend(c.children)


def _divmod0(a: int, b: int) -> tuple[int, int]:
    """C-style division (truncating toward zero), as bash does."""
    if b == 0:
        raise _Unknown("division by zero")
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    return q, a - b * q

"""Read a bash launch script into the commands it runs, each argument expanded as far as is statically known.

offlint never executes what it lints, so this module plays the shell on paper: tree-sitter-bash gives the
syntax, and a small interpreter tracks variables, arrays, exports and quoting well enough to recover the argv
of `torchrun ... key=value` lines built through arrays, string variables and `bash -c` payloads. Where bash
would need runtime information (command output, positional parameters, loop variables, `read`), a word's
value is None with a short reason instead of a guess. Inside a longer value such an unknown part is kept as
a placeholder ("hole"), so `SRUN="srun --mpi=pmix --image=$IMG"; $SRUN` still gives `srun` and `--mpi=pmix`,
and a `bash -c` payload with a `$(hostname)` in it is still read; only the words touching a hole are None.

Positions: a word points at its token; words split from one unquoted `$VAR` all share that token's place.
Array elements point at the element inside the array literal. Words of `bash -c` / `eval` payloads point at
the character they came from, because each expanded character carries its origin and conditional mark (so
`CMD="python x.py"; bash -c "$CMD"` points into the `CMD=` line); their `text` is the payload's token.

Simplifications: pipelines run in the current shell (only `( )` and `$( )` get their own scope); commands in
`$( )` are reported too; `a && X=1` makes X conditional without marking the words of the command; loop
bodies are read once, as a branch that may not run; a branch ending in `exit` does not reach later code;
functions are read at each call, and functions never called are read at the end with the variables of their
definition. `source`d files are not followed. `export X` of a variable never set gives value None.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace

from offlint.sources import shell_paths, shell_tests
from offlint.sources.shell_mask import Masked, parse_masked

Pos = tuple[int, int]  # (line, col), 1-based
Org = tuple[int, int, str]  # where one expanded character came from: (line, col, conditional)
_IFS = " \t\n"
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_DEFAULT_OPS = (":-", "-", ":=", "=", ":+", "+", ":?", "?")
_MAX_DEPTH = 6
_MAX_NESTING = 100  # nested statements, words and arithmetic: past this a script is reported, not half-read
_HOLE0, _HOLES = 0xF0000, 0xFFFE  # Supplementary Private Use Area-A: never meaningful in a launch script


@dataclass(frozen=True)
class Word:
    """One argument word as the command will see it."""

    value: str | None  # after expansion and quote removal; None if it depends on something unresolvable
    line: int  # 1-based, in the ORIGINAL script (array elements and payload words point at their real source)
    col: int  # 1-based, in characters
    text: str  # raw source text of the token it came from
    unknown: str = ""  # when value is None: a short reason ("$PP is not set in this script", ...)
    conditional: str = ""  # non-empty when only present on some paths ("inside if at line 40")


@dataclass(frozen=True)
class EnvSetting:
    """An environment variable the command receives (line/col: where its value was assigned)."""

    name: str
    value: str | None
    line: int
    col: int
    unknown: str = ""
    conditional: str = ""


@dataclass
class Command:
    argv: list[Word]
    env: dict[str, EnvSetting]  # exported variables in effect when the command runs, plus `X=... cmd` prefixes
    line: int
    col: int
    # Branches decided on the way here from a variable's default, i.e. assuming the environment does not set it:
    # "`[[ $PRESET == large ]]` (line 7) is false, taking the default of PRESET ..."
    assumes: tuple[str, ...] = ()


@dataclass
class ShellScript:
    commands: list[Command]  # in execution order; a `bash -c` payload's commands follow the command holding it
    errors: list[str]  # parse problems, "line N: ..."; empty when tree-sitter found no ERROR nodes


def parse_shell(text: str, script: str | None = None, where: tuple[str, int] = ("", 0)) -> ShellScript:
    """Read `text` as bash; never raises (problems go to `errors`, the rest is still returned).

    `script`: the script's path, when `text` is a script file run as such: `$0` and `${BASH_SOURCE[0]}` are then
    that path, so `$(dirname "$0")` and the like locate files next to it (shell_paths). `where`: the file and the
    line offset that Command.assumes name a decision's place with (a finding may be located in another file)."""
    out = ShellScript([], [])
    try:
        if not isinstance(text, str):
            text = bytes(text).decode("utf-8", "replace")
        org: list[Org] = []  # one (line, col, mark) per character, plus one for the end
        for ln, line in enumerate(text.split("\n"), 1):
            org.extend([(ln, c, "") for c in range(1, len(line) + 2)])
        st = _State(out, _Holes(), script)
        st.where = where
        _Walker(st, text, org, 0, "").run()
        st.finish()
    except _TooDeep as exc:
        out.errors.append(f"line {exc.line}: nested more than {_MAX_NESTING} levels deep (statements, substitutions "
                          f"or arithmetic); offlint does not read scripts nested deeper")
    except RecursionError:
        out.errors.append("line 1: nested too deeply for offlint to read")
    except Exception as exc:  # the linter must survive any script; report instead of crashing
        out.errors.append(f"line 1: could not read the script ({type(exc).__name__}: {exc})")
    return out


# ---------------------------------------------------------------------------------------------- internals


class _Holes:
    """Unknown parts of values, as private-use characters that map to the reason they are unknown."""

    def __init__(self):
        self.chars: dict[str, str] = {}
        self.reasons: list[str] = []

    def char(self, reason: str) -> str:
        if reason not in self.chars:
            self.chars[reason] = chr(_HOLE0 + min(len(self.reasons), _HOLES - 1))
            self.reasons.append(reason)
        return self.chars[reason]

    def why(self, s: str) -> str:
        """The reason of the first hole in `s`, or "" when `s` is fully known."""
        if s.isascii():
            return ""
        for c in s:
            k = ord(c) - _HOLE0
            if 0 <= k < _HOLES:
                return self.reasons[k] if k < len(self.reasons) else "unreadable character"
        return ""


@dataclass(frozen=True)
class _Field:
    """A word before it is reported: its value may hold holes, `org` has the origin of each character."""

    value: str
    org: tuple[Org, ...]
    line: int
    col: int
    text: str
    cond: str = ""

    def word(self, holes: _Holes) -> Word:
        why = holes.why(self.value)
        return Word(None if why else self.value, self.line, self.col, self.text, why, self.cond)


@dataclass(frozen=True)
class _Var:
    """A shell variable: scalar `s` or array `arr`; `unset` = exported or declared by name, never given a value."""

    s: str = ""
    org: tuple[Org, ...] = ()
    arr: tuple[_Field, ...] | None = None
    cond: str = ""
    lines: tuple[int, ...] = ()
    pos: Pos = (1, 1)
    exported: bool = False
    unset: bool = False
    defaults: tuple[str, ...] = ()  # variables whose default (`${X:-d}` with X not set here) this value took
    notes: tuple[str, ...] = ()  # the decisions taken from such defaults that this value rests on

    def scalar(self) -> tuple[str, tuple[Org, ...]]:
        """What `$X` gives: the value, or element 0 of an array."""
        if self.arr is None:
            return self.s, self.org
        return (self.arr[0].value, self.arr[0].org) if self.arr else ("", ())


class _P:
    """One piece of an expanding word: text that is split or not, or a break between array elements."""

    __slots__ = ("text", "org", "split", "quoted", "brk", "elem", "cond")

    def __init__(self, text="", org=(), split=False, quoted=False, brk=False, elem=None, cond=""):
        self.text, self.org, self.split, self.quoted = text, org, split, quoted
        self.brk, self.elem, self.cond = brk, elem, cond


class _Acc:
    """The field being built during word splitting; remembers whether it came from a single array element."""

    def __init__(self):
        self.ch, self.org, self.on, self.cond, self.src, self.elem = [], [], False, "", set(), None

    def add(self, p: _P, i: int, j: int) -> None:
        if i < j or p.elem is not None:
            self.src.add(id(p.elem) if p.elem is not None else 0)
            self.elem = p.elem or self.elem
            self.cond = self.cond or p.cond
        self.on = self.on or p.quoted or i < j
        self.ch.append(p.text[i:j])
        self.org.extend(p.org[i:j])

    def field(self, line: int, col: int, text: str, ctx: str) -> _Field:
        e = self.elem if self.elem is not None and self.src == {id(self.elem)} else None
        if e is not None:
            line, col, text = e.line, e.col, e.text
        cond = ctx or self.cond or (self.org[0][2] if self.org else "")  # first char: the word is a conditional one
        return _Field("".join(self.ch), tuple(self.org), line, col, text, cond)


def _split(pieces: list[_P], line: int, col: int, text: str, ctx: str) -> list[_Field]:
    """Field splitting: unquoted expansion text splits on whitespace, array elements start new fields."""
    out: list[_Field] = []
    acc = _Acc()
    for p in pieces:
        if p.brk:
            if acc.on:
                out.append(acc.field(line, col, text, ctx))
            acc = _Acc()
        elif not p.split:
            acc.add(p, 0, len(p.text))
        else:
            start = 0
            for i, c in enumerate(p.text + " "):
                if c in _IFS:
                    if i > start:
                        acc.add(p, start, i)
                    if acc.on and i < len(p.text):
                        out.append(acc.field(line, col, text, ctx))
                        acc = _Acc()
                    start = i + 1
    if acc.on:
        out.append(acc.field(line, col, text, ctx))
    return out


def _join(pieces: list[_P], at: Org) -> tuple[str, list[Org], str]:
    """Concatenate pieces without splitting (assignment values, patterns): (text, origins, conditional)."""
    txt: list[str] = []
    org: list[Org] = []
    cond = ""
    for p in pieces:
        if p.brk:
            txt.append(" ")
            org.append(org[-1] if org else at)
        txt.append(p.text)
        org.extend(p.org)
        cond = cond or p.cond
    return "".join(txt), org, cond


def _stamp(org, cond: str):
    """Mark characters that came from a conditional value, so words re-read from a payload keep the mark."""
    return [(ln, col, c or cond) for ln, col, c in org] if cond else org


def _same(a: _Var, b: _Var) -> bool:
    va = None if a.arr is None else [f.value for f in a.arr]
    vb = None if b.arr is None else [f.value for f in b.arr]
    return (a.s, a.unset, va) == (b.s, b.unset, vb)


def _merge(before: dict, paths: list[dict], label: str, holes: _Holes) -> dict:
    """Join the variables of alternative paths: agreeing values stay, arrays keep conditional appends."""
    out = {}
    for name in dict.fromkeys(n for p in paths for n in p):
        vals = [p.get(name) for p in paths]
        if all(v is vals[0] for v in vals):
            out[name] = vals[0]
            continue
        setv = [v for v in vals if v is not None and not v.unset]
        exported = any(v is not None and v.exported for v in vals)
        if not setv:
            out[name] = replace(next(v for v in vals if v is not None), exported=exported)
            continue
        maybe_unset = len(setv) < len(vals)
        cond = label if maybe_unset else ""
        base = before.get(name)
        if all(_same(v, setv[0]) for v in setv):
            pick = next((v for v in setv if v is not base), setv[0])
            varies_export = len({v is not None and v.exported for v in vals}) > 1
            out[name] = replace(pick, cond=pick.cond or (label if maybe_unset or varies_export else ""),
                                exported=exported)
            continue
        b = base.arr if base is not None and base.arr is not None else ()
        if all(v.arr is not None and len(v.arr) >= len(b) and all(x is y for x, y in zip(v.arr, b)) for v in setv):
            extra = {id(f): f if f.cond else replace(f, cond=label) for v in setv for f in v.arr[len(b) :]}
            out[name] = replace(setv[-1], arr=b + tuple(extra.values()), exported=exported, cond=cond)
            continue
        lines = sorted({ln for v in setv for ln in v.lines})
        n, sufs = len(base.s) if base is not None and base.arr is None and not base.unset else -1, None
        if n >= 0 and all(v.arr is None and v.s[:n] == base.s and v.org[:n] == base.org for v in setv):
            sufs = {(v.s[n:], v.org[n:]): 0 for v in setv if v.s[n:]}
        if sufs is not None and all(t[0] in _IFS for t, _ in sufs):
            # `X="$X --more"` on some paths: like an array append, the added words stay, marked conditional
            s = base.s + "".join(t for t, _ in sufs)
            org = base.org + tuple(o for _, os in sufs for o in _stamp(os, label))
            out[name] = replace(base, s=s, org=org, exported=exported, lines=tuple(lines))
            continue
        where = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
        pos = setv[-1].pos
        out[name] = _Var(s=holes.char(f"assigned differently on some paths ({where})"), org=((*pos, cond),),
                         lines=tuple(lines), pos=pos, exported=exported, cond=cond)
    return out


def _special_reason(name: str) -> str:
    if name == "0":
        return "script name $0"
    if name.isdigit():
        return f"positional parameter ${name}"
    if name in ("@", "*"):
        return f"positional parameters ${name}"
    if name == "#":
        return "argument count $#"
    if name in ("?", "$", "!", "-", "_"):
        return f"special parameter ${name}"
    return ""


def _shell_c_payload(vals: list[str | None]) -> int | None:
    """Index of the script string in `... bash [-flags]c SCRIPT` (None = unknown word); the first shell decides."""
    for i, v in enumerate(vals):
        if v is None or v.rsplit("/", 1)[-1] not in _SHELLS:
            continue
        j, has_c = i + 1, False
        while j < len(vals) and vals[j] is not None:
            v = vals[j]
            if v in ("-o", "+o", "-O", "+O"):
                j += 2
            elif len(v) > 1 and v[0] in "-+" and v != "--":
                has_c = has_c or (v[0] == "-" and v[1] != "-" and "c" in v)
                j += 1
            else:
                break
        return j if has_c and j < len(vals) else None
    return None


class _TooDeep(Exception):
    """Nesting past _MAX_NESTING: the walk stops, and the script is reported instead of losing commands."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


class _Unknown(Exception):
    pass


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


_BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "**": lambda a, b: a**b if b >= 0 else 0, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b), ">": lambda a, b: int(a > b), "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b), "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "&&": lambda a, b: int(bool(a and b)), "||": lambda a, b: int(bool(a or b)),
}


def _divmod0(a: int, b: int) -> tuple[int, int]:
    """C-style division (truncating toward zero), as bash does."""
    if b == 0:
        raise _Unknown("division by zero")
    q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    return q, a - b * q


_LANG = None


def _tree(data: bytes):
    global _LANG
    from tree_sitter import Language, Parser

    if _LANG is None:
        import tree_sitter_bash

        _LANG = Language(tree_sitter_bash.language())
    return Parser(_LANG).parse(data)


class _State:
    """What one shell process knows: variables, functions, and where it writes commands."""

    def __init__(self, out: ShellScript, holes: _Holes, script: str | None = None):
        self.out, self.holes, self.env, self.ctx = out, holes, {}, ""
        self.script = None  # `$0`, when the script's path is known
        if script:
            self.script = _Var(s=script, org=((1, 1, ""),) * len(script))
            self.env["BASH_SOURCE"] = _Var(arr=(_Field(script, self.script.org, 1, 1, "BASH_SOURCE"),))
        self.nesting = 0  # statements, words and arithmetic being read, one inside the other
        self.funcs: dict[str, tuple] = {}
        self.called: set[str] = set()
        self.calling: set[str] = set()
        self.locals: list[dict] = []
        self.hidden: set[str] = set()
        self.seen: dict[str, None] = {}  # variables whose default the expansion being read took
        self.noted: dict[str, None] = {}  # the decisions (their notes) the values being read rest on
        self.control: list[str] = []  # the decisions (notes) of the decided branches being read
        self.where: tuple[str, int] = ("", 0)  # the file and line offset decisions are shown with
        self.order: dict[str, int] = {}  # notes in the order the decisions were read (the script's order)

    def finish(self) -> None:
        """Functions never called still hold commands worth linting: read them with their definition's view."""
        for name, (walker, body, env, line) in list(self.funcs.items()):
            if name not in self.called:
                self.called.add(name)
                self.env, self.ctx = dict(env), f"inside function {name} at line {line}"
                walker.stmt(body)


class _Walker:
    """Interprets one piece of source text (the script, a -c payload, an eval string) against a _State."""

    def __init__(self, st: _State, text: str, org: list[Org], depth: int, label: str):
        self.st, self.text, self.org, self.depth, self.label = st, text, org, depth, label
        self.data = text.encode("utf-8", "surrogatepass")
        self.b2c = None
        if not text.isascii():
            self.b2c = []
            for i, ch in enumerate(text):
                self.b2c.extend([i] * len(ch.encode("utf-8", "surrogatepass")))
            self.b2c.append(len(text))
        self.tok = 0
        self.saw_at = False
        self.masked = Masked()

    # -- positions and small helpers ------------------------------------------------------------------
    def ci(self, b: int) -> int:
        if self.b2c is None:
            return min(b, len(self.text))
        return self.b2c[min(b, len(self.b2c) - 1)]

    def o(self, b: int) -> Org:
        return self.org[min(self.ci(b), len(self.org) - 1)]

    def pos(self, b: int) -> Pos:
        return self.o(b)[:2]

    def raw(self, n) -> str:
        return self.text[self.ci(n.start_byte) : self.ci(n.end_byte)]

    def hole(self, reason: str, at: Org) -> _P:
        return _P(self.st.holes.char(reason), [at], quoted=True)

    def why(self, s: str) -> str:
        return self.st.holes.why(s)

    def differs(self, org, cond: str = "") -> str:
        """Why a value that is partly conditional (beyond its own `cond`) is no single value."""
        mark = next((o[2] for o in org if o[2] and o[2] != cond), "")
        return f"assigned differently on some paths ({mark})" if mark else ""

    def num(self, s: str, org=(), cond: str = "") -> int:
        why = self.why(s) or self.differs(org, cond)
        if why:
            raise _Unknown(why)
        return _int(s)

    def run(self) -> None:
        tree, self.masked = parse_masked(self.data, _tree)  # tree-sitter-bash's known gaps (shell_mask)
        root = tree.root_node
        if root.has_error:
            self.errors(root)
        self.stmt(root)

    def masked_in(self, n) -> str:
        """Why node `n` cannot be read: it holds a construct masked for tree-sitter-bash ("" when it does not)."""
        span = self.masked.inside(n.start_byte, n.end_byte) if self.masked.spans else None
        if span is None:
            return ""
        raw = self.text[self.ci(span[0]) : self.ci(span[1])]
        raw = raw if len(raw) <= 60 else raw[:57] + "..."
        return f"`{raw}` is beyond offlint's bash parser (tree-sitter-bash misreads it), so its value is unknown"

    def errors(self, root) -> None:
        """The MISSING and ERROR nodes, in order (a loop: a deeply nested script must not exhaust the stack). An
        ERROR node that covers no text but blanks and line continuations (a script ending in `\\`) skips
        nothing, so it is no error."""
        pending = [root]
        while pending:
            n = pending.pop()
            if n.is_missing:
                self.st.out.errors.append(f"line {self.pos(n.start_byte)[0]}: {self.label}missing {n.type!r}")
            elif n.type == "ERROR":
                raw = self.raw(n)
                if raw.replace("\\", "").strip():
                    end = self.pos(n.end_byte)[0]
                    span = f" (lines {self.pos(n.start_byte)[0]}-{end} not read)" if "\n" in raw.rstrip() else ""
                    self.st.out.errors.append(f"line {self.pos(n.start_byte)[0]}: {self.label}syntax error near "
                                              f"{raw.split(chr(10), 1)[0][:40]!r}{span}")
            elif n.has_error:
                pending.extend(reversed(n.children))

    def deeper(self, n) -> None:
        """Count one more level of nesting; past _MAX_NESTING the whole walk stops (see parse_shell)."""
        self.st.nesting += 1
        if self.st.nesting > _MAX_NESTING:
            raise _TooDeep(self.pos(n.start_byte)[0])

    # -- statements ---------------------------------------------------------------------------------
    def stmt(self, n) -> None:
        self.deeper(n)
        try:
            self._stmt(n)
        finally:
            self.st.nesting -= 1

    def _stmt(self, n) -> None:
        t = n.type
        if t == "command":
            self.command(n)
        elif t == "variable_assignment":
            self.assign(n)
        elif t == "declaration_command":
            self.declare(n)
        elif t == "unset_command":
            for c in n.named_children:
                if not self.raw(c).startswith("-"):
                    self.st.env.pop(self.raw(c), None)
        elif t == "redirected_statement":
            body = n.child_by_field_name("body")
            self.body(([body] if body else []) + [c for c in n.children if c.type == "heredoc_redirect"])
        elif t == "heredoc_redirect":  # skip the heredoc text, but not a pipeline written after `<<EOF`
            self.body(c for c in n.named_children if not c.type.startswith("heredoc_"))
        elif t == "list":
            self.list_(n)
        elif t == "subshell":
            self.subshell(n.named_children)
        elif t == "if_statement":
            self.if_(n)
        elif t == "case_statement":
            self.case(n)
        elif t in ("for_statement", "c_style_for_statement", "while_statement"):
            self.loop(n)
        elif t == "function_definition":
            name, body = n.child_by_field_name("name"), n.child_by_field_name("body")
            if name is not None and body is not None:
                self.st.funcs[self.raw(name)] = (self, body, dict(self.st.env), self.pos(n.start_byte)[0])
        elif t not in ("comment", "test_command", "heredoc_body", "arithmetic_expansion"):
            self.body(n.named_children)

    def body(self, nodes) -> None:
        for c in nodes:
            self.stmt(c)

    def subshell(self, nodes) -> None:
        saved = self.st.env
        self.st.env = dict(saved)
        try:
            self.body(nodes)
        finally:
            self.st.env = saved

    def branches(self, bodies: list[list], default: bool, label: str, mark: bool = True) -> None:
        """Read alternative paths from the same starting state, then merge what they assigned."""
        before, ctx = self.st.env, self.st.ctx
        results = []
        for nodes in bodies:
            self.st.env = dict(before)
            self.st.ctx = label if mark else ctx
            try:
                self.body(nodes)
            finally:
                self.st.ctx = ctx
            if not self.exits(nodes):
                results.append(self.st.env)  # a path that ends in `exit` does not reach what follows
        if default or not results:
            results.append(before)
        self.st.env = _merge(before, results, label, self.st.holes)

    def list_(self, n) -> None:
        # `a && b && c` is a list nested in its first child, once per operator: read it as one flat sequence,
        # so that a long chain costs no nesting.
        kids = list(n.children)
        while kids and kids[0].type == "list":
            kids[:1] = kids[0].children
        # A test whose outcome is certain decides whether the next command runs (decide()).
        op, status, last, names = None, None, None, ()
        for c in kids:
            if not c.is_named:
                op = c.type
                continue
            if c.type == "comment":
                continue
            runs = None if status is None or op not in ("&&", "||") else status == (op == "&&")
            if op not in ("&&", "||"):
                self.stmt(c)
            elif runs is None or runs and self.exits([c]):
                if runs:
                    self.required([last], names)
                self.branches([[c]], True, f"after {op} at line {self.pos(c.start_byte)[0]}", mark=False)
                status = None
                continue
            else:
                note = self.note(names, f"{self.shown([last])} is {'true' if status else 'false'}")
                self.take([note], [c] if runs else [], [c])
                if not runs:
                    continue  # `false && x`: x does not run, and the status stays
            status, names = self.decide([c])
            last = c
            if status is None and c.type == "variable_assignment" and not _holds(c, ("command_substitution",)):
                status = True  # `X=1` succeeds

    def if_(self, n) -> None:
        clauses: list[tuple[list | None, list]] = []  # (condition, body); the else clause has no condition
        conds, body, seen_then = [], [], False
        for c in n.children:
            if c.type == "then":
                seen_then = True
            elif c.type in ("elif_clause", "else_clause"):
                clauses.append(self.clause(c) if c.type == "elif_clause" else (None, self.named(c)))
            elif c.is_named and c.type != "comment":
                (body if seen_then else conds).append(c)
        clauses.insert(0, (conds, body))
        self.body(conds)
        results: list[tuple[bool | None, tuple[str, ...]]] = []
        for cond, _ in clauses:
            results.append((True, ()) if cond is None else self.decide(cond))
            if results[-1][0] is True:
                break
        taken = next((k for k, (v, _) in enumerate(results) if v is True), -1)
        if self.exits(clauses[taken][1] if taken >= 0 else []):
            self.required([c for cond, _ in clauses[: len(results)] if cond for c in cond],
                          [name for _, names in results for name in names])
            results = [(None, ())] * len(clauses)  # taking it would end the script: read every path, as before
        notes = [self.note(names, f"{self.shown(cond)} is {'true' if verdict else 'false'}")
                 for (cond, _), (verdict, names) in zip(clauses, results) if verdict is not None and cond]
        everything = [c for cond, body in clauses for c in (cond or []) + body]
        verdicts = [v for v, _ in results]
        if None not in verdicts:
            self.take(notes, clauses[taken][1] if taken >= 0 else [], everything)
            return
        paths = [(cond if k and cond else []) + body for k, ((cond, body), v) in enumerate(zip(clauses, verdicts))
                 if v is not False]
        self.take(notes, [], everything, lambda: self.branches(paths, True not in verdicts,
                                                               f"inside if at line {self.pos(n.start_byte)[0]}"))

    def clause(self, c) -> tuple[list, list]:
        """An elif clause: (its condition, its body)."""
        cond, body, seen_then = [], [], False
        for x in c.children:
            if x.type == "then":
                seen_then = True
            elif x.is_named and x.type != "comment":
                (body if seen_then else cond).append(x)
        return cond, body

    @staticmethod
    def named(c) -> list:
        return [x for x in c.named_children if x.type != "comment"]

    def exits(self, nodes) -> bool:
        """Whether a path ends the script (`exit`, also inside `{ ...; }`): it does not reach what follows."""
        pending = list(nodes)
        while pending:
            c = pending.pop()
            if c.type == "command" and self.raw(c).split(None, 1)[:1] == ["exit"]:
                return True
            if c.type == "compound_statement":
                pending.extend(c.named_children)
        return False

    def shown(self, nodes) -> str:
        raw = " ".join(self.raw(c) for c in nodes).replace("\n", " ")
        name, offset = self.st.where
        line = self.pos(nodes[0].start_byte)[0] + offset
        return f"`{raw if len(raw) <= 60 else raw[:57] + '...'}` ({f'{name}:{line}' if name else f'line {line}'})"

    def note(self, names, what: str) -> str:
        """A decision that took defaults, as a path condition ("" when it took none): offlint assumes the
        environment does not set those variables (and that the script gets no argument for `${1:-...}`)."""
        env = [n for n in names if not n.isdigit()]
        args = [f"${n}" for n in names if n.isdigit()]
        parts = ([f"the environment does not set {', '.join(env)}"] if env else []) + (
            [f"the script is run without {', '.join(args)}"] if args else [])
        note = f"{what}, assuming {' and '.join(parts)}" if parts else ""
        self.st.order.setdefault(note, len(self.st.order))
        return note

    def take(self, notes: list[str], body, others, read=None) -> None:
        """Read a decided path (`body`, or `read()`) under its decisions' notes: its commands carry them, and so do
        the variables that any path of the statement (`others`) assigns, whose value now rests on them."""
        notes = [n for n in notes if n]
        self.st.control.extend(notes)
        try:
            read() if read is not None else self.body(body)
        finally:
            del self.st.control[len(self.st.control) - len(notes):]
        if notes:
            names = {self.raw(a.child_by_field_name("name").child_by_field_name("name")
                              or a.child_by_field_name("name"))
                     for c in others for a in [c, *_descendants(c, ("variable_assignment",))]
                     if a.type == "variable_assignment" and a.child_by_field_name("name") is not None}
            for name in names:
                v = self.st.env.get(name)
                if v is not None:
                    self.st.env[name] = replace(v, notes=tuple(dict.fromkeys([*v.notes, *notes])))

    def required(self, nodes, names) -> None:
        """A decision from defaults that would end the script (`[[ -z "${X:-}" ]] && exit 1`): the runs that matter
        set those variables, so from here on they (and the variables the test reads) are unknown."""
        if not names:
            return
        line = self.pos(nodes[0].start_byte)[0]
        read = [self.raw(v) for c in nodes for v in _descendants(c, ("variable_name",))]
        read = [name for name in read if (self.get(name) or _Var()).defaults]  # not those the script sets plainly
        for name in dict.fromkeys([*names, *read]):
            if not name.isdigit():
                self.set_unknown(name, f"the script stops at line {line} unless ${name} is set differently from its "
                                       f"default", self.pos(nodes[0].start_byte))

    def case(self, n) -> None:
        bodies, default, items = [], True, []
        for item in (c for c in n.named_children if c.type == "case_item"):
            stmts, values, through = [], [], False
            for i, c in enumerate(item.children):
                field = item.field_name_for_child(i)
                if field == "value":
                    default = default and self.raw(c) != "*"
                    values.append(c)
                elif field == "fallthrough":
                    through = True
                elif c.is_named and c.type != "comment":
                    stmts.append(c)
            bodies.append(stmts)
            items.append((values, through))
        subject = n.child_by_field_name("value")
        taken, names = self.decide_case(subject, items)
        if taken is not None and self.exits(bodies[taken] if taken >= 0 else []):
            self.required([subject], names)
        elif taken is not None:
            pattern = f"`{self.raw(items[taken][0][0])})`" if taken >= 0 else "no pattern"
            self.take([self.note(names, f"case {self.shown([subject])} takes {pattern}")],
                      bodies[taken] if taken >= 0 else [], [c for b in bodies for c in b])
            return
        self.branches(bodies, default, f"inside case at line {self.pos(n.start_byte)[0]}")

    # -- decisions: tests and case patterns on known values (shell_tests) ---------------------------------
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

    def loop(self, n) -> None:
        kind = "while" if n.type == "while_statement" else "for"
        var = n.child_by_field_name("variable") if n.type == "for_statement" else None
        if var is not None:
            self.set_unknown(self.raw(var), "loop variable", self.pos(var.start_byte))
        if kind == "while":
            self.body(n.children_by_field_name("condition"))
        body = n.child_by_field_name("body")
        self.branches([[body] if body is not None else []], True,
                      f"inside {kind} loop at line {self.pos(n.start_byte)[0]}")

    # -- assignments ----------------------------------------------------------------------------------
    def set_unknown(self, name: str, reason: str, pos: Pos) -> None:
        old = self.st.env.get(name)
        self.st.env[name] = _Var(s=self.st.holes.char(reason), org=((*pos, ""),), lines=(pos[0],), pos=pos,
                                 exported=bool(old and old.exported))

    def scalar(self, val) -> tuple[str, list[Org], str]:
        if val is None:
            return "", [], ""
        self.tok = self.ci(val.start_byte)
        return _join(self.exp(val, False), self.o(val.start_byte))

    def assign(self, n, export: bool = False) -> None:
        """An assignment; the new value remembers the defaults it took and the decisions it rests on."""
        seen, noted = self.st.seen, self.st.noted
        self.st.seen, self.st.noted = {}, {}
        try:
            self._assign(n, export)
            name_n = n.child_by_field_name("name")
            name = self.raw(name_n.child_by_field_name("name") or name_n) if name_n is not None else ""
            var = self.st.env.get(name)
            notes = tuple(dict.fromkeys([*self.st.control, *self.st.noted]))
            if var is not None and (self.st.seen or notes):
                self.st.env[name] = replace(var, defaults=tuple(self.st.seen) or var.defaults,
                                            notes=tuple(dict.fromkeys([*notes, *var.notes])))
        finally:
            self.st.seen, self.st.noted = {**seen, **self.st.seen}, {**noted, **self.st.noted}

    def _assign(self, n, export: bool) -> None:
        name_n, val = n.child_by_field_name("name"), n.child_by_field_name("value")
        if name_n is None:
            return
        pos, append = self.pos(n.start_byte), any(c.type == "+=" for c in n.children)
        if name_n.type == "subscript":
            return self.assign_elem(name_n, val, pos)
        name = self.raw(name_n)
        old = self.st.env.get(name)
        exported = export or bool(old and old.exported)
        old = None if old is not None and old.unset else old
        if val is not None and val.type == "array":
            elems = tuple(f for el in val.named_children if el.type != "comment" for f in self.token(el))
            if append and old is not None:
                elems = (old.arr if old.arr is not None else (_Field(old.s, old.org, *old.pos, f"${name}"),)) + elems
            var = _Var(arr=elems, lines=(pos[0],), pos=pos, exported=exported)
        else:
            s, org, cond = self.scalar(val)
            if append and old is not None:
                if old.arr is not None:
                    s, org = self.st.holes.char("appended to an array"), [(*pos, "")]
                else:
                    s, org = old.s + s, list(old.org) + org
            var = _Var(s=s, org=tuple(org), cond=cond, lines=(pos[0],), pos=pos, exported=exported)
        self.st.env[name] = var

    def assign_elem(self, sub, val, pos: Pos) -> None:
        name = self.raw(sub.child_by_field_name("name") or sub)
        old = self.st.env.get(name)
        try:
            idx = self.arith(sub.child_by_field_name("index"))
        except _Unknown:
            idx = -1
        if old is None or old.arr is None or not 0 <= idx <= len(old.arr) or val is None:
            return self.set_unknown(name, f"element assignment {self.raw(sub)}=", pos)
        s, org, cond = self.scalar(val)
        f = _Field(s, tuple(org), *self.pos(val.start_byte), self.raw(val), cond or self.st.ctx)
        arr = old.arr[:idx] + (f,) + old.arr[idx + 1 :]
        self.st.env[name] = replace(old, arr=arr, lines=(pos[0],), pos=pos)

    def declare(self, n) -> None:
        """export / declare / typeset / local / readonly: assignments, export flags, `local` scoping."""
        kw, flags = n.children[0].type, ""
        for c in n.children[1:]:
            if c.type == "word" and self.raw(c)[:1] in "-+":
                flags += self.raw(c)[1:] if self.raw(c)[0] == "-" else ""
                if "f" in flags or "p" in flags:
                    return
                continue
            if c.type not in ("variable_name", "variable_assignment"):
                continue
            export = kw == "export" and "n" not in flags or "x" in flags
            name_n = c.child_by_field_name("name") if c.type == "variable_assignment" else c
            name = self.raw(name_n.child_by_field_name("name") or name_n) if name_n is not None else ""
            if not name:
                continue
            if kw == "local" and self.st.locals and name not in self.st.locals[-1]:
                self.st.locals[-1][name] = self.st.env.get(name)
            old, p = self.st.env.get(name), self.pos(c.start_byte)
            if c.type == "variable_assignment":
                self.assign(c, export)
            elif kw == "export" and "n" in flags and old is not None:
                self.st.env[name] = replace(old, exported=False)
            elif old is not None:
                self.st.env[name] = replace(old, exported=old.exported or export)
            elif export:
                why = self.st.holes.char(f"${name} is exported but not set in this script")
                self.st.env[name] = _Var(s=why, org=((*p, ""),), unset=True, exported=True, pos=p, lines=(p[0],))
            elif "a" in flags or "A" in flags:
                self.st.env[name] = _Var(arr=(), pos=p, lines=(p[0],))

    # -- commands -------------------------------------------------------------------------------------
    def token(self, n) -> list[_Field]:
        a = self.ci(n.start_byte)
        self.tok = a
        line, col, _ = self.org[a]
        return _split(self.exp(n, False), line, col, self.text[a : self.ci(n.end_byte)], self.st.ctx)

    def setting(self, name: str, v: _Var) -> EnvSetting:
        why = self.why(v.s) or self.differs(v.org, v.cond)
        return EnvSetting(name, None if why else v.s, v.pos[0], v.pos[1], why, v.cond)

    def command(self, n) -> None:
        kids = n.children
        for i in range(1, len(kids)):  # tree-sitter-bash sometimes glues `A=1 B=2<newline>cmd` into one command
            gap = self.text[self.ci(kids[i - 1].end_byte) : self.ci(kids[i].start_byte)]
            if kids[i - 1].type == "variable_assignment" and "\n" in gap.replace("\\\n", ""):
                self.body(kids[:i])
                a, b = self.ci(kids[i].start_byte), self.ci(n.end_byte)
                return _Walker(self.st, self.text[a:b], self.org[a : b + 1], self.depth, self.label).run()
        prefix, toks = [], []
        for i, c in enumerate(kids):
            if c.type == "variable_assignment":
                prefix.append(c)
            elif c.type == "command_name":
                toks.extend(c.named_children or [c])
            elif c.type.endswith("redirect") or c.type == "comment":
                continue
            elif not (c.type == "$" and i + 1 < len(kids) and kids[i + 1].start_byte == c.end_byte):
                toks.append(c)  # (a `$` glued to "..." is bash's translated string; drop the `$`)
        noted, self.st.noted = self.st.noted, {}
        try:
            fields = [f for t in toks for f in self.token(t)]
            penv: dict[str, _Var] = {}
            for a in prefix:
                name_n = a.child_by_field_name("name")
                if name_n is not None:
                    s, org, cond = self.scalar(a.child_by_field_name("value"))
                    p = self.pos(a.start_byte)
                    penv[self.raw(name_n)] = _Var(s=s, org=tuple(org), cond=self.st.ctx or cond, pos=p,
                                                  lines=(p[0],), exported=True)
            read = list(self.st.noted)
        finally:
            self.st.noted = {**noted, **self.st.noted}
        if not fields:
            return
        exported = {k: v for k, v in self.st.env.items() if v.exported and v.arr is None}
        env = {k: self.setting(k, v) for k, v in exported.items()}
        env.update({k: self.setting(k, v) for k, v in penv.items()})
        # the decisions from defaults on this command's path, its words' and its environment's
        notes = dict.fromkeys([*self.st.control, *read, *(n for v in exported.values() for n in v.notes)])
        assumes = tuple(sorted(notes, key=lambda note: self.st.order.get(note, 0)))
        self.st.out.commands.append(Command([f.word(self.st.holes) for f in fields], env, *self.pos(n.start_byte),
                                            assumes))
        vals = [None if self.why(f.value) else f.value for f in fields]
        self.st.control.extend(read)  # an eval or a function call runs on the path its words came from
        try:
            self.builtin(fields, vals)
        finally:
            del self.st.control[len(self.st.control) - len(read):]
        j = _shell_c_payload(vals) if self.depth < _MAX_DEPTH else None
        if j is not None:
            self.payload(fields[j], penv, assumes)

    def builtin(self, fields: list[_Field], vals: list[str | None]) -> None:
        """Builtins that change variables (read, mapfile, printf -v, getopts), eval, and function calls."""
        name, args, pos = vals[0], vals[1:], (fields[0].line, fields[0].col)
        if name in ("read", "mapfile", "readarray"):
            takes = "adinNptu" if name == "read" else "dnOsuCc"
            names, i = [], 0
            while i < len(args):
                v = args[i]
                if v is not None and len(v) > 1 and v[0] == "-" and not names:
                    if v[-1] in takes and i + 1 < len(args) and args[i + 1]:
                        if name == "read" and v[-1] == "a":
                            names.append(args[i + 1])
                        i += 1
                elif v is not None:
                    names.append(v)
                i += 1
            for v in names or ["REPLY" if name == "read" else "MAPFILE"]:
                self.set_unknown(v, "set by read" if name == "read" else f"set by {name}", pos)
        elif name == "printf" and len(args) > 1 and args[0] == "-v" and args[1]:
            self.set_unknown(args[1], "set by printf -v", pos)
        elif name == "getopts" and len(args) > 1 and args[1]:
            self.set_unknown(args[1], "set by getopts", pos)
        elif name == "eval" and args and self.depth < _MAX_DEPTH:
            text, org = "", []
            for k, f in enumerate(fields[1:]):
                if k:
                    text += " "
                    org.append(org[-1] if org else (f.line, f.col, f.cond))
                text += f.value
                org.extend(f.org if len(f.org) == len(f.value) else [(f.line, f.col, f.cond)] * len(f.value))
            _Walker(self.st, text, org + [org[-1] if org else (*pos, "")], self.depth + 1, "in eval: ").run()
        if name in self.st.funcs and name not in self.st.calling:
            walker, body = self.st.funcs[name][:2]
            self.st.called.add(name)
            self.st.calling.add(name)
            self.st.locals.append({})
            try:
                walker.stmt(body)
            finally:
                self.st.calling.discard(name)
                for k, v in self.st.locals.pop().items():
                    if v is None:
                        self.st.env.pop(k, None)
                    else:
                        self.st.env[k] = v

    def payload(self, f: _Field, penv: dict[str, _Var], assumes: tuple[str, ...] = ()) -> None:
        """`bash -c SCRIPT` (also behind srun/docker/...): read SCRIPT as a child shell with the exported env."""
        org = list(f.org) if len(f.org) == len(f.value) else [(f.line, f.col, f.cond)] * len(f.value)
        child = _State(self.st.out, self.st.holes)
        child.env = {k: v for k, v in self.st.env.items() if v.exported and v.arr is None}
        child.env.update(penv)
        child.ctx = self.st.ctx
        child.hidden = {k for k, v in self.st.env.items() if not v.exported}
        child.nesting = self.st.nesting
        child.control = list(assumes)
        child.where, child.order = self.st.where, self.st.order
        org.append(org[-1] if org else (f.line, f.col, f.cond))
        _Walker(child, f.value, org, self.depth + 1, "in shell -c payload: ").run()
        child.finish()

    # -- word expansion -------------------------------------------------------------------------------
    def lit(self, a: int, b: int, q: bool) -> list[_P]:
        """Literal source text with backslash escapes: unquoted (splittable) or inside double quotes."""
        t, org, out = self.text, self.org, []
        start = i = a
        while i < b:
            if t[i] == "\\" and i + 1 < b and (not q or t[i + 1] in '$`"\\\n'):
                if i > start:
                    out.append(_P(t[start:i], org[start:i], split=not q, quoted=q))
                if t[i + 1] != "\n":
                    out.append(_P(t[i + 1], org[i + 1 : i + 2], quoted=True))
                i = start = i + 2
            else:
                i += 1
        if b > start:
            out.append(_P(t[start:b], org[start:b], split=not q, quoted=q))
        return out

    def start(self, c) -> int:
        """Where a child really starts: tree-sitter glues the whitespace before `$` in "a $X" to the `$` token."""
        a = self.ci(c.start_byte)
        if c.child_count and not c.children[0].is_named:
            r = self.raw(c.children[0])
            a += len(r) - len(r.lstrip())
        return a

    def seq(self, kids, a: int, b: int, q: bool) -> list[_P]:
        """Named children in [a, b) expanded in order; the text between them is literal."""
        out = []
        for i, c in enumerate(kids):
            ca, cb = self.start(c), self.ci(c.end_byte)
            if ca < a or cb > b:
                continue
            nxt = kids[i + 1] if i + 1 < len(kids) else None
            if c.type == "$" and nxt is not None and nxt.type == "string" and nxt.start_byte == c.end_byte:
                out += self.lit(a, ca, q)  # `$"..."`: bash's translated string, the same as "..."
                a = cb
            elif c.is_named:
                out += self.lit(a, ca, q) + self.exp(c, q)
                a = cb
        return out + self.lit(a, b, q)

    def exp(self, n, q: bool) -> list[_P]:
        self.deeper(n)
        try:
            return self._exp(n, q)
        finally:
            self.st.nesting -= 1

    def _exp(self, n, q: bool) -> list[_P]:
        t, a, b = n.type, self.ci(n.start_byte), self.ci(n.end_byte)
        at = self.org[a]
        if t in ("expansion", "arithmetic_expansion") and self.masked.spans:
            why = self.masked_in(n)
            if why:
                return [self.hole(why, at)]
        if t == "word" and not q and a == self.tok and self.text.startswith("~", a):
            return [self.hole("tilde expansion ~ (home directory)", at)]
        if t == "raw_string":
            e = b - 1 if b - a >= 2 and self.text[b - 1] == "'" else b
            return [_P(self.text[a + 1 : e], self.org[a + 1 : e], quoted=True)]
        if t == "string":
            return self.string(n, a, b)
        if t == "ansi_c_string":
            return [self.ansi_c(a + 2, b - 1 if self.text[b - 1 : b] == "'" and b - a >= 3 else b)]
        if t == "concatenation":
            return self.seq(n.children, a, b, q)
        if t == "simple_expansion":
            return self.param(self.raw(n.named_children[-1]) if n.named_children else "", q, at)
        if t == "expansion":
            return self.expansion(n, q, at)
        if t in ("command_substitution", "process_substitution"):
            known = self.path_idiom(n, q, at) if t == "command_substitution" else None
            if known is not None:
                return known
            self.subshell(n.named_children)
            return [self.hole(t.replace("_", " "), at)]
        if t == "arithmetic_expansion":
            try:
                s = str(self.arith(n))
                return [_P(s, [at] * len(s), split=not q, quoted=q)]
            except _Unknown as exc:
                return [self.hole(f"arithmetic: {exc}", at)]
        return self.lit(a, b, q)

    def path_idiom(self, n, q: bool, at: Org) -> list[_P] | None:
        """`$(dirname "$0")`, `$(cd "$(dirname "$0")/.." && pwd -P)`, `$(realpath "$0")`...: the path it prints
        (shell_paths), or a hole when an argument is unknown; None when `n` is not such an idiom."""
        stmts = [c for c in n.named_children if c.type != "comment"]
        if len(stmts) == 1 and stmts[0].type == "list":
            if [c.type for c in stmts[0].children if not c.is_named] != ["&&"]:
                return None
            stmts = [c for c in stmts[0].children if c.is_named and c.type != "comment"]
        commands = []
        for i, c in enumerate(stmts):
            if c.type == "redirected_statement":  # `cd DIR >/dev/null`, `dirname X 2>/dev/null`: the same output
                redirects = [r for r in c.children if r.type.endswith("redirect")]
                if i == 0 and len(stmts) == 2 or all(self.raw(r).startswith("2") for r in redirects):
                    c = c.child_by_field_name("body")
            name = c.child_by_field_name("name") if c is not None and c.type == "command" else None
            if name is None or self.raw(name) not in shell_paths.COMMANDS:
                return None
            commands.append((self.raw(name), c.children_by_field_name("argument")))
        if not 1 <= len(commands) <= 2:
            return None
        tok, saw_at = self.tok, self.saw_at
        try:
            known, cond = [], ""
            for name, args in commands:
                fields = [f for a in args for f in self.token(a)]
                for f in fields:
                    why = self.why(f.value) or self.differs(f.org, f.cond)
                    if why:
                        return [self.hole(why, at)]
                    cond = cond or f.cond
                known.append((name, [f.value for f in fields]))
        finally:
            self.tok, self.saw_at = tok, saw_at
        path = shell_paths.prints(known)
        if path is None:
            return [self.hole("command substitution", at)]
        return [_P(path, [at] * len(path), split=not q, quoted=q, cond=cond)]

    def string(self, n, a: int, b: int) -> list[_P]:
        """A double-quoted string; `"${A[@]}"` alone yields no field for an empty array, as in bash."""
        kids = n.children
        stop = self.ci(kids[-1].start_byte) if len(kids) > 1 and kids[-1].type == '"' else b
        out, only_at, i = [], True, a + 1
        for c in kids:
            ca = self.start(c)
            if not c.is_named or c.type == "string_content" or ca < i:
                continue
            lit = self.lit(i, ca, True)
            self.saw_at = False
            out += lit + self.exp(c, True)
            only_at = only_at and not lit and self.saw_at
            i = self.ci(c.end_byte)
        tail = self.lit(i, stop, True)
        if tail or not only_at or i == a + 1:
            out.insert(0, _P(quoted=True))
        return out + tail

    def ansi_c(self, a: int, b: int) -> _P:
        esc = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
               "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
        t, txt, org, i = self.text, [], [], a
        while i < b:
            c, n = t[i], 1
            if c == "\\" and i + 1 < b:
                d = t[i + 1]
                if d in esc:
                    c, n = esc[d], 2
                elif d == "x" and i + 2 < b and t[i + 2] in "0123456789abcdefABCDEF":
                    n = 3 + (i + 3 < b and t[i + 3] in "0123456789abcdefABCDEF")
                    c = chr(int(t[i + 2 : i + n], 16))
                elif d in "01234567":
                    n = 2
                    while n < 4 and i + n < b and t[i + n] in "01234567":
                        n += 1
                    c = chr(int(t[i + 1 : i + n], 8) & 0xFF)
            txt.append(c)
            org.append(self.org[i])
            i += n
        return _P("".join(txt), org, quoted=True)

    def get(self, name: str) -> _Var | None:
        v = self.st.env.get(name)
        return None if v is None or v.unset else v

    def unset_reason(self, name: str) -> str:
        v = self.st.env.get(name)
        if v is not None and v.unset:
            return self.why(v.s)
        if name in self.st.hidden:
            return f"${name} is set in the launching script but not exported to this shell"
        return f"${name} is not set in this script"

    def value(self, v: _Var | None, reason: str, multi: bool, star: bool, q: bool, at: Org) -> list[_P]:
        if v is None:
            return [self.hole(reason, at)]
        if v.defaults:
            self.st.seen.update(dict.fromkeys(v.defaults))
        if v.notes:
            self.st.noted.update(dict.fromkeys(v.notes))
        if v.arr is None or not multi:
            s, org = v.scalar()
            cond = v.cond or (v.arr[0].cond if v.arr else "")
            return [_P(s, _stamp(org, cond), split=not q, quoted=q, cond=cond)]
        if star and q:  # one word, present whatever the elements; they keep their marks per character
            s, org, _ = _join([p for i, f in enumerate(v.arr) for p in ([_P(brk=True)] if i else []) + [
                _P(f.value, _stamp(f.org, f.cond))]], (*v.pos, v.cond))
            return [_P(s, org, quoted=True, cond=v.cond)]
        self.saw_at = True
        out = []
        for i, f in enumerate(v.arr):
            if i:
                out.append(_P(brk=True))
            out.append(_P(f.value, _stamp(f.org, f.cond), split=not q, quoted=q, elem=f, cond=f.cond))
        return out

    def param(self, name: str, q: bool, at: Org) -> list[_P]:
        if name == "0" and self.st.script is not None:
            return self.value(self.st.script, "", False, False, q, at)
        special = _special_reason(name)
        if special:
            return [self.hole(special, at)]
        return self.value(self.get(name), self.unset_reason(name), False, False, q, at)

    def target(self, n) -> tuple[_Var | None, str, bool, bool, str]:
        """The variable named inside ${...}: (var, reason if missing, [@]/[*]?, [*]?, name)."""
        if n.type != "subscript":
            name = self.raw(n)
            if name == "0" and self.st.script is not None:
                return self.st.script, "", False, False, name
            special = _special_reason(name)
            if special:
                return None, special, False, False, name
            return self.get(name), self.unset_reason(name), False, False, name
        name_n, idx_n = n.child_by_field_name("name"), n.child_by_field_name("index")
        name = self.raw(name_n) if name_n is not None else ""
        v, reason = self.get(name), self.unset_reason(name)
        idx = self.raw(idx_n) if idx_n is not None else ""
        if idx in ("@", "*") or v is None or (v.arr is None and self.why(v.s)):
            return v, reason, idx in ("@", "*") and v is not None and v.arr is not None, idx == "*", name
        try:
            i = self.arith(idx_n)
        except _Unknown as exc:
            return None, f"array index: {exc}", False, False, name
        arr = v.arr if v.arr is not None else (_Field(v.s, v.org, *v.pos, ""),)
        if not -len(arr) <= i < len(arr):
            return None, f"${{{name}[{idx}]}} is not set in this script", False, False, name
        f = arr[i]
        return _Var(s=f.value, org=f.org, cond=f.cond, pos=v.pos), "", False, False, name

    def expansion(self, n, q: bool, at: Org) -> list[_P]:
        """${...}: plain, length, defaults, pattern removal/replacement, case, substring."""
        kids = list(n.children[1:])
        end = n.end_byte
        if kids and kids[-1].type == "}":
            end = kids.pop().start_byte
        prefix = kids.pop(0).type if kids and not kids[0].is_named and kids[0].type in ("#", "!") else ""
        if not kids:
            return self.param(prefix, q, at) if prefix else [self.hole("empty ${}", at)]
        v, reason, multi, star, name = self.target(kids[0])
        rest = kids[1:]
        if prefix == "!":
            return [self.hole("indirect expansion ${!...}", at)]
        if prefix == "#":
            if v is None:
                return [self.hole(reason, at)]
            s, org = v.scalar()
            why = "" if multi else self.why(s) or self.differs(org, v.cond)
            if why:
                return [self.hole(why, at)]
            s = str(len(v.arr) if multi else len(s))
            return [_P(s, [at] * len(s), split=not q, quoted=q)]
        if not rest:
            return self.value(v, reason, multi, star, q, at)
        op = rest[0].type
        region = lambda x, y, qq=q: self.seq(rest, self.ci(x), self.ci(y), qq)  # noqa: E731
        if op in _DEFAULT_OPS:
            return self.default(op, v, reason, multi, star, q, name, region(rest[0].end_byte, end), at)
        if v is None:
            return [self.hole(reason, at)]
        s, org = v.scalar()
        if (multi and op != ":") or (not multi and self.why(s)):
            return [self.hole(self.why(s) if self.why(s) else f"unsupported expansion {self.raw(n)}", at)]
        org, ops = list(org), [c for c in rest if not c.is_named]
        if op in ("#", "##", "%", "%%", "/", "//", "/#", "/%"):
            mid = ops[1] if len(ops) > 1 and op[0] == "/" and ops[1].type == "/" else None
            pat = _join(region(rest[0].end_byte, mid.start_byte if mid else end, True), at)[0]
            rep, rorg, _ = _join(region(mid.end_byte, end, True), at) if mid else ("", [], "")
            why = self.why(pat + rep) or (op[0] == "/" and any(c in pat for c in "*?[") and "pattern replacement")
            if why:
                return [self.hole(why, at)]
            s, org = self.cut(op, s, org, pat, rep, rorg)
        elif op in (",", ",,", "^", "^^"):
            conv = str.lower if op[0] == "," else str.upper
            s = conv(s) if len(op) == 2 else conv(s[:1]) + s[1:]
            org = org if len(org) == len(s) else [at] * len(s)
        elif op == ":":
            try:
                colon2 = ops[1] if len(ops) > 1 and ops[1].type == ":" else None
                off = self.num(_join(region(rest[0].end_byte, colon2.start_byte if colon2 else end, True), at)[0])
                ln = self.num(_join(region(colon2.end_byte, end, True), at)[0]) if colon2 else None
            except _Unknown as exc:
                return [self.hole(f"substring: {exc}", at)]
            seq = list(v.arr) if multi else list(range(len(s)))
            off = max(0, len(seq) + off) if off < 0 else off
            stop = len(seq) if ln is None else (ln + off if ln >= 0 else len(seq) + ln)
            if multi:
                return self.value(replace(v, arr=tuple(seq[off:stop])), reason, True, star, q, at)
            s, org = s[off:stop], org[off:stop]
        else:
            return [self.hole(f"unsupported expansion {self.raw(n)}", at)]
        return [_P(s, org, split=not q, quoted=q, cond=v.cond)]

    @staticmethod
    def cut(op: str, s: str, org: list, pat: str, rep: str, rorg: list) -> tuple[str, list]:
        """${X#p} ${X##p} ${X%p} ${X%%p} (glob patterns) and ${X/lit/rep} replacement, keeping origins."""
        n = len(s)
        if op in ("#", "##"):
            rng = range(n, -1, -1) if op == "##" else range(n + 1)
            k = next((k for k in rng if fnmatch.fnmatchcase(s[:k], pat)), 0)
            return s[k:], org[k:]
        if op in ("%", "%%"):
            rng = range(n + 1) if op == "%%" else range(n, -1, -1)
            k = next((k for k in rng if fnmatch.fnmatchcase(s[k:], pat)), n)
            return s[:k], org[:k]
        if not pat:
            return s, org
        if op == "/#":
            return (rep + s[len(pat) :], rorg + org[len(pat) :]) if s.startswith(pat) else (s, org)
        if op == "/%":
            return (s[: n - len(pat)] + rep, org[: n - len(pat)] + rorg) if s.endswith(pat) else (s, org)
        out, oorg, i, done = [], [], 0, False
        while i < n:
            if not done and s.startswith(pat, i):
                out.append(rep)
                oorg += rorg
                i += len(pat)
                done = op == "/"
            else:
                out.append(s[i])
                oorg.append(org[i])
                i += 1
        return "".join(out), oorg

    def default(self, op, v, reason, multi, star, q, name, operand, at) -> list[_P]:
        """${X:-d} ${X-d} ${X:=d} ${X:+a} ${X:?m}; a variable set only on some paths gives both outcomes."""
        colon, kind = op.startswith(":"), op[-1]

        def outcome(var):
            s, org = var.scalar() if var is not None else ("", ())
            if colon and not multi and s and all(0 <= ord(c) - _HOLE0 < _HOLES for c in s):
                return self.value(var, reason, multi, star, q, at)  # wholly unknown: empty or not, can't say
            if colon and not multi and s and self.differs(org[:1], var.cond):
                return [self.hole(self.differs(org[:1], var.cond), at)]  # empty on some paths
            empty = var is not None and (not var.arr if multi else s == "")
            use_default = var is None or (colon and empty)
            if kind == "+":
                return [] if use_default else operand
            if not use_default:
                return self.value(var, reason, multi, star, q, at)
            return [self.hole(reason if var is None else f"${name} is empty", at)] if kind == "?" else operand

        res = outcome(v)
        if v is None and name:
            self.st.seen[name] = None  # the outcome assumes the environment (or the command line) does not set it
        if v is not None and v.cond:
            a, b = _join(res, at)[0], _join(outcome(None), at)[0]
            if a != b or self.why(a + b):
                res = [self.hole(f"${name} is only set on some paths ({v.cond})", at)]
        if kind == "=" and res is operand and not multi:
            s, org, cond = _join(operand, at)
            old = self.st.env.get(name)
            self.st.env[name] = _Var(s=s, org=tuple(org), cond=cond, lines=(at[0],), pos=at[:2],
                                     exported=bool(old and old.exported), defaults=(name,) if v is None else ())
        return res

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

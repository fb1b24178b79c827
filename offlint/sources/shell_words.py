"""Word expansion in the walker: quoting, escapes, `$X`, `${X:-d}` and the other `${...}` forms, arrays,
`$'...'`, command substitution (only the path idioms of shell_paths have a value), arithmetic expansion.

A word expands to pieces (`_P`, shell_values) that carry each character's origin; an unknown part is a hole.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace

from offlint.sources import shell_paths
from offlint.sources.shell_values import (_Field, _HOLE0, _HOLES, _join, _MAX_NESTING, Org, _P, _stamp, _TooDeep,
                                          _Unknown, _Var)

_DEFAULT_OPS = (":-", "-", ":=", "=", ":+", "+", ":?", "?")


# A function's positional parameters and their count (`$1`, `${2}`, `$@`, `$*`, `$#`): a function run for its output
# here is called without arguments, and the script's own would be read in their place
_POSITIONAL = re.compile(r"\$(?:[0-9@*#]|\{[0-9@*#])")
_ECHO_OPTIONS = re.compile(r"-[neE]+")


class WordExpansion:
    """Expanding one word as bash would, as far as is statically known; part of the walker."""

    echoing: frozenset = frozenset()  # the functions being read for their output now (function_output)

    def lit(self, a: int, b: int, q: bool) -> list[_P]:
        """Literal source text with backslash escapes: unquoted (splittable) or inside double quotes."""
        t, org, out = self.text, self.org, []
        start, i = a, t.find("\\", a, b)  # from backslash to backslash (a loop per character was slow)
        while i >= 0:
            if i + 1 < b and (not q or t[i + 1] in '$`"\\\n'):
                if i > start:
                    out.append(_P(t[start:i], org[start:i], split=not q, quoted=q))
                if t[i + 1] != "\n":
                    out.append(_P(t[i + 1], org[i + 1 : i + 2], quoted=True))
                start = i + 2
                i = t.find("\\", i + 2, b)
            else:
                i = t.find("\\", i + 1, b)
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
        st = self.st
        st.nesting += 1  # (deeper(), inline: a call less per word)
        if st.nesting > _MAX_NESTING:
            raise _TooDeep(self.pos(n.start_byte)[0])
        try:
            return self._exp(n, q)
        finally:
            st.nesting -= 1

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
            known = self.path_idiom(n, q, at) or self.cat_document(n, q) or self.function_output(n, q, at) \
                if t == "command_substitution" else None
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
        """`$(dirname "$0")`, `$(cd "$(dirname "$0")/.." && pwd -P)`, `$(realpath "$0")`, `$(seq 16 8 256)`...: what
        it prints (shell_paths), or a hole when an argument is unknown; None when `n` is not such an idiom."""
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
        known, cond = [], ""
        for name, args in commands:
            fields, mark, why = self.substituted_words(args)
            if why:
                return [self.hole(why, at)]
            cond = cond or mark
            known.append((name, [f.value for f in fields]))
        path = shell_paths.prints(known)
        if path is None:
            return [self.hole("command substitution", at)]
        return [_P(path, [at] * len(path), split=not q, quoted=q, cond=cond)]

    def function_output(self, n, q: bool, at: Org) -> list[_P] | None:
        """`$(extra_args)`: what a function of this script, called without arguments, prints where its body is only
        `echo` commands of words offlint reads (each line's words joined by a blank, the lines by line breaks; each
        word located where the function writes it); a hole where a word is unknown; None for anything else (a
        function whose body does more, or reads its positional parameters, is not run for its output)."""
        stmts = [c for c in n.named_children if c.type != "comment"]
        name = stmts[0].child_by_field_name("name") if len(stmts) == 1 and stmts[0].type == "command" else None
        if name is None or stmts[0].children_by_field_name("argument"):
            return None
        called = self.raw(name)
        found = self.st.funcs.get(called)
        if found is None or found[0] is not self or found[1].type != "compound_statement" or \
                called in self.echoing:
            return None  # (a function whose words call it again would print forever: bash never gets its output)
        echoes = [c for c in found[1].named_children if c.type != "comment"]
        if not echoes or any(c.type != "command" or self.raw(c.child_by_field_name("name") or c) != "echo"
                             or _POSITIONAL.search(self.raw(c)) for c in echoes):
            return None
        lines = [c.children_by_field_name("argument") for c in echoes]
        if any(args and _ECHO_OPTIONS.fullmatch(self.raw(args[0])) for args in lines):
            return None  # (echo's options: -n, -e, -E; any other word, `--bf16` too, it prints)
        text, org, cond = "", [], ""
        env, echoing = self.st.env, self.echoing
        self.st.env = dict(env)  # (the substitution's subshell: a `${X:=1}` in its words assigns nothing here)
        self.echoing = echoing | {called}
        try:
            for number, args in enumerate(lines):
                fields, mark, why = self.substituted_words(args)
                if why:
                    return [self.hole(why, at)]
                cond = cond or mark
                if number:
                    text, org = text + "\n", org + [at]
                for k, f in enumerate(fields):
                    if k:
                        text, org = text + " ", org + [at]
                    text, org = text + f.value, org + list(f.org)
        finally:
            self.st.env, self.echoing = env, echoing
        return [_P(text, org, split=not q, quoted=q, cond=cond)]

    def substituted_words(self, args) -> tuple[list[_Field], str, str]:
        """The fields of a command's argument nodes read inside a substitution being expanded (the reader's place in
        the outer word kept), the branch mark the first one given on a path carries, and why one is not one known
        value ("" where every one is)."""
        tok, saw_at = self.tok, self.saw_at
        try:
            fields = [f for a in args for f in self.token(a)]
        finally:
            self.tok, self.saw_at = tok, saw_at
        cond = ""
        for f in fields:
            why = self.why(f.value) or self.differs(f.org, f.cond)
            if why:
                return fields, cond, why
            cond = cond or f.cond
        return fields, cond, ""

    def string(self, n, a: int, b: int) -> list[_P]:
        """A double-quoted string; `"${A[@]}"` alone yields no field for an empty array, as in bash."""
        kids = n.children
        # (the closing quote ends the string; tree-sitter-bash's closing token also holds the blanks before it where
        # nothing else does, `" "` between two expansions: they are the string's text)
        stop = b - 1 if len(kids) > 1 and kids[-1].type == '"' and self.text[b - 1:b] == '"' else b
        out, only_at, i = [], True, a + 1
        for c in kids:
            if not c.is_named or c.type == "string_content":  # (before start(): the quotes and text are most kids)
                continue
            ca = self.start(c)
            if ca < i:
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

    def note_read(self, v: _Var, each_element: bool = False) -> None:
        """Note what reading `v` rests on: the defaults its value took (st.seen; `each_element`: its words take their
        array element's own, not the array's) and the decisions it was set under (st.noted)."""
        if v.defaults:
            self.st.seen.update(dict.fromkeys(v.defaults))
            if not each_element:
                self.st.seen_beside_elements.update(dict.fromkeys(v.defaults))
        if v.notes:
            self.st.noted.update(dict.fromkeys(v.notes))

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
        self.note_read(v, each_element=multi and v.arr is not None and not (star and q)
                  and all(f.defaults is not None for f in v.arr))
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

    def positional(self, name: str, at: Org) -> _Var | None:
        """`$1`..., `$#`, `$@`, `$*` where the positional parameters are known (st.positional); None otherwise. One
        past the last is empty, as in bash."""
        args = self.st.positional
        if args is None or not (name in ("#", "@", "*") or name.isdigit() and name != "0"):
            return None
        if name == "#":
            count = str(len(args))
            return _Var(s=count, org=(at,) * len(count))
        if name in ("@", "*"):
            return _Var(arr=args)
        f = args[int(name) - 1] if int(name) <= len(args) else None
        return _Var(s=f.value, org=f.org, cond=f.cond, pos=(f.line, f.col)) if f is not None else _Var()

    def param(self, name: str, q: bool, at: Org) -> list[_P]:
        if name == "0" and self.st.script is not None:
            return self.value(self.st.script, "", False, False, q, at)
        known = self.positional(name, at)
        if known is not None:
            return self.value(known, "", name in ("@", "*"), name == "*", q, at)
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
            known = self.positional(name, self.o(n.start_byte))
            if known is not None:
                return known, "", name in ("@", "*"), name == "*", name
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
            self.st.seen_beside_elements[name] = None
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



def unbraced_subscripts(text: str) -> list[str]:
    """The array subscripts a word's text writes without braces, `$NAME[@]`, `$NAME[*]` or `$NAME[0]`, outside
    single quotes and not escaped: to bash the value of NAME (its first element) and the literal subscript."""
    if "[" not in text:
        return []  # (most words: no subscript to find, and no character-by-character scan)
    found: list[str] = []
    i, single, double = 0, False, False
    while i < len(text):
        char = text[i]
        if single:
            single = char != "'"
        elif char == "\\":
            i += 2
            continue
        elif char == "'" and not double:
            single = True
        elif char == '"':
            double = not double
        elif char == "$":
            match = _UNBRACED.match(text, i)
            if match:
                found.append(match.group(0))
                i = match.end()
                continue
        i += 1
    return found


_UNBRACED = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*\[(?:@|\*|[0-9]+)\]")


BRACE_WORDS_MAX = 256  # words one brace expansion may make; past it (`{1..100000}`) the word is unknown
BRACE_TEXT_MAX = 4096  # a longer word is left as written (each `{` that opens no expansion is scanned to its end)
_BRACE_GROUPS = 16  # braces in one word past which it is unknown (a launch's sweep has a few; each is scanned again)
_BRACE_LEVELS = 64  # groups nested, or following one another, past which the word is unknown
_BRACE_MARKS = re.compile(r"[{},]")


class TooManyWords(ValueError):
    """A brace expansion of more than BRACE_WORDS_MAX words."""


def brace_expand(text: str) -> list[str] | None:
    """The words bash's brace expansion makes of plain unquoted `text` (`x{a,b}y` -> xay, xby; `{1..5..2}`,
    `{05..10}`, `{a..c}`; nested and several groups), in bash's order, empty words dropped as bash drops them;
    None where `text` has no brace expansion (`{}`, `{a}`, an unclosed `{`). Raises TooManyWords past
    BRACE_WORDS_MAX. Launch scripts sweep settings so (`for bs in {1..4}`), and a Hydra override written
    `key={1,2}` reaches the program as two."""
    if text.count("{") > _BRACE_GROUPS or text.count(",") > BRACE_WORDS_MAX:
        if "," in text or ".." in text:
            raise TooManyWords(text)
        return None
    words = _braces(text)
    return None if words == [text] else words


def _braces(text: str, level: int = 0) -> list[str]:
    if level > _BRACE_LEVELS:
        raise TooManyWords(text)
    if "{" not in text:
        return [text]
    for i, j, commas in _brace_groups(text):  # the first group that is a brace expression, as bash takes it
        if commas:
            cuts = [i, *commas, j]
            alternatives = [w for k in range(len(cuts) - 1)
                            for w in _braces(text[cuts[k] + 1 : cuts[k + 1]], level + 1)]
        else:
            alternatives = _sequence(text[i + 1 : j])
            if alternatives is None:
                continue  # (`{a}`, `{}`: text)
        rest = _braces(text[j + 1 :], level + 1)
        if len(alternatives) * len(rest) > BRACE_WORDS_MAX:
            raise TooManyWords(text)
        head = text[:i]
        return [w for a in alternatives for r in rest for w in [head + a + r] if w]  # (bash drops empty words)
    return [text]


def _brace_groups(text: str) -> list[tuple[int, int, list[int]]]:
    """Each matched `{...}` of `text` (its offsets and those of its own top-level commas), by where it opens; an
    unmatched brace is text. One pass: a word of nested groups none of which expands is not scanned again and
    again."""
    stack: list[tuple[int, list[int]]] = []
    out = []
    for mark in _BRACE_MARKS.finditer(text):  # (the braces and commas alone, not every character)
        k, c = mark.start(), mark.group()
        if c == "{":
            stack.append((k, []))
        elif c == "}" and stack:
            i, commas = stack.pop()
            out.append((i, k, commas))
        elif c == "," and stack:
            stack[-1][1].append(k)
    out.sort()
    return out


_SEQUENCE = re.compile(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?")


def _sequence(body: str) -> list[str] | None:
    """`{x..y[..step]}`'s words (integers, zero-padded as bash pads them, or letters); None when `body` is none."""
    m = _SEQUENCE.fullmatch(body)
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    numeric = first[-1].isdigit()
    if last[-1].isdigit() is not numeric:
        return None  # (`{a..3}` is no sequence)
    step = abs(int(m.group(3) or 1)) or 1
    a, b = (int(first), int(last)) if numeric else (ord(first), ord(last))
    if abs(b - a) // step + 1 > BRACE_WORDS_MAX:
        raise TooManyWords(body)
    values = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    if not numeric:
        return [chr(v) for v in values]
    padded = any(len(s.lstrip("-")) > 1 and s.lstrip("-").startswith("0") for s in (first, last))
    width = max(len(first), len(last)) if padded else 0
    return [f"{v:0{width}d}" for v in values]

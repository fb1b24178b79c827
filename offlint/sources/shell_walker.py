"""The walker: reads one piece of bash (the script, a `bash -c` payload, an `eval` string) statement by statement.

Statements and control flow live here: lists (`a && b`), `if`, `case`, loops, subshells, functions, and the
merging of what alternative paths assigned. What the walker does with a command is shell_commands, with an
assignment shell_assignments, with a here-document shell_documents, with a shell inside this one (a sourced file, a
called script, a `bash -c` payload) shell_children, with a word shell_words, with a test or arithmetic
shell_conditions; the values it passes around are shell_values.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import accumulate
from operator import index

from offlint.sources.bash_tree import parse_bash
from offlint.sources.shell_mask import Masked, parse_masked, placeholder_ending_a_line, unclosed
from offlint.sources.shell_values import _MAX_NESTING, _merge, Org, _P, Pos, _State, _TooDeep, _Var, branch_mark
from offlint.sources.shell_conditions import Conditions, _descendants, _holds
from offlint.sources.shell_words import WordExpansion
from offlint.sources.shell_assignments import Assignments
from offlint.sources.shell_children import ChildShells
from offlint.sources.shell_commands import Commands
from offlint.sources.shell_documents import Documents

# The body readings of `for` loops unrolled together (a loop inside a loop multiplies them): past it, a loop's
# variable is unknown and its body read once (walker.unroll)
MAX_PASSES = 32
_BEGINS = bytes(0 if 0x80 <= b < 0xC0 else 1 for b in range(256))  # 1 for a byte that begins a UTF-8 character


def _leaves_early(body) -> bool:
    """Whether a loop body can end a pass and go on with the script (`break`, `continue`, `return`): the commands
    after it would be read in passes that skip them. (`exit` ends the script: a pass that gets past it runs on, and
    one that does not runs nothing more, as in any script.)"""
    return any(_first_word(c) in ("break", "continue", "return") for c in _descendants(body, ("command",)))


def _statements(body, funcs: dict | None = None, limit: int = -1) -> int:
    """The commands and assignments written in a loop body, and in the bodies of the script's functions it calls
    (`funcs`: name -> (walker, body, ...), each counted once): what a pass reads, judged from the text. A body of one
    call to a function of 60,000 lines had passed this and been read in full before its first pass said no.
    `limit` (not negative): counting stops once past it."""
    count, pending, counted = 0, [body], set()
    while pending:
        for node in _descendants(pending.pop(), ("command", "variable_assignment", "declaration_command")):
            count += 1
            if count == limit + 1:
                return count
            if funcs and node.type == "command":
                name = _first_word(node)
                if name in funcs and name not in counted:
                    counted.add(name)
                    pending.append(funcs[name][1])
    return count


def _first_word(command) -> str:
    name = command.child_by_field_name("name")
    return name.text.decode("utf-8", "replace").strip() if name is not None else ""


class _Walker(Commands, Assignments, Documents, ChildShells, WordExpansion, Conditions):
    """Interprets one piece of source text (the script, a -c payload, an eval string) against a _State."""

    def __init__(self, st: _State, text: str, org: list[Org], depth: int, label: str):
        self.st, self.text, self.org, self.depth, self.label = st, text, org, depth, label
        self.data = text.encode("utf-8", "surrogatepass")
        self.b2c = None
        # ci(b): the character offset of byte offset b (a node's start_byte or end_byte, which never pass the end
        # of the data). A C callable, not a method: it is called for nearly every node, and a Python call and a
        # min() per call were about a tenth of reading a script. ASCII text: the offsets are the same.
        self.ci = index
        if not text.isascii():
            # byte offset -> offset of the character it belongs to: the characters begun up to that byte, less one
            # (a UTF-8 continuation byte begins none), counted in C rather than a Python loop per character
            self.b2c = list(accumulate(self.data.translate(_BEGINS), initial=-1))
            del self.b2c[0]
            self.b2c.append(len(text))
            self.ci = self.b2c.__getitem__
        self.tok = 0
        self.saw_at = False
        self.masked = Masked()

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
        own = branch_mark(cond)
        mark = next((shown for o in org if o[2] for shown in [branch_mark(o[2])] if shown != own), "")
        return f"assigned differently on some paths ({mark})" if mark else ""

    def run(self) -> None:
        tree, self.masked = parse_masked(self.data, parse_bash)  # tree-sitter-bash's known gaps (shell_mask)
        root = tree.root_node
        # Code that eval builds from a value offlint does not know (`eval "IMAGE=\$$IMAGE"`) is only code once
        # that value is there: bash reads it at run time, so a syntax error of the text with a hole is no error.
        if root.has_error and not (self.label and self.st.holes.why(self.text)):
            before = len(self.st.out.errors)
            first_line, first_end = self.errors(root)
            opened = unclosed(self.data) if first_line is not None else None
            if opened is not None:  # (where bash would say it: the error's own place may be far from it)
                first = self.st.out.errors[before]
                self.st.out.errors[before] = (f"{first}; the `{opened[1]}` at line {self.pos(opened[0])[0]} is "
                                              f"never closed")
            ending = placeholder_ending_a_line(self.data) if opened is None and first_line is not None else None
            # (before the first error, or inside the stretch it leaves unread: its recovery may begin earlier)
            if ending is not None and self.pos(ending[0])[0] <= first_end:
                self.st.out.errors.insert(before, f"line {self.pos(ending[0])[0]}: {self.label}syntax error near "
                                                  f"{ending[1]!r} (bash reads `>` with no file after it)")
        self.stmt(root)

    def masked_in(self, n) -> str:
        """Why node `n` cannot be read: it holds a construct masked for tree-sitter-bash ("" when it does not)."""
        span = self.masked.inside(n.start_byte, n.end_byte) if self.masked.spans else None
        if span is None:
            return ""
        raw = self.text[self.ci(span[0]) : self.ci(span[1])]
        raw = raw if len(raw) <= 60 else raw[:57] + "..."
        return f"`{raw}` is beyond offlint's bash parser (tree-sitter-bash misreads it), so its value is unknown"

    def errors(self, root) -> tuple[int | None, int]:
        """The MISSING and ERROR nodes, in order (a loop: a deeply nested script must not exhaust the stack); the lines
        where the first begins and ends, (None, 0) where there is none. An ERROR node that covers no text but blanks
        and line continuations (a script ending in `\\`) skips nothing, so it is no error."""
        first, first_end = None, 0
        pending = [root]
        while pending:
            n = pending.pop()
            if n.is_missing:
                message = f"missing {n.type!r}"
            elif n.type == "ERROR":
                raw = self.raw(n)
                if not raw.replace("\\", "").strip():
                    continue
                end = self.pos(n.end_byte)[0]
                span = f" (lines {self.pos(n.start_byte)[0]}-{end} not read)" if "\n" in raw.rstrip() else ""
                message = f"syntax error near {raw.split(chr(10), 1)[0][:40]!r}{span}"
            else:
                if n.has_error:
                    pending.extend(reversed(n.children))
                continue
            line = self.pos(n.start_byte)[0]
            self.st.out.errors.append(f"line {line}: {self.label}{message}")
            if first is None:
                first, first_end = line, self.pos(n.end_byte)[0]
        return first, first_end

    def deeper(self, n) -> None:
        """Count one more level of nesting; past _MAX_NESTING the whole walk stops (see parse_shell)."""
        self.st.nesting += 1
        if self.st.nesting > _MAX_NESTING:
            raise _TooDeep(self.pos(n.start_byte)[0])

    def stmt(self, n) -> None:
        st = self.st
        st.nesting += 1  # (deeper(), inline: a call less per statement)
        st.walked += 1
        if st.nesting > _MAX_NESTING:
            raise _TooDeep(self.pos(n.start_byte)[0])
        try:
            self._stmt(n)
        finally:
            st.nesting -= 1

    def _stmt(self, n) -> None:
        t = n.type
        if t == "command":
            self.command(n)
        elif t == "variable_assignment":
            self.assign(n)
        elif t == "declaration_command":
            self.declare(n)
        elif t == "unset_command":
            self.unset(n)
        elif t == "redirected_statement":
            body = n.child_by_field_name("body")
            heredocs = [c for c in n.children if c.type == "heredoc_redirect"]
            self.body(([body] if body else []) + heredocs)
            if body is not None and body.type == "command" and heredocs:
                self.read_heredoc(body, heredocs[0])
                self.heredoc_script(n, body, heredocs[0])
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
        return f"`{raw if len(raw) <= 60 else raw[:57] + '...'}` ({self.at(nodes[0])})"

    def at(self, node) -> str:
        """Where a node is, as decisions are shown: "file:line", or "line N" in the script itself."""
        name, offset = self.st.where
        line = self.pos(node.start_byte)[0] + offset
        return f"{name}:{line}" if name else f"line {line}"

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

    def unroll(self, n, var) -> bool:
        """`for X in a b c; do ...; done` over words offlint can read (literals, a known array's `"${A[@]}"`): the
        body read once per word, in order, as bash runs it, each pass's commands marked with it (Command.passes: a
        finding of some passes names their words, one of every pass none; api._dedupe). Launch scripts sweep
        parallelism settings so (Megatron Bridge's examples loop over "EP,TP,PP,CP" strings); with X unknown, every
        launch in the loop had its sizes unknown. Not where the body can leave a pass early and go on (`break`,
        `continue`, `return`), nor past MAX_PASSES body readings for the loops being unrolled together or the
        script's budget of statements read again after a first pass (UNROLL_BUDGET: judged from the text of the
        body and of the script's functions it calls, then from what its first pass read), nor where a word is a
        variable's default (`${SIZES:-1 2}`: the environment may set it): the loop is then read once with X unknown,
        as before."""
        seen, self.st.seen = self.st.seen, {}
        try:
            values = [f for v in n.children_by_field_name("value") for f in self.token(v)]
            took = bool(self.st.seen)
        finally:
            self.st.seen = {**seen, **self.st.seen}
        body = n.child_by_field_name("body")
        if body is None or not values or took or self.known_words(values) is None \
                or self.st.passes * len(values) > MAX_PASSES or _leaves_early(body):
            return False
        again = len(values) - 1  # the passes after the first
        if again and _statements(body, self.st.funcs, self.st.unroll_budget[0] // again) * again \
                > self.st.unroll_budget[0]:
            return False
        name, line = self.raw(var), self.pos(n.start_byte)[0]
        loop, words = f"`for {name} in {self.raw_values(n)}` ({self.at(n)})", tuple(f.value for f in values)
        out, budget, walked = self.st.out, self.st.unroll_budget, self.st.walked
        env, commands, assignments, errors = dict(self.st.env), len(out.commands), len(out.assignments), len(out.errors)
        self.st.passes *= len(values)
        try:
            for k, f in enumerate(values):
                if k == 1:  # the passes after the first cost what it did: past the script's budget, read it once
                    cost = (self.st.walked - walked) * (len(values) - 1)
                    if cost > budget[0]:
                        self.st.env = env
                        del out.commands[commands:], out.assignments[assignments:], out.errors[errors:]
                        return False
                    budget[0] -= cost
                old = self.st.env.get(name)
                self.st.env[name] = _Var(s=f.value, org=f.org, lines=(line,), pos=(f.line, f.col),
                                         exported=bool(old and old.exported))
                self.st.loop_passes.append((loop, name, f.value, words))
                try:
                    self.body([body])
                finally:
                    self.st.loop_passes.pop()
        finally:
            self.st.passes //= len(values)
        return True

    def raw_values(self, n) -> str:
        text = " ".join(self.raw(v) for v in n.children_by_field_name("value"))
        return text if len(text) <= 40 else text[:37] + "..."

    def arguments_loop(self, n, body) -> bool:
        """`while [[ $# -gt 0 ]]; do case "$1" in ...; shift; done` with known positional parameters (a script of the
        tree called with its arguments, st.positional): run it as bash does, each test decided, while every one is
        and the arguments get fewer; False (nothing read) where the first test cannot be decided."""
        condition = [c for c in n.children_by_field_name("condition") if c.is_named]  # (not the `;`)
        before: int | None = None  # the arguments the last turn started with
        for _turn in range(len(self.st.positional) + 1):
            verdict, _ = self.decide(condition)
            if verdict is False:
                return True
            shifted = before is None or self.st.positional is not None and len(self.st.positional) < before
            if verdict is None or not shifted:
                if before is None:
                    return False
                break
            before = len(self.st.positional)
            self.body([body])
        else:
            return True
        # undecided, or no `shift` on the last turn: the rest is read as any loop's body, the arguments unknown
        self.st.positional = None
        self.branches([[body]], True, f"inside while loop at line {self.pos(n.start_byte)[0]}")
        return True

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

    def loop(self, n) -> None:
        kind = "while" if n.type == "while_statement" else "for"
        var = n.child_by_field_name("variable") if n.type == "for_statement" else None
        if var is not None and self.unroll(n, var):
            return
        if var is not None:
            self.set_unknown(self.raw(var), "loop variable", self.pos(var.start_byte))
        body = n.child_by_field_name("body")
        if kind == "while" and self.st.positional is not None and body is not None and self.arguments_loop(n, body):
            return
        if kind == "while":
            self.body(n.children_by_field_name("condition"))
        self.branches([[body] if body is not None else []], True,
                      f"inside {kind} loop at line {self.pos(n.start_byte)[0]}")

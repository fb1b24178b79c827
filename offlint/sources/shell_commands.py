"""Commands and assignments in the walker: `X=...`, `X+=(...)`, `export` / `declare` / `local`, a command's
argv and environment (the `Command` it reports), the builtins that set variables (`read`, `printf -v`,
`getopts`), `eval`, `source`, function calls, and `bash -c` payloads read as child shells, as are the commands
`ssh`, `pdsh` and `tmux new-session` run elsewhere (in an environment not known).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import replace

from offlint.sources.launch import (HYDRA_ENTRY_POINTS, container_image, opened_because, program, runs_script,
                                    srun_environment)
from offlint.sources.shell_paths import tree_copy
from offlint.sources.shell_values import (_BLANK, IMAGE, OPENED, WRITTEN, Command, EnvSetting, _Field, _join,
                                          _MAX_NESTING, _P, Org, Pos, _split, _State, _Unknown, _Var)
from offlint.sources.shell_words import BRACE_TEXT_MAX, BRACE_WORDS_MAX, TooManyWords, brace_expand

_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_BRACE_TOKENS = frozenset(("brace_expression", "concatenation", "word"))  # what may hold a brace expansion
_BRACE_PARTS = frozenset(("brace_expression", "word", "number"))  # plain text (no quotes or expansions)
_MAX_DEPTH = 6
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a variable's name (ASCII, as bash's)


_LOADED_MODULES = "LOADEDMODULES"
_CONDA_ENVIRONMENT = "CONDA_DEFAULT_ENV"
# Lmod's `ml` subcommands (`ml load X`); any other first word is a module to load (`ml X`)
_MODULE_COMMANDS = frozenset({"load", "add", "unload", "rm", "del", "purge", "swap", "switch", "list", "avail",
                              "spider", "show", "display", "help", "save", "restore", "use", "unuse", "reset",
                              "keyword", "whatis", "savelist", "describe", "mt", "update", "refresh", "try-load"})


class Commands:
    """Assignments, declarations, commands and builtins; part of the walker."""

    def set_unknown(self, name: str, reason: str, pos: Pos, exported: bool = False) -> None:
        """`name` set to a value not known here (`exported`: and exported, whether it was before or not)."""
        old = self.st.env.get(name)
        self.st.env[name] = _Var(s=self.st.holes.char(reason), org=((*pos, ""),), lines=(pos[0],), pos=pos,
                                 exported=exported or bool(old and old.exported))

    def set_exported(self, name: str, value: str, pos: Pos) -> None:
        """`name` set to `value` by the command at `pos` and exported (what a tool such as `module` or `conda` sets)."""
        self.st.env[name] = _Var(s=value, org=((*pos, ""),) * len(value), lines=(pos[0],), pos=pos, exported=True)

    def scalar(self, val) -> tuple[str, list[Org], str]:
        if val is None:
            return "", [], ""
        self.tok = self.ci(val.start_byte)
        return _join(self.exp(val, False), self.o(val.start_byte))

    def assign(self, n, export: bool = False, declared: str = "") -> None:
        """An assignment, or (`declared`: the declaration's keyword) a declaration's argument written as a quoted
        word (_assign_word); the new value remembers the defaults it took and the decisions it rests on."""
        seen, noted = self.st.seen, self.st.noted
        self.st.seen, self.st.noted = {}, {}
        try:
            if declared:
                name = self._assign_word(n, declared, export)
            else:
                self._assigned_at(n)
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

    def _assigned_at(self, n) -> None:
        if not self.st.sourcing:  # (a sourced file's lines are another file's)
            self.st.out.assignments.append((self.pos(n.start_byte), self.pos(max(n.end_byte - 1, n.start_byte))))

    def _assign_word(self, n, declared: str, export: bool) -> str:
        """`export 'X=v'`, `export "X=$Y"`, `declare "A"=1`: bash assigns the word as written unquoted, NAME=VALUE,
        the value not split. The name assigned; "" for a word whose expansion gives no NAME= (an unknown name, no
        `=`), left alone as before."""
        text, org, cond = self.scalar(n)
        name, eq, value = text.partition("=")
        if not eq or not _SHELL_NAME.fullmatch(name):
            if eq and export and self._computed_name(name):
                # `export "${KEY}"="${VALUE}"` in a loop over a config's variables: any variable may be set, the
                # launch's among them
                pos = self.pos(n.start_byte)
                self.st.env[OPENED] = _Var(s=f"`export {self.raw(n)}` (line {pos[0]}) sets a variable whose name it "
                                             f"reads at run time", exported=True, pos=pos, every_path=True)
            return ""
        self._assigned_at(n)
        self._scope_local(declared, name)
        pos, old = self.pos(n.start_byte), self.st.env.get(name)
        self.st.env[name] = _Var(s=value, org=tuple(org[len(name) + 1:]), cond=cond, lines=(pos[0],), pos=pos,
                                 exported=export or bool(old and old.exported))
        return name

    def _computed_name(self, text: str) -> bool:
        """Whether `text` is a variable's name with parts unknown until run time (`${KEY}`, `GPU_${I}`): holes and
        name characters only, a hole among them."""
        known = "".join(c for c in text if not self.why(c))
        return len(known) < len(text) and _SHELL_NAME.fullmatch(f"A{known}A") is not None

    def _scope_local(self, declared: str, name: str) -> None:
        """`local NAME`: the function's frame keeps the value the name had, for its return."""
        if declared == "local" and self.st.locals and name not in self.st.locals[-1]:
            self.st.locals[-1][name] = self.st.env.get(name)

    def _assign(self, n, export: bool) -> None:
        name_n, val = n.child_by_field_name("name"), n.child_by_field_name("value")
        if name_n is None:
            return
        pos, append = self.pos(n.start_byte), "+=" in [c.type for c in n.children]
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
            export = kw == "export" and "n" not in flags or "x" in flags
            if c.type in ("string", "raw_string", "concatenation", "word"):
                self.assign(c, export, declared=kw)  # `export 'X=v'`
                continue
            if c.type not in ("variable_name", "variable_assignment"):
                continue
            name_n = c.child_by_field_name("name") if c.type == "variable_assignment" else c
            name = self.raw(name_n.child_by_field_name("name") or name_n) if name_n is not None else ""
            if not name:
                continue
            self._scope_local(kw, name)
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

    fast_tokens = True  # (tests turn the shortcuts of token() off to compare)

    def token(self, n) -> list[_Field]:
        a = self.ci(n.start_byte)
        self.tok = a
        line, col, _ = self.org[a]
        b = self.ci(n.end_byte)
        text = self.text[a:b]
        if "{" in text and "$" not in text and len(text) <= BRACE_TEXT_MAX and n.type in _BRACE_TOKENS:
            braced = self.braced(n, text, a, line, col)
            if braced is not None:
                return braced
        if self.fast_tokens and self.st.nesting < _MAX_NESTING and "\\" not in text:
            # Nine tokens in ten are literal text: a word, a number, '...', or "..." without expansions. Their one
            # field is made here as exp() and _split() would make it (one unquoted piece without blanks, or an empty
            # quoted piece and the quoted text), without the ten or so calls that takes.
            t = n.type
            if t == "word" or t == "number":
                if text and not (t == "word" and text[0] == "~") and not _BLANK.search(text):
                    org = tuple(self.org[a:b])
                    return [_Field(text, org, line, col, text, self.st.ctx or org[0][2])]
            elif t == "raw_string" or t == "string":
                if t == "raw_string":
                    stop = b - 1 if b - a >= 2 and text[-1] == "'" else b
                else:
                    kids = n.children
                    if not all(not c.is_named or c.type == "string_content" for c in kids):
                        return _split(self.exp(n, False), line, col, text, self.st.ctx)
                    stop = b - 1 if len(kids) > 1 and kids[-1].type == '"' and text[-1] == '"' else b  # (string())
                org = tuple(self.org[a + 1 : stop])
                return [_Field(text[1 : stop - a], org, line, col, text, self.st.ctx or (org[0][2] if org else ""))]
        return _split(self.exp(n, False), line, col, text, self.st.ctx)

    def braced(self, n, text: str, a: int, line: int, col: int) -> list[_Field] | None:
        """The words of an unquoted word of plain text that brace expansion makes several of (`{1..4}`, `x{a,b}`),
        or one unknown word past what offlint expands; None where the word has no brace expansion or holds quotes,
        escapes or expansions (bash expands braces first, around them: not read here)."""
        parts = n.named_children if n.type == "concatenation" else (n,)
        if any(p.type not in _BRACE_PARTS for p in parts) or any(c in text for c in "\\'\"$`"):
            return None
        at = self.org[a]
        budget = self.st.brace_budget
        if budget[0] <= 0:  # (spent: a word that may expand is unknown, without expanding it)
            if "," not in text and ".." not in text:
                return None
            return _split([self.hole("brace expansion past the words offlint makes in one script", at)], line, col,
                          text, self.st.ctx)
        try:
            words = brace_expand(text)
        except TooManyWords:
            return _split([self.hole(f"brace expansion of more than {BRACE_WORDS_MAX} words", at)], line, col,
                          text, self.st.ctx)
        if words is None:
            return None
        budget[0] -= max(len(words), 1)
        ctx = self.st.ctx or at[2]
        return [_Field(w, (at,) * len(w), line, col, text, ctx) for w in words]

    def setting(self, name: str, v: _Var) -> EnvSetting:
        """What a command sees of variable `v` in its environment. Made once per variable value (every command gets
        every exported variable; `differs` reads every character's origin), kept in `st.settings`."""
        known = self.st.settings.get((name, id(v)))
        if known is not None and known[0] is v:
            return known[1]
        why = self.why(v.s) or self.differs(v.org, v.cond)
        out = EnvSetting(name, None if why else v.s, v.pos[0], v.pos[1], why, v.cond)
        self.st.settings[(name, id(v))] = (v, out)  # `v` kept alive: its id is not reused while the entry stands
        return out

    def command(self, n) -> None:
        kids = n.children
        types = [c.type for c in kids]  # (each `.type` makes a new string)
        for i in range(1, len(kids)):  # tree-sitter-bash sometimes glues `A=1 B=2<newline>cmd` into one command
            if types[i - 1] != "variable_assignment":
                continue
            gap = self.text[self.ci(kids[i - 1].end_byte) : self.ci(kids[i].start_byte)]
            if "\n" in gap.replace("\\\n", ""):
                self.body(kids[:i])
                a, b = self.ci(kids[i].start_byte), self.ci(n.end_byte)
                return type(self)(self.st, self.text[a:b], self.org[a : b + 1], self.depth, self.label).run()
        prefix, toks = [], []
        for i, (c, t) in enumerate(zip(kids, types)):
            if t == "variable_assignment":
                prefix.append(c)
            elif t == "command_name":
                toks.extend(c.named_children or [c])
            elif t.endswith("redirect") or t == "comment":
                continue
            elif not (t == "$" and i + 1 < len(kids) and kids[i + 1].start_byte == c.end_byte):
                toks.append(c)  # (a `$` glued to "..." is bash's translated string; drop the `$`)
        noted, self.st.noted = self.st.noted, {}
        try:
            fields, assumed = [], []  # (the defaults each token's expansion took, for its words)
            for t in toks:
                seen, self.st.seen = self.st.seen, {}
                try:
                    more = self.token(t)
                    assumed += [tuple(self.st.seen)] * len(more)
                    fields += more
                finally:
                    self.st.seen = {**seen, **self.st.seen}
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
        if not self.st.out.printing and fields[0].value in _PRINTING and fields[0].value not in self.st.funcs:
            self.printed(n, fields)
            return
        exported = _exported(self.st.env)
        env = {k: self.setting(k, v) for k, v in exported.items()}
        env.update({k: self.setting(k, v) for k, v in penv.items()})
        # the decisions from defaults on this command's path, its words' and its environment's
        notes = dict.fromkeys([*self.st.control, *read, *(n for v in exported.values() for n in v.notes)])
        assumes = tuple(sorted(notes, key=lambda note: self.st.order.get(note, 0)))
        inherited = self.st.assumed
        words = [f.word(self.st.holes, took + inherited) for f, took in zip(fields, assumed)]
        opened = self.st.env.get(OPENED)
        vals = [w.value for w in words]  # None for a word with a hole
        self.st.out.commands.append(Command(words, env, *self.pos(n.start_byte), assumes, self.st.ctx,
                                            _opened_reason(opened) if opened is not None else "",
                                            tuple(self.st.loop_passes), vals[0] in self.st.funcs,
                                            self.written_at(n) if self.st.called_text is not None else None,
                                            _image(self.st.env[IMAGE]) if IMAGE in self.st.env else ""))
        self.st.control.extend(read)  # an eval or a function call runs on the path its words came from
        if vals[0] == "eval":  # (`eval $cmd`: its code's words took the defaults $cmd's value took)
            self.st.assumed = tuple(dict.fromkeys([*inherited, *(name for took in assumed for name in took)]))
        try:
            self.builtin(fields, vals)
        finally:
            del self.st.control[len(self.st.control) - len(read):]
            self.st.assumed = inherited
        # (eval's payload is its words joined and read again, quotes and all: builtin() read it, any `sh -c` in it too;
        # a command that prints its words runs none of them)
        j = _shell_c_payload(vals) if self.depth < _MAX_DEPTH and vals[0] not in _NO_PAYLOAD else None
        if j is None and self.depth < _MAX_DEPTH and program(vals[0]) == "bcprun":
            j, settings = _bcprun_payload(vals)  # (its --env NAME=VALUE options: the payload's environment)
            penv = {**penv, **{name: _Var(s=value, exported=True, pos=(fields[i].line, fields[i].col))
                               for i, name, value in settings}}
        image = container_image(vals[:j] if j is not None else vals)
        if image:  # (`srun --container-image IMAGE bash -c "..."`: the payload's or called script's launches run in it)
            penv = {**penv, IMAGE: _Var(s=image, exported=True, pos=(fields[0].line, fields[0].col))}
        if j is not None:
            environment = srun_environment(vals[:j], [f.text for f in fields[:j]])
            if environment:  # (`srun --environment=alps3 bash -c "..."`: the definition file may set variables)
                penv = {**penv, OPENED: _Var(s=environment, exported=True, pos=(fields[0].line, fields[0].col))}
            self.payload(fields[j], penv, assumes)
        if vals[0] == "read":
            self.read_herestring(n, vals, penv)
        if vals[0] == "echo":
            self.echo_to_file(n, fields)
        self.submitted_script(fields, vals)
        remote = _remote_command(vals) if j is None and self.depth < _MAX_DEPTH else None
        if remote is not None:
            self.remote_command(fields, vals, remote, assumes)
        elif j is None:
            self.called_script(fields, vals, penv, assumes)
            k = _launched_shell(vals)
            if k:  # (`srun ... bash job.sh`, `torchrun --no-python bash worker.sh`: each rank runs the script)
                self.submitted_script(fields[k:], vals[k:])
                outer, before = self.st.out.commands[-1], len(self.st.out.commands)
                ended = self.called_script(fields[k:], vals[k:], penv, assumes, ranks=True)
                # (`srun launch.sh pretrain_gpt.py ...`: the script's `python "$@"` runs it, in the environment
                # the script makes; this command is not read as a launch of its own)
                outer.runs_called_script = any(runs_script([w.value for w in command.argv])
                                               for command in self.st.out.commands[before:])
                if ended is not None and not outer.runs_called_script:
                    # its launch, with arguments offlint cannot read (`./launch.sh $CMD`), is this command's: it runs
                    # in what the script exported (LumiOpen's launch.sh sets PyTorch's ROCm allocator options)
                    outer.env.update({name: self.setting(name, var) for name, var in _exported(ended).items()})
                    if OPENED in ended and not outer.env_open:
                        outer.env_open = _opened_reason(ended[OPENED])
                elif ended is None and not outer.env_open:
                    # the same through a script outside the tree (`srun singularity exec $IMG
                    # ${MEGATRON_PATH}/launch.sh $CMD`, LUMI's Megatron-LM scripts): what it exports is unknown
                    unread = self.unread_wrapper(vals[k:])
                    if unread:
                        outer.env_open = opened_because(f"it runs through `{unread}`, a script offlint cannot read")

    def printed(self, n, fields: list[_Field]) -> None:
        """`echo ...` or `printf ...` (not a function of the script) where the output keeps no command that only
        prints (ShellScript.printing): what it does besides printing, as command() does it, without the Command
        (its words, its environment: 8% of the calls reading Megatron Bridge's 435 scripts made, 3.28 -> 3.00 M;
        its sweeps echo each pass's settings)."""
        vals = [None if self.st.holes.why(f.value) else f.value for f in fields]  # (Word.value, as command()'s)
        self.builtin(fields, vals)  # (`printf -v NAME`)
        if vals[0] == "echo":
            self.echo_to_file(n, fields)

    def read_herestring(self, n, vals: list[str | None], penv: dict[str, _Var]) -> None:
        """`IFS=',' read -r EP TP PP CP <<< "$config"`: the names take the fields of a here-string offlint can read
        (Megatron Bridge's example scripts split each "EP,TP,PP,CP" of a sweep so; builtin() had left them
        unknown). Only `-r`, a one-line string, an IFS of blanks only or of other characters only, and no more
        fields than names (where bash would give the last name the rest of the line, separators and all)."""
        redirects = [c for c in n.children if c.type == "herestring_redirect"]
        words = vals[1:]
        if len(redirects) != 1 or len(words) < 2 or words[0] != "-r" or not all(
                w is not None and w.isidentifier() for w in words[1:]):
            return
        source = [c for c in redirects[0].named_children if c.type != "comment"]
        s, org, _ = self.scalar(source[0]) if len(source) == 1 else ("", [], "")
        ifs = penv.get("IFS") or self.st.env.get("IFS")
        separators = ifs.s if ifs is not None else " \t\n"
        if not source or self.why(s) or "\n" in s or not separators or self.why(separators):
            return
        blanks = set(separators) <= set(" \t\n")
        if not blanks and set(separators) & set(" \t\n"):
            return
        spans = _field_spans(s, separators, blanks)
        names = words[1:]
        if len(spans) > len(names):
            return
        pos = (n.start_point[0] + 1, n.start_point[1] + 1)
        for k, name in enumerate(names):
            a, b = spans[k] if k < len(spans) else (len(s), len(s))
            old = self.st.env.get(name)
            self.st.env[name] = _Var(s=s[a:b], org=tuple(org[a:b]), lines=(pos[0],), pos=pos,
                                     exported=bool(old and old.exported))

    def builtin(self, fields: list[_Field], vals: list[str | None]) -> None:
        """Builtins that change variables (read, mapfile, printf -v, getopts), eval, and function calls."""
        name, args, pos = vals[0], vals[1:], (fields[0].line, fields[0].col)
        if name is not None and name.startswith("{{"):
            # a template's placeholder (`{{ env_exports }}`, Jinja): the file is rendered before it runs, and what
            # the placeholder becomes may set any variable (bash itself would run a command named `{{`)
            shown = " ".join(f.text for f in fields[:3]) + (" ..." if len(fields) > 3 else "")
            self.st.env[OPENED] = _Var(s=f"`{shown}` (line {pos[0]}) is a template placeholder, rendered before the "
                                         f"script runs", exported=True, pos=pos)
            return
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
        elif name == "shift" and self.st.positional is not None:
            count = args[0] if args else "1"
            self.st.positional = self.st.positional[int(count):] if count is not None and count.isdigit() else None
        elif name == "set" and args[:1] == ["--"]:  # `set -- a b`: new positional parameters
            self.st.positional = self.known_words(fields[2:])
        elif name in ("source", ".") and args:
            self.source(args[0], pos)
            if len(args) > 1 and program(args[0]) == "activate":  # (conda's: `source activate ENV`)
                self.conda_environment(args[1:], pos)
        elif name == "conda" and args[:1] == ["activate"]:
            self.conda_environment(args[1:], pos)
        elif name == "conda" and args[:1] == ["deactivate"]:
            self.st.env.pop(_CONDA_ENVIRONMENT, None)
        elif name in ("module", "ml"):
            self.environment_modules(name, args, pos)
        elif name == "eval" and args and self.depth < _MAX_DEPTH:
            text, org = _joined(fields[1:])
            type(self)(self.st, text, org + [org[-1] if org else (*pos, "")], self.depth + 1, "in eval: ").run()
        if name in self.st.funcs and name not in self.st.calling:
            walker, body = self.st.funcs[name][:2]
            self.st.called.add(name)
            self.st.calling.add(name)
            self.st.locals.append({})
            outer, self.st.positional = self.st.positional, self.known_words(fields[1:])  # `$1`...: this call's
            try:
                walker.stmt(body)
            finally:
                self.st.positional = outer
                self.st.calling.discard(name)
                for k, v in self.st.locals.pop().items():
                    if v is None:
                        self.st.env.pop(k, None)
                    else:
                        self.st.env[k] = v

    def environment_modules(self, name: str, args: list[str | None], pos: Pos) -> None:
        """`module load A B` (also `add`), `module unload A` (`rm`), `module purge`, and Lmod's shorthand `ml A -B`
        (load A, unload B): what Lmod and Environment Modules keep in LOADEDMODULES, the loaded modules as
        NAME/VERSION joined by `:`, exported (HPC launches take PyTorch from a site's `pytorch/1.12.1` module; what
        else a module sets is not known here). A module named by an unknown word is left out."""
        if name == "ml":
            sub = args[0] if args and args[0] in _MODULE_COMMANDS else "ml"
            words = args[1:] if sub != "ml" else args
        else:
            options = next((i for i, a in enumerate(args) if a is None or not a.startswith("-")), len(args))
            sub, words = (args[options] if options < len(args) else None), args[options + 1:]  # (`module -q load X`)
        if sub in ("swap", "switch") and len(words) == 2 and words[0] is not None:
            words = ["-" + words[0], words[1]]  # (`module swap A B`: A unloaded, B loaded)
            sub = "ml"
        held = self.st.env.get(_LOADED_MODULES)
        loaded = [m for m in (held.s.split(":") if held is not None and held.s else []) if m]
        if sub == "purge":
            loaded = []
        elif sub in ("load", "add", "unload", "rm", "del", "ml", "swap", "switch"):
            for word in words:
                if word is None or word.startswith("-") and (sub != "ml" or len(word) == 1):
                    continue
                unload = sub in ("unload", "rm", "del") or word.startswith("-")
                word = word.lstrip("-")
                loaded = [m for m in loaded if m.split("/")[0] != word.split("/")[0]]
                if not unload:
                    loaded.append(word)
        else:
            return  # (`module list`, `module avail`, `module use PATH`: nothing loaded or unloaded)
        self.set_exported(_LOADED_MODULES, ":".join(loaded), pos)

    def conda_environment(self, args: list[str | None], pos: Pos) -> None:
        """`conda activate ENV` (a name or a prefix): conda names it in CONDA_DEFAULT_ENV, exported, and puts its bin
        first on PATH (a launcher found there is the environment's: launch.conda_interpreter). An unknown ENV is
        unknown there."""
        target = next((a for a in args if a is None or not a.startswith("-")), "")
        if target is None:
            self.set_unknown(_CONDA_ENVIRONMENT, "the conda environment activated is not known", pos, exported=True)
        elif target:
            self.set_exported(_CONDA_ENVIRONMENT, target, pos)

    def read_heredoc(self, command, redirect) -> None:
        """`read -r -d '' NAME <<'EOF' ... EOF`: NAME holds the here-document, less the whitespace around it (Megatron
        Bridge's Slurm launchers keep the script each task runs so, then `srun ... bash -c "...; ${NAME}"`; `read`
        had left NAME unknown, and the launch in it unread). Only a whole document read into one name; one whose
        delimiter is not quoted is expanded first, as this shell expands it (GCP's GPU recipes keep their worker's
        command so, `\\$RANK` left for the worker: it had stayed unknown)."""
        words = [self.raw(c) for c in command.named_children]
        if not words or words[0] != "read":
            return
        names, raw, whole, i = [], False, False, 1
        while i < len(words):
            word = words[i]
            if word in ("-d", "-rd") and i + 1 < len(words) and words[i + 1] in ("''", '""'):
                whole, raw, i = True, raw or word == "-rd", i + 2
            elif word == "-r":
                raw, i = True, i + 1
            elif word.startswith("-"):
                return  # (another option: -a, -n, -p, ... read differently)
            else:
                names.append(word)
                i += 1
        parts = self._heredoc_parts(redirect)
        if not whole or len(names) != 1 or parts is None:
            return
        body, quoted = parts
        a, b = self.ci(body.start_byte), self.ci(body.end_byte)
        text, org = self.text[a:b], list(self.org[a:b])
        if not quoted and ("$" in text or "`" in text):
            document = self._document(redirect)
            if document is None:
                return
            text, org = document.value, list(document.org)
        else:
            text, org = self._tabs_stripped(redirect, text, org)
        if not raw:  # a backslash and a newline join the lines; another backslash quotes the next character
            out, kept, k = [], [], 0
            while k < len(text):
                if text[k] == "\\" and k + 1 < len(text):
                    if text[k + 1] != "\n":
                        out.append(text[k + 1])
                        kept.append(org[k + 1])
                    k += 2
                    continue
                out.append(text[k])
                kept.append(org[k])
                k += 1
            text, org = "".join(out), kept
        first = len(text) - len(text.lstrip(" \t\n"))
        last = len(text.rstrip(" \t\n"))
        pos = self.pos(command.start_byte)
        old = self.st.env.get(names[0])
        self.st.env[names[0]] = _Var(s=text[first:last], org=tuple(org[first:last]), lines=(pos[0],), pos=pos,
                                     exported=bool(old and old.exported))

    def heredoc_script(self, statement, command, redirect) -> None:
        """`sbatch <<EOF ... EOF` (or `bash <<EOF`): the here-document is the script the job runs, read as a child
        shell with the exported environment (sbatch passes it on by default). Megatron-LM's Megatron-FSDP example
        submits `srun ... bash -c "${TRAINING_CMD}"` so; its launch had been unread. An unquoted delimiter's document
        is expanded here first, as the submitting shell does (`\\$SLURM_JOB_ID` is left for the job). A document
        `cat` writes to a file (`cat > $ROOT/job.sbatch <<- EOM`) is kept under that file's name, for the
        `sbatch $ROOT/job.sbatch` that submits it (submitted_script)."""
        words = [self.raw(c) for c in command.named_children]
        if not words or self.depth >= _MAX_DEPTH:
            return
        if words[0] == "cat" and len(words) == 1:
            target = next((c for c in statement.children if c.type == "file_redirect"), None)
            arrow = target.children[0].type if target is not None and target.children else ""
            if arrow in (">", ">>") and target.named_children:
                name = self._file_name(target.named_children[-1])
                document = self._document(redirect)
                if document is not None:
                    self.write_file(name, document.value, document.org, append=arrow == ">>")
            return
        if program(words[0]) not in ("sbatch", "bash", "sh") \
                or any(not word.startswith("-") for word in self._option_words(words[1:])):
            return  # (another command, or one given a script file: the document is its standard input)
        document = self._document(redirect)
        if document is not None:
            self.payload(document, {})

    def _option_words(self, words: list[str]) -> list[str]:
        """The words a submitting command's own words `words` (as written) give, where a word is a variable holding
        its options (`sbatch ${SBATCH_ARG} <<EOF`, SBATCH_ARG empty or " --segment=8": a MoE model zoo submits every
        benchmark so): the variable's words; an expansion whose words are not known (a variable the script does
        not set may come from its caller) stands as itself, no option."""
        out: list[str] = []
        for word in words:
            found = _PLAIN_EXPANSION.fullmatch(word)
            var = self.st.env.get(found[1] or found[2]) if found else None
            if var is None or var.unset or var.arr is not None or self.why(var.s):
                out.append(word)
            else:
                out.extend(var.s.split())
        return out

    def write_file(self, name: str, text: str, org, append: bool) -> None:
        """Note what the script writes to file `name` (WRITTEN): a here-document `cat` writes, a line `echo` appends
        (the lsaie-ss26-gipfelsturm launchers build their job so, a flag per line on the paths that want it)."""
        key = WRITTEN + name
        before = self.st.env.get(key) if append else None
        if before is not None and before.arr is None:
            text, org = before.s + text, (*before.org, *org)
        pos = org[0][:2] if org else (1, 1)
        self.st.env[key] = _Var(s=text, org=tuple(org), lines=(pos[0],), pos=pos)

    def echo_to_file(self, n, fields: list[_Field]) -> None:
        """`echo WORDS > FILE` / `>> FILE`: the line it writes (write_file); `echo -n` writes no newline, an option
        offlint does not read (-e) leaves the file unread."""
        statement = n.parent
        target = next((c for c in statement.children if c.type == "file_redirect"), None) \
            if statement is not None and statement.type == "redirected_statement" else None
        arrow = target.children[0].type if target is not None and target.children else ""
        if arrow not in (">", ">>") or not target.named_children:
            return
        words, end = fields[1:], "\n"
        if words and words[0].value == "-n":
            words, end = words[1:], ""
        name = WRITTEN + self._file_name(target.named_children[-1])
        if words and words[0].value.startswith("-"):
            self.st.env.pop(name, None)  # (what it writes is not read: the file is no longer known)
            return
        text, org = _joined(words)
        pos = (fields[0].line, fields[0].col, self.st.ctx)
        org += [org[-1] if org else pos] * len(end)
        self.write_file(name[len(WRITTEN):], text + end, org, append=arrow == ">>")

    def submitted_script(self, fields: list[_Field], vals: list[str | None]) -> None:
        """`sbatch FILE` (or bash/sh) of a file the script wrote earlier (write_file): its text is the job's script
        (haeggee/Megatron-LM's submit.sh writes `$ROOT_PATH/submission.sbatch` so). A text the paths disagree on
        (a hole) reads as the shell reads its holes."""
        if self.depth >= _MAX_DEPTH or program(vals[0]) not in ("sbatch", "bash", "sh"):
            return
        k = next((k for k in range(1, len(vals)) if not (vals[k] or "").startswith("-")), None)
        written = self.st.env.get(WRITTEN + (vals[k] if vals[k] is not None else _unquoted(fields[k].text))) \
            if k is not None else None
        if written is not None and written.arr is None and len(written.org) == len(written.s) and written.s:
            self.payload(_Field(written.s, written.org, *written.pos, written.s, written.cond), {})

    def _file_name(self, node) -> str:
        """A redirect's file as submitted_script looks it up: its value, or as written (less its quotes) where offlint
        cannot read it (`> "$SCRIPT"` and `sbatch $SCRIPT` name one file)."""
        fields = self.token(node)
        value = fields[0].word(self.st.holes).value if len(fields) == 1 else None
        return value if value is not None else _unquoted(self.raw(node))

    def _document(self, redirect) -> _Field | None:
        """A here-document's text as the command reads it: expanded by this shell unless its delimiter is quoted,
        less leading tabs with `<<-`; None where offlint cannot place every character."""
        parts = self._heredoc_parts(redirect)
        if parts is None:
            return None
        body, quoted = parts
        a, b = self.ci(body.start_byte), self.ci(body.end_byte)
        if quoted:
            text, org = self.text[a:b], list(self.org[a:b])
        else:
            parts, i = [], a
            for c in body.named_children:
                if c.type != "heredoc_content":
                    parts += self.lit(i, self.ci(c.start_byte), True) + self.exp(c, True)
                    i = self.ci(c.end_byte)
            parts += self.lit(i, b, True)
            text, org = "".join(part.text for part in parts), [o for part in parts for o in part.org]
        if len(org) != len(text):
            return None
        text, org = self._tabs_stripped(redirect, text, org)
        line, col = self.pos(body.start_byte)
        return _Field(text, tuple(org), line, col, self.raw(body), self.st.ctx)

    def cat_document(self, n, q: bool) -> list[_P] | None:
        """`$(cat <<EOM ... EOM)`: the here-document as cat prints it, less the trailing newlines the substitution
        drops (GCP's GPU recipes keep their worker's command so, then write it to the file torchrun runs); None where
        the substitution is anything else."""
        stmts = [c for c in n.named_children if c.type != "comment"]
        if len(stmts) != 1 or stmts[0].type != "redirected_statement":
            return None
        body = stmts[0].child_by_field_name("body")
        redirects = [c for c in stmts[0].children if c.type.endswith("redirect")]
        if body is None or body.type != "command" or self.raw(body) != "cat" or len(redirects) != 1 \
                or redirects[0].type != "heredoc_redirect":
            return None
        document = self._document(redirects[0])
        if document is None:
            return None
        text = document.value.rstrip("\n")
        return [_P(text, list(document.org[:len(text)]), split=not q, quoted=q)]

    def _heredoc_parts(self, redirect) -> tuple[object, bool] | None:
        """(a here-document's body node, whether its delimiter is quoted: then nothing in it is expanded); None where
        tree-sitter gave either no body or no delimiter."""
        body = next((c for c in redirect.children if c.type == "heredoc_body"), None)
        start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
        if body is None or start is None:
            return None
        return body, self.raw(start)[:1] in ("'", '"', "\\")

    def _tabs_stripped(self, redirect, text: str, org: list) -> tuple[str, list]:
        """With `<<-`, a here-document less the tabs that begin its lines (they are not part of it)."""
        if not self.raw(redirect).startswith("<<-"):
            return text, org
        kept = [k for k, ch in enumerate(text) if not (ch == "\t" and (k == 0 or text[k - 1] in "\n\t"))]
        return "".join(text[k] for k in kept), [org[k] for k in kept]

    def source(self, target: str | None, pos: Pos) -> None:
        """`source FILE` / `. FILE`: the variables the tree's FILE sets and exports, read on this state (its commands
        and functions are not this script's); where offlint cannot read it, the environment of what follows is open:
        the file may export anything (an environment file outside the tree, `source "$ENV_FILE"`)."""
        path, text = self.sourced(target) if target else (None, None)
        # the tree's copy of a file outside it (tree_copy); not the tree's own file named by its absolute path
        # (`$(dirname "$(readlink -f "$0")")/conf/arguments.sh`, Megatron-LM's ModelOpt examples)
        copy = text is not None and target.startswith("/") and os.path.realpath(target) != os.path.realpath(path)
        budget = self.st.source_budget
        why = "" if text is not None else "is outside the tree" if target and target.startswith("/") else \
            "names a file the tree does not have" if target else "cannot be read"
        if text is not None and (path in self.st.sourcing or self.depth >= _MAX_DEPTH):
            why = "sources files nested deeper than offlint follows"  # (or itself)
        elif text is not None and len(text) > budget[0]:
            why = "is more than offlint reads"
        if why:
            shown = f"`source {target}`" if target else "`source` of a file named at run time"
            # (a path inside the checkout the script spells out: a file the checkout expects, often gitignored)
            expected = bool(target) and not target.startswith(("/", "~")) and why == "names a file the tree does not " \
                "have" and not posixpath.normpath(target).startswith("..") and not self.why(target)
            self.st.env[OPENED] = _Var(s=f"{shown} (line {pos[0]}) {why}", exported=True, pos=pos, every_path=expected)
            return
        budget[0] -= len(text)
        env, commands, errors, funcs = dict(self.st.env), len(self.st.out.commands), len(self.st.out.errors), \
            set(self.st.funcs)
        org = [(pos[0], pos[1], "")] * (len(text) + 1)  # (its text is unconditional, as the script's own)
        self.st.sourcing.append(path)
        try:
            type(self)(self.st, text, org, self.depth + 1, f"in {path}: ").run()
        finally:
            self.st.sourcing.pop()
        del self.st.out.commands[commands:]
        for name in set(self.st.funcs) - funcs:
            del self.st.funcs[name]
        if len(self.st.out.errors) > errors:  # a file offlint cannot parse: as one it cannot read
            del self.st.out.errors[errors:]
            self.st.env = env
            self.st.env[OPENED] = _Var(s=f"`source {target}` (line {pos[0]}) cannot be parsed", exported=True,
                                       pos=pos)
        elif copy:  # what the tree's copy sets is taken; what it leaves unset, the real file may set
            self.st.env[OPENED] = _Var(s=f"`source {target}` (line {pos[0]}) is outside the tree (read as its {path})",
                                       exported=True, pos=pos)

    def sourced(self, target: str) -> tuple[str | None, str | None]:
        """(the tree file `source TARGET` reads, as a path from the tree's root, its text): next to the script, else
        from the root (where launches are usually started); for an absolute TARGET, the tree's copy (tree_copy); no
        text where none is in the tree (above its root, absent)."""
        if self.st.read_file is None:
            return None, None
        if target.startswith("/"):
            return tree_copy(target, self.st.read_file)
        here = posixpath.dirname(self.st.script.s) if self.st.script is not None else ""
        for base in dict.fromkeys((here, "")):
            path = posixpath.normpath(posixpath.join(base, target))
            if path != ".." and not path.startswith("../"):
                text = self.st.read_file(path)
                if text is not None:
                    return path, text
        return None, None

    def known_words(self, fields: list[_Field]) -> tuple[_Field, ...] | None:
        """Positional parameters from a call's words, when every one is known (a word offlint cannot read may be
        several words, or none: then neither `$#` nor any `$N` after it is known)."""
        return None if any(self.why(f.value) for f in fields) else tuple(fields)

    def called_script(self, fields: list[_Field], vals: list[str | None], penv: dict[str, _Var],
                      assumes: tuple[str, ...], ranks: bool = False) -> dict[str, _Var] | None:
        """`bash FILE ARGS`, `sh FILE ARGS` or `FILE ARGS`, FILE a script of the tree: read as a child shell (the
        exported environment) whose positional parameters are ARGS, its commands located at this command. A
        benchmark script calling a wrapper with the flags the wrapper's `while [[ $# -gt 0 ]]; case "$1" in ...`
        loop reads (BochunZhang's Megatron-Bridge-Scale-Down) had left every value of the wrapper's launch unknown.
        `ranks`: a launcher runs it on each rank; a script running its arguments (`python -u "$@"`) is read when they
        name a Python script (lumi-llm-scaling's `srun launch.sh pretrain_gpt.py ...`, launch.sh sourcing a venv).
        Returns the script's environment at its end, where it was read; else None."""
        i = _called_index(vals)
        if i is None or self.depth >= _MAX_DEPTH:
            return None
        path, text = self.sourced(vals[i])
        budget = self.st.source_budget
        runs_arguments = ranks and _RUNS_ARGUMENTS.search(text or "") is not None and any(
            v is not None and v.endswith(".py") for v in vals[i + 1:])
        if text is None or path in self.st.sourcing or len(text) > budget[0] or not (_may_launch(text)
                                                                                   or runs_arguments):
            return None
        budget[0] -= len(text)
        f = fields[i]
        child = self.child_shell(penv, assumes, path)
        child.sourcing = [*self.st.sourcing, path]
        child.positional = self.known_words(fields[i + 1:])
        child.called_text = text
        org = [(f.line, f.col, f.cond)] * (len(text) + 1)
        self.read_child(child, text, org, f"in {path}: ")  # (a script it cannot parse: its own reading reports it)
        return child.env

    def unread_wrapper(self, vals: list[str | None]) -> str:
        """The script a launcher runs on each rank with a Python script among its arguments, where it is not in the
        tree (its text unknown, so what it exports too); "" otherwise."""
        i = _called_index(vals)
        if i is None or not any(v is not None and v.endswith(".py") for v in vals[i + 1:]):
            return ""
        return vals[i] if self.sourced(vals[i])[1] is None else ""

    def written_at(self, n) -> tuple[str, int, int] | None:
        """Where command `n` is written in the called script this shell reads (not in a `bash -c` payload of it)."""
        if self.text is not self.st.called_text or self.st.script is None:
            return None
        a = self.ci(n.start_byte)
        start = self.text.rfind("\n", 0, a) + 1
        return self.st.script.s, self.text.count("\n", 0, a) + 1, a - start + 1

    def child_shell(self, penv: dict[str, _Var], assumes: tuple[str, ...], script: str | None = None,
                    inherit: bool = True) -> _State:
        """The state a child shell starts with (`bash -c`, a called script `script`): this one's exported variables
        (unless not `inherit`: a shell on another host) and `penv`, on this command's path, sharing its output and its
        budget of sourced text."""
        child = _State(self.st.out, self.st.holes, script, read_file=self.st.read_file)
        child.sourcing, child.source_budget, child.unroll_budget, child.brace_budget = \
            self.st.sourcing, self.st.source_budget, self.st.unroll_budget, self.st.brace_budget
        # (a called script keeps the `${BASH_SOURCE[0]}` its state was made with: its own path, not the caller's)
        exported = {k: v for k, v in self.st.env.items() if v.exported and v.arr is None} if inherit else {}
        child.env = {**exported, **penv, **child.env}
        child.ctx = self.st.ctx
        child.nesting = self.st.nesting
        child.control = list(assumes)
        child.loop_passes, child.passes = list(self.st.loop_passes), self.st.passes
        child.where, child.order = self.st.where, self.st.order
        return child

    def payload(self, f: _Field, penv: dict[str, _Var], assumes: tuple[str, ...] = ()) -> None:
        """`bash -c SCRIPT` (also behind srun/docker/...): read SCRIPT as a child shell with the exported env."""
        org = list(f.org) if len(f.org) == len(f.value) else [(f.line, f.col, f.cond)] * len(f.value)
        child = self.child_shell(penv, assumes)
        child.hidden = {k for k, v in self.st.env.items() if not v.exported}
        org.append(org[-1] if org else (f.line, f.col, f.cond))
        # (a payload offlint cannot parse is not read: the words of an unquoted `$CMD` holding `bash -c '...'` keep
        # their quotes as characters, and that bash refuses its payload when the job runs; the script itself is
        # valid: MT-MegatronLM's launch scripts had gone unread)
        self.read_child(child, f.value, org, "in shell -c payload: ")

    def remote_command(self, fields: list[_Field], vals: list[str | None], at: tuple[int, int],
                       assumes: tuple[str, ...]) -> None:
        """`ssh HOST COMMAND...` (`pdsh -w HOSTS COMMAND...`, `tmux new-session -d COMMAND...`): the words from `at[1]`
        on, joined by spaces as ssh joins them, run by the login shell of the remote user (`at[0]`: the ssh, pdsh or
        tmux word) in that host's environment, or in a tmux pane in the tmux server's plus its `-e` settings: nothing
        this shell exports reaches it, and what that environment holds is not known. The words were expanded here."""
        launcher, start = at
        text, org = _joined(fields[start:])
        shown = " ".join(f.text for f in fields[launcher:start])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        pos = (fields[launcher].line, fields[launcher].col)
        tmux = program(vals[launcher]) == "tmux"
        where = "the tmux server's environment" if tmux else "the remote host's login environment"
        remote = {OPENED: _Var(s=f"`{shown}` (line {pos[0]}) runs it in {where}", exported=True, pos=pos)}
        for i, name, value in _tmux_settings(vals, launcher, start) if tmux else ():
            remote[name] = _Var(s=value, exported=True, pos=(fields[i].line, fields[i].col))
        child = self.child_shell(remote, assumes, inherit=False)
        child.hidden = set(self.st.env)
        self.read_child(child, text, org + [org[-1] if org else (*pos, "")],
                        f"in the {program(vals[launcher])} command: ")

    def read_child(self, child: _State, text: str, org: list, where: str) -> None:
        """Read `text` as the child shell `child` (a called script, a `bash -c` payload); where offlint cannot parse
        it, nothing of it is kept, neither its errors nor its commands, as for a sourced file."""
        commands, errors = len(self.st.out.commands), len(self.st.out.errors)
        type(self)(child, text, org, self.depth + 1, where).run()
        child.finish()
        if len(self.st.out.errors) > errors:
            del self.st.out.errors[errors:]
            del self.st.out.commands[commands:]


def _field_spans(s: str, separators: str, blanks: bool) -> list[tuple[int, int]]:
    """Where `read` finds the fields of `s`: runs of blanks separate (and are trimmed) when IFS is blanks only; each
    other separator character ends one field ("a,,b" holds an empty one)."""
    spans, start = [], 0
    if blanks:
        for k, c in enumerate(s + separators[0]):
            if c in separators:
                if k > start:
                    spans.append((start, k))
                start = k + 1
        return spans
    for k, c in enumerate(s):
        if c in separators:
            spans.append((start, k))
            start = k + 1
    return spans + [(start, len(s))] if s else spans


def _may_launch(text: str) -> bool:
    """Whether a script can hold a launch itself (a Python script or an entry point), a cheap test before reading
    a called script: Bridge's CI script, called with arguments, holds 660 other commands. One that sources a file
    may (a MoE model zoo's benchmarking script takes its `pretrain_gpt.py` path from its sourced common.conf)."""
    return ".py" in text or any(name in text for name in HYDRA_ENTRY_POINTS) or _SOURCES.search(text) is not None


_SOURCES = re.compile(r"(?m)^[ \t]*(?:source|\.)[ \t]")  # a line sourcing a file
_RUNS_ARGUMENTS = re.compile(r"\$\{?[@*]")  # `"$@"`, `${@}`, `$*`: a script that may run its arguments


def _joined(fields: list[_Field]) -> tuple[str, list]:
    """Words joined by single spaces, as `eval` and `echo` join them, with each character's origin (a space takes the
    origin of the character before it, or of the word after it)."""
    text, org = "", []
    for k, f in enumerate(fields):
        if k:
            text += " "
            org.append(org[-1] if org else (f.line, f.col, f.cond))
        text += f.value
        org.extend(f.org if len(f.org) == len(f.value) else [(f.line, f.col, f.cond)] * len(f.value))
    return text, org


# `$X` or `${X}` unquoted: the words of X's value
_PLAIN_EXPANSION = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _unquoted(text: str) -> str:
    return text.replace('"', "").replace("'", "")


def _exported(env: dict[str, _Var]) -> dict[str, _Var]:
    """The variables of `env` a command it runs gets: exported scalars (not the OPENED and IMAGE marks)."""
    return {k: v for k, v in env.items() if v.exported and v.arr is None and k != OPENED and k != IMAGE}


def _opened_reason(opened: _Var) -> str:
    """What made an environment open (the OPENED pseudo-variable's text; paths that opened it differently)."""
    reason = opened.s if opened.arr is None and opened.s.isprintable() else ""
    return opened_because(reason or "a sourced file offlint cannot read")


_PRINTING = frozenset({"echo", "printf"})  # commands that print their words and run none of them (command())
_NO_PAYLOAD = _PRINTING | {"eval", "logger"}  # (eval reads its joined words itself; the others print)


# Launchers that start their program on each rank: `srun ... bash FILE`; torchrun's kind only with --no-python
# (else it runs `python bash ...`)
_RANK_LAUNCHERS = frozenset({"srun", "mpirun", "mpiexec", "jsrun"})
_PYTHON_LAUNCHERS = frozenset({"torchrun", "ft_launcher"})


# Options that take a value (`-p 2222`, `-p2222`): ssh's, pdsh's, xargs' (whose command may be ssh), and tmux's, before
# its command and in new-session, new-window and split-window (whose `-e VAR=VALUE` sets the pane's variables)
_SSH_VALUED = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
_PDSH_VALUED = frozenset("wxgXltufRM")
_XARGS_VALUED = frozenset("InPLdaEs")  # (`-i[R]`, `-l[N]`, `-e[S]`: a value only in the same word)
_TMUX_VALUED = frozenset("cfLST")
_TMUX_PANE_VALUED = frozenset("ceFfnstxylp")
_TMUX_STARTS = frozenset({"new-session", "new", "new-window", "neww", "split-window", "splitw"})


def _remote_command(vals: list[str | None]) -> tuple[int, int] | None:
    """(index of `ssh`, `pdsh` or `tmux`, index of the first word of the command it runs elsewhere) in `ssh [options]
    HOST COMMAND...`, `pdsh [options] COMMAND...` or `tmux [options] new-session [options] COMMAND...`, also behind
    `xargs [options]`; None where the command is not one of those, runs nothing (`ssh HOST` logs in) or an option is
    not known."""
    first = 0
    if program(vals[0]) == "xargs":
        first = _after_options(vals, 1, _XARGS_VALUED)
        if first is None or first >= len(vals):
            return None
    name = program(vals[first])
    if name == "tmux":
        sub = _after_options(vals, first + 1, _TMUX_VALUED)
        if sub is None or sub >= len(vals) or vals[sub] not in _TMUX_STARTS:
            return None
        start = _after_options(vals, sub + 1, _TMUX_PANE_VALUED)
    elif name in ("ssh", "pdsh"):
        start = _after_options(vals, first + 1, _SSH_VALUED if name == "ssh" else _PDSH_VALUED)
        if start is not None and name == "ssh" and start < len(vals):
            start = _after_options(vals, start + 1, _SSH_VALUED)  # (the host, then options again: `ssh HOST -p 22 CMD`)
    else:
        return None
    return (first, start) if start is not None and start < len(vals) else None


def _tmux_settings(vals: list[str | None], first: int, start: int) -> list[tuple[int, str, str]]:
    """The (index, NAME, VALUE) of a tmux command's `-e NAME=VALUE` options (`-eNAME=VALUE` too) before `start`."""
    settings = []
    for i in range(first + 1, start):
        word = vals[i] or ""
        setting = word[2:] if word.startswith("-e") and len(word) > 2 else \
            (vals[i + 1] or "") if word == "-e" and i + 1 < start else ""
        name, equals, value = setting.partition("=")
        if equals and name.isidentifier():
            settings.append((i + (word == "-e"), name, value))
    return settings


def _after_options(vals: list[str | None], i: int, valued: frozenset[str]) -> int | None:
    """The index of the first word after the options starting at `i` (getopt's short options, `valued` taking a value
    in the word or the next one; `--` ends them); None where a word there is not known."""
    while i < len(vals):
        word = vals[i]
        if word is None:
            return None
        if word == "--":
            return i + 1
        if not word.startswith("-") or word == "-":
            return i
        if not word.startswith("--"):
            for k, c in enumerate(word[1:], 1):
                if c in valued:
                    i += k == len(word) - 1  # (its value is the next word, else the rest of this one)
                    break
        i += 1
    return i


def _launched_shell(vals: list[str | None]) -> int | None:
    """Index of the shell, or of the script, in a launcher's command that runs a script file on each rank (`srun -N 2
    bash job.sh`, `srun launch.sh pretrain_gpt.py ...`, `torchrun --nproc-per-node=8 --no-python bash worker.sh`:
    GCP's GPU recipes start their worker so); None where there is none."""
    first = program(vals[0])
    if first not in _RANK_LAUNCHERS and not (first in _PYTHON_LAUNCHERS and any(
            v in ("--no-python", "--no_python") for v in vals)):
        return None
    for i, v in enumerate(vals):
        if i and program(v) in ("bash", "sh"):
            return i
        if i and v is not None and v.endswith(".sh") and not any(w is not None and w.endswith(".py") for w in vals[:i]):
            return i  # (a script run itself, before any Python script the command names)
    return None


def _called_index(vals: list[str | None]) -> int | None:
    """Index of the script file in `bash [-x] FILE ARGS`, `sh FILE ARGS` or `FILE ARGS`; None where the command runs
    none (or Bridge's train.sh, a launch of its own)."""
    i = 1 if program(vals[0]) in ("bash", "sh") else 0
    while i and i < len(vals) and vals[i] is not None and vals[i].startswith("-"):
        i += 1  # (`bash -x FILE`)
    if i >= len(vals) or vals[i] is None or not vals[i].endswith(".sh") \
            or program(vals[i]) in HYDRA_ENTRY_POINTS:
        return None
    return i


def _bcprun_payload(vals: list[str | None]) -> tuple[int | None, list[tuple[int, str, str]]]:
    """NVIDIA Base Command Platform's launcher, `bcprun --nnodes N --npernode M [--env NAME=VALUE] --cmd 'COMMAND'`
    (also -n, -p, -e, -c): the index of COMMAND, which it runs with a shell on each rank (None where it has none
    offlint can read), and the (index, NAME, VALUE) of the variables its --env options set there."""
    payload, settings = None, []
    for i, option in enumerate(vals[:-1]):
        value = vals[i + 1]
        if option in ("-c", "--cmd") and value is not None:
            payload = i + 1
        elif option in ("-e", "--env") and value is not None and value.partition("=")[0].isidentifier():
            name, _, setting = value.partition("=")
            settings.append((i + 1, name, setting))
    return payload, settings


def _shell_c_payload(vals: list[str | None]) -> int | None:
    """Index of the script string in `... bash [-flags]c SCRIPT` (None = unknown word); the first shell decides."""
    for i, v in enumerate(vals):
        if v is None or not v.endswith("sh") or v.rsplit("/", 1)[-1] not in _SHELLS:  # (each of _SHELLS ends so)
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


def _image(held: _Var | None) -> str:
    """The image an IMAGE pseudo-variable names ("" for none, or one that differs between paths)."""
    return held.s if held is not None and held.s and held.s.isprintable() else ""

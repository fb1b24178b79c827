"""Commands in the walker: a command's words and environment (the `Command` it reports), what it runs besides
(a `bash -c` payload, a called script, a remote command: shell_children; a here-document: shell_documents), and
the builtins that change the shell's state: `read`, `printf -v`, `getopts`, `shift`, `set --`, `source`, `eval`,
`module` and `conda activate`, and calls of the script's functions. Assignments and declarations are
shell_assignments.
"""

from __future__ import annotations

from offlint.sources.launch import runs_script
from offlint.sources.launch_env import SETTING_LAUNCHERS, launcher_environment, opened_because, srun_environment
from offlint.sources.launch_torch import container_image
from offlint.sources.launch_words import Arg, program
from offlint.sources.shell_launchers import (_bcprun_payload, _launched_shell, _remote_command,
                                             _shell_c_payload)
from offlint.sources.shell_values import (_BLANK, IMAGE, OPENED, Command, EnvSetting, _Field, _joined, _MAX_DEPTH,
                                          _MAX_NESTING, Pos, _split, _Var)
from offlint.sources.shell_words import BRACE_TEXT_MAX, BRACE_WORDS_MAX, TooManyWords, brace_expand
from offlint.types import Location

_BRACE_TOKENS = frozenset(("brace_expression", "concatenation", "word"))  # what may hold a brace expansion
_BRACE_PARTS = frozenset(("brace_expression", "word", "number"))  # plain text (no quotes or expansions)


_LOADED_MODULES = "LOADEDMODULES"
_CONDA_ENVIRONMENT = "CONDA_DEFAULT_ENV"
# Lmod's `ml` subcommands (`ml load X`); any other first word is a module to load (`ml X`)
_MODULE_COMMANDS = frozenset({"load", "add", "unload", "rm", "del", "purge", "swap", "switch", "list", "avail",
                              "spider", "show", "display", "help", "save", "restore", "use", "unuse", "reset",
                              "keyword", "whatis", "savelist", "describe", "mt", "update", "refresh", "try-load"})


class Commands:
    """Commands and builtins; part of the walker."""

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
                beside, self.st.seen_beside_elements = self.st.seen_beside_elements, {}
                try:
                    more = self.token(t)
                    took = tuple(self.st.seen_beside_elements)  # (an array element's own: _Field.defaults)
                    assumed += [tuple(dict.fromkeys([*took, *f.defaults])) if f.defaults else took for f in more]
                    fields += more
                finally:
                    self.st.seen = {**seen, **self.st.seen}
                    self.st.seen_beside_elements = {**beside, **self.st.seen_beside_elements}
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
            penv = {**penv, **self.launcher_settings(words[:j], penv)}
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

    def launcher_settings(self, words: list, penv: dict[str, _Var]) -> dict[str, _Var]:
        """The variables the launchers before a `bash -c` payload set for it (`srun --export=ALL,NAME=VALUE`, `env
        NAME=VALUE`, `mpirun -x NAME=VALUE`: launch_env.launcher_environment, which reads them on a launch's own
        words): the payload's commands run with them, as `NAME=VALUE bash -c` gives them. A setting offlint cannot
        read is unknown; where the launchers may withhold the script's other variables (`env -i`, `srun
        --export=NAME=VALUE` without ALL), the payload's environment is open."""
        if not any(program(w.value) in SETTING_LAUNCHERS for w in words):
            return {}
        args = [Arg(w.value, Location("", w.line, w.col), w.text, w.unknown) for w in words]
        given, withheld = launcher_environment(args)
        out = {name: _Var(s=setting.value if setting.value is not None else
                          self.st.holes.char(setting.unknown or f"{name} is set by a word offlint cannot read"),
                          exported=True, pos=(setting.location.line, setting.location.col))
               for name, setting in given.items()}
        if withheld and OPENED not in penv:
            out[OPENED] = _Var(s=withheld, exported=True, pos=(words[0].line, words[0].col))
        return out

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
        fields than names (where bash would give the last name the rest of the line, separators and all).
        `read -ra NAME <<< "$FLAGS"` makes NAME the array of the fields, less an empty last one (as bash drops it):
        round 5 of the recall study split a launch's flags so, and they had been left unknown."""
        redirects = [c for c in n.children if c.type == "herestring_redirect"]
        words = vals[1:]
        options = "".join(w[1:] for w in words[:2] if w is not None and w.startswith("-") and len(w) > 1)
        array = sorted(options) == ["a", "r"] and len(words) == 3 - (words[0] in ("-ra", "-ar")) and \
            words[-1] is not None and words[-1].isidentifier()
        if len(redirects) != 1 or not array and (len(words) < 2 or words[0] != "-r" or not all(
                w is not None and w.isidentifier() for w in words[1:])):
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
        pos = (n.start_point[0] + 1, n.start_point[1] + 1)
        if array:
            if spans and spans[-1][0] == spans[-1][1] and not blanks:  # ("a,b," is two elements to bash)
                spans.pop()
            old = self.st.env.get(words[-1])
            # (each element where its text was written, as an array's own elements are)
            elements = tuple(_Field(s[a:b], tuple(org[a:b]), *(org[a][:2] if b > a and org[a][0] else pos), s[a:b])
                             for a, b in spans)
            self.st.env[words[-1]] = _Var(arr=elements, lines=(pos[0],), pos=pos,
                                          exported=bool(old and old.exported))
            return
        names = words[1:]
        if len(spans) > len(names):
            return
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
        first on PATH (a launcher found there is the environment's: launch_torch.conda_interpreter). An unknown ENV is
        unknown there."""
        target = next((a for a in args if a is None or not a.startswith("-")), "")
        if target is None:
            self.set_unknown(_CONDA_ENVIRONMENT, "the conda environment activated is not known", pos, exported=True)
        elif target:
            self.set_exported(_CONDA_ENVIRONMENT, target, pos)

    def known_words(self, fields: list[_Field]) -> tuple[_Field, ...] | None:
        """Positional parameters from a call's words, when every one is known (a word offlint cannot read may be
        several words, or none: then neither `$#` nor any `$N` after it is known)."""
        return None if any(self.why(f.value) for f in fields) else tuple(fields)


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


def _exported(env: dict[str, _Var]) -> dict[str, _Var]:
    """The variables of `env` a command it runs gets: exported scalars (not the OPENED and IMAGE marks)."""
    return {k: v for k, v in env.items() if v.exported and v.arr is None and k != OPENED and k != IMAGE}


def _opened_reason(opened: _Var) -> str:
    """What made an environment open (the OPENED pseudo-variable's text; paths that opened it differently)."""
    reason = opened.s if opened.arr is None and opened.s.isprintable() else ""
    return opened_because(reason or "a sourced file offlint cannot read")


_PRINTING = frozenset({"echo", "printf"})  # commands that print their words and run none of them (command())
_NO_PAYLOAD = _PRINTING | {"eval", "logger"}  # (eval reads its joined words itself; the others print)


def _image(held: _Var | None) -> str:
    """The image an IMAGE pseudo-variable names ("" for none, or one that differs between paths)."""
    return held.s if held is not None and held.s and held.s.isprintable() else ""

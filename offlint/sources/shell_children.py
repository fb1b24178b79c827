"""Child shells: a file `source`d into this shell, a script of the tree called with its arguments (`bash FILE`,
`./FILE`), a `bash -c` payload, and the command `ssh`, `pdsh` or `tmux` runs elsewhere. Each is read by a walker
of its own on a state made from this one (child_shell).
"""

from __future__ import annotations

import os
import posixpath
import re

from offlint.sources.launch import HYDRA_ENTRY_POINTS
from offlint.sources.launch_words import program
from offlint.sources.shell_launchers import _called_index, _tmux_settings
from offlint.sources.shell_paths import tree_copy
from offlint.sources.shell_values import OPENED, _Field, _joined, _MAX_DEPTH, Pos, _State, _Var


class ChildShells:
    """Sourced files, called scripts, payloads and remote commands; part of the walker."""

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


def _may_launch(text: str) -> bool:
    """Whether a script can hold a launch itself (a Python script or an entry point), a cheap test before reading
    a called script: Bridge's CI script, called with arguments, holds 660 other commands. One that sources a file
    may (a MoE model zoo's benchmarking script takes its `pretrain_gpt.py` path from its sourced common.conf)."""
    return ".py" in text or any(name in text for name in HYDRA_ENTRY_POINTS) or _SOURCES.search(text) is not None


_SOURCES = re.compile(r"(?m)^[ \t]*(?:source|\.)[ \t]")  # a line sourcing a file
_RUNS_ARGUMENTS = re.compile(r"\$\{?[@*]")  # `"$@"`, `${@}`, `$*`: a script that may run its arguments

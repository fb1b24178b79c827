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
definition. A `source`d file of the tree is read for the variables it sets and exports (not the commands it
runs, nor its functions); one offlint cannot read (outside the tree, absent, named by an unknown value) leaves the
environment of the commands after it open (`Command.env_open`). `export X` of a variable never set gives value
None.

Where each part lives (one room each; `_Walker` is assembled from the mixins):

- shell_parse (here): `parse_shell`, the entry point, and what it reports when a script cannot be read.
- shell_values: the data types: `Word`, `EnvSetting`, `Command`, `ShellScript`; variables, holes, field
  splitting, the merge of alternative paths, one shell process's state.
- shell_walker: the walker and statements: lists, `if`, `case`, loops, subshells, functions.
- shell_commands: commands and their environment, builtins (`read`, `shift`, `source`, `eval`, `module`, ...),
  calls of the script's functions.
- shell_assignments: `X=...`, `A[i]=...`, `export`/`declare`/`local`.
- shell_children: child shells: sourced files, called scripts, `bash -c` payloads, `ssh`/`pdsh`/`tmux` commands;
  shell_launchers finds, from a command's words alone, which word runs which.
- shell_documents: here-documents, and files the script writes and then submits (`cat > job.sh <<EOF`).
- shell_words: word expansion: quoting, `$X`, `${X:-d}` and friends, arrays, `$'...'`, substitutions.
- shell_conditions: tests, `case` patterns and arithmetic on known values (shell_tests decides the strings).
- shell_mask (tree-sitter-bash's gaps), shell_paths (`$(dirname "$0")` idioms), shell_tests: helpers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from offlint.sources.shell_walker import _Walker
from offlint.sources.shell_values import OPENED, _Holes, _MAX_NESTING, Org, ShellScript, _State, _TooDeep, _Var


def parse_shell(text: str, script: str | None = None, where: tuple[str, int] = ("", 0),
                read_file: Callable[[str], str | None] | None = None, printing: bool = True) -> ShellScript:
    """Read `text` as bash; never raises (problems go to `errors`, the rest is still returned).

    `script`: the script's path, when `text` is a script file run as such: `$0` and `${BASH_SOURCE[0]}` are then
    that path, so `$(dirname "$0")` and the like locate files next to it (shell_paths). `where`: the file and the
    line offset that Command.assumes name a decision's place with (a finding may be located in another file).
    `read_file`: a tree file's text by its path (None where there is none), for `source FILE`: what the file sets
    and exports is read; a file it cannot give leaves the environment of the commands after it open. `printing`:
    whether `commands` holds those that only print (ShellScript.printing)."""
    out = ShellScript([], [], printing=printing)
    try:
        if not isinstance(text, str):
            text = bytes(text).decode("utf-8", "replace")
        org = _origins(text)
        st = _State(out, _Holes(), script, read_file)
        st.where = where
        if script is not None:
            st.env.update(_sbatch_directives(text))
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


_SBATCH_EXPORT = re.compile(r"#SBATCH[ \t]+--export[= ](\S+)")
_SBATCH_ENVIRONMENT = re.compile(r"#SBATCH[ \t]+(--environment[= ]\S+)")
_SETTING = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([^,]*)")


def _sbatch_directives(text: str) -> dict[str, _Var]:
    """What a batch script's directives (sbatch reads them up to the script's first command) give the job's
    environment when the script starts. `#SBATCH --export=ALL,NAME=VALUE`: those variables, exported (seen
    launching with PYTORCH_CUDA_ALLOC_CONF so, where OFL301 had called it unset). `#SBATCH --environment=FILE`
    (CSCS's container environment definitions, as `srun --environment` names them: launch_env.srun_environment):
    the environment is open, since the file (outside the tree) may set any variable (a Megatron-LM fork's 12 batch
    scripts running torchrun under one had 13 OFL301)."""
    found: dict[str, _Var] = {}
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        environment = _SBATCH_ENVIRONMENT.match(stripped)
        if environment is not None:
            col = len(line) - len(line.lstrip()) + 1
            found[OPENED] = _Var(s=f"`#SBATCH {environment.group(1)}` (line {number}) runs the job in a container "
                                   f"environment whose definition file (outside the tree) may set variables",
                                 exported=True, pos=(number, col))
            continue
        directive = _SBATCH_EXPORT.match(stripped)
        if directive is None:
            continue
        indent = len(line) - len(line.lstrip())
        for item in _SETTING.finditer(directive.group(1)):
            if item.start() and directive.group(1)[item.start() - 1] != ",":
                continue
            col = indent + directive.start(1) + item.start() + 1
            value = item.group(2)
            found[item.group(1)] = _Var(s=value, org=((number, col, ""),) * len(value), lines=(number,),
                                        pos=(number, col), exported=True)
    return found


_ROWS: list[tuple[Org, ...]] = []  # _ROWS[ln - 1]: (ln, 1, ""), (ln, 2, ""), ... as long as a line has needed
_ROW_LINES, _ROW_COLS = 1000, 200  # beyond these a line's origins are its own: at most ~16 MB are kept


def _origins(text: str) -> list[Org]:
    """One (line, col, "") per character of `text`, plus one for the end.

    The tuples are made once per process and shared by every script (they are immutable): making ~1.3 million
    of them for the scripts of a large tree was about a tenth of reading them. A row is replaced, never extended
    in place, so a reader sees a complete one."""
    org: list[Org] = []
    for ln, line in enumerate(text.split("\n"), 1):
        k = len(line) + 1
        if ln > _ROW_LINES or k > _ROW_COLS:
            org.extend([(ln, c, "") for c in range(1, k + 1)])
            continue
        while len(_ROWS) < ln:
            _ROWS.append(())
        row = _ROWS[ln - 1]
        if len(row) < k:
            row = _ROWS[ln - 1] = row + tuple([(ln, c, "") for c in range(len(row) + 1, k + 1)])
        org += row[:k]
    return org

"""What the directory idioms of launch scripts (and `seq`) print, from known arguments.

`ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd -P)`, `SCRIPT_DIR=$(dirname "$(realpath "$0")")` and
`$(dirname "${BASH_SOURCE[0]}")` locate files next to the script; without them a launch that runs
`"${ROOT_DIR}/scripts/training/run_recipe.py"` is not recognised at all. The walker gives `$0` and
`${BASH_SOURCE[0]}` the script's path as offlint names it (relative to the working directory, as a user runs it
from there) and asks this module what `dirname`, `realpath`, `readlink -f` and `cd DIR && pwd` print. Paths are
made absolute against the working directory and normalised as text; symbolic links are not followed (`pwd -P`
would), nothing is run and nothing on disk is read. `seq` prints integers: THUDM/slime's
`--sglang-cuda-graph-bs 1 2 4 8 $(seq 16 8 256)` is that flag's values, not a word that may be any flag.
"""

from __future__ import annotations

import os
import posixpath

COMMANDS = ("dirname", "realpath", "readlink", "cd", "pwd", "seq")
_MAX_SEQ = 10_000  # numbers; a longer `seq` is left unread


def prints(commands: list[tuple[str, list[str]]]) -> str | None:
    """What `$( ... )` prints for one command, or for `cd DIR && pwd` (also `cd DIR; pwd`), given each command's
    name and its (known) argument values; None when it is not one of these idioms."""
    if len(commands) == 1:
        name, args = commands[0]
        if name == "dirname":
            operand = _operand(args, "")
            return _dirname(operand) if operand is not None else None
        if name == "realpath":
            operand = _operand(args, "esmqPLz")
            return _absolute(operand) if operand is not None else None
        if name == "readlink":
            flags = {c for a in args if a.startswith("-") and not a.startswith("--") for c in a[1:]}
            operand = _operand(args, "femnqsvz")
            return _absolute(operand) if operand is not None and flags & set("fem") else None
        if name == "seq":
            return _seq(args)
        return None
    if len(commands) == 2 and commands[0][0] == "cd" and commands[1][0] == "pwd":
        operand = _operand(commands[0][1], "PLe@")
        if operand is not None and operand != "-" and _operand(commands[1][1] + ["."], "PL") == ".":
            return _absolute(operand)
    return None


def _operand(args: list[str], flags: str) -> str | None:
    """The one argument that is not an option (`--` ends the options), or None when there is not exactly one or an
    option outside `flags` is given."""
    out: list[str] = []
    options = True
    for arg in args:
        if options and arg == "--":
            options = False
        elif options and len(arg) > 1 and arg.startswith("-"):
            if arg.startswith("--") or any(c not in flags for c in arg[1:]):
                return None
        else:
            out.append(arg)
    return out[0] if len(out) == 1 else None


def _seq(args: list[str]) -> str | None:
    """As coreutils `seq [FIRST [INCREMENT]] LAST` of integers, without options: the numbers one per line (a
    command substitution drops the last newline). None for anything else (an option, a fraction, a zero increment,
    more than `_MAX_SEQ` numbers)."""
    if not 1 <= len(args) <= 3 or not all(_is_integer(a) for a in args):
        return None
    given = [int(a) for a in args]
    first, step, last = (1, 1, *given) if len(given) == 1 else (given[0], 1, given[1]) if len(given) == 2 else given
    numbers = range(first, last + (1 if step > 0 else -1), step) if step else None
    if numbers is None or len(numbers) > _MAX_SEQ:
        return None
    return "\n".join(map(str, numbers))


def _is_integer(arg: str) -> bool:
    """A decimal integer as `seq` reads one (`-1`, `+3`), not an option."""
    digits = arg[1:] if arg[:1] in "+-" else arg
    return digits.isascii() and digits.isdigit()


def _dirname(path: str) -> str:
    """As coreutils `dirname`: `a/b/` -> `a`, `run.sh` -> `.`, `/x` -> `/`."""
    if not path:
        return "."
    stripped = path.rstrip("/")
    if not stripped:
        return "/"
    head = stripped.rsplit("/", 1)[0] if "/" in stripped else "."
    return head.rstrip("/") or "/"


def _absolute(path: str) -> str:
    return posixpath.normpath(posixpath.join(os.getcwd(), path)) if path else os.getcwd()


def tree_copy(target: str, read_file) -> tuple[str | None, str | None]:
    """(path, text) of the tree file an absolute path ends in, the longest such ending first:
    `source /home/me/geodesic-megatron/pipeline_env_activate.sh`, the launcher's own checkout on the cluster,
    is the tree's pipeline_env_activate.sh (geodesic-megatron). (None, None) where no ending is a tree file."""
    parts = [p for p in posixpath.normpath(target).split("/") if p]
    for start in range(len(parts)):
        text = read_file("/".join(parts[start:]))
        if text is not None:
            return "/".join(parts[start:]), text
    return None, None

"""Which word of a command runs another command, read from its words alone: the script of `bash -c SCRIPT`, the
script file of `bash FILE` or of a launcher that runs one on each rank (`srun bash job.sh`), the command of `ssh
HOST COMMAND`, `pdsh` and `tmux new-session`, and `bcprun --cmd`.
"""

from __future__ import annotations

from offlint.sources.launch import HYDRA_ENTRY_POINTS
from offlint.sources.launch_words import program

_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}

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

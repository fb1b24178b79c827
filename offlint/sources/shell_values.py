"""What the shell walker computes with: the words and commands it reports, and the values it tracks.

Public: `Word`, `EnvSetting`, `Command`, `ShellScript` (what parse_shell returns). Internal: a variable
(`_Var`), a word before it is reported (`_Field`), the pieces of an expanding word (`_P`) and field splitting
(`_split`, `_join`), unknown parts of values as private-use characters (`_Holes`), the merge of alternative
paths (`_merge`), and one shell process's state (`_State`). Every expanded character carries its origin
(`Org`: line, column, conditional mark).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import chain

from offlint.types import LoopPass

Pos = tuple[int, int]  # (line, col), 1-based
Org = tuple[int, int, str]  # where one expanded character came from: (line, col, conditional)
_IFS = " \t\n"
_BLANK = re.compile("[ \t\n]")  # a character of _IFS
_MAX_NESTING = 100  # nested statements, words and arithmetic: past this a script is reported, not half-read
_MAX_DEPTH = 6  # shells read inside one another (`bash -c` payloads, `eval`, sourced files, called scripts)
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
    # when value is None: the flags it may give, as far as offlint can tell (a variable its branches set to known
    # texts gives theirs; `dir>/$X` none, it is no flag), or None when it may give any (`${EXTRA_ARGS}` unset here)
    flags: tuple[str, ...] | None = ()
    # when value is None: its last path component where only the directories before it are unknown
    # (`$MEGATRON_LM_DIR/pretrain_gpt.py` gives "pretrain_gpt.py"), else ""
    name: str = ""
    # the variables whose default (`${X:-d}`, X not set in the script) its value took: the environment the script
    # runs in chooses it (`NNODES=${SLURM_NNODES:-1}`)
    assumed: tuple[str, ...] = ()
    # a word one alternative of an undecided branch appended to an array or a string (its mark's ALTERNATIVE): (the
    # branch's mark, which alternative, how many there are); () otherwise
    alternative: tuple = ()


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
    # The undecided branch the command itself is in ("inside if at line 40"; "" for none): the mark its own words
    # carry (Word.conditional), as against words that only some paths give it
    inside: str = ""
    # Why its environment may hold variables offlint cannot see ("" when it can see them all): a file it sourced
    # that offlint could not read ("`source /opt/env.sh` at line 3 is outside the tree")
    env_open: str = ""
    passes: tuple[LoopPass, ...] = ()  # the passes of unrolled `for` loops it runs in, outermost first
    calls_function: bool = False  # its first word names a function of the script (whose body is read instead)
    # Where it is written when it is a command of a script the script calls (`bash worker.sh`): (that script's path,
    # line, column); it is located at the call. None for the script's own commands.
    written_at: tuple[str, int, int] | None = None
    # The PyTorch container image an enclosing command runs it in ("" for none: its own launcher words may name one)
    image: str = ""
    # A launcher running a script of the tree on each rank (`srun launch.sh ARGS`) whose commands were read, with
    # ARGS as its positional parameters: they are the launch, not this command
    runs_called_script: bool = False


@dataclass
class ShellScript:
    commands: list[Command]  # in execution order; a `bash -c` payload's commands follow the command holding it
    errors: list[str]  # parse problems, "line N: ..."; empty when tree-sitter found no ERROR nodes
    # where each variable assignment of the script's own text lies, ((line, col) start, (line, col) end): a launch's
    # words from one assignment were written together (OFL004), words from two are layered
    assignments: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)
    # Whether `commands` holds the commands that only print (`echo`, `printf`): a reader of launches has no use for
    # them (read_shell), a YAML command string keeps them (read as far as it parses, it is prose where it has none)
    printing: bool = True


class _Holes:
    """Unknown parts of values, as private-use characters that map to the reason they are unknown."""

    def __init__(self):
        self.chars: dict[str, str] = {}
        self.reasons: list[str] = []
        # a hole -> the flags the texts it stands for hold (it is one of them: a variable's values on different
        # paths); a hole not here may hold any
        self.flags: dict[str, frozenset[str]] = {}

    def char(self, reason: str, flags: frozenset[str] | None = None) -> str:
        """The hole for `reason`; `flags`: what the texts it stands for hold (see flags_in), None: any flags."""
        if reason not in self.chars:
            self.chars[reason] = chr(_HOLE0 + min(len(self.reasons), _HOLES - 1))
            self.reasons.append(reason)
            if flags is not None:
                self.flags[self.chars[reason]] = flags
        elif self.chars[reason] in self.flags:  # the same reason met again: any of the texts of both
            if flags is None:
                del self.flags[self.chars[reason]]
            else:
                self.flags[self.chars[reason]] |= flags
        return self.chars[reason]

    def flags_in(self, text: str) -> frozenset[str] | None:
        """The flags (`--name` of `--name` or `--name=value`) the words of `text` may give once split, its holes
        included; None when a word may give any: one that starts with a hole that may hold any text, or a flag
        whose name is not fully known. A word with a known beginning that is no flag (`dir>/$X`) gives none."""
        from offlint.sources.mlm_flags import takes_value

        found: set[str] = set()
        valued = False  # the word before was a flag that takes a value (`--seq-length ${SEQ_LEN}`): this is it
        for word in _BLANK.split(text):
            if not word:
                continue
            first = next((i for i, c in enumerate(word) if 0 <= ord(c) - _HOLE0 < _HOLES), -1)
            after_flag, valued = valued, False
            if first < 0:
                if word.startswith("-") and len(word) > 1 and not word[1].isdigit() and word[1] != ".":
                    found.add(word.split("=", 1)[0])  # (after a valued flag too: as read_flags, not its value)
                    valued = "=" not in word and takes_value(word)
                continue
            if after_flag:
                continue
            for c in word[first:]:
                if 0 <= ord(c) - _HOLE0 < _HOLES and c in self.flags:
                    found |= self.flags[c]
            known = word[:first]
            if known.startswith("-"):
                if "=" not in known:
                    return None
                found.add(known.split("=", 1)[0])
            elif not known and word[first] not in self.flags:
                return None
        return frozenset(found)

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
    # an array element's: the variables whose defaults its own value took (`NODE_RANK=${NODE_RANK:-0}` makes the
    # element `$NODE_RANK` take NODE_RANK's, not `--nproc_per_node` beside it); None where no element says
    defaults: tuple[str, ...] | None = None

    def word(self, holes: _Holes, assumed: tuple[str, ...] = ()) -> Word:
        """The word; `assumed`: the variables whose defaults its value took (Word.assumed)."""
        why = holes.why(self.value)
        mark, taken = branch_mark(self.cond), alternative(self.cond) or ()
        if not why:
            return Word(self.value, self.line, self.col, self.text, "", mark, assumed=assumed, alternative=taken)
        flags = holes.flags_in(self.value)
        head, slash, name = self.value.rpartition("/")
        known_name = name if slash and name and not holes.why(name) else ""
        return Word(None, self.line, self.col, self.text, why, mark, None if flags is None else tuple(sorted(flags)),
                    known_name, assumed, taken)


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
    # OPENED only: what opened the environment opens every path, even where it happened on some paths only
    # (_merge): a file the script names inside the checkout (`.secrets/env.sh`), which the checkout expects each user
    # to have, or an export of a variable whose name the script reads at run time, in a loop over a config's
    # variables that runs whenever the config has any
    every_path: bool = False

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
        self.defaults: dict[str, None] = {}  # those of the array elements it holds (_Field.defaults)

    def add(self, p: _P, i: int, j: int) -> None:
        if i < j or p.elem is not None:
            self.src.add(id(p.elem) if p.elem is not None else 0)
            self.elem = p.elem or self.elem
            self.cond = self.cond or p.cond
            if p.elem is not None and p.elem.defaults:
                self.defaults.update(dict.fromkeys(p.elem.defaults))
        self.on = self.on or p.quoted or i < j
        self.ch.append(p.text[i:j])
        self.org.extend(p.org[i:j])

    def field(self, line: int, col: int, text: str, ctx: str) -> _Field:
        e = self.elem if self.elem is not None and self.src == {id(self.elem)} else None
        if e is not None:
            line, col, text = e.line, e.col, e.text
        cond = ctx or self.cond or (self.org[0][2] if self.org else "")  # first char: the word is a conditional one
        return _Field("".join(self.ch), tuple(self.org), line, col, text, cond, tuple(self.defaults) or None)


def _split(pieces: list[_P], line: int, col: int, text: str, ctx: str) -> list[_Field]:
    """Field splitting: unquoted expansion text splits on whitespace, array elements start new fields."""
    if len(pieces) == 1:
        p = pieces[0]
        if not p.brk and not (p.split and (not p.text or _BLANK.search(p.text))):
            return _unsplit(p, line, col, text, ctx)
    out: list[_Field] = []
    acc = _Acc()
    for p in pieces:
        if p.brk:
            if acc.on:
                out.append(acc.field(line, col, text, ctx))
            acc = _Acc()
        elif not p.split:
            acc.add(p, 0, len(p.text))
        else:  # each blank ends the field being built (if any); the runs between blanks are its text
            start = 0
            for blank in _BLANK.finditer(p.text):
                i = blank.start()
                if i > start:
                    acc.add(p, start, i)
                if acc.on:
                    out.append(acc.field(line, col, text, ctx))
                    acc = _Acc()
                start = i + 1
            if len(p.text) > start:
                acc.add(p, start, len(p.text))
    if acc.on:
        out.append(acc.field(line, col, text, ctx))
    return out


def _unsplit(p: _P, line: int, col: int, text: str, ctx: str) -> list[_Field]:
    """What `_split` gives for one piece that does not split (four words in five): the field `_Acc` would build,
    without building one (three calls and a set less per word)."""
    n = len(p.text)
    if not (p.quoted or n):
        return []
    org = tuple(p.org[:n])
    e = p.elem
    cond = ctx or (p.cond if n or e is not None else "") or (org[0][2] if org else "")
    if e is not None:
        line, col, text = e.line, e.col, e.text
    return [_Field(p.text, org, line, col, text, cond, e.defaults if e is not None else None)]


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


# In a conditional mark, the alternative of its branch that gave the value (`_merge`: an array element, or words
# added to a string, that one alternative appended: "inside if at line 4" + ALTERNATIVE + "0/2"), for the launch
# readers (launch._by_path)
ALTERNATIVE = "\x1f"


def branch_mark(cond: str) -> str:
    """A conditional mark as shown, without the alternative it may carry."""
    return cond.partition(ALTERNATIVE)[0]


def with_alternative(label: str, index: int, count: int) -> str:
    """The mark `label` carrying alternative `index` of `count` (read back by `alternative`)."""
    return f"{label}{ALTERNATIVE}{index}/{count}"


def alternative(cond: str) -> tuple[str, int, int] | None:
    """(the branch's mark, which alternative, how many there are) a conditional mark carries; None if none."""
    mark, found, rest = cond.partition(ALTERNATIVE)
    if not found:
        return None
    index, _, count = rest.partition("/")
    return mark, int(index), int(count)


def _stamp(org, cond: str):
    """Mark characters that came from a conditional value, so words re-read from a payload keep the mark."""
    return [(ln, col, c or cond) for ln, col, c in org] if cond else org


def _same(a: _Var, b: _Var) -> bool:
    va = None if a.arr is None else [f.value for f in a.arr]
    vb = None if b.arr is None else [f.value for f in b.arr]
    return (a.s, a.unset, va) == (b.s, b.unset, vb)


# The pseudo-variable (no shell name can be it) a path's environment holds once it sourced a file offlint could not
# read: its value says which. Kept in _State.env, it is copied, merged and passed to `bash -c` children as the
# variables are (exported), and left out of a command's environment.
OPENED = "\x00sourced"
# The pseudo-variables holding the text a script wrote to a file (`cat > job.sbatch <<EOF`, `echo ... >> job.sbatch`),
# WRITTEN + the file's name, for the `sbatch job.sbatch` that runs it: merged over branches as variables are, not
# exported (shell_documents.heredoc_script, submitted_script)
WRITTEN = "\x00written:"
# The pseudo-variable holding the PyTorch container image a command runs its payload or called script in (`srun
# --container-image IMAGE bash -c "..."`): exported to the children, left out of a command's environment
# (Command.image)
IMAGE = "\x00image"
SOURCE_BUDGET = 2_000_000  # characters of sourced files one script reads, in all (_State.source_budget)
# statements one script may read again in the passes of its `for` loops after their first (_State.unroll_budget): a
# 2 MB script of 100,000 lines in a 32-word loop would otherwise be read 32 times over (walker.unroll). Megatron
# Bridge's largest sweep (a MIMO parallelism test, 16 configurations) reads 1,320 again; at most 5,000 more
# commands keep a file that had fewer than 5,000 launches under sources.MAX_UNITS
UNROLL_BUDGET = 5_000
# words brace expansion may make in one script, in all (_State.brace_budget): a launch's sweep makes a few; a 2 MB
# script of words of 16 nested groups would make half a million, a third more time than reading it
BRACE_BUDGET = 10_000


def _merge(before: dict, paths: list[dict], label: str, holes: _Holes) -> dict:
    """Join the variables of alternative paths: agreeing values stay, arrays keep conditional appends."""
    out = {}
    for name in dict.fromkeys(chain.from_iterable(paths)):
        vals = [p.get(name) for p in paths]
        if all(v is vals[0] for v in vals):
            out[name] = vals[0]
            continue
        if name == OPENED:
            # A file offlint cannot read, sourced on some paths only (`if [ -n "$CONFIG" ]; then source "$CONFIG"`,
            # `[ -f ~/.env ] && source ~/.env`): what holds on the other paths (the script's own, without the file
            # the user may give) stands; on every path, the environment is open. So it is where the file is one
            # the checkout expects each user to have (`[[ -f .secrets/env.sh ]] && source .secrets/env.sh`).
            if None not in vals or any(v is not None and v.every_path for v in vals):
                out[name] = next(v for v in vals if v is not None and (v.every_path or None not in vals))
            continue
        indexed = [(k, v) for k, v in enumerate(vals) if v is not None and not v.unset]  # (k: its alternative)
        setv = [v for _, v in indexed]
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
            # each element one alternative appends is marked with it (ALTERNATIVE); one a nested branch appended
            # keeps that branch's mark without its alternative: which paths give it is not known
            extra = {id(f): replace(f, cond=with_alternative(label, k, len(vals)))
                     if branch_mark(f.cond) in ("", label) else replace(f, cond=branch_mark(f.cond))
                     for k, v in indexed for f in v.arr[len(b) :]}
            out[name] = replace(setv[-1], arr=b + tuple(extra.values()), exported=exported, cond=cond)
            continue
        lines = sorted({ln for v in setv for ln in v.lines})
        # (a variable not set before: `if [ $AC = sel ]; then ac_options="--recompute-activations"; elif ...; then
        # ac_options="--cpu-offloading ..."; fi`, as Pai-Megatron-Patch's launchers choose their options by
        # positional parameters: each path's options appended to nothing)
        start = base if base is not None else _Var()
        around = _around(start, indexed)
        if around is not None:
            # `X="$X --more"` or `APP="nsys profile $APP"` on some paths (an option appended, a profiler or another
            # wrapper put in front of a command kept in a variable): like an array append, the added words stay,
            # before or after the value, marked conditional
            # (each marked with the alternative that adds it, where one does: ALTERNATIVE)
            pres, sufs = around
            s = "".join(t for (t, _), _ in pres) + start.s + "".join(t for (t, _), _ in sufs)
            marks = {k: label if k is None else with_alternative(label, k, len(vals)) for _, k in (*pres, *sufs)}
            org = (*(o for (_, os), k in pres for o in _stamp(os, marks[k])), *start.org,
                   *(o for (_, os), k in sufs for o in _stamp(os, marks[k])))
            out[name] = replace(start, s=s, org=org, exported=exported, lines=tuple(lines))
            continue
        where = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
        pos = setv[-1].pos
        flags: frozenset[str] | None = frozenset()
        for text in (t for v in setv for t in ([f.value for f in v.arr] if v.arr is not None else [v.s])):
            more = holes.flags_in(text)
            if more is None:
                flags = None
                break
            flags |= more
        out[name] = _Var(s=holes.char(f"assigned differently on some paths ({where})", flags), org=((*pos, cond),),
                         lines=tuple(lines), pos=pos, exported=exported, cond=cond)
    return out


def _flag_lists(setv: list[_Var]) -> bool:
    """Whether every value is a string of command-line options (its first word a flag) or blank: what a script
    expands unquoted into a command's words, not a scalar such as a size (`PP=2` on one path, `PP=4` on another)."""
    return all(v.arr is None and (not v.s.strip(_IFS) or v.s.lstrip(_IFS).startswith("-")) for v in setv)


def _around(base: _Var | None, setv: list[_Var]) -> tuple[list, list] | None:
    """Where every path's string value is `base`'s with whole words added before or after it (its characters from
    the same places, so the same text assigned anew does not count): the distinct (text, origins) added before, and
    after; None otherwise."""
    if base is None or base.arr is not None or base.unset:
        return None
    n = len(base.s)
    if not n and not _flag_lists([v for _, v in setv]):
        return None  # (options added to nothing, each path's own: a scalar, `PP=2` or `PP=4`, is no list of them)
    pres: dict[tuple, int | None] = {}  # what is added -> the alternative that adds it (None: more than one does)
    sufs: dict[tuple, int | None] = {}
    for k, v in setv:
        if v.arr is not None:
            return None
        i = v.s.find(base.s) if n else 0  # (an empty value: words after it, as `X="$X --more"` adds them)
        while i >= 0 and v.org[i:i + n] != base.org:
            i = v.s.find(base.s, i + 1)
        if i < 0 or n and ((i and v.s[i - 1] not in _IFS) or (i + n < len(v.s) and v.s[i + n] not in _IFS)):
            return None
        if not n and v.s[:1] not in _IFS and v.s:  # (words of two paths added to nothing must not run together)
            v = replace(v, s=" " + v.s, org=(*v.org[:1], *v.org))
        for added, found in (((v.s[:i], v.org[:i]), pres), ((v.s[i + n:], v.org[i + n:]), sufs)):
            if added[0]:
                found[added] = k if added not in found else None
    return list(pres.items()), list(sufs.items())


class _TooDeep(Exception):
    """Nesting past _MAX_NESTING: the walk stops, and the script is reported instead of losing commands."""

    def __init__(self, line: int):
        super().__init__(line)
        self.line = line


class _Unknown(Exception):
    pass


class _State:
    """What one shell process knows: variables, functions, and where it writes commands."""

    def __init__(self, out: ShellScript, holes: _Holes, script: str | None = None,
                 read_file: Callable[[str], str | None] | None = None):
        self.out, self.holes, self.env, self.ctx = out, holes, {}, ""
        # a tree file's text by its path from the tree's root (None: not there): what `source FILE` reads
        self.read_file = read_file
        self.sourcing: list[str] = []  # the files being sourced, innermost last (a file sourcing itself stops)
        # characters of sourced files this script may still read, shared with its `bash -c` children: a script
        # that sources a large file many times (or files that source each other twice over) stays linear
        self.source_budget = [SOURCE_BUDGET]
        self.script = None  # `$0`, when the script's path is known
        # `$1`, `$2`, ... when known: the words a script of the tree was called with, or a function (None: a script
        # run by a user, whose arguments are unknown)
        self.positional: tuple[_Field, ...] | None = None
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
        # the same but for the array elements that keep their own (_Field.defaults): each word takes its element's
        self.seen_beside_elements: dict[str, None] = {}
        self.assumed: tuple[str, ...] = ()  # those an eval's words took: every word of the code it runs took them
        self.noted: dict[str, None] = {}  # the decisions (their notes) the values being read rest on
        self.control: list[str] = []  # the decisions (notes) of the decided branches being read
        self.passes = 1  # how many times the `for` loops being unrolled read their bodies, together (walker.unroll)
        self.loop_passes: list[LoopPass] = []  # the passes of the loops being unrolled, outermost first
        self.unroll_budget = [UNROLL_BUDGET]  # shared with its `bash -c` children, as source_budget
        self.brace_budget = [BRACE_BUDGET]  # words brace expansion may still make in this script (shared the same way)
        self.walked = 0  # statements read so far (what a pass of a loop costs: walker.unroll)
        self.where: tuple[str, int] = ("", 0)  # the file and line offset decisions are shown with
        self.order: dict[str, int] = {}  # notes in the order the decisions were read (the script's order)
        self.settings: dict[tuple[str, int], tuple] = {}  # (name, id(var)) -> (var, its EnvSetting): made once
        self.called_text: str | None = None  # a called script's text, read as this shell (Command.written_at)

    def finish(self) -> None:
        """Functions never called still hold commands worth linting: read them with their definition's view."""
        for name, (walker, body, env, line) in list(self.funcs.items()):
            if name not in self.called:
                self.called.add(name)
                self.env, self.ctx = dict(env), f"inside function {name} at line {line}"
                walker.stmt(body)

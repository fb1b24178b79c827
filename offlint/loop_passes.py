"""Which passes of a launch script's `for` loops a finding holds in, as its message says it.

The shell reader reads a `for` loop over words it can read once per word (sources/shell_walker.unroll), so a launch
inside it is a unit per pass, each marked with its passes (Unit.loop_passes, then Finding.passes). api._dedupe
merges the passes' findings into one per place and message; this says in which passes it holds, or nothing where
it holds in every pass.
"""

from __future__ import annotations

import math

from offlint.types import LoopPass as Pass

SHOWN = 4  # irregular combinations of passes listed before "and N more"


def taken(found: list[tuple[Pass, ...]]) -> str:
    """"only in the passes where ..." for findings made in these passes (one tuple of passes per finding); "" where
    one was made outside any loop, or they cover every pass."""
    if not found or any(not passes for passes in found):
        return ""
    loops: dict[str, tuple[str, ...]] = {}
    for passes in found:
        for loop, _, _, words in passes:
            loops.setdefault(loop, words)
    combos = {tuple((loop, word) for loop, _, word, _ in passes) for passes in found}
    whole = all(len(combo) == len(loops) for combo in combos)
    if whole and len(combos) == math.prod(len(set(words)) for words in loops.values()):
        return ""  # every pass
    per_loop = {loop: [word for word in dict.fromkeys(words) if any((loop, word) in combo for combo in combos)]
                for loop, words in loops.items()}  # (in the loop's order)
    if whole and len(combos) == math.prod(len(words) for words in per_loop.values()):
        parts = [f"{loop} takes {_either(words)}" for loop, words in per_loop.items()
                 if len(words) < len(set(loops[loop]))]
        return f"only in the passes where {' and '.join(parts)}"
    order = sorted(combos, key=lambda combo: [(loop, loops[loop].index(word)) for loop, word in combo])
    listed = [" and ".join(f"{loop} takes {word!r}" for loop, word in combo) for combo in order[:SHOWN]]
    more = f"; and {len(combos) - SHOWN} more" if len(combos) > SHOWN else ""
    return f"only in the passes where {'; or where '.join(listed)}{more}"


def named(name: str, passes: tuple[Pass, ...]) -> str:
    """A launch's unit name in its passes: "run.py at line 5 [TP=2, PP=1]" (the words of loops with several), so
    that each pass can be named (`offlint estimate --recipe`), and api._dedupe can tell the launch's own name."""
    taken = [f"{variable}={word}" for _, variable, word, words in passes if len(set(words)) > 1]
    return f"{name} [{', '.join(taken)}]" if taken else name


def base_name(name: str, passes: tuple[Pass, ...]) -> str:
    """The name `named` made `name` from."""
    suffix = named("", passes)
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name


def _either(words: list[str]) -> str:
    shown = [repr(word) for word in words]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"

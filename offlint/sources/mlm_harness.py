"""How Megatron-LM's functional-test harness turns one `MODEL_ARGS` value into arguments, as the tree's own harness
script does it (tests/functional_tests/shell_test_utils/_run_training.sh; read, never run).

The harness prints each entry with yq as `KEY: VALUE`, trims the value with `echo "$value" | xargs` (which splits it at
blanks, removes quotes and backslashes, and joins the words with one space), then appends `KEY "VALUE"` (quoted) or
`KEY VALUE` (bare) to a string that `eval "TRAINING_PARAMS_ARRAY=(...)"` splits into arguments. Which values are
quoted changed: Megatron-LM d98e8a6 quotes a value wrapped in `( )` or holding a space, `|`, `(` or `)`; its harness
of mid-2025 (94f1633a9c~1) quoted only values holding a space, so a pipeline layout had to be written escaped,
`Et*3\\\\|\\\\(tt\\\\|\\\\)*6tL`, which xargs and the bare `eval` turn into `Et*3|(tt|)*6tL`. Reading such a value
with today's rule gave a string with backslashes, not the layout the job ran (a recall miss: its layout lacked the
MTP layer `--mtp-num-layers 1` asks for).

`quoting(text)` reads the harness's rule from its script: the `*"X"*` patterns of the `[[ ... ]]` test that leads to
the quoted append. `arguments(value, triggers)` gives the words the job receives, or None where they depend on
something offlint does not model (an unmatched quote, a shell metacharacter that would break the `eval`).
"""

from __future__ import annotations

import re

HARNESS = "tests/functional_tests/shell_test_utils/_run_training.sh"
# What d98e8a6's harness quotes (besides a value wrapped in `( )`): the rule a tree without a readable harness gets
# for values whose words do not depend on it.
CURRENT = frozenset({" ", "|", "(", ")"})

# `elif [[ "$value" == *" "* || "$value" == *"|"* ]]; then` followed by the quoted append of the KEY loop
_QUOTED_BRANCH = re.compile(r'elif \[\[ ((?:"\$value" == \*"[^"\n]+"\*(?: \|\| )?)+) \]\]; then\s*\n'
                            r'\s*TRAINING_PARAMS_FROM_CONFIG\+="\$key \\"\$value\\" "')
_PATTERN = re.compile(r'\*"([^"\n]+)"\*')
_WRAPPED = re.compile(r"^\([^)]+\)$")  # the harness's `grep -Eq '^\([^)]+\)$'`
_BRACKETED = re.compile(r"^\[[^]]+\]$")  # its `grep -Eq '^\[[^]]+\]$'`
_METACHARACTERS = set("|&;()<>$`")  # a bare one in the eval's text: a syntax error or an expansion


def quoting(text: str | None) -> frozenset[str] | None:
    """The substrings that make the harness quote a value, read from its script; None when the script is absent or
    offlint finds not exactly one such rule in it."""
    if not text:
        return None
    rules = {frozenset(_PATTERN.findall(match.group(1))) for match in _QUOTED_BRANCH.finditer(text)}
    return next(iter(rules)) if len(rules) == 1 else None


def arguments(value: str, triggers: frozenset[str] | None) -> list[str] | None:
    """The words the training script receives for one `MODEL_ARGS` value (after the flag), under the harness rule
    `triggers` (`quoting`; None, where the tree's harness cannot be read: today's rule, CURRENT). None where offlint
    cannot tell."""
    trimmed = _xargs(value)
    if trimmed is None:
        return None
    triggers = CURRENT if triggers is None else triggers
    if _WRAPPED.match(trimmed):
        return _double_quoted(trimmed)
    if _BRACKETED.match(trimmed):
        return _bare(trimmed[1:-1])
    if any(trigger in trimmed for trigger in triggers):
        return _double_quoted(trimmed)
    return _bare(trimmed)


def _xargs(text: str) -> str | None:
    """`echo "$text" | xargs`: GNU xargs splits the line at blanks, a quote (single or double) keeps its contents
    as they are, a backslash outside quotes takes the next character as it is; echo joins the words with one space.
    None on an unmatched quote or a trailing backslash (xargs stops with an error)."""
    words: list[str] = []
    word: list[str] = []
    started = False
    quote = ""
    escaped = False
    for char in text:
        if escaped:
            word.append(char)
            escaped = False
        elif quote:
            if char == quote:
                quote = ""
            else:
                word.append(char)
        elif char == "\\":
            escaped = started = True
        elif char in "'\"":
            quote, started = char, True
        elif char in " \t":
            if started:
                words.append("".join(word))
                word, started = [], False
        else:
            word.append(char)
            started = True
    if quote or escaped:
        return None
    if started:
        words.append("".join(word))
    return " ".join(words)


def _double_quoted(text: str) -> list[str] | None:
    """`"TEXT"` inside the eval: one word, a backslash removed only before `$`, a backquote, `"` or `\\`; None where
    TEXT would end the quotes or expand something."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\':
            out.append(text[index + 1])
            index += 2
            continue
        if char in '"$`':
            return None
        out.append(char)
        index += 1
    return ["".join(out)]


def _bare(text: str) -> list[str] | None:
    """TEXT bare inside the eval: words split at blanks, a backslash takes the next character as it is, quotes group
    and go; None where a bare metacharacter would break the eval or expand (a glob that matches no file stays as
    written, bash's default)."""
    words: list[str] = []
    word: list[str] = []
    started = False
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            word.append(text[index + 1])
            started = True
            index += 2
            continue
        if char == "'":
            end = text.find("'", index + 1)
            if end < 0:
                return None
            word.append(text[index + 1:end])
            started, index = True, end + 1
            continue
        if char == '"':
            end = text.find('"', index + 1)
            inner = _double_quoted(text[index + 1:end]) if end > 0 else None
            if inner is None:
                return None
            word.append(inner[0])
            started, index = True, end + 1
            continue
        if char in " \t":
            if started:
                words.append("".join(word))
                word, started = [], False
        elif char in _METACHARACTERS or char == "\\":
            return None
        else:
            word.append(char)
            started = True
        index += 1
    if started:
        words.append("".join(word))
    return words

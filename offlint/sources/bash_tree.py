"""tree-sitter-bash, the one way offlint parses bash: its parser, and the bytes it is safe to hand it.

tree-sitter-bash (0.25) kills the whole process (SIGSEGV), in some runs and not others, on text holding a character
beyond about U+50000 next to braces (`echo {<U+F0001>}/x`; seen from U+54000 up, never in 16 runs each of
U+20000-U+4C000). offlint's own placeholders for values it does not know are such characters (shell_values._HOLE0,
U+F0000 up), and a sagemaker-hyperpod-recipes launch's `bash -c "... > {$results_dir}/hostname"` (a typo for
`${results_dir}`) put one there; a script could hold one too. Every character from U+40000 up (none is assigned but
tags and private use) is handed to the parser as U+1F600, the same four bytes long, so every position in the tree
stays right (offlint reads the original text at them), and a symbol, so the parser reads it where a placeholder
stood as it read the placeholder (the same tree in 16 shapes: expansions, braces, tests, case patterns, names).

A `$` just before a `)` is a literal dollar to bash (`$(nvidia-smi -L | grep -c GPU$)`, DeepLearningExamples), but
tree-sitter-bash 0.25 reads it as an expansion and fails on the `)`: it is handed `_`, one byte too.
"""

from __future__ import annotations

import re
from functools import lru_cache

_HIGH = re.compile(rb"[\xf1-\xf4][\x80-\xbf]{3}")  # UTF-8 of U+40000 and above
_SAFE = "\U0001F600".encode()


def parse_bash(data: bytes):
    """The tree-sitter tree of bash source `data`."""
    if _HIGH.search(data):
        data = _HIGH.sub(_SAFE, data)
    if b"$)" in data:
        data = data.replace(b"$)", b"_)")
    return _parser().parse(data)


@lru_cache(maxsize=None)
def query(pattern: str):
    """A tree-sitter query over bash trees (compiled once per pattern)."""
    import tree_sitter

    return tree_sitter.Query(_language(), pattern)


@lru_cache(maxsize=1)
def _parser():
    import tree_sitter

    return tree_sitter.Parser(_language())


@lru_cache(maxsize=1)
def _language():
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())

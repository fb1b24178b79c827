"""Linking's index of `X as Y` names: the fast scan finds exactly what the regex's findall finds."""

from __future__ import annotations

import random

import pytest

from offlint.linking import _IMPORTED_AS, _imported_as


@pytest.mark.parametrize("text", [
    "from .h100.llama3 import llama3_8b_pretrain_2gpu_config as llama3_8b_pretrain_config",
    "a as b as c", "x as as y", "as as as as", "x  as\tas y", "a\nas\nb", "(a\n    as b)",
    "9x as y", "über as y", "x as über", "_a as _b", "a as 9", "with open(f) as fh:", "class as_ as x",
    "", "as", " as ", "a as", "pass as b", "a\u2003as\u2003b",
])
def test_the_scan_finds_what_findall_finds(text):
    assert _imported_as(text) == _IMPORTED_AS.findall(text)


def test_the_scan_agrees_with_findall_on_random_text():
    pieces = ["as", "a", "x1", "_y", "9", "ü", "class", " ", "  ", "\t", "\n", "(", ")", ".", ",", ":", "#"]
    rng = random.Random(19)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        assert _imported_as(text) == _IMPORTED_AS.findall(text), text

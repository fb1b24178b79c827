"""The module-level functions a text defines, found by text for ModuleIndex.function_paths (a performance launch's
recipe name is looked up so). The pattern searches for a line break before `def`, which the regex engine finds
fast, where `^def` with re.M was tried at every character; these texts pin that both give the same names."""

from __future__ import annotations

import re

import pytest

from offlint.sources.module_index import ModuleIndex, defined_functions

_ANCHORED = re.compile(r"^def ([A-Za-z_]\w*)\s*\(", re.M)  # what a line start means: after "\n", or at 0

TEXTS = [
    "def first(x):\n    return x\n\n\ndef second ():\n    pass\n",
    "import os\n\ndef a(): pass\n    def nested(): pass\nclass C:\n    def method(self): pass\ndef b(\n): pass\n",
    "x = 1\r\ndef windows_line(y):\r\n    return y\r\n",
    '"""\ndef in_a_docstring(): pass\n"""\n#def commented(): pass\nasync def coroutine(): pass\ndefault = 2\n',
    "def",
    "",
    "\ndef after_blank_first_line():\n    pass",
    "def  two_spaces(): pass\ndef\tafter_tab(): pass\ndef ok(): pass",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_names_are_those_a_line_start_anchored_pattern_finds(text):
    assert defined_functions(text) == _ANCHORED.findall(text)


def test_the_index_lists_the_files_defining_a_name():
    texts = {"a/recipes.py": TEXTS[0], "b/more.py": "def second(): pass\n", "c/none.py": "x = 1\n"}
    index = ModuleIndex(sorted(texts), texts.get)
    assert index.function_paths("second") == ["a/recipes.py", "b/more.py"]
    assert index.function_paths("first") == ["a/recipes.py"] and index.function_paths("nested") == []

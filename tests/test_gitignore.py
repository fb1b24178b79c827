"""offlint.gitignore joins a .gitignore's patterns into one regex: it must decide exactly as pathspec does."""

from __future__ import annotations

import warnings

import pathspec
from hypothesis import given, settings
from hypothesis import strategies as st

from offlint.gitignore import GitIgnore

SEGMENTS = ["a", "b", "build", "out", "x.py", "y.yaml", "run.sh", ".cache", "docs", "data1"]
PATTERNS = ["*.py", "build/", "/out", "docs/**", "**/data*", "!x.py", "!build/", "a/*.sh", "*.yaml", "!docs/b",
            ".cache", "b", "# a comment", "", "\\!literal", "a/**/y.yaml", "[ab]", "?.py", "!/a", "run.sh"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PATTERNS), max_size=8),
       st.lists(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4), min_size=1, max_size=10),
       st.booleans())
def test_the_joined_regex_decides_as_pathspec_does(lines, paths, as_dir):
    ignore = GitIgnore(lines)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    for parts in paths:
        path = "/".join(parts) + ("/" if as_dir else "")
        assert ignore.match(path) == spec.match_file(path), (lines, path)


def test_the_last_matching_pattern_decides():
    ignore = GitIgnore(["*.py", "!keep.py", "keep.py"])
    assert ignore.match("keep.py") and ignore.match("a/other.py")
    assert not GitIgnore(["*.py", "!keep.py"]).match("keep.py")
    assert not GitIgnore([]).match("a.py") and not GitIgnore(["# only a comment"]).match("a.py")

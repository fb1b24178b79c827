"""offlint.gitignore joins a .gitignore's patterns into one regex: it must decide exactly as pathspec does."""

from __future__ import annotations

import json
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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PATTERNS), min_size=8, max_size=30),
       st.lists(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4), min_size=1, max_size=10),
       st.booleans())
def test_runs_of_patterns_of_one_kind_decide_as_pathspec_does(lines, paths, as_dir):
    """Patterns next to each other that all ignore (or all re-include) share one group of the joined regex, and
    those matching at any depth one `^(?:.+/)?`: still pathspec's decisions, on files as long as Bridge's."""
    test_the_joined_regex_decides_as_pathspec_does.hypothesis.inner_test(lines, paths, as_dir)


def test_one_group_per_run_of_patterns_of_one_kind():
    ignore = GitIgnore(["*.py", "build/", "/out", "!keep.py", "!docs/", "*.so", "a/*.sh"])
    assert ignore._regex.groups == 3  # the runs, last first: (*.so, a/*.sh), (!keep.py, !docs/), (*.py, build/, /out)
    assert ignore.match("x.so") and not ignore.match("keep.py") and ignore.match("b/x.py") and ignore.match("out/")


STAR_PIECES = ["*", "a", "b", "?", "[ab]", ".", "**", "/", "*a*"]
NAMES = ["a", "b", "ab", "aab", "ba.b", "aaaa", "abab.a", "b.a", ".a", "aaaaaaaab"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(STAR_PIECES), min_size=1, max_size=7).map("".join), min_size=1, max_size=4),
       st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3), min_size=1, max_size=8), st.booleans())
def test_patterns_of_several_stars_decide_as_pathspec_does(lines, paths, as_dir):
    """Several `*` in one segment are matched without backtracking (each takes the first occurrence of what
    follows it): the same decisions as pathspec's own regexes."""
    test_the_joined_regex_decides_as_pathspec_does.hypothesis.inner_test(lines, paths, as_dir)


def test_many_stars_against_a_long_name_take_no_time():
    """`*a*a*...*b` against `aaa...a`: Python's re tried every split of the name among the stars (a check of one
    such file never finished); run in a child with a timeout, so that a regression fails instead of hanging."""
    import subprocess
    import sys

    code = ("from offlint.gitignore import GitIgnore; "
            "assert not GitIgnore(['*a' * 25 + 'b']).match('a' * 60 + '.py')")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_pathspec_is_imported_without_asyncio_and_its_deprecated_functions_still_warn():
    """gitignore._pathspec lends pathspec Python 3.13's `warnings.deprecated` while it is imported (typing_extensions'
    imports asyncio): a fresh interpreter parses a .gitignore without asyncio, `warnings` is left as it was, and
    what pathspec marks deprecated still warns with its message and gives what it gave."""
    import subprocess
    import sys

    code = """
import json, sys, warnings
had = hasattr(warnings, "deprecated")
from offlint.gitignore import GitIgnore
ignore = GitIgnore(["*.py", "!keep.py"])
import pathspec
factory = pathspec.util.lookup_pattern("gitwildmatch")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    translated = factory.pattern_to_regex("*.py")
print(json.dumps({"asyncio": "asyncio" in sys.modules, "same warnings": hasattr(warnings, "deprecated") == had,
                  "matches": [ignore.match("a.py"), ignore.match("keep.py")], "translated": list(translated),
                  "warned": [(w.category.__name__, str(w.message)) for w in caught]}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = list(pathspec.util.lookup_pattern("gitwildmatch").pattern_to_regex("*.py"))
    assert found["same warnings"] and found["matches"] == [True, False] and found["translated"] == expected
    assert found["warned"] == [[w.category.__name__, str(w.message)] for w in caught]
    if sys.version_info < (3, 13):
        assert not found["asyncio"]


def _without_pattern_to_regex(monkeypatch, lines: list[str]) -> GitIgnore:
    """A GitIgnore of `lines` where the registered pattern factory cannot give a line's regex as text (pathspec's
    own patterns, wrapped)."""
    real = pathspec.util.lookup_pattern("gitwildmatch")

    class Opaque:
        def __init__(self, line):
            self._pattern = real(line)
            self.include = self._pattern.include

        def match_file(self, path):
            return self._pattern.match_file(path)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        monkeypatch.setattr(pathspec.util, "lookup_pattern", lambda name: Opaque)
        return GitIgnore(lines)


def test_a_pathspec_factory_without_pattern_to_regex_is_asked_to_match(monkeypatch):
    """Where the registered factory cannot give a line's regex as text, pathspec matches (nothing joined)."""
    ignore = _without_pattern_to_regex(monkeypatch, ["*.py", "!keep.py"])
    assert ignore._regex is None and ignore._spec is not None
    assert ignore.match("a/b.py") and not ignore.match("keep.py") and not ignore.match("a.sh")


def test_the_star_patterns_of_a_run_share_one_star_and_decide_as_pathspec_does():
    """`*.pyc`, `*.egg`, ... of one run are tried under one `[^/]*` (each split of a name once for all of them)."""
    lines = ["*.pyc", "*.egg", "build/", "*$py.class", "**.log", "*~", "x*.out", "!keep.egg", "!*.keep", "*.so",
             "*.py[cod]", "*a*b", "*|*", "*(x)"]
    ignore = GitIgnore(lines)
    shared = r"[^/]*(?:\(x\)(?:(?:/)|$)|\.py[cod]", r"[^/]*(?:\~(?:(?:/)|$)|[^/]*\.log"  # the two ignoring runs'
    assert all(start in ignore._regex.pattern for start in shared)  # (`!*.keep` alone in its run: as it was)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    names = ["a.pyc", "b.egg", "keep.egg", "x.keep", "a.so", "a.pyd", "a.pyx", "t~", "xy.out", "y.out", "a.log",
             "ab", "ba", "|", "a|b", "(x)", "a(x)", "x", "build", "lib$py.class", "a.py"]
    for name in names:
        for path in (name, "d/" + name, "d/e/" + name, name + "/", "d/" + name + "/", name + "/f.py"):
            assert ignore.match(path) == spec.match_file(path), path


def test_only_a_whole_term_shares_a_star():
    from offlint.gitignore import _closed

    assert _closed(r"\.pyc(?:(?:/)|$)") and _closed(r"[]|](?:a|b)") and _closed(r"\|") and _closed(r"[\]|]")
    assert not _closed("a|b") and not _closed("(a") and not _closed("a)") and not _closed("[a")


def test_a_pattern_git_cannot_read_matches_nothing_and_the_others_still_count(monkeypatch):
    """`git check-ignore` skips a line ending in an unescaped backslash and goes on with the others; pathspec raises
    on it, which had ended a whole check in "Invalid git pattern" (naming no file). With and without the joined
    regex (a factory without pattern_to_regex)."""
    lines = ["*.py", "foo\\", "!keep.py", "\\"]
    ignore = GitIgnore(lines)
    assert ignore._regex is not None
    assert ignore.match("a/b.py") and not ignore.match("keep.py") and not ignore.match("foo\\")
    opaque = _without_pattern_to_regex(monkeypatch, lines)
    assert opaque._regex is None
    assert opaque.match("a/b.py") and not opaque.match("keep.py") and not opaque.match("foo\\")

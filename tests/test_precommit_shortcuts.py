"""Shortcuts of a pre-commit run's fixed costs, each against the code it stands in for: relocate's inline
Assignment path and its movers kept across calls, changed.expand's ` as NAME` pre-search and `--recipe` test,
scope's already-normal paths, and the cache's whole-run answer read only when asked for and written only when new."""

import os

import pytest

from offlint import cache as cache_module
from offlint import cache_files, changed, scope
from offlint.cache import Cache, FileOutcome
from offlint.cache_format import VALUE_CLASSES, Codec
from offlint.relocation import Unmovable, relocate
from offlint.types import Assignment, Finding, Layer, Location, Severity, Source, Unit, UnitKind, Unknown


def _units():
    shared = Assignment("base", 1, Location("common.py", 4, 1), Source.PYTHON, via=("_common()",))
    moved = Location("a.py", 10, 5)
    assignments = [
        Assignment("k", 1, moved, Source.PYTHON, text="k = 1", via=("cfg", "by f() at a.py:10")),
        Assignment("j", [2, Location("a.py", 12, 1)], Location("b.py", 11, 1), Source.PYTHON),
        Assignment("m", Unknown("set at a.py:12"), Location("a.py", 12, 3), Source.PYTHON, via=("line 5",)),
        Assignment("n", "plain", moved, Source.PYTHON, via=()),
        shared,
    ]
    units = [Unit(name, UnitKind.RECIPE, Location("a.py", 3, 1), layers=[Layer("recipe", list(assignments)),
                                                                         Layer("base", [shared])])
             for name in ("u", "v")]
    finding = Finding("OFL102", "s", Severity.ERROR, "set at a.py:10:5", moved, unit="u")
    return units, [finding]


def _generic() -> Codec:
    """A codec like the others here, with the Assignment path turned off (relocate then moves Assignments as any
    dataclass)."""
    other = Codec(VALUE_CLASSES + (FileOutcome,))
    other._dedicated = False
    return other


@pytest.mark.parametrize("moves", [{"a.py": {3: 3, 10: 11, 12: 13}}, {"a.py": {3: 4, 10: 10, 12: 12}},
                                   {"b.py": {11: 12}}, {"a.py": {3: 3, 10: 11, 12: 13}, "common.py": {4: 7}}])
def test_the_assignment_path_and_shared_movers_give_what_the_general_path_gives(moves):
    codec = Codec(VALUE_CLASSES + (FileOutcome,))
    units, findings = _units()
    expected = [relocate(_generic(), [unit], findings, moves) for unit in units]
    assert _generic()._dedicated is False and codec._dedicated is True
    units, findings = _units()
    alone = [relocate(codec, [unit], findings, moves) for unit in units]
    units, findings = _units()
    movers: list = []
    shared = [relocate(codec, [unit], findings, moves, movers) for unit in units]
    assert repr(alone) == repr(expected) == repr(shared)
    assert len(movers) == 1  # equal moves: one mover for both units
    # the base builder's assignment, shared by both units (and both layers), stays shared when moved
    assert shared[0][0][0].layers[1].assignments[0] is shared[1][0][0].layers[1].assignments[0]


def test_a_mover_kept_across_calls_refuses_what_a_fresh_one_refuses():
    codec = Codec(VALUE_CLASSES + (FileOutcome,))
    units, findings = _units()
    moves = {"a.py": {3: 3, 10: 11}}  # line 12 kept by no part: unmovable
    movers: list = []
    for unit in units:
        with pytest.raises(Unmovable):
            relocate(codec, [unit], findings, moves, movers)
        with pytest.raises(Unmovable):
            relocate(codec, [unit], findings, moves)
    # a line named without its file ("line 5") that moved: refused by both
    with pytest.raises(Unmovable):
        relocate(codec, [units[0]], [], {"a.py": {3: 3, 5: 6, 10: 10, 12: 12}}, movers)


_ALIAS_TEXTS = [
    b"from x import a as b, c as  d\nimport e.f as g\n",
    b"from .llama import (\n    llama3_8b_config as llama3_8b_pretrain_config,\n    other as\tthird,\n)\n",
    b"x as as y\nimport a.b as c\nwith open(f) as handle:\n    pass\n",
    b"try:\n    pass\nexcept ValueError as exc:\n    raise\n",
    b"# a comment as in as_name\nfoo as_bar as baz\n",
]


@pytest.mark.parametrize("text", _ALIAS_TEXTS)
def test_every_name_an_as_binds_is_found_by_the_pre_search(text):
    bound = {m.group(1) or m.group(2) for m in changed._ALIAS.finditer(text)}
    assert bound <= set(changed._AS_NAME.findall(text))


def test_a_launch_text_without_recipe_flag_names_no_recipe():
    for text in ("python run.py --config-file a.yaml", "RECIPE=x\npython run.py --recip $RECIPE", ""):
        assert "--recipe" not in text and not changed._recipe_names(text)
    assert changed._recipe_names("python run.py --recipe a_config") == ["a_config"]


@pytest.mark.parametrize("path", ["a/b.py", "a//b.py", "./a.py", "a/./b.py", "a/../b.py", ".github/x.sh",
                                  "a/.hidden/c.py", "a/", "x", "..", ".", "a/b..c/d.py", "b.", "a/b."])
def test_a_path_below_the_working_directory_is_written_as_normpath_writes_it(path):
    assert scope._as_user_writes(path, ".") == os.path.normpath(path)


def test_the_whole_run_answer_is_read_when_asked_for_and_written_only_when_new(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "home"))
    root = tmp_path / "tree"
    root.mkdir()
    cache = Cache(root, "k").load()
    cache.last = ("run", {}, "[]")
    cache.save(None)
    stored = cache.last_file.read_bytes()
    cache.close()
    reads = []
    read_owned = cache_files.read_owned
    monkeypatch.setattr(cache_files, "read_owned", lambda path: reads.append(path) or read_owned(path))
    again = Cache(root, "k").load()
    assert reads == []  # not read by load
    entry = FileOutcome("a.py", "d")
    again.store(entry)
    os.utime(again.last_file, ns=(1, 1))
    again.save(None)  # entries changed, the whole-run answer did not: its file is left as it was
    assert again.last_file.stat().st_mtime_ns == 1 and again.last_file.read_bytes() == stored
    assert again.last == ("run", {}, "[]") and again.last_file in reads
    again.last = None  # no whole-run answer any more: the file goes
    again.save(None)
    assert not again.last_file.exists()
    again.close()
    with Cache(root, "k").load() as last:
        assert last.last is None


def _merge_by_lines(moves: dict, more: dict) -> bool:
    """merge_moves as it was written line by line (the reference of the whole-dict version)."""
    for file, lines in more.items():
        if not lines:
            continue
        into = moves.get(file)
        if into is None:
            moves[file] = lines
            continue
        into = moves[file] = dict(into)
        for old, new in lines.items():
            if into.setdefault(old, new) != new:
                return False
        if len(set(into.values())) != len(into):
            return False
    return True


def test_merge_moves_by_whole_dicts_answers_what_merging_line_by_line_does():
    import random

    from offlint.call_records import merge_moves

    generator = random.Random(7)

    def mapping():
        return {generator.randint(1, 9): generator.randint(1, 9) for _ in range(generator.randint(0, 6))}

    for _ in range(3000):
        moves = {file: mapping() for file in generator.sample("abc", generator.randint(0, 3))}
        more = {file: mapping() for file in generator.sample("abc", generator.randint(0, 3))}
        expected, got = {f: dict(m) for f, m in moves.items()}, {f: dict(m) for f, m in moves.items()}
        frozen = {f: dict(m) for f, m in more.items()}
        answer = _merge_by_lines(expected, {f: dict(m) for f, m in more.items()})
        assert merge_moves(got, more) == answer
        assert more == frozen  # `more` is not changed
        if answer:
            assert got == expected


def test_a_run_that_asks_for_no_gitignore_keeps_the_kept_ones_and_does_not_rewrite_the_file(tmp_path, monkeypatch):
    from offlint.api import CheckOptions, check
    from offlint.cache_files import project_cache_dir

    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "home"))
    root = tmp_path / "tree"
    (root / "recipes").mkdir(parents=True)
    (root / ".gitignore").write_text("build/\n")
    (root / "recipes" / "a.py").write_text("def a_config():\n    return None\n")
    monkeypatch.chdir(root)
    check(["."], CheckOptions(root=root))
    [warm] = project_cache_dir(root).glob("warm-*.json")
    kept = warm.read_bytes()
    assert b"gitignores" in kept and b'"gitignores": {}' not in kept
    os.utime(warm, ns=(1, 1))
    check(["recipes/a.py"], CheckOptions(root=root))  # its walk is the kept listing: no .gitignore read
    assert warm.read_bytes() == kept and warm.stat().st_mtime_ns == 1
    (root / ".gitignore").write_text("build/\ndist/\n")  # a changed .gitignore: asked for, the old one dropped
    check(["."], CheckOptions(root=root))
    [warm] = project_cache_dir(root).glob("warm-*.json")
    assert warm.read_bytes() != kept


def test_the_files_defining_a_name_are_read_from_the_summaries_as_stored(tmp_path):
    """Cache.files_defining (changed.expand's other definitions of a chosen launch's recipe) takes a summary as the
    index holds it, decoded or not, and passes over one a damaged index holds instead of failing."""
    cache = Cache(tmp_path, "k")
    summary = cache_module.Summary(frozenset({"a_config"}), False, frozenset(), False, False)
    entries = {
        "decoded.py": dict(summary=summary),
        "raw.py": dict(raw_summary=[["b_config", "a_config"], False, [], False, False, False]),
        "other.py": dict(raw_summary=[["c_config"], False, [], False, False, False]),
        "damaged.py": dict(raw_summary={"recipes": ["a_config"]}),
        "odd.py": dict(raw_summary=[[["a_config"], 7], False]),
        "none.py": dict(),
    }
    cache.entries.update((path, cache_module._Entry("d", {}, {}, None, **fields)) for path, fields in entries.items())
    assert cache.files_defining({"a_config"}) == ["decoded.py", "raw.py"]
    assert cache.files_defining({"c_config", "b_config"}) == ["raw.py", "other.py"]
    assert cache.files_defining({"z_config"}) == []
    assert cache.entries["raw.py"].summary is None  # not decoded by the question


def test_a_module_named_setup_py_is_no_project_root(tmp_path):
    """Megatron Bridge has a module `training/setup.py`: in a checkout without .git (an archive), a pre-commit run on
    `training/flex_dispatcher_backend.py` took `training/` for the project and checked it without the recipes that
    read it. A `setup.py` beside an `__init__.py` is a package's module; one without is a project's."""
    from offlint.scope import project_root

    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "src" / "bridge" / "training"
    package.mkdir(parents=True)
    for name in ("__init__.py", "setup.py", "flex.py"):
        (package / name).write_text("")
    assert project_root([str(package / "flex.py")]) == tmp_path
    tool = tmp_path / "tools" / "plugin"
    tool.mkdir(parents=True)
    (tool / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (tool / "plugin.py").write_text("")
    assert project_root([str(tool / "plugin.py")]) == tool

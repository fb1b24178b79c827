"""A warm `offlint check` imports only what it uses, and what it keeps between runs (warm_start.py: the rule
catalog, each .gitignore's joined regex) never changes an answer: the same findings as without the cache, a
changed .gitignore read anew, a damaged or planted file ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pathspec

from offlint.api import CheckOptions, check
from offlint.cache_files import project_cache_dir
from offlint import gitignore, rules
from offlint.gitignore import GitIgnore
from offlint.rules import _parse_rules, load_rules, rules_codec
from offlint.warm_start import WarmStart, _Kept, remembered

RECIPE = '''
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def llama_offload_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=4))
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
'''
# Modules `offlint check` imported on every run before they were made lazy: a warm run needs none of them
LAZY = ("yaml", "pathspec", "asyncio", "offlint.estimate.oom", "offlint.estimate.inputs", "offlint.engine",
        "offlint.conditions", "offlint.sources.tree_config_fields")


def _tree(root: Path) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / ".gitignore").write_text("build/\n*.tmp.py\n!keep.tmp.py\n")
    (root / "recipes").mkdir()
    (root / "recipes" / "llama.py").write_text(RECIPE)
    (root / "recipes" / "skip.tmp.py").write_text(RECIPE)
    (root / "recipes" / "keep.tmp.py").write_text(RECIPE)


def _findings(root: Path, **options) -> list[str]:
    result = check(["."], CheckOptions(root=root, **options))
    assert not result.errors
    return [f"{f.code} {f.location.path}:{f.location.line}" for f in result.findings]


def _warm_file(root: Path) -> Path:
    [found] = project_cache_dir(root).glob("warm-*.json")
    return found


def _modules_after(code: str, cwd: Path) -> dict:
    """Which of LAZY a fresh interpreter has imported after running `code` (offlint's own environment)."""
    probe = f"import json, sys\n{code}\nprint(json.dumps({{m: m in sys.modules for m in {LAZY!r}}}))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, env=os.environ)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_command_line_imports_none_of_the_lazy_modules(tmp_path):
    assert _modules_after("import offlint.cli", tmp_path) == {m: False for m in LAZY}


def test_a_warm_run_imports_none_of_them_and_a_cold_one_does(tmp_path, monkeypatch):
    _tree(tmp_path)
    run = ("from offlint.cli import main\ntry:\n    main(['check', '.', '-q'], standalone_mode=False)\n"
           "except SystemExit:\n    pass")
    cold = _modules_after(run, tmp_path)
    assert cold["yaml"] and cold["pathspec"]  # the rules parsed, the .gitignore's patterns too
    assert not cold["asyncio"]  # pathspec imported without it (gitignore._pathspec)
    assert _modules_after(run, tmp_path) == {m: False for m in LAZY}
    again = run.replace("'-q'", "'-q', 'recipes/llama.py'")  # a pre-commit run keeps them too
    found = _modules_after(again, tmp_path)
    assert not found["yaml"] and not found["pathspec"]
    # ... and, its file's outcome valid as stored, checks nothing: the rules are not imported (0.04 s of its 0.3 s)
    assert not found["offlint.engine"] and not found["offlint.conditions"]


def test_kept_values_give_the_findings_of_a_run_without_the_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    uncached = _findings(tmp_path, cache=False)
    assert any("recipes/llama.py" in f for f in uncached) and not any("skip.tmp" in f for f in uncached)
    assert any("keep.tmp" in f for f in uncached)  # re-included by `!keep.tmp.py`
    assert _findings(tmp_path) == uncached
    kept = json.loads(_warm_file(tmp_path).read_text())
    assert kept["rules"] and len(kept["gitignores"]) == 1
    assert _findings(tmp_path) == uncached  # from what was kept
    (tmp_path / "recipes" / "llama.py").write_text(RECIPE + "\n")  # no whole-run answer: discovery runs again
    assert _findings(tmp_path) == uncached


def test_a_changed_gitignore_is_read_anew(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    before = _findings(tmp_path)
    assert any("keep.tmp" in f for f in before)
    (tmp_path / ".gitignore").write_text("build/\n*.tmp.py\n")
    after = _findings(tmp_path)
    assert after == _findings(tmp_path, cache=False)
    assert after == [f for f in before if "keep.tmp" not in f]
    assert len(json.loads(_warm_file(tmp_path).read_text())["gitignores"]) == 1  # the old regex is not kept


def test_a_damaged_or_planted_file_is_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    expected = _findings(tmp_path, cache=False)
    _findings(tmp_path)
    warm = _warm_file(tmp_path)
    kept = json.loads(warm.read_text())
    [key] = kept["gitignores"]
    fewer = rules_codec().dumps({code: rule for code, rule in load_rules().items() if code != "OFL102"})
    for planted in ("not json", json.dumps({**kept, "rules": fewer}),  # a rule left out: no run goes without it
                    json.dumps({**kept, "rules": kept["rules"][:-9]}),
                    json.dumps({**kept, "gitignores": {key: ["(a)(b)", [True]]}}),  # not what _joined makes
                    json.dumps({**kept, "gitignores": {key: ["(", [True]]}})):
        warm.write_text(planted)
        (tmp_path / "recipes" / "llama.py").write_text(RECIPE + "#\n" * len(planted))  # no whole-run answer
        monkeypatch.setattr(rules, "_LOADED", [])  # as in a new process: the catalog is looked up in the file
        assert _findings(tmp_path) == expected
    assert _findings(tmp_path) == expected


def test_the_kept_catalog_is_the_parsed_one(tmp_path):
    warm = WarmStart(tmp_path)
    assert warm.rules() is None
    warm.keep_rules(_parse_rules())
    assert warm.rules() == _parse_rules() == load_rules()
    assert all(type(rule) is type(load_rules()[code]) for code, rule in warm.rules().items())


def test_a_kept_gitignore_regex_decides_as_pathspec_does(tmp_path, monkeypatch):
    lines = ["*.py", "!keep.py", "build/", "/out", "docs/**", "# comment", "a/*.sh"]
    warm = WarmStart(tmp_path)
    asked = []  # each GitIgnore that asked pathspec to parse its lines
    parser = gitignore._pathspec
    monkeypatch.setattr(gitignore, "_pathspec", lambda: asked.append(1) or parser())
    with remembered(warm):
        first = GitIgnore(lines)
        again = GitIgnore(lines)
    assert len(asked) == 1 and first._regex is not None and again._spec is None  # the second from what was kept
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = pathspec.PathSpec.from_lines("gitwildmatch", lines)
    for path in ("x.py", "keep.py", "a/keep.py", "build/", "a/build/", "out", "a/out", "docs/x", "a/b.sh", "b.sh"):
        assert again.match(path) == spec.match_file(path), path
    with remembered(warm):
        other = GitIgnore(lines + ["b.sh"])
    assert len(asked) == 2 and other.match("b.sh")


def test_nothing_is_kept_where_the_cache_must_not_be(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "inside"))  # inside the checked project
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    assert WarmStart.load(tmp_path).directory is None
    _findings(tmp_path)
    assert not (tmp_path / "inside").exists()


def test_a_gitignore_is_kept_by_its_lines_and_pathspec_s_installed_files(monkeypatch):
    lines = ["*.py", "!keep.py"]
    key = gitignore._key(lines)
    assert key is not None and gitignore._key(lines + ["b"]) != key
    monkeypatch.setattr(gitignore, "_PATHSPEC", ["another pathspec"])
    assert gitignore._key(lines) != key


def _rglob_key(package: Path, *parts) -> str:
    """The cache key as fingerprint computed it with Path.rglob: os.walk gives the same keys (caches stay valid)."""
    import hashlib

    from offlint.cache import FORMAT

    h = hashlib.blake2b(digest_size=16)
    h.update(repr((FORMAT, parts)).encode())
    for root in (package, package.parent / "rules"):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".json") and "__pycache__" not in path.parts:
                info = path.stat()
                h.update(f"{path.relative_to(root)}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return h.hexdigest()


def test_the_cache_key_follows_offlint_s_files_as_before(tmp_path, monkeypatch):
    from offlint import cache

    package = tmp_path / "offlint"
    for name in ("cache.py", "a.py", "a-b.py", "sub/x.py", "sub/data.json", "sub-c/y.py", "notes.txt",
                 "__pycache__/cache.py", "../rules/OFL101-x.yaml"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(name)
    monkeypatch.setattr(cache, "__file__", str(package / "cache.py"))
    key = cache.fingerprint("x", 1)
    assert key == _rglob_key(package, "x", 1) and key != cache.fingerprint("x", 2)
    (package / "notes.txt").write_text("longer")  # neither code nor rules
    (package / "__pycache__" / "cache.py").write_text("longer")
    assert cache.fingerprint("x", 1) == key
    (package / "sub" / "x.py").write_text("longer")
    assert cache.fingerprint("x", 1) == _rglob_key(package, "x", 1) != key
    key = cache.fingerprint("x", 1)
    (tmp_path / "rules" / "OFL102-y.yaml").write_text("")
    assert cache.fingerprint("x", 1) == _rglob_key(package, "x", 1) != key


def test_kept_walk_regexes_are_compiled_by_a_walk_only_and_a_bad_one_is_not_used(tmp_path, monkeypatch):
    """Loading the warm start checks a kept .gitignore's match_walked regexes by their form only (a pre-commit run
    whose walk is a kept listing never compiles them); one that does not compile, or has a group, is not used."""
    lines = ["*.pyc", "build/", "docs/_build"]
    warm = WarmStart(tmp_path)
    with remembered(warm):
        kept = GitIgnore(lines)
    [key] = warm._gitignores.used()
    joined, include, walked = warm.gitignore(key)
    assert walked is not None and kept._walked is not None
    compiled = []
    real = gitignore.re.compile
    monkeypatch.setattr(gitignore.re, "compile", lambda pattern, *a: compiled.append(pattern) or real(pattern, *a))
    assert gitignore.valid_joined([joined, include, walked]) and not set(walked) & set(compiled)
    monkeypatch.undo()
    for bad in (["(", walked[1]], [walked[0], "(x)"]):
        assert gitignore.valid_joined([joined, include, bad])
        damaged = WarmStart(tmp_path)
        damaged._gitignores.keep(key, [joined, include, bad])
        with remembered(damaged):
            ignore = GitIgnore(lines)
        assert ignore._walked is None
        for path in ("a.pyc", "x/build/", "docs/_build", "docs/_build/a.py", "a.py", "build"):
            assert ignore.match_walked(path) == kept.match_walked(path) == kept.match(path), path


def test_a_kept_value_is_checked_when_first_asked_for_and_a_damaged_one_never_given():
    checked = []

    def valid(value):
        checked.append(value)
        return value != "damaged"

    kept = _Kept({"a": "fine", "b": "damaged", "c": "unasked"}, valid)
    assert checked == []  # a run that asks for none checks none (a pre-commit run's .gitignore regexes)
    assert kept.get("a") == "fine" and kept.get("a") == "fine"
    assert kept.get("b") is None and kept.get("b") is None
    assert checked == ["fine", "damaged"]  # each once
    kept.keep("d", "made")
    assert kept.used() == {"a": "fine", "d": "made"}  # the damaged one is not written again, nor the unasked one
    assert _Kept({"a": "fine", "b": "damaged"}, valid).used() == {"a": "fine", "b": "damaged"}  # none asked: as read

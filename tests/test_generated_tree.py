"""offlint on a synthetic Megatron-Bridge-shaped tree (fixtures/generate_bridge_tree.py).

The generator plants a known set of offload mistakes and lists them in EXPECTED.json. Mistakes whose shape
offlint resolves within one file (or through a launch command naming a recipe of the tree) must be found;
those that need values from other modules (recipe inheritance through aliases, imported base builders,
imported helpers) are marked `"needs": "cross-file"` and expected to fail until that resolution lands.
Everything else in the tree is written to be clean, so any other finding is a false positive.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "fixtures" / "generate_bridge_tree.py"
SEED = 7
PYTHON_FILES = 120


def _generator_module():
    spec = importlib.util.spec_from_file_location("generate_bridge_tree", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_bridge_tree", module)
    spec.loader.exec_module(module)
    return module


gen = _generator_module()
# The same (seed, size) as the tree the fixture writes: the output is a pure function of them.
_, EXPECTED = gen.build_tree(SEED, PYTHON_FILES)
PLANTED = EXPECTED["planted"]
LOCAL = [p for p in PLANTED if not p.get("needs")]
CROSS = [p for p in PLANTED if p.get("needs") == "cross-file"]


def _key(p: dict) -> tuple[str, int, str]:
    return p["file"], p["line"], p["code"]


def _id(p: dict) -> str:
    return f"{p['kind']}:{p['file'].rsplit('/', 1)[-1]}:{p['line']}:{p['code']}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tree = tmp_path_factory.mktemp("bridge") / "tree"
    subprocess.run([sys.executable, str(GENERATOR), str(tree), "--python-files", str(PYTHON_FILES),
                    "--seed", str(SEED)], check=True, capture_output=True, text=True)
    expected = json.loads((tree / "EXPECTED.json").read_text())
    result = check([str(tree)], CheckOptions(mcore_version="0.20.0", root=tree))
    found = {}
    for f in result.findings:
        rel = Path(f.location.path).resolve().relative_to(tree.resolve()).as_posix()
        found.setdefault((rel, f.location.line, f.code), f)
    return tree, expected, result, found


def test_expected_json_matches_in_memory_build(generated):
    _, expected, _, _ = generated
    assert expected == EXPECTED


def test_tree_shape(generated):
    tree, expected, _, _ = generated
    counts = expected["counts"]
    assert counts["python_files"] == PYTHON_FILES == sum(1 for _ in tree.rglob("*.py"))
    assert counts["shell_scripts"] >= 20 and counts["yaml_files"] >= 3 and counts["cards"] >= 3
    kinds = {p["kind"] for p in expected["planted"]}
    assert kinds == set(gen.PY_LOCAL_KINDS + gen.PY_CROSS_KINDS + gen.SHELL_KINDS + gen.YAML_KINDS + gen.CARD_KINDS)
    assert LOCAL and CROSS


def test_no_file_errors(generated):
    tree, expected, result, _ = generated
    assert result.errors == [], [str(e) for e in result.errors]
    c = expected["counts"]
    assert result.files_checked == c["python_files"] + c["shell_scripts"] + c["yaml_files"] + c["cards"]
    assert result.units >= c["library_recipes"] + c["perf_recipes"]


@pytest.mark.parametrize("planted", LOCAL, ids=[_id(p) for p in LOCAL])
def test_planted_mistake_is_found(generated, planted):
    _, _, _, found = generated
    assert _key(planted) in found, f"{planted['what']}: not reported; found in that file: " + repr(
        sorted(k for k in found if k[0] == planted["file"]))


@pytest.mark.parametrize("planted", CROSS, ids=[_id(p) for p in CROSS])
def test_cross_file_planted_mistake_is_found(generated, planted):
    """Mistakes that only show through imports: inherited recipes, base builders, helpers in other modules."""
    _, _, _, found = generated
    assert _key(planted) in found, planted["what"]


def test_nothing_but_planted_mistakes_is_reported(generated):
    """Every other line of the tree is written to be clean (cross-file plants may or may not be found yet)."""
    _, _, _, found = generated
    planted = {_key(p) for p in PLANTED}
    extra = {k: f"{f.code} {f.message}" for k, f in found.items() if k not in planted}
    assert extra == {}


def test_generation_is_deterministic_and_default_size():
    files_a, expected_a = gen.build_tree(3, 1500)
    files_b, expected_b = gen.build_tree(3, 1500)
    assert files_a == files_b and expected_a == expected_b
    assert sum(1 for p in files_a if p.endswith(".py")) >= 1500
    assert expected_a["counts"]["shell_scripts"] >= 250
    other_seed, _ = gen.build_tree(4, 1500)
    assert other_seed != files_a

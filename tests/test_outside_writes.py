"""A module's dict that other modules of the tree add entries to as they are imported. LLaVA-OneVision-2's
ov2_qwen35.py does `from .ov2 import _OV2_BACKBONES` then `_OV2_BACKBONES.setdefault("qwen3.5-35b-a3b", {...})`,
and its recipes call ov2.py's builder, which refuses a backbone its table lacks (`if key not in _OV2_BACKBONES:
raise`). Read as complete, the table made every one of those recipes raise: no unit, no finding, silently. The
entries the defining module writes stay known (setdefault never replaces one); a key they lack may be there.
Fixtures of our own."""

from __future__ import annotations

from offlint.sources.module_index import ModuleIndex, lookup_state, lookups_of, outside_writes, writer_lookup
from tests.check_helpers import check_json

TABLE = '''\
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig

_BACKBONES = {"small": {"layers": 8}}


def _common(backbone, pipeline_model_parallel_size=1):
    key = backbone.strip().lower()
    if key not in _BACKBONES:
        raise ValueError(f"unknown backbone {backbone}")
    row = dict(_BACKBONES[key])
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=row["layers"]), optimizer=OptimizerConfig())
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size
    cfg.model.cpu_offloading = True
    return cfg


def small_config():
    return _common("Small", pipeline_model_parallel_size=3)
'''

EXTRA = '''\
from .table import _BACKBONES, _common

BIG = "big"
_BACKBONES.setdefault(BIG, {"layers": 30, "path": f"/ckpt/{BIG}"})


def big_config():
    return _common(BIG, pipeline_model_parallel_size=4)
'''


def _units_with(tree, code: str) -> list[str]:
    found = check_json(tree, "--no-cache", "--select", code)
    return sorted({unit for f in found for unit in [f["unit"], *f.get("shared_with", [])]})


def test_a_key_another_module_adds_is_not_taken_for_missing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "recipes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "table.py").write_text(TABLE)
    (package / "extra.py").write_text(EXTRA)
    # both recipes run (layer offloading with pipelines: OFL102); small's row is its module's (8 layers over PP3),
    # big's the one extra.py adds (30 over PP4), read from its literal fields (the f-string one stays unknown)
    assert _units_with(tmp_path, "OFL102") == ["big_config", "small_config"]
    assert _units_with(tmp_path, "OFL218") == ["big_config", "small_config"]


def test_which_writes_count():
    text = ("from .table import TABLE, OTHER\nOWN = {}\nOWN['a'] = 1\nTABLE.setdefault('b', 2)\n"
            "OTHER['c'] = 3\n    TABLE['d'] = 4\nOTHER == {}\n")
    assert outside_writes(text) == {"TABLE": False, "OTHER": True}  # OWN is its own; indented: not at import
    texts = {"a/table.py": "TABLE = {}\n", "a/b/extra.py": text, "c/other.py": text}
    index = ModuleIndex(sorted(texts), texts.get)
    assert index.writers("a", "TABLE") == [("a/b/extra.py", False)]  # the package's own modules, not c/'s
    before = lookup_state(writer_lookup("a", "TABLE"), index)
    texts["a/b/extra.py"] = text.replace("TABLE.setdefault('b', 2)", "TABLE['b'] = 2")
    assert lookup_state(writer_lookup("a", "TABLE"), ModuleIndex(sorted(texts), texts.get)) != before  # replaces
    assert writer_lookup("a", "TABLE") in lookups_of("a/b/extra.py", texts["a/b/extra.py"])  # (pre-commit)


def test_a_cached_reading_follows_a_writer_that_changes(tmp_path, monkeypatch):
    """The defining module's readings depend on which modules write into its table and how (a lookup): a writer
    that starts replacing entries makes the table's own rows unknown too, in a cached run as in an uncached one."""
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    package = tree / "recipes"
    package.mkdir(parents=True)
    (tree / "pyproject.toml").write_text("")
    (package / "__init__.py").write_text("")
    (package / "table.py").write_text(TABLE)
    (package / "extra.py").write_text(EXTRA)
    assert _units_with(tree, "OFL218") == ["big_config", "small_config"]
    cold = check_json(tree)  # the cache filled
    (package / "extra.py").write_text(EXTRA.replace('_BACKBONES.setdefault(BIG, {"layers": 30, "path": f"/ckpt/{BIG}"})',
                                                    '_BACKBONES[BIG] = {"layers": 30}'))
    assert check_json(tree) == check_json(tree, "--no-cache") != cold
    assert not [f for f in check_json(tree) if f["code"] == "OFL218"]  # a replacing write: no row is known

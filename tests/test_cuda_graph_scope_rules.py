"""OFL214 (CUDA graph scope with cuda_graph_impl="none") and OFL215 (local impl with the deprecated "full"
scope) on trees shaped like Megatron Bridge's recipes and performance configs (fixtures of our own), and the
megatron-core behaviour each rule reports, checked on the real package where it is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.sources.mcore_source import refusals_lacked

REPO = Path(__file__).resolve().parent.parent

# A library recipe as Bridge writes them: graphs off, the scope left at the deprecated "full" default spelling.
LIBRARY_RECIPE = """
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
from megatron.bridge.models import GPTModelProvider


def moe_20b_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=24), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.cuda_graph_impl = "none"
    cfg.model.cuda_graph_scope = "full"
    cfg.model.cuda_graph_warmup_steps = 3
    return cfg
"""

# A performance config on top of it, one branch per precision (the shape of Bridge's gpt_oss_llm_pretrain.py).
PERF_CONFIG = """
from recipes.moe import moe_20b_pretrain_config


def moe_20b_pretrain_config_b300(precision: str = "bf16", config_variant: str = "v1"):
    cfg = moe_20b_pretrain_config()
    cfg.model.moe_token_dispatcher_type = "flex"
    if precision == "bf16":
        cfg.model.cuda_graph_impl = "transformer_engine"
        cfg.model.cuda_graph_scope = ["attn", "moe_router", "moe_preprocess"]
    elif precision == "fp8_mx" and config_variant == "v1":
        cfg.model.cuda_graph_impl = "local"
        {FP8_MX_GRAPHS}
    return cfg


def moe_20b_fp8_mx_b300():
    cfg = moe_20b_pretrain_config_b300(precision="fp8_mx")
    cfg.model.cuda_graph_warmup_steps = 5
    return cfg
"""
BEFORE_8FDB = 'cfg.model.cuda_graph_modules = "full"'
AFTER_8FDB = 'cfg.model.cuda_graph_modules = "full_iteration"\n        cfg.model.cuda_graph_scope = None'

# A workload applied by a helper (the shape of Bridge's _set_cuda_graph_overrides before and after 1fdebbcba).
OVERRIDES = """
from recipes.moe import moe_20b_pretrain_config


def set_cuda_graph_overrides(recipe, cuda_graph_impl=None, cuda_graph_scope=None):
    if isinstance(cuda_graph_scope, str):
        cuda_graph_scope = [cuda_graph_scope]
    if cuda_graph_impl is not None:
        recipe.model.cuda_graph_impl = cuda_graph_impl
    if cuda_graph_scope is not None:
        recipe.model.cuda_graph_scope = cuda_graph_scope
    {CLEAR}
    return recipe


def dense_405b_pretrain_config_gb200_nvfp4():
    cfg = moe_20b_pretrain_config()
    return set_cuda_graph_overrides(cfg, cuda_graph_impl="none", cuda_graph_scope="full_iteration")
"""
BEFORE_1FDE = "pass"
AFTER_1FDE = 'if recipe.model.cuda_graph_impl == "none":\n        recipe.model.cuda_graph_scope = []'


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def _findings(tree: Path, version: str, codes=("OFL214", "OFL215")) -> list:
    """offlint check of the whole tree (run from inside it, so the parent's other trees are not its project)."""
    here = os.getcwd()
    os.chdir(tree)
    try:
        result = check(["."], CheckOptions(select=list(codes), mcore_version=version, root=tree))
    finally:
        os.chdir(here)
    assert not result.errors, result.errors
    return [f for f in result.findings if not f.possible]


# A Megatron-LM checkout's megatron-core, in two shapes: 0.16.0rc0's, where the scope is a string whose documented
# default "full" means whole layers, and 0.16.1's, which warns that "full" is the deprecated spelling of [].
RC0_CONFIG = """
class TransformerConfig:
    cuda_graph_scope: str = "full"
    \"\"\"'Full' scope captures a whole Transformer layer.\"\"\"
"""
DEPRECATING_CONFIG = """
import warnings


class TransformerConfig:
    def __post_init__(self):
        if "full" in self.cuda_graph_scope:
            warnings.warn(
                "full scope is deprecated. "
                "Use empty cuda_graph_scope to capture the whole layer."
            )
            self.cuda_graph_scope = []
"""
SERVER_LAUNCH = ("torchrun --nproc-per-node 1 tools/run_text_generation_server.py --num-layers 4 --hidden-size 256 "
                 "--num-attention-heads 4 --cuda-graph-impl local --cuda-graph-scope full\n")


@pytest.mark.parametrize("config, reported", [(RC0_CONFIG, []), (DEPRECATING_CONFIG, ["OFL215"])])
def test_full_is_a_deprecated_spelling_only_where_the_checkout_says_so(tmp_path, config, reported):
    """A helper's sweep: a Megatron-LM copy at 0.16.0rc0 runs an inference test with `--cuda-graph-scope full` for
    whole-layer graphs, its documented meaning there; OFL215 called it deprecated and said to write [], which that
    parser's choices (full, attn, full_iteration) refuse. The checkout's own megatron-core is the one its jobs run."""
    info = "MAJOR = 0\nMINOR = 16\nPATCH = 0\nPRE_RELEASE = 'rc0'\n"
    tree = _tree(tmp_path, {".git/HEAD": "", "megatron/core/package_info.py": info,
                            "megatron/core/transformer/transformer_config.py": config,
                            "examples/serve.sh": SERVER_LAUNCH})
    assert [f.code for f in _findings(tree, None)] == reported


def test_a_check_may_live_in_either_of_its_files():
    words = "full scope is deprecated"
    files = {"core/transformer/transformer_config.py": "class TransformerConfig:\n    pass\n",
             "core/transformer/cuda_graph_config.py": f"    warnings.warn('{words}. Use empty cuda_graph_modules')\n"}
    assert "full-graph-scope-deprecated" not in refusals_lacked(files)  # (0.18's normalize_cuda_graph_modules)
    files["core/transformer/cuda_graph_config.py"] = None
    assert "full-graph-scope-deprecated" in refusals_lacked(files)
    assert "full-graph-scope-deprecated" not in refusals_lacked({})  # (no checkout file read: not judged)


UNKNOWN_RECOMPUTE = """
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
from megatron.bridge.models import GPTModelProvider
from site_tuning import granularity


def llama_pretrain_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.recompute_granularity = granularity()  # (a package outside the tree: unknown){GRAPHS}
    return cfg
"""


@pytest.mark.parametrize("version", ["0.16.1", "0.20.0"])
@pytest.mark.parametrize("graphs, possible", [("", False), ('\n    cfg.model.cuda_graph_impl = "local"', True)])
def test_an_unknown_recompute_granularity_without_graphs_is_no_question(tmp_path, monkeypatch, version, graphs,
                                                                        possible):
    """OFL225: full recompute is refused only beside per-layer graphs; with graphs off no granularity is, so an
    unknown one is no possible finding (LoongForge's round-trip test had one under --strict)."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/llama.py": UNKNOWN_RECOMPUTE.replace("{GRAPHS}", graphs)})
    result = check(["."], CheckOptions(select=["OFL225"], mcore_version=version, root=tree, strict=True))
    assert [f.possible for f in result.findings] == ([True] if possible else [])


@pytest.mark.parametrize("version", ["0.16.1", "0.18.0", "0.20.0"])
def test_local_full_modules_meant_as_full_iteration(tmp_path, monkeypatch, version):
    """8fdb46cb7's shape: reported at the parent (on 0.18+, where the field exists), gone at the fix."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "before", {"recipes/moe.py": LIBRARY_RECIPE,
                                       "perf/moe_perf.py": PERF_CONFIG.replace("{FP8_MX_GRAPHS}", BEFORE_8FDB)})
    found = _findings(tree, version)
    if version == "0.16.1":
        # cuda_graph_modules does not exist before 0.18: Bridge's assignment only adds an unread attribute,
        # and the recipe's cuda_graph_scope "full" stays with the local implementation.
        assert [f.code for f in found] == ["OFL215"]
        assert "cuda_graph_scope='full'" in found[0].message and found[0].location.path.endswith("recipes/moe.py")
    else:
        assert [f.code for f in found] == ["OFL215"]
        assert found[0].location.path.endswith("perf/moe_perf.py")
        assert "cuda_graph_modules='full'" in found[0].message and "full_iteration" in found[0].message
        assert found[0].unit.endswith("moe_20b_fp8_mx_b300")
    fixed = _tree(tmp_path / "after", {"recipes/moe.py": LIBRARY_RECIPE,
                                       "perf/moe_perf.py": PERF_CONFIG.replace("{FP8_MX_GRAPHS}", AFTER_8FDB)})
    assert _findings(fixed, version) == []


@pytest.mark.parametrize("version", ["0.16.1", "0.18.0", "0.20.0"])
def test_full_iteration_scope_with_impl_none(tmp_path, monkeypatch, version):
    """1fdebbcba's shape: a workload turns graphs off and keeps a full-iteration scope; the fix clears it."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "before", {"recipes/moe.py": LIBRARY_RECIPE,
                                       "perf/overrides.py": OVERRIDES.replace("{CLEAR}", BEFORE_1FDE)})
    found = _findings(tree, version)
    assert [f.code for f in found] == ["OFL214"], [f.message for f in found]
    message = found[0].message
    assert "cuda_graph_scope=['full_iteration']" in message
    if version == "0.16.1":
        assert "has no effect" in message
    else:
        assert "cuda_graph_impl='full_iteration'" in message and "captures one after all" in message
    fixed = _tree(tmp_path / "after", {"recipes/moe.py": LIBRARY_RECIPE,
                                       "perf/overrides.py": OVERRIDES.replace("{CLEAR}", AFTER_1FDE)})
    assert _findings(fixed, version) == []


MUTATORS = """
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.utils.cuda_graph import (clear_cuda_graph_modules, set_cuda_graph_modules,
                                              set_full_iteration_cuda_graph)
from megatron.core.transformer.enums import CudaGraphModule


def _base():
    return ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                           ddp=DistributedDataParallelConfig())


def modules_left_without_impl():
    cfg = _base()
    set_cuda_graph_modules(cfg.model, [CudaGraphModule.attn, "moe_router"])
    return cfg


def modules_with_te():
    cfg = _base()
    cfg.model.cuda_graph_impl = "transformer_engine"
    set_cuda_graph_modules(cfg.model, [CudaGraphModule.attn, "moe_router"])
    return cfg


def full_iteration_by_mutator():
    cfg = _base()
    set_full_iteration_cuda_graph(cfg.model)
    return cfg


def cleared():
    cfg = _base()
    cfg.model.cuda_graph_scope = "attn"
    cfg.model.cuda_graph_impl = "none"
    clear_cuda_graph_modules(cfg.model)
    return cfg


def whole_layers_by_default():
    cfg = _base()
    cfg.model.cuda_graph_impl = "local"
    return cfg
"""


@pytest.mark.parametrize("version", ["0.16.1", "0.20.0"])
def test_bridge_mutators_on_each_side_of_the_modules_field(tmp_path, monkeypatch, version):
    """set_cuda_graph_modules writes cuda_graph_scope before 0.18 and cuda_graph_modules from 0.18: either way
    the modules with no implementation are reported once, and the other shapes are not."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/graphs.py": MUTATORS})
    found = _findings(tree, version)
    assert [(f.code, f.unit.rsplit(".", 1)[-1]) for f in found] == [("OFL214", "modules_left_without_impl")]
    field = "cuda_graph_scope" if version == "0.16.1" else "cuda_graph_modules"
    assert f"{field}=['attn', 'moe_router']" in found[0].message


def test_a_branch_offlint_cannot_decide_is_reported_with_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/moe.py": LIBRARY_RECIPE, "perf/env_switch.py": """
        import os
        from recipes.moe import moe_20b_pretrain_config


        def moe_20b_graphs():
            cfg = moe_20b_pretrain_config()
            if os.environ.get("USE_LOCAL_GRAPHS") == "1":
                cfg.model.cuda_graph_impl = "local"
                cfg.model.cuda_graph_scope = None
                cfg.model.cuda_graph_modules = "full"
            return cfg
        """})
    found = [f for f in _findings(tree, "0.20.0") if f.location.path.endswith("env_switch.py")]
    assert [f.code for f in found] == ["OFL215"]
    assert "on the path where" in found[0].message


def test_switching_graphs_off_over_a_recipe_is_not_reported(tmp_path, monkeypatch):
    """A launch (or a derived recipe) that turns the implementation off over a recipe that chose TE modules is
    how graphs are disabled (a Bridge verification card does it): the scope goes unused on purpose. A launch
    that adds a scope without an implementation is reported, on the launch's own line."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/graphs.py": MUTATORS + """

def modules_with_te_switched_off():
    cfg = modules_with_te()
    cfg.model.cuda_graph_impl = "none"
    return cfg
""", "scripts/launch.sh": """
        #!/bin/bash
        torchrun --nproc-per-node 8 scripts/training/run_recipe.py --recipe modules_with_te \\
            model.cuda_graph_impl=none
        torchrun --nproc-per-node 8 scripts/training/run_recipe.py --recipe whole_layers_by_default \\
            model.cuda_graph_impl=none model.cuda_graph_scope=[attn]
        """})
    found = _findings(tree, "0.20.0")
    assert not [f for f in found if "modules_with_te" in f.unit], [(f.unit, f.message) for f in found]
    launched = [f for f in found if "--recipe whole_layers_by_default" in f.unit]
    assert [f.code for f in launched] == ["OFL214"], [(f.unit, f.message) for f in found]
    assert launched[0].location.path.endswith("launch.sh") and "cuda_graph_scope=['attn']" in launched[0].message


def test_full_iteration_is_reported_whoever_switched_the_implementation_off(tmp_path, monkeypatch):
    """From 0.18 megatron-core turns a deprecated 'full_iteration' back into a graph whatever cuda_graph_impl
    says, so even a launch's `cuda_graph_impl=none` over it is reported (before 0.18 it is not)."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/full.py": """
        from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
        from megatron.bridge.models import GPTModelProvider


        def old_style_full_iteration():
            cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
            cfg.model.cuda_graph_impl = "local"
            cfg.model.cuda_graph_scope = ["full_iteration"]
            return cfg
        """, "scripts/launch.sh": """
        #!/bin/bash
        torchrun --nproc-per-node 8 scripts/training/run_recipe.py --recipe old_style_full_iteration \\
            model.cuda_graph_impl=none
        """})
    for version, expected in (("0.16.1", []), ("0.18.0", ["OFL214"])):
        found = [f for f in _findings(tree, version) if "--recipe old_style_full_iteration" in f.unit]
        assert [f.code for f in found] == expected, (version, [f.message for f in found])


# Workload records as Bridge's performance configs keep them (the shape of nemotron_3_workload_base_configs.py at
# Bridge 625992d99): a base that chose TE graphs, variants derived with `replace`, applied by one helper that writes
# both the implementation and the scope from whichever record the recipe looked up.
WORKLOADS = """
from dataclasses import dataclass, replace


@dataclass
class WorkloadBaseConfig:
    tensor_model_parallel_size: int = 1
    cuda_graph_impl: str | None = None
    cuda_graph_scope: list | None = None


BASE = WorkloadBaseConfig(
    cuda_graph_impl="transformer_engine",
    cuda_graph_scope=["attn", "moe_router"],
)
GRAPHS_OFF = replace(BASE, cuda_graph_impl="none")
GRAPHS_OFF_TP2 = replace(GRAPHS_OFF, tensor_model_parallel_size=2)
BOTH_AT_ONCE = replace(BASE, cuda_graph_impl="none", cuda_graph_scope=["mlp"])
NO_GRAPHS = WorkloadBaseConfig(cuda_graph_impl="none")
SCOPE_OVER_NO_GRAPHS = replace(NO_GRAPHS, cuda_graph_scope=["attn"])
"""

WORKLOAD_RECIPES = """
from megatron.bridge.training.config import ConfigContainer
from configs import workloads
from perf.overrides import set_cuda_graph_overrides
from recipes.moe import moe_20b_pretrain_config


def get_workload(name):
    return getattr(workloads, name)


def set_workload_base_configs(cfg, settings):
    cfg.model.tensor_model_parallel_size = settings.tensor_model_parallel_size
    set_cuda_graph_overrides(cfg, cuda_graph_impl=settings.cuda_graph_impl, cuda_graph_scope=settings.cuda_graph_scope)
    return cfg


def _config(name) -> ConfigContainer:
    cfg = moe_20b_pretrain_config()
    set_workload_base_configs(cfg, get_workload(name))
    return cfg


def graphs_off_config() -> ConfigContainer:
    return _config("GRAPHS_OFF")


def graphs_off_tp2_config() -> ConfigContainer:
    return _config("GRAPHS_OFF_TP2")


def both_at_once_config() -> ConfigContainer:
    return _config("BOTH_AT_ONCE")


def scope_over_no_graphs_config() -> ConfigContainer:
    return _config("SCOPE_OVER_NO_GRAPHS")


def graphs_off_with_the_base_scope(cfg, settings):
    cfg.model.cuda_graph_impl = "none"
    cfg.model.cuda_graph_scope = settings.cuda_graph_scope
    return cfg


def one_helper_sets_both_config() -> ConfigContainer:
    return graphs_off_with_the_base_scope(moe_20b_pretrain_config(), get_workload("BASE"))


def scope_written_from_the_record_config() -> ConfigContainer:
    cfg = moe_20b_pretrain_config()
    settings = get_workload("GRAPHS_OFF")
    cfg.model.cuda_graph_impl = settings.cuda_graph_impl
    cfg.model.cuda_graph_scope = settings.cuda_graph_scope
    return cfg
"""


@pytest.mark.parametrize("version", ["0.16.1", "0.20.0"])
def test_a_derived_workload_switching_graphs_off_over_its_base_is_not_reported(tmp_path, monkeypatch, version):
    """`GRAPHS_OFF = replace(BASE, cuda_graph_impl="none")` turns off the graphs its base chose, as a derived recipe
    does, although one helper then writes both fields (Bridge 625992d99's nemotron_3_super B200 workload). A record
    that sets both itself, or adds a scope over a base with graphs off, is reported, and so is a helper that turns
    graphs off while it writes a record's scope itself (one writer); the note names the record each value came
    from."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path, {"recipes/moe.py": LIBRARY_RECIPE, "configs/__init__.py": "",
                            "configs/workloads.py": WORKLOADS, "perf/workload_recipes.py": WORKLOAD_RECIPES,
                            "perf/overrides.py": OVERRIDES.replace("{CLEAR}", BEFORE_1FDE)})
    # (the helper's module has a recipe of its own, reported on its own: test_full_iteration_scope_with_impl_none)
    found = {f.unit: f for f in _findings(tree, version) if f.unit != "dense_405b_pretrain_config_gb200_nvfp4"}
    assert sorted(found) == ["both_at_once_config", "one_helper_sets_both_config", "scope_over_no_graphs_config"], \
        [(f.unit, f.message) for f in found.values()]
    notes = {unit: " ".join(r.note for r in f.related) for unit, f in found.items()}
    assert "from replace(...) at configs/workloads.py:18" in notes["both_at_once_config"], notes
    assert "from WorkloadBaseConfig(...) at configs/workloads.py:19" in notes["scope_over_no_graphs_config"], notes


# ---- what megatron-core itself does with these configurations --------------------------------------------

PROBE = r"""
import json, sys, warnings
from megatron.core.transformer.transformer_config import TransformerConfig
base = dict(num_layers=4, hidden_size=64, num_attention_heads=4)
out = []
for kwargs in json.loads(sys.argv[1]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = TransformerConfig(**base, **kwargs)
        except Exception as exc:
            out.append({"error": f"{type(exc).__name__}: {exc}"})
            continue
    modules = getattr(config, "cuda_graph_modules", None)
    names = [s.name for s in (modules if modules is not None else config.cuda_graph_scope)]
    out.append({"impl": config.cuda_graph_impl, "names": names,
                "warnings": sorted({str(w.message) for w in caught if "scope" in str(w.message)
                                    or "cuda_graph" in str(w.message)})})
print(json.dumps(out))
"""


def _environments() -> list[tuple[str, dict]]:
    out = []
    try:  # found, not imported: importing it here would import torch while collecting every test run
        if importlib.util.find_spec("megatron.core") is not None:
            out.append(("installed", dict(os.environ)))
    except (ImportError, ValueError):
        pass
    for tree in sorted((REPO / ".mcore").glob("megatron_core-*")):
        if (tree / "megatron" / "core").is_dir():
            out.append((tree.name, {**os.environ, "PYTHONPATH": str(tree)}))
    for tree in filter(None, os.environ.get("OFFLINT_MCORE_SRC", "").split(os.pathsep)):
        out.append((tree, {**os.environ, "PYTHONPATH": tree}))
    return out


def _version(env: dict) -> str:
    code = "import megatron.core.package_info as p; print(p.__version__)"
    text = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300).stdout.strip().splitlines()[-1]
    return text.split("+", 1)[0]  # a source tree inside a git checkout appends "+<commit>"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "env"), [pytest.param(n, e, id=n) for n, e in _environments()] or [pytest.param(
    "none", {}, marks=pytest.mark.skip(reason="megatron-core is not installed and no source tree is available"))])
def test_megatron_core_does_what_the_rules_say(name, env, tmp_path, monkeypatch):
    from offlint.versions import parse_version

    version = _version(env)
    new = parse_version(version) >= parse_version("0.18")
    configs = [
        {"cuda_graph_impl": "none", "cuda_graph_scope": "full_iteration"},
        {"cuda_graph_impl": "none", "cuda_graph_scope": ["attn"]},
        {"cuda_graph_impl": "local", "cuda_graph_scope": "full"},
        {"cuda_graph_impl": "local"},
        {"cuda_graph_impl": "none", "cuda_graph_scope": "attn,mlp"},
    ] + ([{"cuda_graph_impl": "none", "cuda_graph_modules": ["attn", "mlp"]},
          {"cuda_graph_impl": "local", "cuda_graph_modules": "full"}] if new else [])
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(configs)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert not any("error" in a for a in answers), answers
    none_full_iteration, none_attn, local_full, local_default, none_split = answers[:5]
    # impl "none" + a per-layer scope: accepted, no graph implementation, the names kept but unused
    assert none_attn["impl"] == "none" and none_attn["names"] == ["attn"]
    assert none_split["impl"] == "none" and none_split["names"] == ["attn", "mlp"]  # a string splits on commas
    if new:
        # 0.18+: the deprecated full_iteration value turns the implementation on
        assert none_full_iteration["impl"] == "full_iteration" and none_full_iteration["names"] == []
        none_modules, local_full_modules = answers[5:]
        assert none_modules["impl"] == "none" and none_modules["names"] == ["attn", "mlp"]
        assert local_full_modules["impl"] == "local" and local_full_modules["names"] == []
        assert any(w.startswith("full scope is deprecated") for w in local_full_modules["warnings"])
    else:
        assert none_full_iteration["impl"] == "none" and none_full_iteration["names"] == ["full_iteration"]
    # "full" with the local implementation: whole layers (an empty list), with only a warning
    assert local_full["impl"] == "local" and local_full["names"] == []
    assert any(w.startswith("full scope is deprecated") for w in local_full["warnings"])
    assert local_default["impl"] == "local" and local_default["names"] == []

    # offlint, at that version, reports exactly the configurations the rules describe
    monkeypatch.chdir(tmp_path)
    lines = ["def build_{}():\n    return TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4, "
             "{})\n".format(i, ", ".join(f"{k}={v!r}" for k, v in c.items())) for i, c in enumerate(configs)]
    (tmp_path / "configs.py").write_text("\n\n".join(lines), encoding="utf-8")
    found = _findings(tmp_path, version)
    by_unit = {f.unit.rsplit("build_", 1)[-1]: f.code for f in found}
    expected = {"0": "OFL214", "1": "OFL214", "2": "OFL215", "4": "OFL214"}
    if new:
        expected.update({"5": "OFL214", "6": "OFL215"})
    assert by_unit == expected, [(f.unit, f.message) for f in found]


def test_a_possible_no_effect_scope_does_not_claim_the_implementation(tmp_path):
    """Where the recipe (outside the tree) decides cuda_graph_impl, the possible OFL214 says it is unknown, not
    'none' (NVIDIA's dgxc-benchmarking adds `--cuda_graph_scope=mamba` on top of Bridge's recipe: the message had
    said "cuda_graph_impl is 'none'" beside "depends on unknown values: model.cuda_graph_impl")."""
    (tmp_path / "override.yaml").write_text("model:\n  cuda_graph_scope: [mamba]\n")
    found = check([str(tmp_path / "override.yaml")],
                  CheckOptions(root=tmp_path, cache=False, strict=True, mcore_version="0.20.0", select=["OFL214"]))
    assert [f.message.split(",")[0] for f in found.findings] == ["cuda_graph_impl is ?"]
    assert found.findings[0].possible


@pytest.mark.parametrize("impl, version, reported", [
    ("transformer_engine", "0.20.0", True), ("transformer_engine", "0.18.0", True),
    ("local", "0.20.0", False),  # a full_iteration name would make local graphs full-iteration ones: allowed
    ("transformer_engine", "0.16.1", False),  # before 0.18 a [full_iteration] scope allows it
])
def test_full_recompute_beside_te_graphs_with_an_unknown_scope(tmp_path, impl, version, reported):
    """A recall study's override file (session 66): full recompute with Transformer Engine graphs, the graph scope
    left to a recipe offlint does not see. From 0.18 every scope is refused (a full_iteration one beside TE graphs
    first, cuda_graph_config.py), so it is no longer only possible."""
    (tmp_path / "override.yaml").write_text(
        f"model:\n  cuda_graph_impl: {impl}\n  recompute_granularity: full\n  recompute_method: uniform\n"
        f"  recompute_num_layers: 1\n")
    findings = check([str(tmp_path)], CheckOptions(select=["OFL225"], mcore_version=version, root=tmp_path,
                                                   cache=False)).findings
    assert bool(findings) == reported, findings
    if reported:
        assert "whatever the graphed modules are" in findings[0].message and not findings[0].possible

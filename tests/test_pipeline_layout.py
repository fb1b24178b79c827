"""OFL221: a custom pipeline layout megatron-core refuses. offlint/pipeline_layout.py parses and checks a layout as
megatron-core's PipelineParallelLayerLayout does; here it is compared with the installed megatron-core on layouts
of each kind, and the rule is checked on the shapes Megatron-LM and megatron-core programs write (fixtures of our
own)."""

from __future__ import annotations

import pytest

from offlint import pipeline_layout
from offlint.api import CheckOptions, check

# (layout, PP, VPP set, num_layers, mtp_num_layers)
CASES = [
    ("Et*3|(tt|)*6tL", 2, None, 16, 1),  # no MTP layer for mtp_num_layers=1 (Megatron-LM 94f1633a9c~1)
    ("Et*3|(tt|)*6tmL", 2, None, 16, 1),
    ("Et*3|(tt|)*6tL", 2, None, 16, None),
    ("Et*3|(tt|)*6tL", 2, 2, 16, None),  # the layout gives VPP4
    ("Et*3|(tt|)*6tL", 2, 4, 16, None),
    ("Ettt|t*4L", 2, None, 8, None),  # 7 decoder layers
    ("Et*4|t*4L", 3, None, 8, None),  # 2 stages over PP3
    ("tEtt|ttL", 2, None, 5, None),  # embedding not first
    ("Ett|ttLt", 2, None, 5, None),  # loss not last
    ("Ett|mttL", 2, None, 4, 1),  # MTP before decoder layers
    ("Etm|tt|tt|ttL", 2, None, 7, 1),  # MTP outside the last virtual stage of its rank
    ("Et,t|tt,L", 2, None, 4, None),  # commas are cosmetic
    ([["embedding", "decoder"], ["decoder", "loss"]], 2, None, 2, None),
    ([["Embedding", "decoder"], ["decoder", "mtp", "loss"]], 2, None, 2, 1),
]


@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_offlint_refuses_a_layout_exactly_where_megatron_core_does(case):
    layout_module = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    layout, pp, vpp, layers, mtp = case
    try:
        built = layout_module.PipelineParallelLayerLayout(layout, pp)
        if vpp is not None:
            assert vpp == built.virtual_pipeline_model_parallel_size, (
                "virtual_pipeline_model_parallel_size conflicts with pipeline_model_parallel_layout")
        built.validate_layer_layout(layers, mtp)
        expected = ""
    except AssertionError as exc:
        expected = str(exc)
    stages = pipeline_layout.stages_of(layout)
    assert stages is not None
    why, _ = pipeline_layout.refusal(stages, pp, vpp, layers, mtp)
    assert why == expected or (expected and expected.startswith(why)), (why, expected)
    assert bool(why) == bool(expected)


def test_a_layout_offlint_cannot_read_is_not_judged():
    assert pipeline_layout.stages_of("Ex|tL") is None  # megatron-core refuses it too, but not as a count
    assert pipeline_layout.stages_of([]) is None  # more likely a list offlint saw before the code that fills it
    assert pipeline_layout.stages_of("(t*99999999)*99999999") is None  # bounded unrolling
    assert pipeline_layout.stages_of([["embedding", "encoder"]]) is None


def test_without_the_sizes_only_what_does_not_depend_on_them_is_checked():
    stages = pipeline_layout.stages_of("Ett|ttL")
    assert pipeline_layout.refusal(stages, 2, None, None, None, counts=False) == ("", "")
    assert pipeline_layout.refusal(stages, 2, 2, None, None, counts=False)[0].startswith(
        "virtual_pipeline_model_parallel_size conflicts")


def _check(tmp_path, monkeypatch, name: str, text: str) -> list:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / name).write_text(text)
    result = check([name], CheckOptions(select=["OFL221"], mcore_version="0.20.0", root=tmp_path, cache=False))
    return [f for f in result.findings if f.code == "OFL221"]


def test_a_megatron_lm_launch_and_a_megatron_core_program_are_judged(tmp_path, monkeypatch):
    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 16 --pipeline-model-parallel-size 2 "
              "--pipeline-model-parallel-layout 'Et*3|(tt|)*6tL' --mtp-num-layers 1\n")
    found = _check(tmp_path, monkeypatch, "run.sh", launch)
    assert len(found) == 1 and "Number of mtp layers in layout must match mtp_num_layers" in found[0].message
    program = ("from megatron.core.transformer import TransformerConfig\n\n\n"
               "def model_config():\n"
               "    return TransformerConfig(num_layers=8, hidden_size=64, num_attention_heads=4,\n"
               "                             pipeline_model_parallel_size=2, pipeline_model_parallel_layout='Ettt|ttttL')\n")
    found = _check(tmp_path, monkeypatch, "model.py", program)
    assert len(found) == 1 and "Number of decoder layers 7must match num_layers 8" in found[0].message


BUILT = ("from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
         "from megatron.bridge.training.config import ConfigContainer\n\n\n"
         "def _layout(pp, vp):\n"
         "    return {(2, 1): 'Etttt|ttttL', (4, 1): 'Ett|tt|tt|ttL'}[(pp, 1 if vp is None else vp)]\n\n\n"
         "def NAME():\n"
         "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n"
         "    BUILDER\n"
         "    cfg.model.pipeline_model_parallel_size = 2\n"
         "    cfg.model.virtual_pipeline_model_parallel_size = VP\n"
         "    cfg.model.pipeline_model_parallel_layout = _layout(2, 1)\n"
         "    return cfg\n")


def _recipe(name: str, builder: bool, vp=None) -> str:
    line = "cfg.model._pipeline_model_parallel_layout_builder = _layout" if builder else "pass"
    return BUILT.replace("NAME", name).replace("BUILDER", line).replace("VP", repr(vp))


def test_a_bridge_recipe_is_judged_and_a_launch_only_where_its_sizes_meet_a_layout_not_built_again(
        tmp_path, monkeypatch):
    """A recipe function's layout reaches megatron-core as written (`(pp, vp)` looked up among a table's tuple keys,
    as GLM-4.5V's and Moonlight's recipes do). Bridge's training runner asks a recipe's registered layout builder
    (`_pipeline_model_parallel_layout_builder`) for a new layout after PP/VP overrides on the command line
    (recipe_runner.sync_model_pipeline_layout); without one the recipe's layout stays, for the old sizes, and
    megatron-core refuses it (Bridge PRs 5578 and 5708 registered builders to fix exactly that). A launch that keeps
    the recipe's sizes is judged in the recipe's unit."""
    found = _check(tmp_path, monkeypatch, "recipe.py", _recipe("llama_pretrain_config", False, vp=2))
    assert [f.unit for f in found] == ["llama_pretrain_config"]
    assert "virtual_pipeline_model_parallel_size conflicts with pipeline_model_parallel_layout" in found[0].message
    (tmp_path / "recipe.py").write_text(_recipe("stale_config", False) + "\n\n" + _recipe("built_config", True)
                                        .split("\n\n\n", 2)[2])
    run = "python scripts/training/run_recipe.py --recipe "
    (tmp_path / "same.sh").write_text(run + "stale_config model.global_batch_size=8\n")
    (tmp_path / "stale.sh").write_text(run + "stale_config model.pipeline_model_parallel_size=4\n")
    (tmp_path / "built.sh").write_text(run + "built_config model.pipeline_model_parallel_size=4\n")
    (tmp_path / "split.sh").write_text(run + "built_config model.pipeline_model_parallel_size=3\n")
    result = check(["recipe.py", "same.sh", "stale.sh", "built.sh", "split.sh"], CheckOptions(
        select=["OFL218", "OFL221"], mcore_version="0.20.0", root=tmp_path, cache=False))
    found = [(f.code, f.unit_path, f.location.path) for f in result.findings]
    assert found == [("OFL221", "stale.sh", "recipe.py")], found  # 2 stages over PP4, where the layout is written
    assert "pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size" in \
        result.findings[0].message
    # (built.sh and split.sh: the builder, which offlint does not run, decides the layout: no claim either way)


def test_a_layout_chosen_by_a_tuple_in_a_table_is_read(tmp_path, monkeypatch):
    """`if (pp, vp) in table:` (GLM-4.5V's recipes at Bridge 2b8cb21d9): the tuple, which the reader holds as a list,
    is looked up among the table's tuple keys; the test had been left undecided (a list is no dict key), the layout
    a value of one path only, and a recipe that then changes PP went unjudged."""
    recipe = ("from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
              "from megatron.bridge.training.config import ConfigContainer\n\n\n"
              "def set_layout(model):\n"
              "    pp, vp = model.pipeline_model_parallel_size, model.virtual_pipeline_model_parallel_size or 1\n"
              "    table = {(2, 1): 'Etttt|ttttL', (4, 1): 'Ett|tt|tt|ttL'}\n"
              "    if (pp, vp) in table:\n"
              "        model.pipeline_model_parallel_layout = table[(pp, vp)]\n\n\n"
              "def vlm_pp4_config():\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n"
              "    cfg.model.pipeline_model_parallel_size = 2\n"
              "    cfg.model.virtual_pipeline_model_parallel_size = None\n"
              "    set_layout(cfg.model)\n"
              "    cfg.model.pipeline_model_parallel_size = 4\n"
              "    return cfg\n")
    found = _check(tmp_path, monkeypatch, "recipe.py", recipe)
    assert [f.unit for f in found] == ["vlm_pp4_config"], found
    assert "must be divisible by pipeline_model_parallel_size" in found[0].message


@pytest.mark.parametrize("key, expected", [("(pp, None)", ["vlm_config"]), ("[pp]", [])])
def test_a_dicts_get_with_a_tuple_key_is_read_and_a_list_key_is_no_error(tmp_path, monkeypatch, key, expected):
    """`.get((rank, config_file))` on a dict (NVFlare's client API, reached from a script that sets the allocator's
    options): the tuple, which the reader holds as a list, had been looked up as it was held and ended the file's
    reading in an internal error (unhashable type: 'list'). It is looked up as the tuple it is; a list key, which
    Python itself refuses to hash, gives an unknown value (no layout: no finding)."""
    recipe = ("from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
              "from megatron.bridge.training.config import ConfigContainer\n\n"
              "LAYOUTS = {(2, None): 'Etttt|ttttL'}\n\n\n"
              "def vlm_config():\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n"
              "    pp = 2\n"
              f"    cfg.model.pipeline_model_parallel_layout = LAYOUTS.get({key}, 'Ett|tt|tt|ttL')\n"
              "    cfg.model.pipeline_model_parallel_size = 4\n"
              "    return cfg\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text(recipe)
    result = check(["recipe.py"], CheckOptions(select=["OFL221"], mcore_version="0.20.0", root=tmp_path, cache=False))
    assert result.errors == []
    assert [f.unit for f in result.findings if f.code == "OFL221"] == expected


def test_a_bridge_launch_that_writes_the_layout_itself_is_judged(tmp_path, monkeypatch):
    """Bridge's runner keeps a layout the command line sets (sync_model_pipeline_layout returns early), and a YAML
    file's layout reaches megatron-core unless the command line changes PP or VP and the recipe has a layout builder
    to build it again."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text(
        "from megatron.bridge.models.gpt_provider import GPTModelProvider\n"
        "from megatron.bridge.training.config import ConfigContainer\n\n\n"
        "def _layout(pp, vp):\n"
        "    return None\n\n\n"
        "def llama_pretrain_config():\n"
        "    return ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n\n\n"
        "def built_pretrain_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=64, num_attention_heads=4))\n"
        "    cfg.model._pipeline_model_parallel_layout_builder = _layout\n"
        "    return cfg\n")
    run = "python scripts/training/run_recipe.py --recipe llama_pretrain_config "
    (tmp_path / "launch.sh").write_text(
        run + "model.pipeline_model_parallel_size=2 'model.pipeline_model_parallel_layout=Ettt|ttttL'\n")
    (tmp_path / "override.yaml").write_text("model:\n  pipeline_model_parallel_size: 2\n"
                                            "  pipeline_model_parallel_layout: Etttt|ttttL\n  mtp_num_layers: 1\n")
    (tmp_path / "from_file.sh").write_text(run + "--config-file override.yaml\n")
    (tmp_path / "stale.sh").write_text(run + "--config-file override.yaml model.pipeline_model_parallel_size=4\n")
    (tmp_path / "rebuilt.sh").write_text(run.replace("llama_", "built_") +
                                         "--config-file override.yaml model.pipeline_model_parallel_size=4\n")
    result = check(["recipe.py", "launch.sh", "override.yaml", "from_file.sh", "stale.sh", "rebuilt.sh"],
                   CheckOptions(select=["OFL221"], mcore_version="0.20.0", root=tmp_path, cache=False))
    found = [(f.location.path, f.unit_path, f.message) for f in result.findings if f.code == "OFL221"]
    launch = [m for path, _, m in found if path == "launch.sh"]
    assert len(launch) == 1 and "Number of decoder layers 7must match num_layers 8" in launch[0], found
    from_file = [(path, m) for path, unit_path, m in found if unit_path == "from_file.sh"]
    assert len(from_file) == 1 and from_file[0][0] == "override.yaml", found  # located where the layout is written
    assert "Number of mtp layers in layout must match mtp_num_layers" in from_file[0][1], found
    stale = [m for _, unit_path, m in found if unit_path == "stale.sh"]  # no builder: the file's 2 stages over PP4
    assert len(stale) == 1 and "divisible by pipeline_model_parallel_size" in stale[0], found
    assert not [u for _, u, _ in found if u == "rebuilt.sh"], found  # PP from the command line: built again


def test_stages_without_layers_do_not_stop_offlint():
    assert pipeline_layout.refusal(pipeline_layout.stages_of("|"), 2, None, 0, None) == ("", "")

"""OFL218: a decoder whose layers do not divide over the pipeline stages, which megatron-core's TransformerBlock
refuses when it builds the model. Recipes in Megatron Bridge's shapes, fixtures of our own."""

from __future__ import annotations

from offlint.api import CheckOptions, check

HEADER = ("from megatron.bridge.models import GPTModelProvider\n"
          "from megatron.bridge.training.config import ConfigContainer\n\n\n")


def _findings(tmp_path, body: str, layers: int = 94, version: str = "0.19.2"):
    lines = "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())
    (tmp_path / "recipes.py").write_text(
        HEADER + "def vl_pretrain_config():\n"
        f"    cfg = ConfigContainer(model=GPTModelProvider(num_layers={layers}, hidden_size=1024, "
        f"num_attention_heads=8))\n{lines}    return cfg\n")
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL218"],
                                                 mcore_version=version))
    return [f for f in result.findings if f.code == "OFL218"]


def test_an_even_split_that_does_not_divide_is_refused(tmp_path):
    found = _findings(tmp_path, "cfg.model.pipeline_model_parallel_size = 8\n"
                                "cfg.model.virtual_pipeline_model_parallel_size = 4")
    assert len(found) == 1, found
    assert "num_layers=94 should be divisible by config.pipeline_model_parallel_size=8" in found[0].message


def test_megatron_core_0_16_says_it_without_the_values(tmp_path):
    """0.16's TransformerBlock asserts a plain text; the f-string naming the values came with 0.17 (the message is
    what a user searches the job's log for)."""
    found = _findings(tmp_path, "cfg.model.pipeline_model_parallel_size = 8", version="0.16.1")
    assert len(found) == 1, found
    assert '"num_layers should be divisible by pipeline_model_parallel_size"' in found[0].message


def test_first_and_last_stage_counts_or_a_dividing_pp_are_not_judged(tmp_path):
    assert _findings(tmp_path, """
        cfg.model.pipeline_model_parallel_size = 8
        cfg.model.num_layers_in_first_pipeline_stage = 10
        cfg.model.num_layers_in_last_pipeline_stage = 12
    """) == []
    assert _findings(tmp_path, "cfg.model.pipeline_model_parallel_size = 2") == []
    assert _findings(tmp_path, "cfg.model.pipeline_model_parallel_size = 1") == []


def test_a_counted_embedding_and_loss_take_a_layer_each(tmp_path):
    assert _findings(tmp_path, """
        cfg.model.pipeline_model_parallel_size = 8
        cfg.model.account_for_embedding_in_pipeline_split = True
        cfg.model.account_for_loss_in_pipeline_split = True
    """) == []  # 94 + 2 = 96
    found = _findings(tmp_path, """
        cfg.model.pipeline_model_parallel_size = 8
        cfg.model.account_for_embedding_in_pipeline_split = True
    """)
    assert len(found) == 1 and "plus 1 for the embedding/loss" in found[0].message, found


def test_a_hybrid_pattern_or_an_unknown_size_gives_no_finding(tmp_path):
    assert _findings(tmp_path, """
        cfg.model.pipeline_model_parallel_size = 8
        cfg.model.hybrid_layer_pattern = "M*M*|M*M*"
    """) == []
    assert _findings(tmp_path, "cfg.model.pipeline_model_parallel_size = pick_pp()") == []


def test_a_megatron_lm_launch_is_refused_first_by_validate_args(tmp_path, monkeypatch):
    """Megatron-LM's validate_args refuses layers that do not divide over PP when the job starts, before
    TransformerBlock would (arguments.py, 0.16.1 to d98e8a6); with `--num-virtual-stages-per-pipeline-rank` it makes
    no such check, and TransformerBlock's assert is the one met."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "l.sh").write_text(
        "torchrun pretrain_gpt.py --num-layers 30 --pipeline-model-parallel-size 4\n"
        "torchrun pretrain_gpt.py --num-layers 30 --pipeline-model-parallel-size 4 "
        "--num-layers-per-virtual-pipeline-stage 2\n"
        "torchrun pretrain_gpt.py --num-layers 30 --pipeline-model-parallel-size 4 "
        "--num-virtual-stages-per-pipeline-rank 2\n")
    monkeypatch.chdir(tmp_path)
    result = check(["l.sh"], CheckOptions(root=tmp_path, cache=False, select=["OFL218"], mcore_version="0.19.2"))
    messages = [f.message.split(": ", 1)[1] for f in sorted(result.findings, key=lambda f: f.location.line)]
    assert messages == [
        "Megatron-LM's validate_args asserts \"Number of layers should be divisible by the pipeline-model-parallel "
        "size\" when the job starts",
        "Megatron-LM's validate_args asserts \"number of layers of the model must be divisible pipeline model "
        "parallel size\" when the job starts",
        "megatron-core's TransformerBlock asserts \"num_layers=30 should be divisible by "
        "config.pipeline_model_parallel_size=4\" when it builds the model"]


def test_a_launch_flag_of_another_layer_split_leaves_the_split_unjudged(tmp_path, monkeypatch):
    """Ascend's MindSpeed-LLM: `--num-layers 61 --pipeline-model-parallel-size 4 --num-layer-list 16,16,16,13`.
    Its entry scripts import a plugin that patches Megatron-LM's validate_args and get_num_layers_to_build: the
    uneven split is valid there (22 false OFL218). A flag no Megatron-LM parser has, named for layers, is the tree's
    own way of laying them out, which offlint does not read; another flag of the tree's own changes nothing here."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "l.sh").write_text(
        "torchrun pretrain_gpt.py --num-layers 61 --pipeline-model-parallel-size 4 --num-layer-list 16,16,16,13\n"
        "torchrun pretrain_gpt.py --num-layers 61 --pipeline-model-parallel-size 4 --use-fused-swiglu\n")
    monkeypatch.chdir(tmp_path)
    result = check(["l.sh"], CheckOptions(root=tmp_path, cache=False, select=["OFL218"], mcore_version="0.19.2"))
    assert [f.location.line for f in result.findings] == [2]
    strict = check(["l.sh"], CheckOptions(root=tmp_path, cache=False, select=["OFL218"], mcore_version="0.19.2",
                                          strict=True))
    assert [(f.location.line, f.possible) for f in strict.findings] == [(2, False)]


def _codes(tmp_path, body: str, version: str = "0.20.0") -> dict[str, list[str]]:
    lines = "".join(f"    {line.strip()}\n" for line in body.strip().splitlines())
    (tmp_path / "recipes.py").write_text(
        HEADER + "def small_pretrain_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8))\n"
        f"{lines}    return cfg\n")
    result = check([str(tmp_path)], CheckOptions(root=tmp_path, cache=False, select=["OFL218", "OFL211"],
                                                 mcore_version=version))
    found: dict[str, list[str]] = {}
    for f in result.findings:
        found.setdefault(f.code, []).append(f.message)
    return found


def test_virtual_stages_without_a_pipeline_stop_bridge_s_initialization(tmp_path):
    """A seeded-mistake study (session 64, B22): Bridge's initialization hands virtual_pipeline_model_parallel_size
    to megatron-core's initialize_model_parallel (training/initialize.py), which raises "pipeline-model-parallel size
    should be greater than 1 with interleaved schedule" for any VPP at PP 1 (parallel_state.py, 0.16.1 to main).
    OFL211 had said megatron-core accepts it, and without offloading nothing was reported."""
    refused = ('"RuntimeError: pipeline-model-parallel size should be greater than 1 with interleaved schedule"')
    for body in ("cfg.model.virtual_pipeline_model_parallel_size = 2",
                 "cfg.model.virtual_pipeline_model_parallel_size = 2\ncfg.model.cpu_offloading = True\n"
                 "cfg.model.cpu_offloading_num_layers = 2"):
        found = _codes(tmp_path, body)
        assert list(found) == ["OFL218"], found  # (OFL211's premise, that it runs, does not hold)
        assert refused in found["OFL218"][0]
    assert _codes(tmp_path, "cfg.model.virtual_pipeline_model_parallel_size = None") == {}
    assert _codes(tmp_path, "cfg.model.pipeline_model_parallel_size = 2\n"
                            "cfg.model.virtual_pipeline_model_parallel_size = 2") == {}


def test_decentralized_process_groups_do_not_call_initialize_model_parallel(tmp_path):
    """With dist.use_decentralized_pg Bridge builds its groups itself (HyperCommGrid): not judged, and OFL211 keeps
    its case."""
    assert _codes(tmp_path, "cfg.model.virtual_pipeline_model_parallel_size = 2\ncfg.dist.use_decentralized_pg = True") \
        == {}
    found = _codes(tmp_path, "cfg.model.virtual_pipeline_model_parallel_size = 2\ncfg.dist.use_decentralized_pg = True\n"
                             "cfg.model.cpu_offloading = True\ncfg.model.cpu_offloading_num_layers = 2")
    assert list(found) == ["OFL211"], found

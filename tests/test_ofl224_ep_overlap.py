"""OFL224: what megatron-core's TransformerConfig asserts beside MoE expert-parallel communication overlap, by
release, in the shapes real trees write it: Megatron Bridge's comm_overlap section over the model, a precision
recipe's bf16, Energon packing turning the overlap off, and Megatron-LM's functional test cases whose pipeline
layout gives the virtual pipeline size (two such cases at Megatron-LM d98e8a6 were a false finding before the
layout was read). The comparison with the real megatron-core is tests/test_conformance.py's."""

from __future__ import annotations

import textwrap

import pytest

from offlint.api import CheckOptions, check

MOE = ("num_layers=8, hidden_size=1024, num_attention_heads=8, num_moe_experts=8, expert_model_parallel_size=8, "
       "moe_token_dispatcher_type='alltoall'")


def _findings(tmp_path, monkeypatch, files: dict[str, str], version="0.20.0", strict=False):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    result = check(sorted(files), CheckOptions(select=["OFL224"], strict=strict, mcore_version=version,
                                               root=tmp_path))
    assert not result.errors, result.errors
    return result.findings


def _recipe(body: str, precision: str = '"bf16_mixed"', overlap: str = "True") -> str:
    head = textwrap.dedent(f"""
        def moe_pretrain_config():
            cfg = ConfigContainer(model=GPTModelProvider({MOE}), optimizer=OptimizerConfig(bf16=True),
                                  ddp=DistributedDataParallelConfig(), mixed_precision={precision})
            cfg.comm_overlap = CommOverlapConfig(tp_comm_overlap=False, overlap_moe_expert_parallel_comm={overlap})
    """)
    return head + textwrap.indent(textwrap.dedent(body), " " * 4) + "    return cfg\n"


def test_full_recompute_with_the_section_on_is_refused(tmp_path, monkeypatch):
    found = _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("""
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "uniform"
        cfg.model.recompute_num_layers = 1
    """)})
    assert len(found) == 1 and not found[0].possible
    assert "comm_overlap.overlap_moe_expert_parallel_comm=True at recipe.py:5" in found[0].message
    assert '"disable full recomputation when enabling overlap_moe_expert_parallel_comm"' in found[0].message
    assert "and 2 more" in found[0].message


def test_selective_recompute_without_moe_passes(tmp_path, monkeypatch):
    assert not _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("""
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = ["moe_act", "layernorm"]
    """)}, strict=True)


def test_the_section_off_overrides_the_model_switch(tmp_path, monkeypatch):
    """CommOverlapConfig.setup copies the section's False (or None, as False) over the model's True."""
    assert not _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("""
        cfg.model.overlap_moe_expert_parallel_comm = True
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "uniform"
        cfg.model.recompute_num_layers = 1
    """, overlap="None")}, strict=True)


def test_precision_comes_from_the_mixed_precision_recipe(tmp_path, monkeypatch):
    """The named recipe's bf16 is copied over the model's before comm_overlap's setup; without one the model's
    own fields count (GPTModelProvider's bf16 default is False in megatron-core's dataclass)."""
    assert not _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("")}, strict=True)
    found = _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("", precision="None")})
    assert len(found) == 1 and "only supported with bf16 or fp16 model" in found[0].message


def test_a_precision_name_offlint_cannot_build_is_only_possible(tmp_path, monkeypatch):
    files = {"recipe.py": _recipe("", precision='"my_own_mixed"')}
    assert not _findings(tmp_path, monkeypatch, files)
    found = _findings(tmp_path, monkeypatch, files, strict=True)
    assert [f.possible for f in found] == [True]


def test_energon_packing_turns_the_overlap_off(tmp_path, monkeypatch):
    assert not _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("""
        cfg.dataset = EnergonDatasetConfig(packing_buffer_size=64)
        cfg.model.moe_shared_expert_overlap = True
    """)}, strict=True)


def test_delay_wgrad_compute_without_the_overlap(tmp_path, monkeypatch):
    found = _findings(tmp_path, monkeypatch, {"recipe.py": _recipe("""
        cfg.comm_overlap.delay_wgrad_compute = True
    """, overlap="False")})
    assert len(found) == 1
    assert "must be enabled when enabling delay_wgrad_compute" in found[0].message


MLM_CASE = """
    MODEL_ARGS:
      --num-layers: 16
      --pipeline-model-parallel-size: 2
      {layout}
      --mtp-num-layers: 1
      --num-experts: 8
      --expert-model-parallel-size: 4
      --moe-token-dispatcher-type: alltoall
      --bf16: true
      --overlap-moe-expert-parallel-comm: true
"""


@pytest.mark.parametrize("layout, refused", [("--pipeline-model-parallel-layout: Et*3|(tt|)*6tmL", False),
                                             ("--pipeline-model-parallel-layout: Et*7|t*8mL", True),
                                             ("", True)])
def test_a_layout_gives_the_virtual_pipeline_size(tmp_path, monkeypatch, layout, refused):
    """Megatron-LM's validate_args (and TransformerConfig's layout block, before the overlap asserts) sets the
    virtual size to the layout's stages over PP when that is more than one."""
    case = "tests/functional_tests/test_cases/moe/gpt3_moe_ep_overlap/model_config.yaml"
    found = _findings(tmp_path, monkeypatch, {case: MLM_CASE.format(layout=layout)})
    assert [("virtual_pipeline_model_parallel_size must be specified" in f.message) for f in found] == \
        ([True] if refused else [])


@pytest.mark.parametrize("version, mtp, refused", [("0.16.1", 0, True), ("0.19.1", 0, False), ("0.20.0", 2, True),
                                                   ("0.16.1", 1, True), ("0.18.0", 1, False)])
def test_mtp_depth_by_release(tmp_path, monkeypatch, version, mtp, refused):
    """0 MTP layers is allowed from 0.19 (Megatron-LM acd0e358ae); one MTP layer needs PP > 1 before 0.18."""
    text = f"""
        from megatron.core.transformer.transformer_config import TransformerConfig


        def model_config():
            return TransformerConfig({MOE}, bf16=True, overlap_moe_expert_parallel_comm=True, mtp_num_layers={mtp})
    """
    assert bool(_findings(tmp_path, monkeypatch, {"recipe.py": text}, version=version)) is refused


@pytest.mark.parametrize("version, refused", [("0.16.1", True), ("0.20.0", False)])
def test_local_cuda_graphs_by_release(tmp_path, monkeypatch, version, refused):
    """Before 0.18 any graph but Transformer Engine's is refused beside the overlap; from 0.18 only TE graphs of
    moe or mlp."""
    text = f"""
        from megatron.core.transformer.transformer_config import TransformerConfig


        def model_config():
            return TransformerConfig({MOE}, bf16=True, overlap_moe_expert_parallel_comm=True,
                                     cuda_graph_impl="local")
    """
    found = _findings(tmp_path, monkeypatch, {"recipe.py": text}, version=version)
    assert [("CUDA graph scope on moe and mlp" in f.message) for f in found] == ([True] if refused else [])


def test_ncclep_with_expert_fc1_offloaded_from_0_19(tmp_path, monkeypatch):
    text = f"""
        from megatron.core.transformer.transformer_config import TransformerConfig


        def model_config():
            return TransformerConfig({MOE.replace("'alltoall'", "'flex'")}, bf16=True,
                                     overlap_moe_expert_parallel_comm=True, moe_flex_dispatcher_backend="ncclep",
                                     fine_grained_activation_offloading=True, offload_modules=["expert_fc1"])
    """
    found = _findings(tmp_path, monkeypatch, {"recipe.py": text}, version="0.19.1")
    assert len(found) == 1 and "with ncclep does not support offloading 'expert_fc1'" in found[0].message

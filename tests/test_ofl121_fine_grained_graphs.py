"""OFL121: fine-grained activation offloading beside CUDA graphs, as megatron-core's TransformerConfig refuses it
from 0.18 (CG-11 to CG-16), by release: 0.18 refuses every local graph, 0.19 allows local graphs of part of the MoE;
a graphed MoE, no warm-up steps, and a full-iteration graph without an in-flight limit are refused from 0.18.
The comparison with the real megatron-core (0.16.1, 0.19.2, and source trees) is tests/test_conformance.py's
(fine_grained_graph_configs)."""

from __future__ import annotations

import textwrap

from check_helpers import rule_findings


def _findings(tmp_path, monkeypatch, name: str, text: str, version="0.20.0", strict=False):
    return rule_findings(tmp_path, monkeypatch, "OFL121", name, text, version, strict)


def _recipe(body: str, model: str = "num_moe_experts=8") -> str:
    return textwrap.dedent(f"""
        def deepseek_pretrain_config():
            cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, {model}), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
            cfg.model.fine_grained_activation_offloading = True
    """) + textwrap.indent(textwrap.dedent(body), " " * 4) + "    return cfg\n"


LOCAL_EXPERTS = """
    cfg.model.offload_modules = ["expert_fc1"]
    cfg.model.cuda_graph_impl = "local"
    cfg.model.cuda_graph_modules = ["attn", "moe_router"]
"""


def test_local_graphs_of_part_of_the_moe_are_refused_in_0_18_and_allowed_from_0_19(tmp_path, monkeypatch):
    found = _findings(tmp_path, monkeypatch, "a.py", _recipe(LOCAL_EXPERTS), version="0.18.0")
    assert len(found) == 1 and not found[0].possible
    assert found[0].message.startswith("fine-grained activation offloading beside CUDA graphs (cuda_graph_impl="
                                       "'local', cuda_graph_modules=['attn', 'moe_router']): megatron-core's "
                                       "TransformerConfig asserts")
    assert "implementation or local CUDA graph implementation with full_iteration scope." in found[0].message
    for version in ("0.19.1", "0.20.0"):
        assert not _findings(tmp_path, monkeypatch, "b.py", _recipe(LOCAL_EXPERTS), version=version)
    # Before 0.18 megatron-core has none of these checks (the rule does not apply).
    assert not _findings(tmp_path, monkeypatch, "c.py", _recipe(LOCAL_EXPERTS), version="0.17.0")


def test_local_graphs_offloading_attention_or_capturing_whole_layers_are_refused(tmp_path, monkeypatch):
    attention = LOCAL_EXPERTS.replace('["expert_fc1"]', '["core_attn", "expert_fc1"]')
    (found,) = _findings(tmp_path, monkeypatch, "a.py", _recipe(attention))
    assert ("only supports offload_modules 'expert_fc1', 'moe_act', and 'fused_group_mlp'. Unsupported "
            "offload_modules: ['core_attn'].") in found.message
    whole = LOCAL_EXPERTS.replace('    cfg.model.cuda_graph_modules = ["attn", "moe_router"]\n', "")
    (found,) = _findings(tmp_path, monkeypatch, "b.py", _recipe(whole))
    assert "graphing whole layers" in found.message
    assert "is not supported with whole-layer CUDA graph capture." in found.message


def test_a_graphed_moe_and_no_warm_up_steps_are_refused_beside_transformer_engine_graphs(tmp_path, monkeypatch):
    graphed_moe = """
        cfg.model.offload_modules = ["expert_fc1"]
        cfg.model.cuda_graph_impl = "transformer_engine"
        cfg.model.cuda_graph_modules = ["attn", "moe"]
    """
    # a dropless MoE meets the per-layer graphs' own check first (NemotronH's shape; a round-4 recall seed)
    (found,) = _findings(tmp_path, monkeypatch, "a.py", _recipe(graphed_moe))
    assert '"moe cuda graph is only supported with drop-padding MoE."' in found.message
    drop_padding = "num_moe_experts=8, moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True"
    (found,) = _findings(tmp_path, monkeypatch, "a2.py", _recipe(graphed_moe, model=drop_padding))
    assert '"Token-drop MoE is temporarily not supported with activation offloading."' in found.message
    (found,) = _findings(tmp_path, monkeypatch, "a3.py", _recipe(graphed_moe, model="hidden_size=64"))
    assert '"moe cuda graph is only supported for MoE."' in found.message
    # DeepSeek-V3's GB200 performance recipe (Bridge 067f987): router and preprocessing graphed, one warm-up step
    deepseek = graphed_moe.replace('["attn", "moe"]', '["attn", "moe_router", "moe_preprocess"]') + \
        "    cfg.model.cuda_graph_warmup_steps = 1\n"
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe(deepseek))
    (found,) = _findings(tmp_path, monkeypatch, "c.py", _recipe(deepseek.replace("warmup_steps = 1",
                                                                                 "warmup_steps = 0")))
    assert '"cuda_graph_warmup_steps must be greater than 0 when enabling fine-grained' in found.message


def test_a_full_iteration_graph_needs_an_in_flight_limit_whose_default_is_none(tmp_path, monkeypatch):
    full = """
        cfg.model.offload_modules = ["core_attn"]
        cfg.model.cuda_graph_impl = "full_iteration"
    """
    (found,) = _findings(tmp_path, monkeypatch, "a.py", _recipe(full))
    assert found.message.startswith("fine-grained activation offloading beside CUDA graphs (cuda_graph_impl="
                                    "'full_iteration', graphing whole layers)")
    assert '"fine_grained_offloading_max_inflight_offloads must be a non-negative integer' in found.message
    assert not _findings(tmp_path, monkeypatch, "b.py",
                         _recipe(full + "    cfg.model.fine_grained_offloading_max_inflight_offloads = 0\n"))
    # the deprecated module name "full_iteration" with local graphs selects the full-iteration implementation
    migrated = full.replace('"full_iteration"', '"local"') + '    cfg.model.cuda_graph_modules = ["full_iteration"]\n'
    (found,) = _findings(tmp_path, monkeypatch, "c.py", _recipe(migrated))
    assert "cuda_graph_impl='full_iteration'" in found.message and "max_inflight_offloads" in found.message


def test_the_deprecated_switches_count_as_their_implementations(tmp_path, monkeypatch):
    legacy = """
        cfg.model.offload_modules = ["core_attn"]
        cfg.model.enable_cuda_graph = True
        cfg.model.cuda_graph_modules = ["attn"]
    """
    (found,) = _findings(tmp_path, monkeypatch, "a.py", _recipe(legacy, model="hidden_size=64"))
    assert "cuda_graph_impl='local'" in found.message and "Unsupported offload_modules: ['core_attn']" in found.message
    external = legacy.replace("enable_cuda_graph", "external_cuda_graph")
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe(external, model="hidden_size=64"))


def test_offloading_off_or_graphs_off_is_never_judged(tmp_path, monkeypatch):
    off = LOCAL_EXPERTS.replace('["expert_fc1"]', '["core_attn"]') + \
        "    cfg.model.fine_grained_activation_offloading = False\n"
    assert not _findings(tmp_path, monkeypatch, "a.py", _recipe(off), strict=True)
    no_graphs = 'cfg.model.offload_modules = ["core_attn"]\ncfg.model.cuda_graph_warmup_steps = 0\n'
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe(no_graphs), strict=True)


def test_an_unknown_input_is_possible_only_under_strict_unless_another_check_decides(tmp_path, monkeypatch):
    unknown = """
        cfg.model.offload_modules = pick_modules()
        cfg.model.cuda_graph_impl = "local"
        cfg.model.cuda_graph_modules = ["moe_router"]
    """
    assert not _findings(tmp_path, monkeypatch, "a.py", _recipe(unknown))
    (found,) = _findings(tmp_path, monkeypatch, "b.py", _recipe(unknown), strict=True)
    assert found.possible and "is not known" in found.message
    # a refusal that does not depend on the unknown list is certain: no warm-up steps
    (found,) = _findings(tmp_path, monkeypatch, "c.py",
                         _recipe(unknown + "    cfg.model.cuda_graph_warmup_steps = 0\n"))
    assert not found.possible and "cuda_graph_warmup_steps must be greater than 0" in found.message


def test_a_megatron_lm_launch(tmp_path, monkeypatch):
    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --fine-grained-activation-offloading "
              "--offload-modules core_attn --cuda-graph-impl transformer_engine --cuda-graph-warmup-steps {}\n")
    (found,) = _findings(tmp_path, monkeypatch, "a.sh", launch.format(0))
    assert "cuda_graph_warmup_steps must be greater than 0" in found.message
    assert not _findings(tmp_path, monkeypatch, "b.sh", launch.format(2))


def test_graphed_modules_offlint_cannot_read_leave_the_other_checks_decided(tmp_path, monkeypatch):
    # A Bridge override file whose recipe offlint does not see: the graphed modules are the recipe's, unknown.
    override = """
        model:
          fine_grained_activation_offloading: true
          offload_modules: [core_attn]
          cuda_graph_impl: transformer_engine
          cuda_graph_warmup_steps: {}
    """
    (found,) = _findings(tmp_path, monkeypatch, "a.yaml", override.format(0))
    assert not found.possible and found.message.startswith(
        "fine-grained activation offloading beside CUDA graphs (cuda_graph_impl='transformer_engine'): ")
    assert not _findings(tmp_path, monkeypatch, "b.yaml", override.format(1))
    # nor under --strict: a CUDA-graph setting the unseen recipe may set keeps its default there (engine._could_hold)
    assert not _findings(tmp_path, monkeypatch, "c.yaml", override.format(1), strict=True)


def test_a_deprecated_switch_decides_an_implementation_offlint_cannot_read(tmp_path, monkeypatch):
    # An override file turning external_cuda_graph on over a recipe offlint does not see: beside any implementation
    # but "none" TransformerConfig refuses the switch (CG-1), so the graph block checks Transformer Engine's graphs
    override = """
        model:
          external_cuda_graph: true
          fine_grained_activation_offloading: true
          offload_modules: [core_attn]
          cuda_graph_warmup_steps: 0
    """
    (found,) = _findings(tmp_path, monkeypatch, "legacy.yaml", override)
    assert not found.possible and found.message.startswith(
        "fine-grained activation offloading beside CUDA graphs (cuda_graph_impl='transformer_engine'): ")
    assert "cuda_graph_warmup_steps must be greater than 0" in found.message

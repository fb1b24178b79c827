"""OFL226: selective recompute of a module a CUDA graph covers and cannot replay (megatron-core's TransformerConfig,
CG-9), by release: the MoE router's Transformer Engine graph with "moe" recomputed; dropout and MoE input
jitter where the graph covers the recomputed module (the whole layer, or the module's own graph). A dropout a
Megatron Bridge recipe leaves unset is its provider class's default, which offlint does not read: not judged (the
Qwen3.5-VL functional recipe on Bridge 067f987 graphs attention and recomputes core_attn with its provider's 0.0).
The comparison with the real megatron-core is tests/test_conformance.py's (graph_recompute_configs)."""

from __future__ import annotations

import textwrap

from check_helpers import rule_findings


def _findings(tmp_path, monkeypatch, name: str, text: str, version="0.20.0", strict=False):
    return rule_findings(tmp_path, monkeypatch, "OFL226", name, text, version, strict)


def _recipe(model: str, body: str) -> str:
    return textwrap.dedent(f"""
        def llama_pretrain_config():
            cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, {model}), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
    """) + textwrap.indent(textwrap.dedent(body), " " * 4) + "    return cfg\n"


GRAPHED_ATTENTION = """
    cfg.model.cuda_graph_impl = "transformer_engine"
    cfg.model.cuda_graph_modules = ["attn"]
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["core_attn"]
"""


def test_recomputed_attention_in_an_attention_graph_with_dropout_is_refused(tmp_path, monkeypatch):
    found = _findings(tmp_path, monkeypatch, "recipe.py", _recipe("attention_dropout=0.1", GRAPHED_ATTENTION))
    assert len(found) == 1 and not found[0].possible
    assert found[0].message.startswith("selective recompute of 'core_attn' recomputed with attention_dropout=0.1 "
                                       "beside CUDA graphs (cuda_graph_impl='transformer_engine', "
                                       "cuda_graph_modules=['attn'])")
    assert '"attention dropout is not supported with graphed attention recomputation."' in found[0].message


def test_no_dropout_or_a_graph_elsewhere_passes(tmp_path, monkeypatch):
    assert not _findings(tmp_path, monkeypatch, "a.py", _recipe("attention_dropout=0.0", GRAPHED_ATTENTION))
    elsewhere = GRAPHED_ATTENTION.replace('["attn"]', '["mlp"]')
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe("attention_dropout=0.1", elsewhere))


def test_a_dropout_a_bridge_recipe_leaves_unset_is_not_judged_even_under_strict(tmp_path, monkeypatch):
    # megatron-core's default is 0.1, but a Bridge provider class gives its own (0.0 in most), unread by offlint
    assert not _findings(tmp_path, monkeypatch, "recipe.py", _recipe("hidden_size=64", GRAPHED_ATTENTION),
                         strict=True)


def test_whole_layer_graphs_cover_every_module_and_differ_by_release(tmp_path, monkeypatch):
    # From 0.18: empty cuda_graph_modules graphs the whole layer; hidden dropout meets the recomputed MLP there.
    whole = """
        cfg.model.cuda_graph_impl = "local"
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = ["mlp"]
    """
    found = _findings(tmp_path, monkeypatch, "a.py", _recipe("hidden_dropout=0.1", whole))
    assert len(found) == 1 and "graphing whole layers" in found[0].message
    assert '"hidden dropout is not supported with graphed MLP/MoE recomputation."' in found[0].message
    # Before 0.18 the scope decides: an attention scope leaves the MLP outside the graph.
    scoped = whole + '    cfg.model.cuda_graph_scope = ["attn"]\n'
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe("hidden_dropout=0.1", scoped), version="0.16.1")
    assert _findings(tmp_path, monkeypatch, "c.py", _recipe("hidden_dropout=0.1", whole), version="0.16.1")


def test_the_deprecated_switch_and_module_name_count_as_their_implementations(tmp_path, monkeypatch):
    legacy = """
        cfg.model.enable_cuda_graph = True
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = ["core_attn"]
    """
    assert _findings(tmp_path, monkeypatch, "a.py", _recipe("attention_dropout=0.1", legacy))
    migrated = """
        cfg.model.cuda_graph_modules = ["full_iteration"]
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = ["core_attn"]
    """  # (0.18+: the module name selects cuda_graph_impl="full_iteration", even with the implementation unset)
    found = _findings(tmp_path, monkeypatch, "b.py", _recipe("attention_dropout=0.1", migrated))
    assert len(found) == 1 and "cuda_graph_impl='full_iteration'" in found[0].message
    assert not _findings(tmp_path, monkeypatch, "c.py", _recipe("attention_dropout=0.1", migrated.replace(
        '["full_iteration"]', '[]')))  # no graph at all


def test_the_moe_router_transformer_engine_graph_with_moe_recomputed_is_refused(tmp_path, monkeypatch):
    moe = "num_moe_experts=8, attention_dropout=0.0, hidden_dropout=0.0"
    body = """
        cfg.model.cuda_graph_impl = "transformer_engine"
        cfg.model.cuda_graph_modules = ["moe_router", "moe_preprocess"]
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = ["moe"]
    """
    found = _findings(tmp_path, monkeypatch, "a.py", _recipe(moe, body))
    assert len(found) == 1 and '"moe recompute is not supported with moe_router CUDA graph with: ' in found[0].message
    assert not _findings(tmp_path, monkeypatch, "b.py", _recipe(moe, body.replace("transformer_engine", "local")))


def test_a_megatron_lm_launch_takes_the_flags_default_dropout(tmp_path, monkeypatch):
    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --cuda-graph-impl full_iteration "
              "--recompute-granularity selective --recompute-modules core_attn")
    found = _findings(tmp_path, monkeypatch, "a.sh", launch + "\n")
    assert len(found) == 1 and "attention_dropout=0.1" in found[0].message  # argparse's default
    assert not _findings(tmp_path, monkeypatch, "b.sh", launch + " --attention-dropout 0.0\n")


def test_a_value_offlint_cannot_read_is_possible_only(tmp_path, monkeypatch):
    body = GRAPHED_ATTENTION.replace('["attn"]', "graphed_modules()")
    assert not _findings(tmp_path, monkeypatch, "a.py", _recipe("attention_dropout=0.1", body))
    found = _findings(tmp_path, monkeypatch, "b.py", _recipe("attention_dropout=0.1", body), strict=True)
    assert len(found) == 1 and found[0].possible


def test_recompute_modules_left_unset_are_megatron_cores_core_attn(tmp_path, monkeypatch):
    """TransformerConfig.__post_init__ makes an unset recompute_modules ["core_attn"] before its graph block (every
    release), so selective recompute beside whole-layer graphs meets attention dropout without naming a module
    (found on a probe at Megatron-LM PR 6310's head)."""
    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --cuda-graph-impl local "
              "--recompute-granularity selective")
    found = _findings(tmp_path, monkeypatch, "a.sh", launch + "\n")
    assert len(found) == 1 and "'core_attn' recomputed with attention_dropout=0.1" in found[0].message
    assert not _findings(tmp_path, monkeypatch, "b.sh", launch + " --recompute-modules layernorm\n")

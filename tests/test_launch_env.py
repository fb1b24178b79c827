"""Issue 14, D1 and two message defects, in the shapes Megatron Bridge writes them (fixtures/launch_env).

OFL301 must never advise `expandable_segments:True` where it breaks the run (NCCL user buffers) or where the
project opted out on purpose (Megatron-FSDP), and under CUDA graphs its fix must name NCCL_GRAPH_REGISTER=0,
without which megatron-core asserts. OFL208 names only the settings that are really ignored; OFL213 reports
`recompute_modules` without selective recompute, and OFL002 says so instead of claiming a crash.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check

TREE = Path(__file__).resolve().parent.parent / "fixtures" / "launch_env"


@pytest.fixture(scope="module")
def findings():
    result = check([str(TREE)], CheckOptions(mcore_version="0.20.0", root=TREE, strict=True))
    assert not result.errors, result.errors
    return result.findings


def of(findings, code: str, unit: str, possible: bool | None = None):
    return [f for f in findings if f.code == code and f.unit == unit
            and (possible is None or f.possible == possible)]


@pytest.mark.parametrize("unit", ["moe_pretrain_8gpu_gb300_bf16_config",  # ddp.nccl_ub from a shared helper
                                  "dense_pretrain_64gpu_gb200_bf16_config",  # Megatron-FSDP
                                  "moe_pretrain_8gpu_b200_bf16_config"])  # graphs, both variables set
def test_no_allocator_advice_where_it_breaks_or_is_set(findings, unit):
    assert of(findings, "OFL301", unit) == []  # not even a possible finding under --strict: the values are known


def test_cuda_graphs_the_fix_names_the_partner_variable(findings):
    (finding,) = of(findings, "OFL301", "moe_pretrain_8gpu_h100_bf16_config")
    assert not finding.possible
    assert "NCCL_GRAPH_REGISTER=0" in finding.fix and "expandable_segments:True" in finding.fix
    assert "cuda_graph_impl='transformer_engine'" in finding.message
    # It points where the recipe defines its environment, not at the graph helper it consulted.
    assert (Path(finding.location.path).name, finding.location.line) == ("moe.py", 24)


def test_without_graphs_or_with_the_partner_already_set_the_fix_is_the_allocator_option_alone(findings):
    (plain,) = of(findings, "OFL301", "dense_pretrain_8gpu_h100_bf16_config")
    assert "max_split_size_mb:256" in plain.message
    (partnered,) = of(findings, "OFL301", "dense_pretrain_8gpu_b200_bf16_config")  # local graphs, int 0
    for finding in (plain, partnered):
        assert not finding.possible
        assert "expandable_segments:True" in finding.fix and "NCCL_GRAPH_REGISTER" not in finding.fix


def test_every_allocator_advice_is_safe_for_its_unit(findings):
    """Over the whole tree: no OFL301 for a unit with nccl_ub or Megatron-FSDP, and every one under graphs
    names the partner variable."""
    graph_units = {"moe_pretrain_8gpu_h100_bf16_config"}
    reported = {f.unit for f in findings if f.code == "OFL301"}
    assert reported == {"moe_pretrain_8gpu_h100_bf16_config", "dense_pretrain_8gpu_h100_bf16_config",
                        "dense_pretrain_8gpu_b200_bf16_config"}
    for finding in (f for f in findings if f.code == "OFL301"):
        assert ("NCCL_GRAPH_REGISTER=0" in finding.fix) == (finding.unit in graph_units)


def test_megatron_lm_flags_nccl_user_buffers_and_graphs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "pretrain.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --use-nccl-ub\n"
                      "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --cuda-graph-impl local\n")
    result = check([script.name], CheckOptions(select=["OFL301"], mcore_version="0.16.1", root=tmp_path,
                                               strict=True))
    (finding,) = result.findings
    assert finding.location.line == 2 and "NCCL_GRAPH_REGISTER=0" in finding.fix


def test_precision_aware_message_lists_only_ignored_settings(findings):
    (finding,) = [f for f in findings if f.code == "OFL208" and not f.possible]
    assert "exp_avg_dtype=bf16, exp_avg_sq_dtype=bf16, main_params_dtype=fp16:" in finding.message
    assert "store_param_remainders" not in finding.message  # True, the default: what the fix says to keep


def test_recompute_modules_without_selective(findings):
    (finding,) = of(findings, "OFL213", "moe_pretrain_config_gb200", possible=False)
    assert "recompute_granularity is None" in finding.message and "layernorm, moe_act" in finding.message
    assert (Path(finding.location.path).name, finding.location.line) == ("moe_workloads.py", 6)
    assert of(findings, "OFL213", "moe_pretrain_config_b200") == []


def _override_findings(tmp_path, text: str):
    path = tmp_path / "override.yaml"
    path.write_text(text)
    result = check([str(path)], CheckOptions(select=["OFL002"], mcore_version="0.20.0", root=tmp_path))
    assert not result.errors
    return result.findings


def test_scalar_recompute_modules_message_when_megatron_core_never_reads_it(tmp_path):
    (inert,) = _override_findings(tmp_path, "model:\n  recompute_granularity: full\n  recompute_method: block\n"
                                            "  recompute_num_layers: 2\n  recompute_modules: core_attn\n")
    assert inert.severity.value == "warning"
    assert "does nothing now" in inert.message and "iterates" not in inert.message
    (read,) = _override_findings(tmp_path, "model:\n  recompute_granularity: selective\n"
                                           "  recompute_modules: core_attn\n")
    assert read.severity.value == "error" and "iterates the characters" in read.message

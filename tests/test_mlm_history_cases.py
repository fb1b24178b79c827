"""The configuration mistakes Megatron-LM's history fixed in its functional test cases
(benchmarks/triage/megatron-lm-history.md), in the shapes they took: each is reported in a model_config.yaml of
our own, and the fixed form is not. The fixtures are ours; only the shapes follow those commits."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

BASE = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
{env}MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 256
  --num-attention-heads: 4
  --micro-batch-size: 1
  --global-batch-size: 8
  --train-iters: 20
  --bf16: true
  --use-distributed-optimizer: true
{args}TEST_TYPE: regular
"""

# name: (code, mistake's env, mistake's args, fixed env, fixed args)
CASES = {
    # layer-level offloading of more layers than the model has, with full recompute (070af04fde)
    "offload_recompute": ("OFL103", "", "  --cpu-offloading: true\n  --cpu-offloading-num-layers: 6\n"
                          "  --recompute-granularity: full\n  --recompute-method: uniform\n", "", ""),
    # offload modules as one comma-joined word: the harness splits only a [ ] value (25daceb419)
    "comma_modules": ("OFL107", "  NVTE_CPU_OFFLOAD_V1: 1\n",
                      "  --fine-grained-activation-offloading: true\n  --offload-modules: \"core_attn,attn_proj\"\n",
                      "  NVTE_CPU_OFFLOAD_V1: 1\n",
                      "  --fine-grained-activation-offloading: true\n  --offload-modules: \"[core_attn attn_proj]\"\n"),
    # fine-grained offloading without NVTE_CPU_OFFLOAD_V1 (9423c6b3b5, 1844c7d0a2)
    "nvte_env": ("OFL112", "", "  --fine-grained-activation-offloading: true\n  --offload-modules: \"[core_attn]\"\n",
                 "  NVTE_CPU_OFFLOAD_V1: 1\n",
                 "  --fine-grained-activation-offloading: true\n  --offload-modules: \"[core_attn]\"\n"),
    # expandable segments next to NCCL user buffers (5034f9b734)
    "nccl_ub": ("OFL118", "  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n", "  --use-nccl-ub: true\n",
                "", "  --use-nccl-ub: true\n"),
    # local CUDA graphs with the scope "full" meant as full_iteration (d7ca9a4e3c)
    "local_full": ("OFL215", "", "  --cuda-graph-impl: local\n  --cuda-graph-scope: full\n", "",
                   "  --cuda-graph-impl: local\n  --cuda-graph-scope: full_iteration\n"),
}


def _findings(tmp_path, text: str, code: str, version: str):
    path = tmp_path / "tests" / "functional_tests" / "test_cases" / "case" / "model_config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    result = check([str(tmp_path)], CheckOptions(mcore_version=version, root=tmp_path, select=[code], cache=False))
    assert not result.errors, result.errors
    return [f for f in result.findings if not f.possible]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_mistake_is_reported_and_its_fix_is_not(tmp_path, name):
    code, env, args, fixed_env, fixed_args = CASES[name]
    version = "0.17.0"  # OFL118 is an error before 0.18; the others hold from 0.16 on
    assert [f.code for f in _findings(tmp_path, BASE.format(env=env, args=args), code, version)] == [code]
    assert _findings(tmp_path, BASE.format(env=fixed_env, args=fixed_args), code, version) == []


def test_expandable_segments_with_nccl_ub_is_an_error_before_0_18_and_a_warning_after(tmp_path):
    """From 0.18 megatron-core refuses the pair only on torch older than 2.11, which offlint cannot see."""
    text = BASE.format(env="  PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold:0.8,expandable_segments:True\n",
                       args="  --use-nccl-ub: true\n")
    assert [f.severity.value for f in _findings(tmp_path, text, "OFL118", "0.17.0")] == ["error"]
    assert [f.severity.value for f in _findings(tmp_path, text, "OFL118", "0.20.0")] == ["warning"]


def test_a_joined_offload_module_name_is_quoted_in_the_message(tmp_path):
    """`[core_attn,attn_proj]` would read as two allowed names; the message shows the one name megatron-core gets."""
    _, env, args, _, _ = CASES["comma_modules"]
    (finding,) = _findings(tmp_path, BASE.format(env=env, args=args), "OFL107", "0.17.0")
    assert "offload_modules has ['core_attn,attn_proj']" in finding.message, finding.message

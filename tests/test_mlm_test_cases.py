"""Megatron-LM's functional test cases (`MODEL_ARGS` / `ENV_VARS` in a model_config.yaml) are read as the
harness runs them (sources/mlm_test_cases.py), and a Megatron-LM command's flags that offlint does not map leave
their keys unknown instead of taking argparse defaults.

On Megatron-LM d98e8a6 the 333 test cases gave 0 units before; read, 7 of them were reported by OFL218 until the
pipeline flags they use (`--pipeline-model-parallel-layout`, `--account-for-*-in-pipeline-split`) were read: CI
runs them, so those findings were false. The fixtures are our own, in the shapes those files take.
"""

from __future__ import annotations

from pathlib import Path

from offlint.api import CheckOptions, check
from offlint.resolve import resolve
from offlint.sources import read_source
from offlint.types import Unknown
from offlint.versions import parse_version

V = parse_version("0.20.0")

CASE = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
  NVTE_CPU_OFFLOAD_V1: 1
  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True
  DATA_HOME: ${DATA_PATH}/text
MODEL_ARGS:
  --num-layers: 14
  --hidden-size: 512
  --num-attention-heads: 8
  --pipeline-model-parallel-size: 4
  --pipeline-model-parallel-layout: Et*2|(tt|)*5t|tmL
  --recompute-granularity: selective
  --recompute-modules: "[layernorm mlp moe_act]"
  --fine-grained-activation-offloading: true
  --offload-modules: "[expert_fc1 attn_norm]"
  --moe-layer-freq: ([0]*3+[1]*11)
  --data-path: ${DATA_PATH}/text/the_pile/shard00
  --micro-batch-size: 1
  --train-iters: 50
  --bf16: true
  --empty-value: ""
TEST_TYPE: regular
"""


def _unit(text: str, name: str = "tests/functional_tests/test_cases/moe/case_a/model_config.yaml"):
    (unit,) = read_source(name, "yaml", text)
    return unit


def test_model_args_become_the_flags_the_harness_passes():
    unit = _unit(CASE)
    values = {a.key: a.value for a in unit.all_assignments()}
    assert unit.name == "case_a (Megatron-LM functional test)" and unit.launches_training
    assert values["model.pipeline_model_parallel_layout"] == "Et*2|(tt|)*5t|tmL"  # one quoted argument
    assert values["model.recompute_modules"] == ["layernorm", "mlp", "moe_act"]  # brackets dropped, split
    assert values["model.offload_modules"] == ["expert_fc1", "attn_norm"]
    assert values["model.fine_grained_activation_offloading"] is True  # `true`: the bare flag
    assert values["env.NVTE_CPU_OFFLOAD_V1"] == "1"
    assert isinstance(values["env.DATA_HOME"], Unknown)  # substituted from the CI job's environment
    layout = next(a for a in unit.all_assignments() if a.key == "model.pipeline_model_parallel_layout")
    assert (layout.location.line, layout.location.col) == (11, 3)


def test_the_environment_outside_the_file_is_unknown():
    resolved = resolve(_unit(CASE.replace("  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n", "")), V)
    assert resolved.get("env.PYTORCH_CUDA_ALLOC_CONF").state == "unknown"  # the CI job may set it
    assert resolved.get("env.NVTE_CPU_OFFLOAD_V1").value == "1"


def test_an_inference_test_case_does_not_train():
    assert not _unit(CASE.replace("TEST_TYPE: regular", "MODE: inference\nTEST_TYPE: frozen-start")).launches_training


def _checked(tmp_path, cases: dict[str, str], version: str, code: str) -> list:
    """`code`'s findings on functional test cases named by `cases` (name -> model_config.yaml text)."""
    for name, text in cases.items():
        path = tmp_path / "tests" / "functional_tests" / "test_cases" / name / "model_config.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    result = check([str(tmp_path)], CheckOptions(mcore_version=version, root=tmp_path, select=[code], cache=False))
    assert not result.errors, result.errors
    return result.findings


def test_the_deprecated_full_graph_scope_advice_follows_whether_the_case_trains(tmp_path):
    """OFL215 says 'full' with the local implementation gives per-layer graphs, not one full-iteration graph: for a
    training case a full-iteration graph is `full_iteration`; an inference case captures per-layer graphs, which []
    gives, and full_iteration there captures none before 0.18 (Megatron-LM's inference throughput tests took that
    advice)."""
    graphs = "  --cuda-graph-impl: local\n  --cuda-graph-scope: full\n"
    cases = {"training": CASE.replace("  --bf16: true\n", "  --bf16: true\n" + graphs),
             "inference": CASE.replace("  --bf16: true\n", "  --bf16: true\n" + graphs).replace(
                 "TEST_TYPE: regular", "MODE: inference\nTEST_TYPE: frozen-start")}
    found = {Path(f.location.path).parent.name: f for f in _checked(tmp_path, cases, "0.16.1", "OFL215")}
    assert sorted(found) == ["inference", "training"]
    assert "a full-iteration graph is cuda_graph_scope='full_iteration'" in found["training"].message
    assert "this run does not train" in found["inference"].message
    assert "'full_iteration'" not in found["inference"].message
    # (the inference case does what inference wants, only its spelling is deprecated: info, not a warning; a
    # helper's sweep, session 68, found two forks' inference test cases reported as warnings)
    assert (found["training"].severity.value, found["inference"].severity.value) == ("warning", "info")


def test_a_nemo_test_case_is_not_a_megatron_lm_command():
    assert read_source("x/model_config.yaml", "yaml", "MODEL_ARGS:\n  model.config.bias_activation_fusion: false\n"
                       "TEST_TYPE: regular\n") == []


def test_pipeline_flags_decide_the_split(tmp_path):
    """A layout, or the embedding and loss counted in the split, make an uneven layer count valid: no OFL218.
    Without either, 14 layers over PP4 is refused."""
    cases = {
        "layout": CASE,
        "counted": CASE.replace("  --pipeline-model-parallel-layout: Et*2|(tt|)*5t|tmL\n", "").replace(
            "--num-layers: 14", "--num-layers: 6").replace(
            "  --bf16: true\n", "  --bf16: true\n  --account-for-embedding-in-pipeline-split: true\n"
                                "  --account-for-loss-in-pipeline-split: true\n"),
        "uneven": CASE.replace("  --pipeline-model-parallel-layout: Et*2|(tt|)*5t|tmL\n", ""),
    }
    assert [Path(f.location.path).parent.name for f in _checked(tmp_path, cases, "0.20.0", "OFL218")] == ["uneven"]


def test_a_flag_offlint_does_not_read_leaves_its_key_unknown():
    """`--no-gradient-accumulation-fusion` is not mapped: model.gradient_accumulation_fusion must not take
    the argparse default (True) as if the flag were absent."""
    text = "#!/bin/bash\ntorchrun pretrain_gpt.py --num-layers 4 --no-gradient-accumulation-fusion --bf16\n"
    (unit,) = read_source("run.sh", "shell", text)
    assert "--no-gradient-accumulation-fusion" in unit.unread_flags
    resolved = resolve(unit, V)
    value = resolved.get("model.gradient_accumulation_fusion")
    assert value.state == "unknown" and "--no-gradient-accumulation-fusion" in str(value.value)
    assert resolved.get("model.num_layers").value == 4
    assert resolved.get("model.cpu_offloading").state == "default"  # untouched keys keep argparse defaults


def test_outside_megatron_lm_s_test_cases_a_value_the_harness_would_split_or_join_is_unknown():
    """A MoE model zoo keeps `MODEL_ARGS` files under model_configs/ and runs them with its own script, which joins
    each flag and value with a space and expands the line unquoted: `--recompute-modules: mla_up_proj mlp` gives two
    valid names there, where Megatron-LM's harness would pass one argument (a false OFL222, sweep 38). Outside
    tests/functional_tests/test_cases, only a value that is one plain word either way is read."""
    unit = _unit(CASE, "model_configs/benchmarking/case_a.yaml")
    values = {a.key: a.value for a in unit.all_assignments()}
    assert isinstance(values["model.recompute_modules"], Unknown)  # `[layernorm mlp moe_act]`: its runner's
    assert isinstance(values["model.offload_modules"], Unknown)
    assert values["model.pipeline_model_parallel_layout"] == "Et*2|(tt|)*5t|tmL"  # one word either way
    assert values["model.num_layers"] == 14 and values["model.fine_grained_activation_offloading"] is True
    spaced = _unit(CASE.replace('"[layernorm mlp moe_act]"', "mla_up_proj mlp"), "model_configs/case_a.yaml")
    assert isinstance({a.key: a.value for a in spaced.all_assignments()}["model.recompute_modules"], Unknown)

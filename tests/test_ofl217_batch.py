"""OFL217: the global batch size against the data-parallel ranks a recipe runs on (megatron-core's
ConstantNumMicroBatchesCalculator), judged at the GPU count the name gives and where no GPU count runs it. Bridge
067f987's Qwen3.5-VL H100 recipes are the shape: `cfg.train.global_batch_size = 36` with micro 4 over DP4."""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json

HEADER = """
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig, TrainingConfig


"""


def _recipe(name: str, gbs: int, mbs: int, tp: int = 2, pp: int = 1, extra: str = "") -> str:
    return (f"def {name}():\n"
            f"    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, hidden_size=1024, num_attention_heads=8),\n"
            f"                          optimizer=OptimizerConfig(bf16=True), ddp=DistributedDataParallelConfig(),\n"
            f"                          train=TrainingConfig())\n"
            f"    cfg.model.tensor_model_parallel_size = {tp}\n"
            f"    cfg.model.pipeline_model_parallel_size = {pp}\n"
            f"    cfg.train.global_batch_size = {gbs}\n"
            f"    cfg.train.micro_batch_size = {mbs}\n{extra}"
            f"    return cfg\n\n\n")


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    for folder in ("recipes", "perf_recipes"):
        (tmp_path / "bridge" / folder).mkdir(parents=True)
        (tmp_path / "bridge" / folder / "__init__.py").write_text("")
    (tmp_path / "bridge" / "__init__.py").write_text("")
    return tmp_path


def _refused(tree, text: str, folder: str = "recipes") -> dict[str, str]:
    (tree / "bridge" / folder / "vl.py").write_text(HEADER + text)
    return {f["unit"]: f["message"] for f in check_json(tree, "--no-cache") if f["code"] == "OFL217"}


def test_the_batch_at_the_gpu_count_the_name_gives(tree):
    found = _refused(tree, _recipe("vl_sft_8gpu_h100_bf16_config", 36, 4) + _recipe("vl_sft_16gpu_h100_bf16_config", 32, 4)
                     + _recipe("vl_sft_config", 36, 4))
    assert list(found) == ["vl_sft_8gpu_h100_bf16_config"]  # DP8 x 4 divides 32; no count: any DP that divides
    assert ('"global batch size (36) is not divisible by micro batch size (4) times data parallel size (4)"'
            in found["vl_sft_8gpu_h100_bf16_config"])


def test_decreasing_the_batch_leaves_only_too_few_micro_batches(tree):
    decrease = "    cfg.train.decrease_batch_size_if_needed = True\n"
    found = _refused(tree, _recipe("a_8gpu_h100_bf16_config", 36, 4, extra=decrease)
                     + _recipe("b_64gpu_h100_bf16_config", 36, 4, extra=decrease))
    assert list(found) == ["b_64gpu_h100_bf16_config"]  # 36 rounds to 32 at DP4; at DP32 it rounds to 0
    assert "number of microbatches should be at least 1" in found["b_64gpu_h100_bf16_config"]


def test_not_judged_with_a_ramp_up_an_unknown_size_or_in_a_performance_recipe(tree):
    rampup = "    cfg.train.rampup_batch_size = [16, 8, 1000]\n"
    unknown = "    import os\n    cfg.train.global_batch_size = int(os.environ['GBS'])\n"
    assert _refused(tree, _recipe("a_8gpu_h100_bf16_config", 36, 4, extra=rampup)
                    + _recipe("b_8gpu_h100_bf16_config", 36, 4, extra=unknown)) == {}
    # the performance launcher rescales the global batch size with the launch's data-parallel size
    assert _refused(tree, _recipe("c_8gpu_h100_bf16_config", 36, 4), folder="perf_recipes") == {}


OWN_CONFIG = """
class ConfigContainer:
    def validate(self):
        eval_dp_product = self.validation.eval_micro_batch_size * self.data_parallel_size
        assert self.validation.eval_global_batch_size % eval_dp_product == 0, "eval_global_batch_size must divide"
"""


def _with_own_bridge(tree, config: str) -> None:
    folder = tree / "megatron" / "bridge" / "training"
    folder.mkdir(parents=True)
    for package in (tree / "megatron", tree / "megatron" / "bridge", folder):
        (package / "__init__.py").write_text("")
    (folder / "config.py").write_text(config)


def test_the_evaluation_batch_check_is_named_where_the_trees_bridge_makes_it(tree):
    """Bridge's ConfigContainer.validate divides the evaluation batch sizes (from 6c78fba79) and stops the job before
    the calculator does: the message names the tree's line. A fork without that check (GeodesicResearch's
    geodesic-megatron) stops only at megatron-core's calculator: no clause there."""
    _with_own_bridge(tree, OWN_CONFIG)
    found = _refused(tree, _recipe("a_8gpu_h100_bf16_config", 36, 4))
    assert found["a_8gpu_h100_bf16_config"].endswith(
        "when training starts; Megatron Bridge's ConfigContainer.validate (megatron/bridge/training/config.py:5) makes "
        "the same division of the evaluation batch sizes and, where those are left unset (they then default to "
        "these), stops the job first")


def test_no_evaluation_batch_clause_where_the_trees_bridge_lacks_the_check(tree):
    _with_own_bridge(tree, OWN_CONFIG.replace("eval_global_batch_size %", "eval_global_batch_size >"))
    found = _refused(tree, _recipe("a_8gpu_h100_bf16_config", 36, 4))
    assert found["a_8gpu_h100_bf16_config"].endswith("times data parallel size (4)\" when training starts")


MOE_DEFAULT = """
def _set_moe_expert_tensor_parallel_default(config):
    if config.expert_tensor_parallel_size is None and config.expert_model_parallel_size > 1:
        config.expert_tensor_parallel_size = 1
"""


def test_an_unset_expert_tp_is_the_trees_bridge_default(tree):
    """Megatron Bridge defaults an unset expert tensor parallel size to 1 under expert parallelism since July 2026
    (6f2f546ef, models/transformer_config.py); megatron-core, and the Bridge forks from before it (LLaVA-OneVision-2),
    take TP's. TP4 with EP32 then tiles 32 GPUs (8 data-parallel ranks, GBS 32 holds MBS 2) or 128 (32 ranks: it
    does not). Read from the tree's Bridge; a tree without one keeps the fewest, where both may hold."""
    moe = "    cfg.model.expert_model_parallel_size = 32\n"
    recipe = _recipe("vl_moe_sft_config", 32, 2, tp=4, extra=moe)
    assert _refused(tree, recipe) == {}  # no Bridge of the tree's own: the fewest GPUs, 32
    _with_own_bridge(tree, OWN_CONFIG)
    (tree / "megatron" / "bridge" / "models").mkdir()
    (tree / "megatron" / "bridge" / "models" / "__init__.py").write_text("")
    (tree / "megatron" / "bridge" / "models" / "transformer_config.py").write_text("def finalize(config):\n    pass\n")
    found = _refused(tree, recipe)
    assert "(128: TP4 x PP1 x CP1, ETP4 x EP32 (expert TP unset: TP's 4))" in found["vl_moe_sft_config"]
    (tree / "megatron" / "bridge" / "models" / "transformer_config.py").write_text(MOE_DEFAULT)
    assert _refused(tree, recipe) == {}


def test_what_the_trees_bridge_says_is_not_listed_among_the_settings(tree):
    """The tree's checks are noted on a unit as keys (bridge_checks.NOT_CONFIG_FIELDS); a finding's related
    locations had listed "bridge_eval_batch_check = ConfigContainer(...)" beside the batch sizes it read."""
    _with_own_bridge(tree, OWN_CONFIG)
    (tree / "bridge" / "recipes" / "vl.py").write_text(HEADER + _recipe("a_8gpu_h100_bf16_config", 36, 4))
    finding = next(f for f in check_json(tree, "--no-cache") if f["code"] == "OFL217")
    notes = [r["note"] for r in finding["related"]]
    assert any(note.startswith("train.micro_batch_size = 4") for note in notes)
    assert not any(note.startswith("bridge_") for note in notes), notes

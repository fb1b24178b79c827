"""OFL122: the optimizer's lower-precision dtypes without the precision-aware optimizer, which megatron-core's
OptimizerConfig refuses (OC-8: main_grads_dtype, main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype must each be fp32
without it, checked in that order). The comparison with the real megatron-core is tests/test_conformance.py's
(optimizer_dtype_configs)."""

from __future__ import annotations

from check_helpers import rule_findings


def _findings(tmp_path, monkeypatch, name: str, text: str, strict=False):
    return rule_findings(tmp_path, monkeypatch, "OFL122", name, text, strict=strict)


# The shape of Bridge 067f987's moonlight_16b and nemotron_omni recipes: a base with the precision-aware optimizer and
# bf16 moments, and a variant built on it.
RECIPES = """
    import torch


    def moonlight_16b_pretrain_config():
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                              ddp=DistributedDataParallelConfig())
        cfg.optimizer.use_distributed_optimizer = True
        cfg.optimizer.use_precision_aware_optimizer = True
        cfg.optimizer.main_params_dtype = torch.float32
        cfg.optimizer.main_grads_dtype = torch.bfloat16
        cfg.optimizer.exp_avg_dtype = torch.bfloat16
        cfg.optimizer.exp_avg_sq_dtype = torch.bfloat16
        return cfg


    def moonlight_16b_offload_config():
        cfg = moonlight_16b_pretrain_config()
        cfg.optimizer.optimizer_cpu_offload = True
        cfg.optimizer.use_precision_aware_optimizer = False
        return cfg
"""


def test_a_variant_that_turns_the_precision_aware_optimizer_off_keeps_its_base_recipes_dtypes(tmp_path, monkeypatch):
    (found,) = _findings(tmp_path, monkeypatch, "moonlight.py", RECIPES)
    assert not found.possible and found.location.line == 11  # the first dtype megatron-core checks: main_grads_dtype
    assert found.message == ("main_grads_dtype=torch.bfloat16 without the precision-aware optimizer "
                             "(use_precision_aware_optimizer=False): megatron-core's OptimizerConfig asserts "
                             "\"main_grads_dtype can only be fp32 when not using precision-aware optimizer\" when it "
                             "builds the config")


def test_the_first_dtype_that_is_not_fp32_is_named_even_after_one_offlint_cannot_read(tmp_path, monkeypatch):
    recipe = """
        def recipe(grads_dtype):
            cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
            cfg.optimizer.main_grads_dtype = grads_dtype
            cfg.optimizer.exp_avg_sq_dtype = torch.float16
            return cfg
    """
    (found,) = _findings(tmp_path, monkeypatch, "a.py", recipe)
    assert not found.possible and found.message.startswith("exp_avg_sq_dtype=torch.float16 without")
    assert found.location.line == 6


def test_an_unknown_switch_is_possible_only_under_strict(tmp_path, monkeypatch):
    recipe = """
        def recipe(aware):
            cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
            cfg.optimizer.use_precision_aware_optimizer = aware
            cfg.optimizer.exp_avg_dtype = torch.bfloat16
            return cfg
    """
    assert not _findings(tmp_path, monkeypatch, "a.py", recipe)
    (found,) = _findings(tmp_path, monkeypatch, "b.py", recipe, strict=True)
    assert found.possible and "use_precision_aware_optimizer" in found.message


def test_dtypes_an_unseen_recipe_may_set_keep_fp32_under_strict(tmp_path, monkeypatch):
    # An override file whose recipe offlint does not see, turning the precision-aware optimizer off: the recipe's
    # dtypes are the precision-aware optimizer's settings, fp32 unless code offlint reads sets them (engine._could_hold)
    override = "optimizer:\n  use_precision_aware_optimizer: false\n"
    assert not _findings(tmp_path, monkeypatch, "a.yaml", override, strict=True)
    (found,) = _findings(tmp_path, monkeypatch, "b.yaml", override + "  exp_avg_dtype: bf16\n")
    assert found.message.startswith("exp_avg_dtype=bf16 without")


def test_a_megatron_lm_launch(tmp_path, monkeypatch):
    launch = "torchrun --nproc-per-node 8 pretrain_gpt.py --use-distributed-optimizer {}--main-params-dtype fp16\n"
    (found,) = _findings(tmp_path, monkeypatch, "a.sh", launch.format(""))
    assert found.message.startswith("main_params_dtype=torch.float16 without the precision-aware optimizer")
    assert not _findings(tmp_path, monkeypatch, "b.sh", launch.format("--use-precision-aware-optimizer "))


def test_a_run_config_bridge_wrote_to_yaml_spells_its_dtypes_as_object_references(tmp_path, monkeypatch):
    # ConfigContainer.to_yaml writes a torch dtype as `{_target_: torch.float32, _call_: false}`: the dtype itself
    # (OpenEuroLLM/oellm-autoexp's Megatron Bridge run_config.yaml templates; 11 false findings before)
    dumped = """
        optimizer:
          use_precision_aware_optimizer: false
          main_grads_dtype:
            _call_: false
            _target_: torch.float32
          exp_avg_dtype:
            _call_: false
            _target_: torch.{}
    """
    assert not _findings(tmp_path, monkeypatch, "run_config.yaml", dumped.format("float32"))
    (found,) = _findings(tmp_path, monkeypatch, "b.yaml", dumped.format("bfloat16"))
    assert found.message.startswith("exp_avg_dtype=torch.bfloat16 without")

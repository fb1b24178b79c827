"""What the estimate tests share: a lookup over plain values, as `read_inputs` asks a resolved unit, a recipe file's
inputs as `offlint estimate` reads them, the VLM tests' small language model, and the
parameter count of a real megatron-core model to compare the estimate's with."""

from __future__ import annotations

from offlint.types import Assignment, Location, Source, Unknown, Value


def lookup(values: dict):
    """A resolved unit's `get` over `values`: a key not in it is left at its default, an `Unknown` is unknown."""
    def get(key: str) -> Value:
        if key not in values:
            return Value(key, "default", None)
        value = values[key]
        return Value(key, "unknown" if isinstance(value, Unknown) else "known", value)
    return get


def located_lookup(values: dict, source: Source = Source.PYTHON):
    """As `lookup`, with each known value written at recipe.py:1 by `source` (for what reads where a value was set,
    such as the launch-environment and provenance checks)."""
    def get(key: str) -> Value:
        if key not in values:
            return Value(key, "default", None)
        value = values[key]
        if isinstance(value, Unknown):
            return Value(key, "unknown", value)
        return Value(key, "known", value, Assignment(key, value, Location("recipe.py", 1, 1), source))
    return get


def recipe_inputs(tmp_path, monkeypatch, text: str, version: str = "0.20.0"):
    """`text` written as recipes.py in a project at `tmp_path`; returns name -> the memory model's inputs of that
    recipe function, read as `offlint estimate` reads it."""
    from offlint.estimate.inputs import read_inputs
    from offlint.units import load_unit

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(text)
    return lambda name: read_inputs(load_unit("recipes.py", name, mcore_version=version).resolved.get, name)


QWEN3_VL_STEP = '''\
def _pad_and_pack(tokens, this_pg_collection, force_to_pad_to_seq_len=False, seq_length=None):
    return tokens


def forward_step(state, data_iterator, model):
    this_pg_collection = model.pg_collection
    tokens = _pad_and_pack(next(data_iterator), this_pg_collection,
                           force_to_pad_to_seq_len={condition}, seq_length=4096)
    return model(tokens)
'''
BRIDGE_PADDING = "this_pg_collection.pp.size() > 1 or this_pg_collection.ep.size() > 1"  # Bridge 067f987's


def write_qwen3_vl_step(root, condition: str = BRIDGE_PADDING) -> None:
    """A Qwen3-VL training step in Bridge's shape (our own code) under `root`'s src/, padding every micro-batch to
    seq_length where `condition` holds (sources/bridge_vlm_step.py reads it)."""
    step = root / "src" / "megatron" / "bridge" / "models" / "qwen_vl"
    step.mkdir(parents=True, exist_ok=True)
    (step / "qwen3_vl_step.py").write_text(QWEN3_VL_STEP.format(condition=condition))


# The VLM tests' language model: small and dense, under a small Qwen3-VL-like tower (test_estimate_trained_vlm.py,
# test_estimate_vision_graphs.py), with its training settings.
VLM_SIZES = {"model.num_layers": 4, "model.hidden_size": 128, "model.num_attention_heads": 4, "model.vocab_size": 1024,
             "model.seq_length": 256}
# That tower, a Qwen3.5-VL MoE vision config's fields, and the settings that train the language model, the tower and
# the projection (test_estimate_trained_vlm.py, test_vlm_step_padding.py).
TOWER = {"model_type": "qwen3_5_moe", "depth": 3, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4,
         "in_channels": 3, "patch_size": 4, "temporal_patch_size": 2, "spatial_merge_size": 2,
         "num_position_embeddings": 16, "out_hidden_size": 128, "deepstack_visual_indexes": []}
TRAINS = {"model.freeze_language_model": False, "model.freeze_vision_model": False,
          "model.freeze_vision_projection": False, "model.vision_config": TOWER}


def vlm_dense():
    from offlint.estimate.inputs import ModelShape

    return ModelShape(num_layers=4, hidden_size=128, ffn_hidden_size=384, num_attention_heads=4, num_query_groups=4,
                      kv_channels=32, vocab_size=1024, seq_length=256, gated_linear_unit=True, tied_embeddings=False,
                      rms_norm=True, add_bias_linear=False)


def vlm_train():
    from offlint.estimate.inputs import Training

    return Training(micro_batch_size=2, global_batch_size=16, distributed_optimizer=True)


def count_params(model, prefix: str = "") -> int:
    """The parameters of a real model (a torch module) whose names start with `prefix`."""
    return sum(p.numel() for name, p in model.named_parameters() if name.startswith(prefix))


def write_recipe_tree(root: Path, tokenizer_utils: str, common: str, module: str, recipes: str) -> str:
    """A project at `root` laid out as Megatron Bridge's recipes are (recipes/utils/tokenizer_utils.py, a base
    builder in recipes/common.py, recipe functions in recipes/MODULE.py); returns the recipe module's path."""
    (root / "pyproject.toml").write_text("")
    package = root / "src" / "megatron" / "bridge" / "recipes"
    (package / "utils").mkdir(parents=True)
    (package / "utils" / "tokenizer_utils.py").write_text(tokenizer_utils)
    (package / "common.py").write_text(common)
    (package / f"{module}.py").write_text(recipes)
    return f"src/megatron/bridge/recipes/{module}.py"

"""Writes the Python reader used to ignore, leaving a value known and stale: an item written into a dict a name holds
(`kw["k"] = v`, `kw.update(...)`, `kw.setdefault(...)`, `kw.pop(...)`, `del kw["k"]`), an augmented assignment
(`n *= 4`, `cfg.model.x *= 2`), and a `**spread` offlint cannot read passed to a followed function or a
`replace(...)`. Fixtures of our own, in the shape of Bridge's Qwen2.5 recipes before 2026-03
(`user_kwargs["tensor_model_parallel_size"] = 8` then `return _common(**user_kwargs)`), which gave a false OFL303."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from offlint.units import load_unit

HEAD = '''
import os
from dataclasses import dataclass, replace

from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider


def _common(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=80))
    cfg.model.tensor_model_parallel_size = tensor_model_parallel_size
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size
    return cfg


@dataclass
class Workload:
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1


def _from_workload(w):
    return _common(w.tensor_model_parallel_size, w.pipeline_model_parallel_size)

'''

BODIES = {
    "item": ['user_kwargs["tensor_model_parallel_size"] = 8', 'user_kwargs["pipeline_model_parallel_size"] = 4',
             "return _common(**user_kwargs)"],
    "guarded": ['if "tensor_model_parallel_size" not in user_kwargs:',
                '    user_kwargs["tensor_model_parallel_size"] = 8',
                'user_kwargs.setdefault("pipeline_model_parallel_size", 4)', "return _common(**user_kwargs)"],
    "update": ["user_kwargs.update(tensor_model_parallel_size=8)",
               'user_kwargs.update({"pipeline_model_parallel_size": 4})', "return _common(**user_kwargs)"],
    "local": ["kw = {}", 'kw["tensor_model_parallel_size"] = 2', 'kw["tensor_model_parallel_size"] *= 4',
              'kw["pipeline_model_parallel_size"] = 4', "return _common(**kw)"],
    "popped": ['kw = {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 2}',
               'kw.pop("pipeline_model_parallel_size")', 'kw["pipeline_model_parallel_size"] = 4',
               "return _common(**kw)"],
    "augmented": ["n = 2", "n *= 4", "cfg = _common(n, 2)", "cfg.model.pipeline_model_parallel_size *= 2",
                  "return cfg"],
    "deleted": ['kw = {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 8}',
                'del kw["pipeline_model_parallel_size"]', "return _common(**kw)"],
    "unknown key": ['user_kwargs[os.environ["KEY"]] = 8', "return _common(**user_kwargs)"],
    "unknown spread": ["return _common(**os.environ.copy())"],
    "unknown update": ["user_kwargs.update(os.environ)", "return _common(**user_kwargs)"],
    "replaced": ["w = replace(Workload(tensor_model_parallel_size=8), **os.environ.copy())",
                 "return _from_workload(w)"],
    "constructed": ["w = Workload(8, **os.environ.copy())", "return _from_workload(w)"],
}
# (TP, PP) each recipe builds; None: unknown (offlint cannot tell, and must not take the default as known)
# "guarded": a test on the recipe's own `**user_kwargs` is left to the user (both paths: python_statements._literal
# does not decide on an empty dict), so the dict differs by path and all it sets is unknown.
EXPECTED = {
    "item": (8, 4), "guarded": (None, None), "update": (8, 4), "local": (8, 4), "popped": (8, 4), "augmented": (8, 4),
    "deleted": (8, 1), "unknown key": (None, None), "unknown spread": (None, None), "unknown update": (None, None),
    "replaced": (None, None), "constructed": (8, None),
}


def _returning_cfg(body: list[str]) -> list[str]:
    """The body with its result bound to `cfg` and a key set on it, as recipes do (a function that names no config
    key is no unit of its own: python.worth_parsing)."""
    *rest, last = body
    return [*rest, "cfg = " + last.removeprefix("return "), "cfg.model.recompute_granularity = None", "return cfg"]


def _recipe_name(case: str) -> str:
    return case.replace(" ", "_") + "_pretrain_config"


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    root = tmp_path_factory.mktemp("dicts")
    (root / "pyproject.toml").write_text("")
    text = HEAD + "\n".join(f"\ndef {_recipe_name(case)}(**user_kwargs):\n" + "\n".join(f"    {line}" for line in
                                                                                    _returning_cfg(body))
                            + "\n" for case, body in BODIES.items())
    (root / "recipes.py").write_text(text)
    return root


@pytest.mark.parametrize("case", list(BODIES))
def test_what_a_recipe_writes_into_a_dict_or_spreads_reaches_the_call(recipes, monkeypatch, case):
    monkeypatch.chdir(recipes)
    resolved = load_unit("recipes.py", _recipe_name(case), mcore_version="0.20.0").resolved
    found = []
    for key in ("model.tensor_model_parallel_size", "model.pipeline_model_parallel_size"):
        value = resolved.get(key)
        found.append(value.value if value.state == "known" else None)
    assert tuple(found) == EXPECTED[case]


def test_the_qwen_shape_gives_no_false_oom(tmp_path):
    """The whole check: a 70B-class model at TP 8, PP 8 set through the recipe's kwargs fits an 80 GB GPU; read with
    the helper's defaults (TP 1, PP 1) it was a 505 GiB OFL303."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipe.py").write_text('''
from megatron.bridge.training.config import ConfigContainer
from megatron.bridge.models import GPTModelProvider
from megatron.core.optimizer import OptimizerConfig
from megatron.core.distributed import DistributedDataParallelConfig


def _common(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1):
    cfg = ConfigContainer(
        model=GPTModelProvider(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                               num_query_groups=8, kv_channels=128, vocab_size=128256, seq_length=4096,
                               gated_linear_unit=True, normalization="RMSNorm", add_bias_linear=False,
                               share_embeddings_and_output_weights=False, position_embedding_type="rope",
                               hidden_dropout=0.0, bf16=True),
        optimizer=OptimizerConfig(bf16=True, use_distributed_optimizer=True),
        ddp=DistributedDataParallelConfig(grad_reduce_in_fp32=True, use_distributed_optimizer=True))
    cfg.model.tensor_model_parallel_size = tensor_model_parallel_size
    cfg.model.pipeline_model_parallel_size = pipeline_model_parallel_size
    return cfg


def big_pretrain_config(**user_kwargs):
    user_kwargs["tensor_model_parallel_size"] = 8
    user_kwargs["pipeline_model_parallel_size"] = 8
    return _common(**user_kwargs)


def big_single_gpu_pretrain_config(**user_kwargs):
    cfg = _common(**user_kwargs)
    cfg.model.recompute_granularity = None
    return cfg
''')
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--no-cache", "--mcore-version", "0.20.0",
                           "--output-format", "json"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)
    units = [[f["unit"], *f.get("shared_with", [])] for f in found if f["code"] == "OFL303"]
    # the recipe left at TP 1, PP 1 still does not fit; the one set to TP 8, PP 8 does
    assert units == [["big_single_gpu_pretrain_config"]], done.stdout

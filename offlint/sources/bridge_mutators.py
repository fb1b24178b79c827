"""The documented effects of Megatron Bridge's config mutators, which recipes call instead of assigning keys:
the fallback for when the tree's own source cannot say.

Where a mutator's source is in the linted tree, the Python reader runs it there (python_call_effects `_tree_mutator`),
so a checkout is judged by its own helpers (`offlint bisect --probe lint` at an old commit included). This
model is used when the source is not in the tree (a project that pip-installs Bridge), or when running it
leaves a key unknown or depending on a branch: `set_cuda_graph_modules(cfg.model, [...])` and friends
(src/megatron/bridge/utils/cuda_graph.py) write different fields depending on the megatron-core they run
against (from 0.18, where `CudaGraphModule` and the `cuda_graph_modules` field exist, the modules go to
`cuda_graph_modules` and `cuda_graph_scope` is reset; before, the same names go to `cuda_graph_scope`), an
import-time branch the reader cannot decide, so their effects are written here per version (`ByVersion`) and
kept in step with Bridge by the tests. `apply_determinism_overrides(cfg)` (recipes/utils/determinism_utils.py)
sets two model flags and adds three environment variables.

The training entry points (`pretrain(cfg, forward_step)` and friends in megatron/bridge/training/) are where a
configuration ends: what they do with it happens at run time, is the same for every recipe, and reading them
would pull the whole training loop into every script that launches a run. They are not followed, and the
config handed to them stays as the script built it.
"""

from __future__ import annotations

from offlint.types import ABSENT, ByVersion, Unknown

MODULES_FIELD_SINCE = "0.18"  # megatron-core added CudaGraphModule / TransformerConfig.cuda_graph_modules here

MUTATORS = frozenset({"set_cuda_graph_modules", "clear_cuda_graph_modules", "set_full_iteration_cuda_graph",
                      "apply_determinism_overrides"})

TRAINING_ENTRY_POINTS = frozenset({"pretrain", "finetune", "distill", "pretrain_megatron_mimo", "train",
                                   "train_megatron_mimo"})
TRAINING_PACKAGE = "megatron.bridge.training"


def is_training_entry_point(function_name: str, module: str) -> bool:
    """A call of Bridge's training loop (by name, defined in the training package), not a config builder.
    `module`: the dotted module it is imported from (megatron.bridge.training.pretrain, or as the tree lays
    it out for a relative import: src.megatron.bridge.training.pretrain)."""
    return function_name in TRAINING_ENTRY_POINTS and f".{TRAINING_PACKAGE}." in f".{module}."


# Which object the first argument is: a model config (provider), or the whole ConfigContainer.
RECEIVER = {"set_cuda_graph_modules": "model", "clear_cuda_graph_modules": "model",
            "set_full_iteration_cuda_graph": "model", "apply_determinism_overrides": "container"}


def effects(name: str, modules: list[str] | Unknown | None = None) -> list[tuple[str, object]]:
    """(key, value) pairs the mutator assigns; values may be ByVersion. `modules`: the module names passed."""
    new, old = f">={MODULES_FIELD_SINCE}", f"<{MODULES_FIELD_SINCE}"
    if name == "clear_cuda_graph_modules":
        name, modules = "set_cuda_graph_modules", []
    if name == "set_cuda_graph_modules":
        names = modules if modules is not None else Unknown("the modules passed to set_cuda_graph_modules()")
        return [("model.cuda_graph_modules", ByVersion(((new, names), (old, ABSENT)))),
                ("model.cuda_graph_scope", ByVersion(((new, None), (old, names))))]
    if name == "set_full_iteration_cuda_graph":
        return [("model.cuda_graph_impl", ByVersion(((new, "full_iteration"), (old, "local")))),
                ("model.cuda_graph_modules", ByVersion(((new, []), (old, ABSENT)))),
                ("model.cuda_graph_scope", ByVersion(((new, None), (old, ["full_iteration"]))))]
    if name == "apply_determinism_overrides":
        return [("model.deterministic_mode", True), ("model.cross_entropy_loss_fusion", False),
                ("env.CUBLAS_WORKSPACE_CONFIG", ":4096:8"), ("env.NCCL_ALGO", "Ring"),
                ("env.NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0")]
    raise KeyError(name)


def member_names(value: object) -> list[str] | Unknown:
    """Bridge's `_member_name_list`: enum members or their dotted/plain names; "a,b" splits; "full" means none."""
    if isinstance(value, Unknown):
        return value
    if value is None:
        return []
    if isinstance(value, str):
        return [] if value in ("", "full") else [v.rsplit(".", 1)[-1] for v in value.split(",")]
    if isinstance(value, list):
        names = []
        for item in value:
            if not isinstance(item, str):
                return Unknown(f"a CUDA graph module that is not a name: {item!r}")
            names.append(item.rsplit(".", 1)[-1])
        return names
    return Unknown(f"CUDA graph modules given as {type(value).__name__}")

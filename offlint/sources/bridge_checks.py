"""Checks Megatron Bridge's own validate() makes, read from the linted tree: a rule about one applies only where the
tree's Bridge makes it (older trees accept what newer ones refuse).

Bridge's ConfigContainer.validate calls `validate_cuda_graph_configuration(self.model)` (utils/cuda_graph.py) before
the model's finalize: from July 2026 (7e8662c66) it raises for `cuda_graph_impl="local"` outside full-iteration graphs
and local inference graphs. The reader notes where the tree raises it as the unit's key LOCAL_GRAPH_CHECK (not a
config field), so that the check is a dependency of the unit's reading and rule OFL223 can name the line.

From April 2026 (6c78fba79) ConfigContainer.validate (training/config.py) also divides the evaluation batch sizes,
which default to the training ones, by the evaluation data-parallel size, and asserts before the training's micro-batch
calculator is built; forks without it stop only at that calculator. Noted as EVAL_BATCH_CHECK, for OFL217's message.

From July 2026 (6f2f546ef) Bridge's model configs default an unset expert tensor parallel size to 1 where expert
parallelism is on (models/transformer_config.py); megatron-core, and Bridge before, take the tensor parallel size.
Noted as EXPERT_TP_DEFAULT ("path:line" of the default, or NO_DEFAULT for a tree whose Bridge lacks it), for the
GPU counts OFL216 and OFL217 work out; a tree without a Bridge of its own notes nothing (either may hold).
"""

from __future__ import annotations

import re

LOCAL_GRAPH_CHECK = "bridge_local_graph_check"  # "path:line" of the tree's raise; not a config field
EVAL_BATCH_CHECK = "bridge_eval_batch_check"  # "path:line" of the tree's assert; not a config field
_MODULE = "megatron.bridge.utils.cuda_graph"
_VALIDATOR = "\ndef validate_cuda_graph_configuration("
EXPERT_TP_DEFAULT = "bridge_expert_tp_default"  # "path:line", or NO_DEFAULT; not a config field
NO_DEFAULT = "none"
# What the tree's Bridge code says, noted as keys: no finding lists them among the settings it read
NOT_CONFIG_FIELDS = frozenset({LOCAL_GRAPH_CHECK, EVAL_BATCH_CHECK, EXPERT_TP_DEFAULT})
_CONFIG_MODULE = "megatron.bridge.training.config"
_MODEL_CONFIG_MODULE = "megatron.bridge.models.transformer_config"
_EXPERT_TP_ONE = re.compile(r"expert_tensor_parallel_size is None and [\w.]*expert_model_parallel_size > 1:\s*\n"
                            r"\s*[\w.]*expert_tensor_parallel_size = 1\b")
_EVAL_DIVISION = "eval_global_batch_size % "  # (`assert self.validation.eval_global_batch_size % eval_dp_product == 0`)


def local_graph_check(project, near: str) -> str | None:
    """"path:line" of the refusal in the tree's validate_cuda_graph_configuration of a local graph outside full
    iteration (a `raise` whose message names "local" and full-iteration graphs); None when the tree (as the file
    `near` imports it) has no such check."""
    path, text = _tree_module(project, _MODULE, near)
    text = "\n" + text
    start = text.find(_VALIDATOR)
    if start == -1:
        return None
    end = text.find("\ndef ", start + 1)
    body = text[start:end if end != -1 else len(text)]
    message = body.find("full-iteration")
    at = body.rfind("raise ValueError", 0, message) if message != -1 else -1
    if at == -1 or '"local"' not in body[at:message + 1]:
        return None
    return _line_at(path, text[1:], start + at - 1)  # the line that raises


def _tree_module(project, module: str, near: str) -> tuple[str | None, str]:
    """(the tree's file of a dotted module as `near` imports it, its text); (None, "") when the tree has none."""
    path = project.path_of(module, near) if project is not None else None
    return path, (project.text(path) or "") if path is not None else ""


def _line_at(path: str, text: str, offset: int) -> str:
    return f"{path}:{text.count(chr(10), 0, offset) + 1}"


def eval_batch_check(project, near: str) -> str | None:
    """"path:line" of the tree's ConfigContainer.validate assert that the evaluation global batch size divides by
    the evaluation micro batch size times the data-parallel size; None when the tree (as the file `near` imports
    it) has no such check, or no Bridge of its own."""
    path, text = _tree_module(project, _CONFIG_MODULE, near)
    at = text.find(_EVAL_DIVISION)
    return _line_at(path, text, at) if at != -1 else None


def expert_tp_default(project, near: str) -> str | None:
    """"path:line" of the tree's Bridge defaulting an unset expert tensor parallel size to 1 under expert
    parallelism; NO_DEFAULT when the tree has a Bridge of its own without it; None when it has none (unknown)."""
    if project is None or project.path_of(_CONFIG_MODULE, near) is None:
        return None
    path, text = _tree_module(project, _MODEL_CONFIG_MODULE, near)
    found = _EXPERT_TP_ONE.search(text)
    return _line_at(path, text, found.end()) if found is not None else NO_DEFAULT

"""When Megatron Bridge's Qwen3-VL training step pads every micro-batch to `seq_length`, read from the linted tree's
own `qwen3_vl_step.py` (never imported or run).

The memory model sizes a micro-batch at `model.seq_length` tokens. Bridge's Qwen3-VL step (the one its recipe
runner and performance scripts run for Qwen3-VL and Qwen3.5-VL recipes) pads to that length only where its
`forward_step` passes `force_to_pad_to_seq_len=` a condition that holds: Bridge 067f987
`models/qwen_vl/qwen3_vl_step.py:268` `this_pg_collection.pp.size() > 1 or this_pg_collection.ep.size() > 1`, forks
of February to April 2026 `pp.size() > 1` alone. Otherwise `_pad_and_pack_qwen3_vl_step` pads to the batch's
longest sample, rounded up to a small multiple: how many tokens a micro-batch holds then depends on the data.

What is read: the keyword's value in the module's top-level `forward_step`, as the parallel groups whose size above
1 forces the padding (`X.pp.size() > 1`, `>= 2` or `!= 1`, joined by `or`; a literal True or False). Anything else,
or no such module in the tree (a project that pip-installs Bridge), leaves it unknown.
"""

from __future__ import annotations

import ast

from offlint.scope import nearest
from offlint.types import Unknown

KEY = "model.step_pads_to_seq_length_when"  # not a field: what the reader notes about the tree's Qwen3-VL step
ALWAYS = "always"  # in KEY's value: the step pads whatever the layout
GROUPS = ("tp", "pp", "ep", "cp")  # the process groups of Bridge's pg_collection a condition may name
_PACKAGE, _FILE = "megatron.bridge.models.qwen_vl", "qwen3_vl_step.py"
_KEYWORD = "force_to_pad_to_seq_len"


def padding_condition(project, importer: str) -> tuple[str, ...] | Unknown:
    """The groups (of GROUPS, or (ALWAYS,)) whose size above 1 makes the tree's Qwen3-VL step pad every micro-batch
    to seq_length; () when it never does; unknown when the tree has no such step or its condition cannot be read."""
    if project is None:
        return Unknown("the Qwen3-VL training step is not read here")
    paths = nearest(project.paths_in_package(_PACKAGE, _FILE), importer)
    if len(paths) != 1:
        return Unknown(f"how the training step pads a micro-batch (no single {_FILE} in the tree)")
    return project.call_result(("qwen3-vl-step-padding", paths[0]), lambda: _read(project.parsed(paths[0]),
                                                                                     paths[0]))


def _read(module: ast.Module | None, path: str) -> tuple[str, ...] | Unknown:
    step = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "forward_step"), None) \
        if module is not None else None
    values = [k.value for node in ast.walk(step) if isinstance(node, ast.Call) for k in node.keywords
              if k.arg == _KEYWORD] if step is not None else []
    conditions = {_condition(v) for v in values}
    if len(conditions) != 1 or None in conditions:
        return Unknown(f"how {path}'s forward_step pads a micro-batch ({_KEYWORD} not read)")
    return conditions.pop()


def _condition(node: ast.expr) -> tuple[str, ...] | None:
    """The groups a padding condition names, or None when it is not of the shapes read."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return (ALWAYS,) if node.value else ()
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        parts = [_condition(v) for v in node.values]
        return None if None in parts else tuple(sorted({g for part in parts for g in part}))
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant)):
        return None
    size, op, bound = node.left, node.ops[0], node.comparators[0].value
    if not (isinstance(size, ast.Call) and not size.args and not size.keywords
            and isinstance(size.func, ast.Attribute) and size.func.attr == "size"
            and isinstance(size.func.value, ast.Attribute) and size.func.value.attr in GROUPS):
        return None
    above_one = (isinstance(op, ast.Gt) and bound == 1) or (isinstance(op, ast.GtE) and bound == 2) or (
        isinstance(op, ast.NotEq) and bound == 1)
    return (size.func.value.attr,) if above_one and type(bound) is int else None

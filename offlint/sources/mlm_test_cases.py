"""Megatron-LM functional test cases: a `model_config.yaml` whose `MODEL_ARGS` maps Megatron-LM flags to values.

Megatron-LM's CI runs each of these (tests/functional_tests/test_cases/**) as one training or inference job, and
they are where its offloading, recompute and CUDA-graph combinations are exercised. Its harness,
`tests/functional_tests/shell_test_utils/_run_training.sh` (Megatron-LM d98e8a6, lines 128-166), substitutes the
environment into the file (`envsubst`), then turns each `MODEL_ARGS` entry into arguments of the training script:
`true` gives the bare flag; a value in `( )` or holding a space, `|`, `(` or `)` is one quoted argument; a value
in `[ ]` loses its brackets and is split into words; any other value is one word, after xargs and the harness's
`eval` (which take quotes and backslashes away). Which values it quotes is read from the tree's own harness script:
an older one quoted only values with a space (sources/mlm_harness.py). `ENV_VARS` are
exported first. The script itself (`TRAINING_SCRIPT_PATH`) and the rest of the job's environment come from the
CI recipe and cluster, outside the file: the unit's environment is therefore not fully known (no advice that
needs the whole environment, such as OFL301), and a test whose `MODE` is `inference` does not train. The script is
read from the tree's CI recipes when commands are linked (sources/mlm_ci_recipes.py), for OFL007's parser.

A value that names the environment (`${DATA_PATH}/...`) is known only at run time.
"""

from __future__ import annotations

import posixpath

import yaml

from offlint.sources import launch, mlm_harness
from offlint.sources.launch_words import Arg, EnvArg
from offlint.sources.mlm_ci_recipes import case_parts
from offlint.types import Location, Unit

def is_test_case(roots) -> bool:
    """A YAML document with a MODEL_ARGS mapping of `--flag` keys (a NeMo test's `model.x` keys are not flags)."""
    args = _mapping(roots, "MODEL_ARGS")
    return args is not None and any(isinstance(k, yaml.ScalarNode) and str(k.value).startswith("--")
                                    for k, _ in args.value)


def test_case_unit(path: str, roots, project=None) -> Unit:
    """The case's job as its harness runs it; `project` (a PythonProject) reads the tree's harness script, whose rule
    for quoting values changed between Megatron-LM's versions (sources/mlm_harness.py)."""
    args_node = _mapping(roots, "MODEL_ARGS")
    found = case_parts(path)
    harness = posixpath.join(found[0], mlm_harness.HARNESS) if found else None
    # (one reading of the checkout's harness for all its cases, noted as read by each)
    triggers = project.call_result(("mlm-harness-quoting", harness), lambda: mlm_harness.quoting(
        project.text(harness))) if project is not None and harness else None
    args: list[Arg] = []
    for key_node, value_node in args_node.value:
        if isinstance(key_node, yaml.ScalarNode) and str(key_node.value).startswith("--"):
            args.extend(_arguments(path, key_node, value_node, triggers, found is not None))
    env: dict[str, EnvArg] = {}
    env_node = _mapping(roots, "ENV_VARS")
    for key_node, value_node in env_node.value if env_node is not None else ():
        if isinstance(key_node, yaml.ScalarNode) and isinstance(value_node, yaml.ScalarNode):
            name, text = str(key_node.value), str(value_node.value)
            at = _at(path, key_node)
            env[name] = EnvArg(name, None, at, "set from the CI job's environment") if "$" in text else \
                EnvArg(name, text, at)
    mode = _scalar(roots, "MODE")
    trains = mode != "inference" and launch.trains_by_flags("", args)
    name = f"{posixpath.basename(posixpath.dirname(path)) or path} (Megatron-LM functional test)"
    first = args[0].location if args else Location(path, 1, 1)
    unit = launch.mlm_unit(name, args, env, first, trains)
    unit.ci_test_case = True  # its entry script is the CI recipe's (linking: sources/mlm_ci_recipes.py)
    unit.env_known = False  # the CI recipe and cluster set the rest of the job's environment
    unit.default_sections = unit.default_sections - {"env"}
    unit.unknown_sections = {"env": "set by the CI job that runs the test case, outside the file"}
    return unit


def _arguments(path: str, key_node, value_node, triggers: frozenset[str] | None, in_test_cases: bool) -> list[Arg]:
    """The arguments one `MODEL_ARGS` entry gives. Outside a checkout's tests/functional_tests/test_cases
    (`in_test_cases` False) the file is run by a script of its own tree, not Megatron-LM's harness (a MoE model zoo
    joins each flag and value with a space and expands the line unquoted): a value the harness would pass otherwise
    than as its blank-separated words is unknown there."""
    at = _at(path, key_node)
    flag = str(key_node.value)
    if not isinstance(value_node, yaml.ScalarNode):
        return [Arg(flag, at, flag), Arg(None, at, unknown=f"{flag}: a YAML collection, as the harness's yq prints it")]
    text = str(value_node.value)
    if value_node.tag.endswith(":bool") and text.lower() == "true":
        return [Arg(flag, at, flag)]
    if text == "":
        return []  # the harness's `select(.value != "")` drops the entry
    if "$" in text:
        return [Arg(flag, at, flag), Arg(None, at, text, unknown=f"`{text}` is substituted from the CI job's "
                                                                   "environment")]
    words = mlm_harness.arguments(text, triggers)
    if words is None:
        return [Arg(flag, at, flag), Arg(None, at, text, unknown=f"`{text}`: the test harness's xargs and eval "
                                                                   "would not pass it as written")]
    if not in_test_cases and words != text.split():
        return [Arg(flag, at, flag), Arg(None, at, text, unknown=f"`{text}`: the file is not one of Megatron-LM's "
                                                                   "functional test cases, and how the script running "
                                                                   "it splits the value is its own")]
    return [Arg(flag, at, flag)] + [Arg(word, at, word) for word in words]


def _mapping(roots, name: str):
    return _top(roots, name, yaml.MappingNode)


def _scalar(roots, name: str) -> str | None:
    node = _top(roots, name, yaml.ScalarNode)
    return None if node is None else str(node.value)


def _top(roots, name: str, kind):
    """The first value of node type `kind` a top-level key `name` holds, in any of the file's documents."""
    for root in roots:
        if isinstance(root, yaml.MappingNode):
            for key, value in root.value:
                if isinstance(key, yaml.ScalarNode) and key.value == name and isinstance(value, kind):
                    return value
    return None


def _at(path: str, node) -> Location:
    return Location(path, node.start_mark.line + 1, node.start_mark.column + 1)

"""What a Python function is to the linter: something that runs on its own, or code that only runs as part of
something else, or code that only a test runner runs.

A finding must be about something that would run. Three kinds of functions build or change configurations
without being a launch or a recipe of their own:

- test code. A file pytest collects (`test_*.py`, `*_test.py`, with pytest's default `python_files`), a
  `conftest.py`, and the helper modules of a `tests/` (or `test/`) directory (but a script kept there that
  trains when run, is_test_module) run only under pytest: their
  `test_*` functions, `Test*` classes' methods, fixtures and helpers build configurations (often with mocks or
  patched construction) to assert on them. Such files give no units at all: nothing in them is a launch or a
  recipe, and the recipes they exercise are units of their own, so a recipe's findings are not repeated
  through a test. (There is no opt-in to check test code: a test that builds a bad configuration fails on its
  own when it runs.)
- private functions (`_name`). Python's convention says they are not called from outside: they run when their
  callers run, and the callers' units follow them, so a finding inside one is reported through each caller
  that reaches it, with that caller's values (its parameters, its launch environment). A private function no
  caller reaches does not run, and is not reported.
- helpers that change a configuration they are given (`def apply_x(cfg, ...)`, `def set_y(model_cfg)`). On
  their own every key they do not set is unknown and every path depends on their parameters; their callers
  know both. They too are checked through the units that call them.

Such functions are still read into units (`offlint estimate --recipe`, the property tests and the reader's own
tests look at them), marked with `Unit.checked_through_callers`; the engine runs no unit rule on them.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from offlint.sources.python_values import ConfigObj
from offlint.types import Unknown

PYTEST_FILE = re.compile(r"^(?:test_.*|.*_test)\.py$")
_TEST_DIRECTORIES = ("tests", "test")
# Deep-learning frameworks other than PyTorch, by the top-level package a program imports to use one
OTHER_FRAMEWORKS = frozenset({"mxnet", "tensorflow", "jax", "paddle", "paddlenlp", "mindspore", "oneflow"})
# What a module that configures a PyTorch job imports; another framework's module importing none of them has that
# framework's configs (PaddleNLP's LlamaConfig has a `recompute_granularity` of its own)
_TORCH_STACK = frozenset({"torch", "megatron", "nemo", "transformer_engine", "lightning", "pytorch_lightning"})


def imports_another_framework(module: ast.Module) -> bool:
    """Whether a module's top level imports another deep-learning framework (OTHER_FRAMEWORKS) and nothing of
    PyTorch's stack: its configuration objects are not megatron-core's (FlagPerf's PaddleNLP pretraining script
    sets `config.recompute_granularity` on a paddlenlp LlamaConfig)."""
    tops = set()
    for node in module.body:
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return bool(tops & OTHER_FRAMEWORKS) and not tops & _TORCH_STACK


# A module-level `if __name__ == "__main__":`, and a call of Megatron Bridge's or Megatron-LM's training entry points
_MAIN_BLOCK = re.compile(rb"^if[ \t]+__name__[ \t]*==[ \t]*[\"']__main__[\"'][ \t]*:", re.MULTILINE)
_TRAINING_CALL = re.compile(rb"\b(?:pretrain|finetune)[ \t]*\(")


def is_test_module(path: str, data: bytes) -> bool:
    """is_test_code, less a script kept in a tests/ folder that trains when run: pytest would not collect it (no
    test_*.py or *_test.py name) and, after its `if __name__ == "__main__":`, it calls pretrain or finetune (a Bridge
    user's tests/train_lora_g4.py, run with torchrun: a launch like any other). `data`: its text."""
    if not is_test_code(path):
        return False
    if _pytest_reads(path.rsplit("/", 1)[-1]):
        return True
    main = _MAIN_BLOCK.search(data)
    return main is None or _TRAINING_CALL.search(data, main.end()) is None


@lru_cache(maxsize=4096)  # a function of the path's text alone; asked about each file several times
def is_test_code(path: str) -> bool:
    """A module pytest collects with its default settings, a conftest.py, or a module of a tests/ directory of
    the project (a relative path, as files inside the working directory are named: the directories above an
    absolute path are not the project's)."""
    parts = [part for part in path.split("/") if part and part != "."]  # PurePosixPath's parts, without pathlib:
    name = parts[-1] if parts else ""  # a cold run's parent asks about every file before forking (1,713: 8 ms)
    return _pytest_reads(name) or (not path.startswith("/") and any(part in _TEST_DIRECTORIES for part in parts[:-1]))


def _pytest_reads(name: str) -> bool:
    """Whether pytest, with its default settings, reads a file of this name: one it collects, or a conftest.py."""
    return name == "conftest.py" or PYTEST_FILE.match(name) is not None


def checked_through_callers(name: str, objects: list[ConfigObj], bound: dict[str, object],
                            params: list[str]) -> str:
    """Why the function `name` is checked only through its callers ("" when it is a unit of its own).

    `objects`: the config objects it built or changed; `bound`: its local names after it ran; `params`: its
    parameter names."""
    short = name.rsplit(".", 1)[-1]
    if short.startswith("_") and not short.startswith("__"):
        return f"{short}() is private: it runs as part of its callers, which are checked with it"
    given = _given(objects, bound, params, short)
    if objects and given:
        return (f"{short}() changes the configuration it is given (parameter `{given}`): it is checked as part "
                f"of the code that calls it")
    return ""


def _given(objects: list[ConfigObj], bound: dict[str, object], params: list[str], short: str) -> str:
    """The parameter every object came from, when each one did ("" otherwise)."""
    names = []
    for obj in objects:
        name = next((p for p in params if bound.get(p) is obj), "") or _parameter_named(obj, params, short)
        if not name:
            return ""
        names.append(name)
    return names[0] if names else ""


def _parameter_named(obj: ConfigObj, params: list[str], short: str) -> str:
    """The parameter named by an object's unknown base ("parameter `cfg` of f()", given by the reader to what
    it receives through a parameter), when that parameter is this function's."""
    reason = obj.base.reason if isinstance(obj.base, Unknown) else ""
    for param in params:
        if reason == f"parameter `{param}` of {short}()":
            return param
    return ""

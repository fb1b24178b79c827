"""A module's closing `if __name__ == "__main__":` block that only calls the module's own functions without arguments
is not run with the module body (python._calls_own_functions): each function it calls is a unit of its own, and an
importer never runs the block. Every other block still runs, and the units are those of the plain reading (the block
run with the body), kept here as the reference. Fixtures of our own, in the shape of Megatron Bridge's example
scripts (`def main(): ...` then `if __name__ == "__main__": main()`)."""

from __future__ import annotations

import pytest

from offlint.sources import python as python_reader
from offlint.sources.python_project import PythonProject

RECIPES = '''\
from megatron.bridge.training.config import ConfigContainer, GPTModelProvider


def tiny_config(tp=1):
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=4, num_attention_heads=8))
    cfg.model.tensor_model_parallel_size = tp
    return cfg
'''

SCRIPT = '''\
import sys

from megatron.bridge.training.pretrain import pretrain
from pkg.recipes import tiny_config


def main():
    cfg = tiny_config(tp=2)
    cfg.model.pipeline_model_parallel_size = 2
    pretrain(cfg, None)


def helper():
    return tiny_config()


if __name__ == "__main__":
{block}
'''

# The module holds a config object main() changes: the block runs, as before.
HOLDS_A_CONFIG = '''\
from megatron.bridge.training.pretrain import pretrain
from pkg.recipes import tiny_config

CFG = tiny_config()


def main():
    CFG.model.pipeline_model_parallel_size = 4
    pretrain(CFG, None)


if __name__ == "__main__":
    main()
'''


def _read(texts: dict[str, str], path: str, monkeypatch, skip: bool = True):
    """(the functions run while the module was prepared, its units as (name, [(key, value)]))"""
    if not skip:
        monkeypatch.setattr(python_reader, "_calls_own_functions", lambda stmt, body: False)
    ran: list[str] = []
    run_function = python_reader.PythonReader.run_function

    def noting(self, fn, *args, **kwargs):
        ran.append(fn.name)
        return run_function(self, fn, *args, **kwargs)

    monkeypatch.setattr(python_reader.PythonReader, "run_function", noting)
    project = PythonProject(sorted(texts), texts.get)
    with project.tracking():
        reader = project.reader(path)
        prepared = list(ran)
        units = reader.units()
    monkeypatch.undo()
    return prepared, [(unit.name, [(a.key, repr(a.value)) for layer in unit.layers for a in layer.assignments])
                      for unit in units]


def _tree(script: str) -> dict[str, str]:
    return {"pkg/__init__.py": "", "pkg/recipes.py": RECIPES, "pkg/script.py": script}


@pytest.mark.parametrize("block", ["    main()", "    sys.exit(main())", "    helper()\n    main()"])
def test_a_block_calling_the_modules_functions_is_not_run_with_the_body(block, monkeypatch):
    tree = _tree(SCRIPT.format(block=block))
    prepared, units = _read(tree, "pkg/script.py", monkeypatch)
    assert "main" not in prepared and "helper" not in prepared
    assert units == _read(tree, "pkg/script.py", monkeypatch, skip=False)[1]
    assert [name for name, _ in units] == ["main"]  # (helper() names no key: no unit of its own)


@pytest.mark.parametrize("block", [
    "    main(None)",  # an argument: not the function's own unit
    "    args = sys.argv\n    main()",  # a name bound at module level
    "    tiny_config()",  # a function of another module
    "    main()\nelse:\n    helper()",  # an `else`
])
def test_other_blocks_still_run(block, monkeypatch):
    tree = _tree(SCRIPT.format(block=block))
    prepared, units = _read(tree, "pkg/script.py", monkeypatch)
    assert prepared, "the block ran with the module body"
    assert units == _read(tree, "pkg/script.py", monkeypatch, skip=False)[1]


def test_a_block_that_is_not_the_last_statement_still_runs(monkeypatch):
    tree = _tree(SCRIPT.format(block="    main()") + "\nVALUE = 1\n")
    prepared, units = _read(tree, "pkg/script.py", monkeypatch)
    assert "main" in prepared
    assert units == _read(tree, "pkg/script.py", monkeypatch, skip=False)[1]


def test_a_module_holding_a_config_its_functions_change_runs_the_block(monkeypatch):
    tree = _tree(HOLDS_A_CONFIG)
    prepared, units = _read(tree, "pkg/script.py", monkeypatch)
    assert "main" in prepared
    assert units == _read(tree, "pkg/script.py", monkeypatch, skip=False)[1]
    assert [name for name, _ in units] == ["<module>", "main"]

"""`python_roles.is_test_code` splits a path by hand (a cold run's parent asks about every file before forking);
it decides as the PurePosixPath form it replaced does, for every spelling of a path discovery or a user gives."""

import ast
from pathlib import PurePosixPath

import pytest

from offlint.sources.python_roles import PYTEST_FILE, _TEST_DIRECTORIES, imports_another_framework, is_test_code
from tests.check_helpers import check_json


def _by_pathlib(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.name == "conftest.py" or PYTEST_FILE.match(pure.name) is not None or (
        not pure.is_absolute() and any(part in _TEST_DIRECTORIES for part in pure.parts[:-1]))


@pytest.mark.parametrize("path", [
    "src/megatron/bridge/recipes/llama/llama3.py", "tests/unit/test_x.py", "tests/helpers.py", "test/helpers.py",
    "pkg/tests/data/x.py", "x_test.py", "test_x.py", "conftest.py", "pkg/conftest.py", "testing/x.py",
    "./tests/x.py", "a//tests//x.py", "a/./tests/x.py", "/abs/tests/x.py", "/abs/test_x.py", "//abs/tests/x.py",
    "tests", "tests/", "a/tests/", ".", "", "/", "../tests/x.py", "a/../tests/x.py", "tests.py", "my_tests/x.py",
    "a/test_/x.py", "a/b/test.py", "a/b/_test.py", "a/b/c_test.pyc",
])
def test_it_decides_as_the_pathlib_form(path):
    is_test_code.cache_clear()
    assert is_test_code(path) == _by_pathlib(path), path


@pytest.mark.parametrize("imports, other", [
    ("import paddle\nfrom paddlenlp.transformers import LlamaConfig\n", True),
    ("import mindspore as ms\n", True),
    ("import paddle\nimport torch\n", False),  # (a converter between the two: PyTorch's side is read)
    ("from megatron.core.transformer import TransformerConfig\n", False),
    ("from .paddle import helpers\n", False),  # (a module of the tree's own package)
])
def test_another_frameworks_module_is_told_apart(imports, other):
    assert imports_another_framework(ast.parse(imports)) is other


def test_a_paddle_scripts_config_gives_no_unit(tmp_path):
    """FlagPerf's PaddleNLP pretraining script sets `config.recompute_granularity` on a paddlenlp LlamaConfig;
    with --strict OFL226 had asked whether CUDA graphs meet its selective recompute."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "run_pretraining.py").write_text(
        "import paddle\nfrom paddlenlp.transformers import LlamaConfig\n\n\ndef main(args):\n"
        "    config = LlamaConfig.from_pretrained('llama')\n    config.recompute_granularity = args.granularity\n"
        "    return config\n")
    assert check_json(tmp_path, "--no-cache", "--strict") == []

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


TRAIN_SCRIPT = '''from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, OptimizerConfig
from megatron.bridge.training.finetune import finetune


def build_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=16), optimizer=OptimizerConfig(optimizer="adam"))
    cfg.model.cpu_offloading_num_layers = 2
    return cfg


if __name__ == "__main__":
    finetune(config=build_config(), forward_step_func=None)
'''


def _units_and_findings(root, path: str) -> tuple[int, list[tuple[int, str]]]:
    found = check_json(root, "--no-cache", paths=(".",))
    from offlint.api import CheckOptions, check

    units = check(["."], CheckOptions(root=root, cache=False, mcore_version="0.20.0")).units
    return units, sorted((f["location"]["row"], f["code"]) for f in found if f["filename"] == path)


@pytest.mark.parametrize("path, checked", [
    ("tests/train_lora.py", True),  # a script kept in tests/ that trains when run (a Bridge user's, run with torchrun)
    ("scripts/train_lora.py", True),
    ("tests/test_train_lora.py", False),  # pytest collects it: test code whatever it holds
    ("tests/conftest.py", False),
])
def test_a_script_kept_in_a_tests_folder_that_trains_when_run_is_checked(tmp_path, monkeypatch, path, checked):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_text(TRAIN_SCRIPT)
    monkeypatch.chdir(tmp_path)
    units, found = _units_and_findings(tmp_path, path)
    assert (units > 0, bool(found)) == (checked, checked), (units, found)
    if checked:
        assert (8, "OFL202") in found  # cpu_offloading_num_layers without cpu_offloading


def test_a_tests_folder_module_without_a_training_main_block_is_still_test_code(tmp_path, monkeypatch):
    """Helpers of a tests/ folder, and scripts there that run something else (Megatron-LM's CI tools under
    tests/test_utils/python_scripts/), stay test code."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helpers.py").write_text(TRAIN_SCRIPT.split('\n\nif __name__')[0] + "\n")
    (tmp_path / "tests" / "launch_ci.py").write_text(TRAIN_SCRIPT.replace("finetune(config=build_config(), "
                                                                          "forward_step_func=None)", "print(1)"))
    monkeypatch.chdir(tmp_path)
    assert _units_and_findings(tmp_path, "tests/helpers.py") == (0, [])

"""`python_roles.is_test_code` splits a path by hand (a cold run's parent asks about every file before forking);
it decides as the PurePosixPath form it replaced does, for every spelling of a path discovery or a user gives."""

from pathlib import PurePosixPath

import pytest

from offlint.sources.python_roles import _PYTEST_FILE, _TEST_DIRECTORIES, is_test_code


def _by_pathlib(path: str) -> bool:
    pure = PurePosixPath(path)
    return pure.name == "conftest.py" or _PYTEST_FILE.match(pure.name) is not None or (
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

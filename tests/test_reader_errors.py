"""A file's own faults are its author's (one line, exit 2); offlint's own bugs while reading say so. A helper's sweep
(NVIDIA/DeepLearningExamples 729963dd, TF2 BERT) found an offlint bug printed as if the file were wrong: two caches
of the Python reader shared one key, and the ValueError it raised passed for bad input. Fixtures of our own."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.source_files import read_files
from offlint.types import FileError


def _errors(tmp_path, files: dict[str, str], named: bool = False) -> list[str]:
    """The errors of a check of the tree, or of its files named on the command line (each then parsed)."""
    (tmp_path / "pyproject.toml").write_text("")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    paths = [str(tmp_path / name) for name in files] if named else [str(tmp_path)]
    result = check(paths, CheckOptions(root=tmp_path, cache=False, mcore_version="0.20.0"))
    return [error.message for error in result.errors]


def test_an_if_whose_test_is_a_comprehension_is_read(tmp_path):
    """The test is undecided where the caller's values are inputs (`fp16`); the comprehension's cache entry and the
    `if`'s flag leaves were both kept under the test node's id."""
    assert _errors(tmp_path, {
        "helpers/loop.py": "def fit(options=None):\n    if [name for name in missing if name is None]:\n"
                           "        raise ValueError('required settings are missing')\n",
        "helpers/__init__.py": "",
        "train.py": "from helpers import loop\n\nx = 1 if fp16 else 2\nloop.fit(options=None)\n"}) == []


def test_a_reader_bug_is_reported_as_offlints_not_the_files(tmp_path, monkeypatch):
    import offlint.source_files as source_files

    def broken(*args, **kwargs):
        raise ValueError("not enough values to unpack (expected 3, got 2)")

    monkeypatch.setattr(source_files, "read_source", broken)
    errors: list[FileError] = []
    (tmp_path / "train.py").write_text("x = 1\n")
    from offlint.discover import SourceFile

    read_files([SourceFile(str(tmp_path / "train.py"), "python", True)], {}, None, errors)
    (error,) = errors
    assert error.message.startswith("internal error while reading (ValueError: not enough values to unpack")
    assert error.message.endswith("please report it")


@pytest.mark.parametrize("name, text, said", [
    ("bad.py", "def f(:\n", "Python syntax error at line 1"),
    ("bad.yaml", "a: [1, 2\n", "invalid YAML"),
    ("bad.sh", "echo \"unclosed\n", "cannot parse shell script"),
])
def test_the_files_own_faults_are_still_its_authors(tmp_path, name, text, said):
    (message,) = _errors(tmp_path, {name: text}, named=True)
    assert said in message and "internal error" not in message


@pytest.mark.parametrize("line", ['NGPU=$(nvidia-smi -L | grep -c GPU$)',
                                  'if [ "$(ls | grep -c ^data$)" -eq 1 ]; then :; fi'])
def test_a_dollar_before_a_closing_parenthesis_is_a_literal(tmp_path, line):
    """bash reads `GPU$)` as the word `GPU$` and the end of the substitution (`bash -n` accepts it);
    tree-sitter-bash failed on it, and the whole script went unread (DeepLearningExamples'
    get_datasets.sh). The launch after it is read as without that line."""
    launch = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
              "--micro-batch-size 1 --global-batch-size 8 --seq-length 128 --max-position-embeddings 128 "
              "--train-iters 10\n")
    assert _errors(tmp_path, {"train.sh": f"#!/bin/bash\n{line}\n{launch}"}, named=True) == []
    result = check([str(tmp_path / "train.sh")], CheckOptions(root=tmp_path, cache=False, mcore_version="0.20.0"))
    assert [f.code for f in result.findings] == ["OFL301"]

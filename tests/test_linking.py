"""Linking's index of `X as Y` names: the fast scan finds exactly what the regex's findall finds."""

from __future__ import annotations

import random

import pytest

from offlint.linking import _IMPORTED_AS, _imported_as


@pytest.mark.parametrize("text", [
    "from .h100.llama3 import llama3_8b_pretrain_2gpu_config as llama3_8b_pretrain_config",
    "a as b as c", "x as as y", "as as as as", "x  as\tas y", "a\nas\nb", "(a\n    as b)",
    "9x as y", "über as y", "x as über", "_a as _b", "a as 9", "with open(f) as fh:", "class as_ as x",
    "", "as", " as ", "a as", "pass as b", "a\u2003as\u2003b",
])
def test_the_scan_finds_what_findall_finds(text):
    assert _imported_as(text) == _IMPORTED_AS.findall(text)


def test_the_scan_agrees_with_findall_on_random_text():
    pieces = ["as", "a", "x1", "_y", "9", "ü", "class", " ", "  ", "\t", "\n", "(", ")", ".", ",", ":", "#"]
    rng = random.Random(19)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        assert _imported_as(text) == _IMPORTED_AS.findall(text), text


def test_a_finding_at_an_option_of_a_called_launch_is_reported_once(tmp_path):
    """A launch a script writes, run by another script of the tree (`bash run_cloud.sh &`), is read alone and at each
    call; a finding located at one of its options (OFL216 at `--pipeline-model-parallel-size`) had been reported
    twice, at the option and at the command's start (MindSpeed's layerwise-disaggregated tests, a helper's sweep,
    session 49). It is one finding, where the script's own reading puts it."""
    from tests.check_helpers import check_json

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "run_cloud.sh").write_text(
        "#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "torchrun --nproc_per_node 6 pretrain_gpt.py \\\n    --tensor-model-parallel-size 1 "
        "--pipeline-model-parallel-size 4 --num-layers 28\n")
    (tmp_path / "run_both.sh").write_text("#!/bin/bash\nbash run_cloud.sh &\nwait\n")
    found = [(f["filename"], f["location"]["row"], f["location"]["column"]) for f in check_json(tmp_path, "--no-cache")
             if f["code"] == "OFL216"]
    assert found == [("run_cloud.sh", 4, 36)]


def test_a_place_with_no_file_is_answered_by_one_stat(tmp_path, monkeypatch):
    """Nearly every path linking asks about is a place an entry script is not (upward from its launch): None, without
    the project-root lookup an existing file outside the run's reads gets."""
    from offlint import linking

    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    asked = []
    real = linking.scope.project_root
    monkeypatch.setattr(linking.scope, "project_root", lambda paths: asked.append(paths) or real(paths))
    tree_text = linking._tree_reader([])
    assert tree_text("scripts/missing/train.py", "scripts/missing/run.sh") is None
    assert asked == []
    assert tree_text("train.py", "run.sh") == "print('hi')\n"
    assert len(asked) == 1

"""The GPU validation's CPU-side pieces: the generated bisect history and the scripts' shell syntax."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "fixtures" / "replay" / "gpt_1b_recipes.py"


def _offload_at(history: Path, revision: str) -> bool:
    subprocess.run(["git", "-C", str(history), "checkout", "-q", revision], check=True)
    spec = subprocess.run([sys.executable, "-m", "offlint", "replay", "fixtures/gpt_1b_recipes.py", "--recipe",
                           "gpt_1b_offload", "--dry-run"], cwd=history, capture_output=True, text=True, check=True)
    return json.loads(spec.stdout[:spec.stdout.rindex("}") + 1])["optimizer"]["optimizer_cpu_offload"]


@pytest.mark.slow  # six `replay --dry-run` runs
def test_the_generated_history_drops_the_offload_at_its_break(tmp_path):
    history = tmp_path / "history"
    made = subprocess.run(["bash", "scripts/make_offload_history.sh", str(history), str(RECIPES), "6", "4"],
                          cwd=ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    subjects = subprocess.run(["git", "-C", str(history), "log", "--format=%s"], capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert subjects[::-1] == ["revision 1", "revision 2", "revision 3", "revision 4: drop the optimizer offload",
                              "revision 5", "revision 6"]
    revisions = subprocess.run(["git", "-C", str(history), "rev-list", "--reverse", "HEAD"], capture_output=True,
                               text=True, check=True).stdout.split()
    assert [_offload_at(history, commit) for commit in revisions] == [True, True, True, False, False, False]


def test_the_history_script_never_writes_into_an_existing_folder(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    made = subprocess.run(["bash", "scripts/make_offload_history.sh", str(tmp_path), str(RECIPES)], cwd=ROOT,
                          capture_output=True, text=True)
    assert made.returncode == 2 and "exists" in made.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_the_gpu_scripts_parse():
    for script in ("gpu_replay_check.sh", "gpu_validation_1b.sh", "device_env.sh", "make_offload_history.sh",
                   "fetch_device_wheels.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / script)]).returncode == 0, script

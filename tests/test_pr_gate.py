"""scripts/pr_gate.py: what offlint would add as a CI gate on a pull request, against the pull request's base. A
repository of our own: main with a clean recipe, a pull request (refs/heads/pull-request/7, as NVIDIA's
copy-pr-bot pushes them) that turns optimizer offloading on without its fraction and changes a number elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import pr_gate  # noqa: E402

pytestmark = pytest.mark.slow  # two offlint runs of a tree

RECIPE = '''
from megatron.bridge.models import GPTModelProvider
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig


def small_config() -> ConfigContainer:
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=16, hidden_size=2048, num_attention_heads=16),
                          optimizer=OptimizerConfig(optimizer="adam", use_distributed_optimizer=True),
                          ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
    cfg.model.cpu_offloading = True
    cfg.model.cpu_offloading_num_layers = 20
    return cfg
'''


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "pyproject.toml").write_text("")
    (repo / "recipes" / "small.py").write_text(RECIPE)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "feature")
    (repo / "recipes" / "small.py").write_text(
        RECIPE.replace("cpu_offloading_num_layers = 20", "cpu_offloading_num_layers = 24")
        .replace("    return cfg", "    cfg.optimizer.optimizer_cpu_offload = True\n    return cfg"))
    _git(repo, "commit", "-q", "-am", "offload the optimizer")
    _git(repo, "update-ref", "refs/heads/pull-request/7", "feature")
    _git(repo, "checkout", "-q", "main")
    (repo / "recipes" / "later.py").write_text("X = 1\n")  # main moved on: the base is the merge base
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "later")
    return repo


def test_the_new_findings_of_a_pull_request_against_its_base(repo, tmp_path):
    out = tmp_path / "gate.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "pr_gate.py"), "--mirror", str(repo), "--main",
                           "main", "--mcore-version", "0.20.0", "--workdir", str(tmp_path / "trees"), "--json",
                           str(out), "7", "404"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert list(report) == ["7"] and "404: not in the mirror" in done.stdout
    entry = report["7"]
    assert entry["base"] == _git(repo, "rev-parse", "main~1")
    # offloading the optimizer with no fraction set (OFL201), and without the precision-aware optimizer (OFL207)
    assert {f["code"] for f in entry["new"]} == {"OFL201", "OFL207"}
    assert entry["gone"] == []  # OFL101 (20, then 24 layers of 16) is the same finding: only its number moved
    assert (entry["base_findings"], entry["head_findings"]) == (1, 3)


def test_a_finding_is_the_same_when_only_its_numbers_or_line_change():
    a = {"code": "OFL303", "filename": "r.py", "unit": "x at line 4", "message": "peak 80.1 GiB\nmore"}
    b = {"code": "OFL303", "filename": "r.py", "unit": "x at line 9", "message": "peak 95.7 GiB\nother"}
    assert pr_gate.key(a) == pr_gate.key(b)
    assert pr_gate.compare([a], [dict(b, unit="y")]) == ([dict(b, unit="y")], [a])


def test_a_file_the_pull_request_renames_keeps_its_findings(repo, tmp_path):
    _git(repo, "checkout", "-q", "-b", "move", "main")
    _git(repo, "mv", "recipes/small.py", "recipes/small_model.py")
    _git(repo, "commit", "-q", "-m", "rename")
    base, head = _git(repo, "rev-parse", "main"), _git(repo, "rev-parse", "move")
    assert pr_gate.renames(repo, base, head) == {"recipes/small.py": "recipes/small_model.py"}
    out = tmp_path / "gate.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "pr_gate.py"), "--mirror", str(repo), "--main",
                           "main", "--mcore-version", "0.20.0", "--workdir", str(tmp_path / "trees"), "--json",
                           str(out), head], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    entry = json.loads(out.read_text())[head]
    assert (entry["base_findings"], entry["head_findings"]) == (1, 1)
    assert (entry["new"], entry["gone"]) == ([], [])  # OFL101 of the moved recipe: not news


def test_renamed_paths_map_the_base_s_findings_only():
    a = {"code": "OFL301", "filename": "old.sh", "unit": "u", "message": "m"}
    b = dict(a, filename="new.sh")
    assert pr_gate.compare([a], [b], {"old.sh": "new.sh"}) == ([], [])
    assert pr_gate.compare([a], [b]) == ([b], [a])


def test_a_pull_request_is_found_by_github_s_ref_too(repo):
    _git(repo, "update-ref", "refs/pull/9/head", "feature")
    assert pr_gate.head_of(repo, "9") == pr_gate.head_of(repo, "7") == _git(repo, "rev-parse", "feature")
    with pytest.raises(ValueError):
        pr_gate.head_of(repo, "404")

"""History and worktrees: first-parent candidates, merge base, and the user's repository left untouched
after success, failure and a real Ctrl-C (SIGINT) to a running `offlint bisect`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from offlint.bisect import history
from offlint.bisect.worktree import Worktrees
from tests.bisect_helpers import bisect, history as make_history, repo_state
from tests.signals import default_sigint


def test_first_parent_candidates_exclude_side_branch_commits(tmp_path):
    h = make_history(tmp_path, "command", commits=30, culprit=20, merge_every=10)
    repo = history.open_repo(h["repo"])
    span = history.bisect_range(repo, h["good"], h["bad"])
    assert [c.sha for c in span.candidates] == h["main_line"][1:]
    full = history.bisect_range(repo, h["good"], h["bad"], full_history=True)
    assert len(full.candidates) == len(span.candidates) + 2 * 3  # two side commits per merged branch
    assert full.candidates[-1].sha == h["bad"]


def test_good_end_not_an_ancestor_uses_the_merge_base(tmp_path):
    h = make_history(tmp_path, "command", commits=6, culprit=4, merge_every=0)
    run = lambda *a: subprocess.run(["git", *a], cwd=h["repo"], check=True, capture_output=True)  # noqa: E731
    run("checkout", "-q", "-b", "topic", h["main_line"][2])
    run("commit", "-q", "--allow-empty", "-m", "topic work")
    run("checkout", "-q", "main")
    repo = history.open_repo(h["repo"])
    span = history.bisect_range(repo, "topic", h["bad"])
    assert span.good.sha == h["main_line"][2] and span.used_merge_base
    assert [c.sha for c in span.candidates] == h["main_line"][3:]


def test_worktrees_follow_submodule_gitlinks_and_leave_nothing_behind(tmp_path):
    h = make_history(tmp_path, "submodule", commits=4, culprit=3, merge_every=0)
    repo = history.open_repo(h["repo"])
    before = repo_state(h["repo"])
    with Worktrees(repo) as trees:
        old = trees.checkout(0, h["main_line"][2])
        assert "0.16" not in (old / "3rdparty/Megatron-LM/check.py").read_text()
        assert "MINOR = 16" in (old / "3rdparty/Megatron-LM/megatron/core/package_info.py").read_text()
        new = trees.checkout(0, h["main_line"][3])  # the same job's worktree, moved to the bump
        assert "MINOR = 17" in (new / "3rdparty/Megatron-LM/megatron/core/package_info.py").read_text()
        base = trees.base
    assert not base.exists()
    assert repo_state(h["repo"]) == before


@pytest.mark.parametrize("culprit", [4, None])
def test_repository_unchanged_after_success_and_failure(tmp_path, culprit):
    h = make_history(tmp_path, "command", commits=8, culprit=culprit or 99, merge_every=0)
    before = repo_state(h["repo"])
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command",
                    "--command", f"{sys.executable} probe.py")
    assert result.returncode == (0 if culprit else 1), result.stderr
    assert repo_state(h["repo"]) == before
    assert "offlint-bisect-" not in subprocess.run(["git", "worktree", "list"], cwd=h["repo"], capture_output=True,
                                                   text=True).stdout


def test_repository_unchanged_after_sigint(tmp_path):
    h = make_history(tmp_path, "command", commits=20, culprit=10, merge_every=0)
    before = repo_state(h["repo"])
    marker = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], "--good", h["good"],
                                "--bad", h["bad"], "--probe", "command", "--command", f"touch {marker}; sleep 30"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the probe never started"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    assert repo_state(h["repo"]) == before


@pytest.mark.parametrize("args, message", [
    (["--good", "no-such-rev", "--bad", "HEAD", "--probe", "command", "--command", "true"], "unknown revision"),
    (["--good", "HEAD~1", "--bad", "HEAD", "--probe", "command", "--command", "true", "--bad-on", "oom"],
     "unknown outcome class"),
    (["conf/missing.yaml", "--good", "HEAD~1", "--bad", "HEAD", "--probe", "lint"], "not in the repository"),
    (["--good", "HEAD~1", "--bad", "HEAD", "--probe", "lint"], "needs CONFIG"),
    (["--good", "HEAD~1", "--probe", "lint"], "missing option '--bad'"),  # click's own errors: the same style
    (["--good", "HEAD~1", "--bad", "HEAD", "--probe", "lint", "--jobs", "0"], "invalid value for '--jobs'"),
    (["conf/offload.yaml", "--config", "conf/offload.yaml", "--good", "HEAD~1", "--bad", "HEAD", "--probe", "lint"],
     "give CONFIG once"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, message):
    h = make_history(tmp_path, "command", commits=2, culprit=9, merge_every=0)
    result = bisect(h["repo"], *args)
    assert result.returncode == 2
    error = result.stderr.splitlines()[-1]  # after a deprecation note for an old spelling
    assert error.startswith("offlint: error: ") and message in error, result.stderr
    assert result.stderr.count("\n") == 1 + ("--config" in args)


def test_not_a_repository_is_a_usage_error(tmp_path):
    result = bisect(str(tmp_path), "--good", "a", "--bad", "b", "--probe", "command", "--command", "true")
    assert result.returncode == 2 and "not a git repository" in result.stderr

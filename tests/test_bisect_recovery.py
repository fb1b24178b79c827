"""Recovery after `kill -9` of a running `offlint bisect`, through the real CLI: the probe's child dies with
the run, a later run (fresh or --resume) removes the worktree the dead run left and still finds the culprit;
a damaged journal or state directory is one line and exit 2. Also the recovery's safety: a recorded process
group whose number now belongs to another process is never killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from offlint.bisect.state import RunRecord, open_state, recover
from offlint.bisect.watchdog import boot_id, start_time
from tests.bisect_helpers import bisect, history, read_json, repo_state


def gone(pid: int) -> bool:
    """Not running (a zombie waiting for a reaper counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_for(predicate, limit_s: float = 60) -> bool:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def worktrees(repo: str) -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True, text=True).stdout


def kill9_mid_probe(tmp_path: Path, h: dict) -> tuple[list[str], dict]:
    """Start a bisect whose third probe run starts a background child and hangs; SIGKILL the bisect there."""
    runs, hang, child = tmp_path / "runs.txt", tmp_path / "hang", tmp_path / "child.pid"
    hang.touch()
    command = (f"echo x >> {runs}; if [ $(wc -l < {runs}) -ge 3 ] && [ -e {hang} ]; then "
               f"sleep 300 & echo $! > {child}; wait; fi; {sys.executable} probe.py")
    args = ["--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", command]
    process = subprocess.Popen([sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: child.exists() and child.read_text().strip()), "the hanging probe never started"
        [record_file] = Path(h["repo"], ".git", "offlint-bisect", "runs").glob("*.json")
        record = json.loads(record_file.read_text())
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    hang.unlink()
    return args, {"child": int(child.read_text()), "record": record}


@pytest.mark.slow
@pytest.mark.parametrize("resume", [True, False])
def test_kill9_mid_probe_child_dies_and_next_run_cleans_up(tmp_path, resume):
    h = history(tmp_path, "command", commits=12, culprit=7, merge_every=0)
    before = repo_state(h["repo"])
    args, left = kill9_mid_probe(tmp_path, h)
    base = left["record"]["worktree_base"]
    out = tmp_path / "r.json"
    try:
        # (a) the probe's own child (a grandchild of the bisect) is gone, killed by the watchdog
        assert wait_for(lambda: gone(left["child"]), 20), f"probe child {left['child']} outlived the bisect"
        assert "offlint-bisect-" in worktrees(h["repo"]) and Path(base).is_dir()  # what SIGKILL leaves behind
        result = bisect(h["repo"], *args, *(["--resume"] if resume else []), "--report-json", str(out))
        left_on_disk = Path(base).exists()
    finally:  # a failing run must not leave the worktree in the shared temporary directory
        if Path(base).name.startswith("offlint-bisect-"):
            shutil.rmtree(base, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "an earlier bisect" in result.stderr and "Traceback" not in result.stderr
    # (b) git's list and the disk are clean, and the dead run's record is gone
    assert "offlint-bisect-" not in worktrees(h["repo"])
    assert not left_on_disk
    assert not list(Path(h["repo"], ".git", "offlint-bisect", "runs").iterdir())
    assert repo_state(h["repo"]) == before
    # (c) the same answer; --resume reuses the two runs that finished before the kill
    report = read_json(out)
    assert report["first_bad_commit"] == h["culprit"]
    assert report["cached_runs"] == (2 if resume else 0)


def test_recovery_kills_a_dead_runs_group_only_while_it_is_the_recorded_one(tmp_path):
    """A dead run's record lists two groups: one still running (a probe and its child: killed) and one whose
    leader's number now belongs to an unrelated process with another start time (left alone)."""
    h = history(tmp_path, "command", commits=2, culprit=9, merge_every=0)
    repo = git.Repo(h["repo"])
    state = open_state(Path(h["repo"], ".git", "offlint-bisect"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_start = start_time(dead.pid)
    dead.wait()
    pidfile = tmp_path / "child.pid"
    probe = subprocess.Popen(["bash", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], start_new_session=True)
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip())
        child = int(pidfile.read_text())
        record = {"pid": dead.pid, "start": dead_start, "boot": boot_id(),
                  "worktree_base": None, "worktrees": [],
                  "groups": {str(probe.pid): start_time(probe.pid), str(unrelated.pid): start_time(unrelated.pid) + 1}}
        (state / "runs" / f"{dead.pid}.json").write_text(json.dumps(record))
        assert recover(state, repo) == 1
        assert probe.wait(timeout=30) is not None and wait_for(lambda: gone(child), 20)
        assert unrelated.poll() is None  # its start time differs from the recorded one: not ours
        assert not (state / "runs" / f"{dead.pid}.json").exists()
    finally:
        for process in (probe, unrelated):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_a_live_runs_record_is_left_alone(tmp_path):
    h = history(tmp_path, "command", commits=2, culprit=9, merge_every=0)
    state = open_state(Path(h["repo"], ".git", "offlint-bisect"))
    live = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        record = RunRecord(state)  # this test process: alive
        record.started(live.pid, start_time(live.pid))
        assert recover(state, git.Repo(h["repo"])) == 0
        assert live.poll() is None and record.path.exists()
    finally:
        live.kill()
        live.wait()


DAMAGE = {
    "random-bytes": lambda state: (state / "journal.jsonl").write_bytes(bytes(range(256)) + os.urandom(512)),
    "null-line": lambda state: (state / "journal.jsonl").write_text('{"type": "start"}\nnull\n'),
    "list-line": lambda state: (state / "journal.jsonl").write_text("[1, 2]\n"),
    "run-without-outcome": lambda state: (state / "journal.jsonl").write_text(
        '{"type": "run", "key": "k", "sha": "s", "attempt": 1, "log": "", "duration_s": 1}\n'),
    "journal-is-a-directory": lambda state: (state / "journal.jsonl").mkdir(),
    "damaged-run-record": lambda state: (state / "runs" / "1234.json").write_text("null"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_state_is_one_line_and_exit_2(tmp_path, damage):
    h = history(tmp_path, "command", commits=4, culprit=2, merge_every=0)
    state = open_state(Path(h["repo"], ".git", "offlint-bisect"))
    DAMAGE[damage](state)
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command",
                    f"{sys.executable} probe.py", "--resume", timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("offlint: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "internal error" not in result.stderr and ("remove" in result.stderr or "without --resume" in
                                                      result.stderr)


@pytest.mark.parametrize("resume", [True, False])
def test_state_path_being_a_file_is_one_line_and_exit_2(tmp_path, resume):
    h = history(tmp_path, "command", commits=4, culprit=2, merge_every=0)
    Path(h["repo"], ".git", "offlint-bisect").write_text("not a directory")
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command",
                    f"{sys.executable} probe.py", *(["--resume"] if resume else []), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("offlint: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "offlint-bisect: not a directory" in result.stderr and "remove it" in result.stderr


def test_a_damaged_journal_is_replaced_by_a_run_without_resume(tmp_path):
    h = history(tmp_path, "command", commits=4, culprit=2, merge_every=0)
    state = open_state(Path(h["repo"], ".git", "offlint-bisect"))
    (state / "journal.jsonl").write_text("null\n")
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command",
                    f"{sys.executable} probe.py", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "null" not in (state / "journal.jsonl").read_text().splitlines()


def test_sigterm_mid_probe_leaves_no_record(tmp_path):
    h = history(tmp_path, "command", commits=6, culprit=3, merge_every=0)
    marker = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], "--good", h["good"],
                                "--bad", h["bad"], "--probe", "command", "--command", f"touch {marker}; sleep 300"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: marker.exists()), "the probe never started"
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert not list(Path(h["repo"], ".git", "offlint-bisect", "runs").iterdir())
    assert "offlint-bisect-" not in worktrees(h["repo"])



@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")
def test_asking_whether_a_group_lives_closes_its_scan():
    """watchdog.group_alive scans /proc and answers at the first live member: the scan is closed on that early
    answer too (it had been left for its deallocation to close, with a ResourceWarning each call)."""
    import warnings

    from offlint.bisect.watchdog import group_alive

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert group_alive(os.getpgid(0))  # this test's own group: alive, found before the scan ends
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []

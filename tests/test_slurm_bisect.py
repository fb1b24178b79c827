"""`offlint bisect --launcher slurm`: whole bisects whose every probe run is a job on the real cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import active_jobs, slurm, slurm_cluster, wait_for  # noqa: F401 (fixtures)

from offlint.bisect.journal import Journal
from offlint.bisect.probes import Probe
from offlint.slurm import SlurmOptionsError, render_script
from offlint.slurm.launchers import bisect_launch
from tests.bisect_helpers import bisect, history, read_json
from tests.signals import default_sigint

PROBE = f"{sys.executable} probe.py"


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def visible_state(repo: str) -> str:
    return "\n".join([git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"),
                      git(repo, "branch", "-a", "-v"), git(repo, "worktree", "list", "--porcelain")])


def journal_records(repo: str) -> list[dict]:
    path = Path(repo, ".git", "offlint-bisect", "journal.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_bisect_with_every_step_a_slurm_job(slurm, tmp_path):
    h = history(tmp_path, "command", commits=24, culprit=17, merge_every=0)
    before = visible_state(h["repo"])
    out = tmp_path / "report.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", PROBE,
                    "--launcher", "slurm", "--jobs", "2", "--timeout", "120", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    report = read_json(out)
    assert report["status"] == "found" and report["first_bad_commit"] == h["culprit"]

    jobs = [r for r in journal_records(h["repo"]) if r["type"] == "slurm-job"]
    assert len(jobs) == report["probe_runs"] and len({r["job_id"] for r in jobs}) == len(jobs)
    workdir = Path(h["repo"], ".offlint", "slurm")  # the default: inside the repository, git-ignored
    for record in jobs:
        log = workdir / "logs" / f"{record['step']}.log"
        script = log.with_suffix(".sbatch").read_text()
        assert f"#SBATCH --output={log}" in script and "probe.py" in script
        assert f"as Slurm job {record['job_id']}" in result.stderr
    assert visible_state(h["repo"]) == before  # worktrees removed, nothing to commit, HEAD unchanged


@pytest.mark.slow
def test_resume_reattaches_to_the_jobs_of_a_killed_bisect(slurm, tmp_path):
    h = history(tmp_path, "command", commits=6, culprit=4, merge_every=0)
    marker = tmp_path / "slept"
    command = f"if [ ! -e {marker} ]; then touch {marker}; sleep 4; fi; {PROBE}"  # only the first job is slow
    args = [sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], "--good", h["good"], "--bad", h["bad"],
            "--probe", "command", "--command", command, "--launcher", "slurm", "--timeout", "120"]
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: Path(h["repo"], ".git", "offlint-bisect", "journal.jsonl").exists()
                 and any(r["type"] == "slurm-job" for r in journal_records(h["repo"]))
                 and active_jobs(tmp_path), 60, "the first job to be queued")
        first.send_signal(signal.SIGKILL)  # no cleanup at all: the job keeps running
        first.wait()
        (killed,) = [r for r in journal_records(h["repo"]) if r["type"] == "slurm-job"]
        assert any(line.split()[0] == killed["job_id"] for line in active_jobs(tmp_path))
    finally:
        if first.poll() is None:
            first.kill()

    out = tmp_path / "report.json"
    resumed = bisect(h["repo"], *args[6:], "--resume", "--report-json", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert f"re-attached to Slurm job {killed['job_id']}" in resumed.stderr
    assert read_json(out)["first_bad_commit"] == h["culprit"]
    steps = [r["step"] for r in journal_records(h["repo"]) if r["type"] == "slurm-job"]
    assert steps.count(killed["step"]) == 1  # the interrupted step was not submitted again
    git(h["repo"], "worktree", "prune")


@pytest.mark.slow
def test_slurm_options_need_the_slurm_launcher_and_a_fitting_probe(slurm, tmp_path):
    h = history(tmp_path, "command", commits=3, culprit=2, merge_every=0)
    base = ["--good", h["good"], "--bad", h["bad"]]
    result = bisect(h["repo"], *base, "--probe", "command", "--command", "true", "--partition", "debug")
    assert result.returncode == 2 and result.stderr.strip() == \
        "offlint: error: --partition: Slurm options need --launcher slurm"
    result = bisect(h["repo"], *base, "--probe", "lint", "--config", "conf/offload.yaml", "--launcher", "slurm")
    assert result.returncode == 2 and "the lint probe runs locally" in result.stderr
    result = bisect(h["repo"], *base, "--probe", "command", "--command", "true", "--launcher", "slurm",
                    "--partition", "no-such-partition")
    assert result.returncode == 2 and "nvalid partition" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_ctrl_c_cancels_the_jobs_and_leaves_the_repository_as_it_was(slurm, tmp_path):
    h = history(tmp_path, "command", commits=6, culprit=4, merge_every=0)
    before = visible_state(h["repo"])
    args = [sys.executable, "-m", "offlint", "bisect", "--repo", h["repo"], "--good", h["good"], "--bad", h["bad"],
            "--probe", "command", "--command", "sleep 120", "--launcher", "slurm", "--jobs", "2"]
    running = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=default_sigint)
    try:
        wait_for(lambda: any(" RUNNING " in line for line in active_jobs(tmp_path)), 60, "a probe job to run")
        running.send_signal(signal.SIGINT)
        _, stderr = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 130, stderr
    assert "cancelling Slurm job(s)" in stderr and "--resume" in stderr
    assert active_jobs(tmp_path) == []  # cancelled and gone before offlint exited
    assert visible_state(h["repo"]) == before


@pytest.mark.slow
def test_a_node_failure_is_retried_and_never_a_verdict(slurm, tmp_path):
    h = history(tmp_path, "command", commits=6, culprit=4, merge_every=0)
    marker = tmp_path / "node-failed-once"
    # the first probe job takes its node down (as a real node failure would); later jobs just run the probe
    command = (f"if [ ! -e {marker} ]; then touch {marker}; "
               f"scontrol update nodename=$SLURMD_NODENAME state=down reason=offlint-test; sleep 60; fi; {PROBE}")
    out = tmp_path / "report.json"
    result = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "command", "--command", command,
                    "--launcher", "slurm", "--report-json", str(out))
    assert result.returncode == 0, result.stderr
    assert read_json(out)["first_bad_commit"] == h["culprit"]
    runs = [r for r in journal_records(h["repo"]) if r["type"] == "run"]
    assert runs[0]["outcome"] == "infra-failure" and "NODE_FAIL" in runs[0]["detail"]
    again = [r for r in runs[1:] if r["sha"] == runs[0]["sha"]]  # the same commit, run again
    assert [r["attempt"] for r in again] == [2] and again[0]["outcome"] != "infra-failure"
    assert wait_for(lambda: subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
                    .stdout.split() == ["idle"], 60, "the node to be idle again")


def test_replay_probe_job_is_one_task_with_its_gpu_and_no_second_torchrun(tmp_path):
    """No cluster needed: bisect's replay probe starts `offlint replay`, which launches its own ranks."""
    journal = Journal(tmp_path / "state" / "journal.jsonl", resume=False)
    launch = bisect_launch("slurm", {}, tmp_path, tmp_path / "state", journal, "replay", [], print)
    assert launch.log_dir == tmp_path / ".offlint" / "slurm" / "logs"
    assert launch.worktree_base == tmp_path / ".offlint" / "slurm" / "worktrees"
    step = Probe("replay", config="/shared/conf.yaml", iters=3).step(launch.worktree_base / "job0", "abc-replay-try1",
                                                                      launch.log_dir)
    script = render_script(step, launch.runner.options)
    assert "#SBATCH --gpus-per-node=1\n" in script and "#SBATCH --ntasks-per-node=1\n" in script
    assert "torch.distributed.run" not in script and " -m offlint replay /shared/conf.yaml" in script
    with pytest.raises(SlurmOptionsError, match="the replay probe runs on one node"):
        bisect_launch("slurm", {"nodes": 2}, tmp_path, tmp_path / "state", journal, "replay", [], print)
    with pytest.raises(SlurmOptionsError, match="use --gpus-per-node"):
        bisect_launch("slurm", {}, tmp_path, tmp_path / "state", journal, "command", ["0", "1"], print)

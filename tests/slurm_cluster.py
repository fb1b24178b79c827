"""Fixtures for tests that need a real Slurm cluster (scripts/start_slurm.sh starts one, as root).

`slurm` skips with the reason when no cluster answers, and fails a test that leaves a job of its own queued.
The cluster has one node, and some tests take it down: `slurm` lets one test at a time use it, across the test
processes of one run (pytest-xdist) and across runs on the machine.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# Held by the test using the cluster: a lock file every run on this machine finds
ONE_AT_A_TIME = Path(tempfile.gettempdir()) / "offlint-tests-slurm-cluster.lock"
START = "start one with `sudo scripts/start_slurm.sh` (as .ci/run does)"


def cluster_problem() -> str | None:
    """Why no usable cluster is here, or None when one answers with a node ready for jobs."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return f"no Slurm client commands on PATH; {START}"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return f"sinfo did not answer in 20 s (slurmctld down?); {START}"
    if proc.returncode != 0:
        return f"sinfo failed: {(proc.stderr.strip().splitlines() or [f'exit {proc.returncode}'])[-1]}; {START}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no Slurm node is up (sinfo: {' '.join(states) or 'no nodes'}); {START}"
    return None


def active_jobs(under: Path | None = None) -> list[str]:
    """Jobs still pending, running or completing (squeue's default states), those whose working directory
    lies under `under` when given (so that two test sessions sharing a cluster do not see each other's)."""
    proc = subprocess.run(["squeue", "-h", "-o", "%i %T %j %Z"], capture_output=True, text=True, timeout=30,
                          check=True)
    jobs = [line for line in proc.stdout.splitlines() if line.strip()]
    if under is not None:
        root = under.resolve()
        jobs = [line for line in jobs if Path(line.split(" ", 3)[3]).resolve().is_relative_to(root)]
    return jobs


def node_name() -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30,
                          check=True).stdout.split()[0]


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    problem = cluster_problem()
    if problem:
        pytest.skip(f"Slurm tests need a running cluster: {problem}")


@pytest.fixture
def slurm(slurm_cluster, tmp_path: Path) -> Path:
    """A shared workdir for one test on a running cluster; the test must leave no job of its own queued
    (every job a test submits runs in a directory under its tmp_path)."""
    workdir = tmp_path / "shared"
    workdir.mkdir()
    with open(ONE_AT_A_TIME, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, after the queue is checked
        yield workdir
        left = active_jobs(tmp_path)
        if left:  # clean up so that one failure does not cascade into the next tests, then fail this one
            subprocess.run(["scancel", *(line.split()[0] for line in left)], check=False)
            wait_for(lambda: not active_jobs(tmp_path), 60, "the leftover jobs to be cancelled", poll_s=0.5)
    assert left == [], f"jobs left in the Slurm queue after the test: {left}"

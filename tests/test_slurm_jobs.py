"""SlurmRunner against a real single-node Slurm (scripts/start_slurm.sh): every step here is a real job.

Each test uses the `slurm` fixture, which skips without a cluster and fails if any job is left queued.
"""

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slurm_cluster import node_name, slurm, slurm_cluster, wait_for  # noqa: F401 (fixtures)

from offlint.outcomes import Outcome
from offlint.slurm import SlurmError, SlurmOptions, SlurmRunner, scheduler_outcome
from offlint.slurm import commands
from offlint.steps import Step
from tests.signals import sigint_raises

pytestmark = pytest.mark.slow  # jobs on a real Slurm cluster: the fast lane (`pytest -m "not slow"`) leaves them out

PY = os.path.dirname(sys.executable)  # jobs inherit PATH; make sure this venv's python/torchrun come first


def shell_step(workdir: Path, name: str, script: str, timeout_s: float = 60, **kwargs) -> Step:
    return Step(name=name, argv=("bash", "-c", script), cwd=workdir, log=workdir / "logs" / f"{name}.log",
                timeout_s=timeout_s, **kwargs)


def runner(workdir: Path, **kwargs) -> SlurmRunner:
    return SlurmRunner(kwargs.pop("options", SlurmOptions()), workdir, poll_s=0.2, **kwargs)


def state_of(job_id: str) -> str:
    info = commands.show_job(job_id)
    return info.state if info else "UNKNOWN"


def test_passing_and_failing_jobs_submitted_together(slurm):
    submitted = []
    steps = [shell_step(slurm, "pass", "echo hello from $SLURM_JOB_ID"),
             shell_step(slurm, "fail", "echo 'RuntimeError: boom' >&2; exit 3"),
             shell_step(slurm, "env", 'echo "note=$OFFLINT_NOTE"; pwd', env={"OFFLINT_NOTE": "two words"})]
    results = runner(slurm, on_submit=lambda step, job: submitted.append((step.name, job))).run(steps)

    assert [name for name, _ in submitted] == ["pass", "fail", "env"]  # all three submitted before waiting
    assert [r.job_id for r in results] == [job for _, job in submitted]
    ok, fail, env = results
    assert (ok.scheduler_state, ok.exit_code, ok.signal) == ("COMPLETED", 0, None)
    assert f"hello from {ok.job_id}" in steps[0].log.read_text()
    assert (fail.scheduler_state, fail.exit_code) == ("FAILED", 3)
    assert scheduler_outcome(fail) is None  # FAILED: the probe classifies from exit code and log
    assert "RuntimeError: boom" in steps[1].log.read_text()
    assert steps[2].log.read_text().splitlines() == ["note=two words", str(slurm)]


def test_workdir_holds_script_log_and_result_and_the_users_tree_is_untouched(slurm, tmp_path):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "train.py").write_text("print('hi')\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    workdir = repo / ".offlint" / "slurm"  # the default place: inside the repository, ignored
    result_file = workdir / "results" / "replay.json"
    # a replay-shaped job: runs in the user's tree, writes its result file to shared storage
    code = ("import json, os, sys; json.dump({'outcome': 'pass', 'job': os.environ['SLURM_JOB_ID'], "
            "'peak_gib': 1.5}, open(sys.argv[1], 'w'))")
    step = Step(name="replay", argv=(sys.executable, "-c", code, str(result_file)), cwd=repo,
                log=workdir / "logs" / "replay.log", timeout_s=120)
    result_file.parent.mkdir(parents=True, exist_ok=True)

    (result,) = runner(workdir).run([step])

    assert result.scheduler_state == "COMPLETED"
    assert json.loads(result_file.read_text()) == {"outcome": "pass", "job": result.job_id, "peak_gib": 1.5}
    script = workdir / "logs" / "replay.sbatch"  # next to the log
    assert f"#SBATCH --output={step.log}" in script.read_text()
    assert subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout == ""


def test_a_log_outside_the_workdir_is_refused(slurm, tmp_path):
    step = Step(name="x", argv=("true",), cwd=tmp_path, log=tmp_path / "x.log", timeout_s=60)
    with pytest.raises(ValueError, match="not under the Slurm workdir"):
        runner(slurm).run([step])


def test_sbatch_rejection_is_one_line(slurm):
    step = shell_step(slurm, "nopart", "true")
    with pytest.raises(SlurmError, match=r"^`sbatch --parsable` failed \(exit 1\): .*[Ii]nvalid partition"):
        runner(slurm, options=SlurmOptions(partition="no-such-partition")).run([step])


def test_job_cancelled_by_someone_else_is_aborted(slurm):
    step = shell_step(slurm, "victim", "echo started; sleep 120")
    threading.Thread(target=_cancel_when_started, args=(step,), daemon=True).start()
    (result,) = runner(slurm).run([step])
    assert result.scheduler_state == "CANCELLED" and scheduler_outcome(result) is Outcome.ABORTED
    assert "CANCELLED AT" in step.log.read_text()


def _cancel_when_started(step: Step) -> None:
    wait_for(lambda: step.log.exists() and "started" in step.log.read_text(), 60, "the job to start")
    job = subprocess.run(["squeue", "-h", "-n", f"offlint-{step.name}", "-o", "%i"], capture_output=True,
                         text=True, check=True).stdout.strip()
    subprocess.run(["scancel", job], check=True)


def test_ctrl_c_cancels_every_job_and_leaves_nothing_running(slurm):
    pids = slurm / "pids"
    pids.mkdir()
    steps = [shell_step(slurm, f"long{i}", f"echo $$ > {pids}/{i}; echo started; sleep 120") for i in range(3)]
    submitted = []

    def interrupt_when_one_runs():
        wait_for(lambda: any(s.log.exists() and "started" in s.log.read_text() for s in steps), 60, "a job")
        _thread.interrupt_main()  # what Ctrl-C does to the main thread

    threading.Thread(target=interrupt_when_one_runs, daemon=True).start()
    with sigint_raises(), pytest.raises(KeyboardInterrupt):
        runner(slurm, on_submit=lambda step, job: submitted.append(job)).run(steps)

    assert len(submitted) == 3
    assert {state_of(job) for job in submitted} == {"CANCELLED"}  # running and pending ones alike
    for pid_file in pids.iterdir():  # the job's processes are gone, not just its queue entry
        assert not Path(f"/proc/{pid_file.read_text().strip()}").exists()


RESUMABLE_CHILD = """
import sys
from pathlib import Path
from offlint.slurm import SlurmOptions, SlurmRunner
from offlint.steps import Step
workdir = Path(sys.argv[1])
step = Step(name="resumable", argv=("bash", "-c", "echo started; sleep 6; echo finished"), cwd=workdir,
            log=workdir / "logs" / "resumable.log", timeout_s=120)
SlurmRunner(SlurmOptions(), workdir, poll_s=0.2,
            on_submit=lambda s, job: print(job, flush=True)).run([step])
"""


def test_resume_reattaches_to_the_running_job_of_a_killed_offlint(slurm):
    child = subprocess.Popen([sys.executable, "-c", RESUMABLE_CHILD, str(slurm)], stdout=subprocess.PIPE, text=True)
    job_id = child.stdout.readline().strip()  # the journal's record of the submission
    log = slurm / "logs" / "resumable.log"
    wait_for(lambda: log.exists() and "started" in log.read_text(), 60, "the job to start")
    child.send_signal(signal.SIGKILL)  # offlint dies without cancelling (lost ssh session, OOM, kill -9)
    child.wait()
    child.stdout.close()
    assert state_of(job_id) == "RUNNING"

    step = Step(name="resumable", argv=("bash", "-c", "echo started; sleep 6; echo finished"), cwd=slurm,
                log=log, timeout_s=120)
    resumed = runner(slurm, on_submit=lambda s, job: pytest.fail(f"submitted again as {job}"))
    resumed.attach({"resumable": job_id})
    (result,) = resumed.run([step])

    assert (result.job_id, result.scheduler_state, result.exit_code) == (job_id, "COMPLETED", 0)
    assert log.read_text().splitlines() == ["started", "finished"]  # one run, not two


def test_resume_submits_again_when_the_old_job_was_cancelled_unknown_or_someone_elses(slurm):
    first = shell_step(slurm, "again", "echo run")
    other = shell_step(slurm, "other", "true")
    (cancelled_job,) = runner(slurm).submit([first])
    subprocess.run(["scancel", cancelled_job], check=True)
    (other_result,) = runner(slurm).run([other])
    wait_for(lambda: state_of(cancelled_job) == "CANCELLED", 30, "the cancel")

    submitted = []
    resumed = runner(slurm, on_submit=lambda s, job: submitted.append(job))
    resumed.attach({"again": cancelled_job})
    (result,) = resumed.run([first])
    assert result.scheduler_state == "COMPLETED" and result.job_id == submitted[0] != cancelled_job

    resumed.attach({"again": other_result.job_id})  # an id that names another step's job
    (result,) = resumed.run([first])
    assert result.job_id == submitted[1] != other_result.job_id

    resumed.attach({"again": "999999"})  # an id Slurm does not know (forgotten, or another cluster's)
    (result,) = resumed.run([first])
    assert result.job_id == submitted[2] and result.scheduler_state == "COMPLETED"


def test_node_failure_is_an_infrastructure_failure(slurm):
    step = shell_step(slurm, "unlucky", "echo started; sleep 120")
    node = node_name()

    def fail_node():
        wait_for(lambda: step.log.exists() and "started" in step.log.read_text(), 60, "the job to start")
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=offlint-test"], check=True)

    threading.Thread(target=fail_node, daemon=True).start()
    try:
        (result,) = runner(slurm).run([step])
    finally:  # slurmd re-registers at once here (ReturnToService=2); resume the node if it did not
        if subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout.strip() \
                not in ("idle", "mixed", "allocated"):
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)
        wait_for(lambda: subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True,
                                        text=True).stdout.strip() == "idle", 60, "the node to be idle")
    assert result.scheduler_state == "NODE_FAIL" and scheduler_outcome(result) is Outcome.INFRA_FAILURE
    assert result.exit_code is None


def test_two_gpu_job_runs_torchrun_with_a_working_rendezvous(slurm):
    # Each rank reports in one write(2): with PYTHONUNBUFFERED, print() issues several and the ranks interleave.
    code = ("import os, torch, torch.distributed as dist; dist.init_process_group('gloo'); "
            "t = torch.tensor([dist.get_rank() + 1]); dist.all_reduce(t); "
            "os.write(1, f'rank {dist.get_rank()} of {dist.get_world_size()} sum {int(t)}\\n'.encode()); "
            "dist.destroy_process_group()")
    step = Step(name="ddp", argv=("python", "-c", code), cwd=slurm, log=slurm / "logs" / "ddp.log",
                timeout_s=300, env={"PATH": f"{PY}:{os.environ['PATH']}"}, gpus=2)
    (result,) = runner(slurm).run([step])
    lines = sorted(line for line in step.log.read_text().splitlines() if line.startswith("rank "))
    assert result.scheduler_state == "COMPLETED", step.log.read_text()
    assert lines == ["rank 0 of 2 sum 3", "rank 1 of 2 sum 3"]


@pytest.mark.slow
def test_time_limit_kill_is_a_timeout(slurm):
    """Costs about 75 s: Slurm limits are whole minutes and checked about every 30 s."""
    steps = [shell_step(slurm, "slow", "trap 'echo got TERM' TERM; echo started; sleep 300 & wait", timeout_s=30),
             shell_step(slurm, "quick", "echo done", timeout_s=30)]
    slow, quick = runner(slurm).run(steps)  # both --time=1: 30 s rounds up to one minute
    assert (slow.scheduler_state, slow.timed_out) == ("TIMEOUT", True)
    assert scheduler_outcome(slow) is Outcome.TIMEOUT
    assert slow.duration_s >= 60  # Slurm never kills before the limit
    text = steps[0].log.read_text()
    assert "DUE TO TIME LIMIT" in text and "got TERM" in text
    assert quick.scheduler_state == "COMPLETED"


def test_a_queued_job_says_why_it_waits(slurm):
    """One one-CPU job more than the node has CPUs: the last waits for Resources, and the runner says so."""
    sinfo = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, check=True)
    cpus = int(sinfo.stdout.split()[0])
    steps = [shell_step(slurm, f"busy{i}", "sleep 2") for i in range(cpus + 1)]
    messages = []
    runner(slurm, log=messages.append).run(steps)
    assert any("is pending: Resources" in m for m in messages), messages

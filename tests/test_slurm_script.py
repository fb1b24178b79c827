"""Slurm without a cluster: sbatch script shapes, options and their sources, state mapping, command errors."""

import shlex
import subprocess
from pathlib import Path

import pytest

from offlint.config import ConfigError, load_config
from offlint.outcomes import Outcome
from offlint.slurm import SlurmError, SlurmOptions, SlurmOptionsError, outcome_for_state, render_script
from offlint.slurm import commands
from offlint.slurm.options import build_options, parse_time
from offlint.slurm.script import script_path
from offlint.slurm.states import scheduler_outcome
from offlint.steps import Step, StepResult

STEP = Step(name="3f2a9c1-try1", argv=("python", "-m", "offlint.replay", "--config", "run config.yaml"),
            cwd=Path("/shared/wt/3f2a9c1"), log=Path("/shared/logs/3f2a9c1-try1.log"), timeout_s=600,
            env={"NCCL_DEBUG": "INFO", "OFFLINT_NOTE": "two words"}, gpus=8)
CONTAINER = ("--container-image=nvcr.io/nvidia/pytorch:25.01-py3", "--container-mounts=/shared:/shared")


def sbatch_lines(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def srun_line(script: str) -> list[str]:
    (line,) = [line for line in script.replace("\\\n", " ").splitlines() if line.startswith("srun ")]
    return shlex.split(line)


def test_two_nodes_of_eight_gpus_run_one_torchrun_per_node():
    options = SlurmOptions(nodes=2, gpus_per_node=8, partition="batch", account="llm", time_min=45,
                           slurm_args=CONTAINER)
    script = render_script(STEP, options)
    assert sbatch_lines(script) == [
        "--job-name=offlint-3f2a9c1-try1", "--output=/shared/logs/3f2a9c1-try1.log", "--chdir=/shared/wt/3f2a9c1",
        "--time=45", "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8", "--partition=batch",
        "--account=llm", "--no-requeue"]
    words = srun_line(script)
    assert words[:5] == ["srun", "--nodes=2", "--ntasks-per-node=1", *CONTAINER]  # container options on srun
    torchrun = words[5:words.index("--no-python") + 1]
    assert torchrun[:3] == ["python", "-m", "torch.distributed.run"]  # the step's own Python's torchrun
    assert "--nnodes=2" in torchrun and "--nproc-per-node=8" in torchrun
    assert "--rdzv-backend=c10d" in torchrun
    # the rendezvous host is the first node of the allocation, computed in the batch script
    assert 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert any(w.startswith("--rdzv-endpoint=$head:") for w in torchrun)
    assert words[len(words) - len(STEP.argv):] == list(STEP.argv)  # argv intact, spaces included
    assert "export NCCL_DEBUG=INFO" in script and "export OFFLINT_NOTE='two words'" in script


def test_task_per_gpu_runs_sixteen_srun_tasks_with_ranks_from_srun():
    script = render_script(STEP, SlurmOptions(nodes=2, gpus_per_node=8, ranks="srun", slurm_args=CONTAINER))
    assert "--ntasks-per-node=8" in sbatch_lines(script)
    words = srun_line(script)
    assert words[:5] == ["srun", "--nodes=2", "--ntasks-per-node=8", *CONTAINER]
    assert "torchrun" not in script
    assert words[5:7] == ["bash", "-c"] and "RANK=$SLURM_PROCID" in words[7] and "WORLD_SIZE=$SLURM_NTASKS" in words[7]
    assert 'export MASTER_ADDR="$head"' in script


def test_a_program_that_starts_its_own_ranks_is_one_task_per_node_with_all_gpus():
    script = render_script(STEP, SlurmOptions(gpus_per_node=4, ranks="program"))
    assert "--ntasks-per-node=1" in sbatch_lines(script) and "--gpus-per-node=4" in sbatch_lines(script)
    assert srun_line(script) == ["srun", "--nodes=1", "--ntasks-per-node=1", *STEP.argv]


def test_a_program_that_is_not_python_gets_torchrun_from_path():
    step = Step(name="b", argv=("./train.sh",), cwd=Path("/w"), log=Path("/w/b.log"), timeout_s=60, gpus=2)
    assert srun_line(render_script(step, SlurmOptions()))[3].startswith("torchrun")


def test_cpu_step_is_one_task_and_time_is_the_step_timeout_rounded_up():
    step = Step(name="a", argv=("make", "check"), cwd=Path("/w"), log=Path("/w/a.log"), timeout_s=61)
    script = render_script(step, SlurmOptions())
    assert "--time=2" in sbatch_lines(script)  # 61 s -> 2 minutes
    assert not any(line.startswith("--gpus") for line in sbatch_lines(script))
    assert srun_line(script) == ["srun", "--nodes=1", "--ntasks-per-node=1", "make", "check"]
    assert script_path(step) == Path("/w/a.sbatch")


def test_generated_scripts_are_valid_bash(tmp_path):
    for options in (SlurmOptions(), SlurmOptions(nodes=2, gpus_per_node=8),
                    SlurmOptions(nodes=2, gpus_per_node=8, ranks="srun", slurm_args=CONTAINER)):
        path = tmp_path / "job.sbatch"
        path.write_text(render_script(STEP, options))
        subprocess.run(["bash", "-n", str(path)], check=True)


@pytest.mark.parametrize("value, minutes", [(30, 30), ("90", 90), ("1:30:00", 90), ("45:30", 46),
                                            ("2-00:00:00", 2880), ("0:0:1", 1)])
def test_time_is_minutes_rounded_up(value, minutes):
    assert parse_time(value, "--time") == minutes


@pytest.mark.parametrize("value", ["soon", "1:2:3:4", 0, True, "x-1:00:00"])
def test_bad_time_is_one_line(value):
    with pytest.raises(SlurmOptionsError, match="^--time: time must"):
        parse_time(value, "--time")


def test_command_line_overrides_the_pyproject_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.offlint.slurm]\npartition = "batch"\nnodes = 2\ngpus-per-node = 8\ntime = "1:00:00"\n'
        'slurm-args = ["--container-image=img"]\nworkdir = "/shared/offlint"\ntask-per-gpu = true\n')
    config = load_config(tmp_path)
    options = build_options({"nodes": 4, "slurm_args": ("--container-mounts=/a:/a",)}, config.slurm, config.path)
    assert options == SlurmOptions(partition="batch", nodes=4, gpus_per_node=8, time_min=60,
                                   slurm_args=("--container-mounts=/a:/a",), ranks="srun",
                                   workdir=Path("/shared/offlint"))
    assert options.ranks == "srun"
    assert build_options({}).workdir is None


def test_relative_workdir_in_pyproject_is_relative_to_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.offlint.slurm]\nworkdir = "scratch/offlint"\n')
    config = load_config(tmp_path)
    assert build_options({}, config.slurm, config.path).workdir == (tmp_path / "scratch/offlint").resolve()


@pytest.mark.parametrize("table, message", [
    ({"nodes": 0}, "nodes must be an integer >= 1"),
    ({"gpus_per_node": 8}, "unknown key(s) gpus_per_node"),
    ({"slurm-args": "--exclusive"}, "slurm-args must be a list of strings"),
    ({"partition": ""}, "partition must be a non-empty string"),
])
def test_bad_table_names_the_file(tmp_path, table, message):
    path = tmp_path / "pyproject.toml"
    with pytest.raises(SlurmOptionsError) as info:
        build_options({}, table, path)
    assert str(info.value).startswith(f"{path}: [tool.offlint.slurm]") and message in str(info.value)


def test_slurm_table_must_be_a_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.offlint]\nslurm = 3\n')
    with pytest.raises(ConfigError, match=r"\[tool.offlint.slurm\] must be a table"):
        load_config(tmp_path)


@pytest.mark.parametrize("state, outcome", [
    ("COMPLETED", None), ("FAILED", None), ("OUT_OF_MEMORY", Outcome.HOST_OOM_KILL),
    ("TIMEOUT", Outcome.TIMEOUT), ("NODE_FAIL", Outcome.INFRA_FAILURE), ("BOOT_FAIL", Outcome.INFRA_FAILURE),
    ("PREEMPTED", Outcome.INFRA_FAILURE), ("CANCELLED", Outcome.ABORTED), ("CANCELLED by 0", Outcome.ABORTED),
    ("CANCELLED+", Outcome.ABORTED), ("UNKNOWN", Outcome.INFRA_FAILURE),
])
def test_state_to_outcome(state, outcome):
    assert outcome_for_state(state) == outcome


def test_an_active_state_has_no_outcome_and_a_local_result_no_scheduler_outcome():
    with pytest.raises(ValueError, match="not final"):
        outcome_for_state("COMPLETING")
    local = StepResult(step=STEP, exit_code=None, signal=None, timed_out=False, duration_s=0.0,
                       scheduler_state="not started: No such file or directory")  # LocalRunner's note
    assert scheduler_outcome(local) is None
    slurm = StepResult(step=STEP, exit_code=None, signal=None, timed_out=False, duration_s=0.0, job_id="7",
                       scheduler_state="NODE_FAIL")
    assert scheduler_outcome(slurm) is Outcome.INFRA_FAILURE and not Outcome.INFRA_FAILURE.is_failure


def test_scontrol_line_and_durations_parse():
    fields = commands.parse_fields("JobId=19 JobName=offlint-a b JobState=TIMEOUT Reason=TimeLimit "
                                   "ExitCode=0:9 RunTime=1-00:01:10 AllocNode:Sid=localhost:28972 CPUs/Task=1")
    assert fields["JobName"] == "offlint-a b" and fields["ExitCode"] == "0:9"
    assert fields["AllocNode:Sid"] == "localhost:28972" and fields["CPUs/Task"] == "1"
    assert commands.parse_duration(fields["RunTime"]) == 86400 + 70
    assert commands.parse_duration("05:03") == 303


def test_missing_slurm_commands_are_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    with pytest.raises(SlurmError) as info:
        commands.submit(tmp_path / "x.sbatch")
    assert "`sbatch` not found on PATH" in str(info.value) and "\n" not in str(info.value)


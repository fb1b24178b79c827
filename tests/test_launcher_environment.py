"""The environment a launcher gives the processes it starts: the variables its own options set
(launch_env.launcher_environment), a batch script's `#SBATCH --export` (shell_parse), and a `deepspeed` launch's ranks
(launch_env.deepspeed_ranks_environment).

Each form below set PYTORCH_CUDA_ALLOC_CONF in real launches (Megatron-LM users' `mpirun -x`, `srun
--export=ALL,...`, `apptainer exec --env`, `env NAME=VALUE`, `#SBATCH --export`), and OFL301 had called it unset.

DeepSpeed's runner starts a multi-node job's ranks over ssh: they get each node's login environment, the launching
shell's NCCL*, PYTHON*, MV2*, UCX* and MLFLOW* variables and the lines of `.deepspeed_env`, not the rest of what the
script exports. A Megatron-DeepSpeed fork sets PYTORCH_CUDA_ALLOC_CONF in its committed `.deepspeed_env`, and OFL301
had said 63 multi-node launches ran without it. A local run (no hostfile, one node, `--no_ssh`) inherits the
script's environment, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from offlint.api import CheckOptions, check

FLAGS = "pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 --train-iters 10 --deepspeed"


def _check(tmp_path: Path, script: str, strict: bool = False):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    (tmp_path / ".deepspeed_env").write_text("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    (tmp_path / "launch.sh").write_text(f"#!/bin/bash\n{script}\n")
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL301"],
                                                 cache=False, strict=strict))
    assert not result.errors, result.errors
    return result.findings


@pytest.mark.parametrize("launcher", [
    "deepspeed --hostfile hosts --num_nodes 2 --num_gpus 8",
    "deepspeed --hostfile=hosts --num_nodes=2",
    "deepspeed -H hosts --include 'node1@node2:0,1'",
    "deepspeed --force_multi --num_gpus 8",
    "deepspeed --hostfile hosts --num_gpus 8",  # the hostfile's hosts decide: not known
    "deepspeed --hostfile hosts --num_nodes $NODES",
    # (no hostfile: DeepSpeed's default, /job/hostfile, the only way 16 nodes run; Megatron-DeepSpeed's curriculum
    # learning example, in eleven forks a helper's sweep read)
    "deepspeed --num_nodes 16 --num_gpus 8",
    # (no hostfile, and the script counts the GPUs of that file's hosts with DeepSpeed's ds_ssh: Megatron-DeepSpeed's
    # examples, 54 findings in three copies a helper's sweep read in session 47)
    "num_gpus=$(($(ds_ssh nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)-2))\ndeepspeed --num_gpus 8",
    "cat /job/hostfile\ndeepspeed",
    "deepspeed --hostfile=$1",  # (a hostfile the caller names: its hosts decide)
    # (a hostfile on one path: SysML-project's MoE scripts, 20 findings a helper's sweep read in session 49)
    'if [ "$#" -eq 1 ]; then\n  HOST_ARGS="--hostfile $1"\nelse\n  HOST_ARGS=""\nfi\ndeepspeed ${HOST_ARGS}',
])
def test_a_launch_that_may_run_on_several_nodes_does_not_know_its_ranks_allocator_options(tmp_path, launcher):
    assert _check(tmp_path, f"{launcher} {FLAGS}") == []
    assert _check(tmp_path, f"{launcher} {FLAGS}", strict=True) == []  # (as for any launch whose environment is open)


@pytest.mark.parametrize("launcher", [
    "deepspeed --num_gpus 8",
    "deepspeed --hostfile hosts --num_nodes 1 --num_gpus 8",
    "deepspeed -H hosts --include node1:0,1,2,3",
    "deepspeed --no_ssh --hostfile hosts --num_nodes 2 --node_rank 0",
    "deepspeed --num_nodes $NODES --num_gpus 8",  # no hostfile: more than one node is refused
    "deepspeed --num_nodes 1 --num_gpus 8",
    "ds_ssh hostname\ndeepspeed --num_nodes 1",  # (one node of the default hostfile)
    "echo ds_ssh_not_run\ndeepspeed --num_gpus 8",
    "# on a cluster, list the hosts in /job/hostfile\ndeepspeed --num_gpus 8",  # (a comment runs nothing)
])
def test_a_local_launch_runs_with_the_scripts_environment(tmp_path, launcher):
    found = _check(tmp_path, f"{launcher} {FLAGS}")
    assert [(f.code, f.possible) for f in found] == [("OFL301", False)]


def test_the_script_exports_reach_the_ranks_only_where_deepspeed_passes_them(tmp_path):
    """On several nodes, the allocator options the script exports are not passed (their name has none of the
    prefixes), so OFL301's info about the options it chose is not given either; locally it still is."""
    export = "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256\n"
    assert _check(tmp_path, f"{export}deepspeed --hostfile hosts --num_nodes 2 {FLAGS}") == []
    local = _check(tmp_path, f"{export}deepspeed --num_gpus 8 {FLAGS}")
    assert [(f.code, f.severity) for f in local] == [("OFL301", "info")]


@pytest.mark.parametrize("launch", [
    f"env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun --nproc-per-node 8 {FLAGS}",
    f"env -C /work NCCL_DEBUG=INFO PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python {FLAGS}",
    f"mpirun -np 16 -x PATH -x PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -x PYTHONPATH=$ROOT python {FLAGS}",
    f"MPI=(-np 16 -x 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True')\nmpirun \"${{MPI[@]}}\" python {FLAGS}",
    f"mpirun -np 16 -genv PYTORCH_CUDA_ALLOC_CONF expandable_segments:True python {FLAGS}",
    f"srun --export=ALL,PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,NCCL_DEBUG=INFO python {FLAGS}",
    f"apptainer exec --nv --env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True img.sif torchrun {FLAGS}",
    f"singularity exec --env=PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True img.sif torchrun {FLAGS}",
    f"#SBATCH --nodes=2\n#SBATCH --export=ALL,PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n\nsrun python {FLAGS}",
    f"sudo -u trainer PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python {FLAGS}",
])
def test_a_variable_a_launcher_sets_reaches_the_launch(tmp_path, launch):
    assert _check(tmp_path, launch) == []


@pytest.mark.parametrize("launcher, reported", [
    ("srun --mpi=pmix --export=ALL,PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", False),
    ("env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", False),
    ("mpirun -np 8 -x PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", False),
    ("srun --export=NCCL_DEBUG=INFO", False),  # (the tasks get only the variables listed: open)
    ("srun --mpi=pmix --export=ALL,NCCL_DEBUG=INFO", True),
    ("srun --mpi=pmix", True),
])
def test_a_variable_a_launcher_sets_reaches_the_bash_c_payload_it_runs(tmp_path, launcher, reported):
    """`srun --export=ALL,NAME=VALUE bash -c "$CMD"` (Bridge's Slurm launchers build SRUN_CMD so): the launch in
    the payload runs with NAME as the launcher sets it. A recall study's correct `--export=ALL,NVTE_CPU_OFFLOAD_V1=1`
    had OFL112 call the variable unset, an error."""
    found = _check(tmp_path, f'CMD="python {FLAGS}"\n{launcher} bash -c "$CMD"')
    assert bool(found) == reported, found


@pytest.mark.parametrize("launch", [
    f"srun --export=NONE python {FLAGS}",  # the tasks get only the variables listed (and Slurm's)
    f"export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nsrun --export=NCCL_DEBUG=INFO python {FLAGS}",
    f"apptainer exec --env-file job.env img.sif torchrun {FLAGS}",
    f"singularity exec --cleanenv img.sif torchrun {FLAGS}",
    f"env -i PATH=/usr/bin torchrun {FLAGS}",
    f"mpirun -np 16 -x $EXTRA python {FLAGS}",
    f"uv run --env-file .env torchrun {FLAGS}",
    f"jsrun -n 2 -E PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python {FLAGS}",  # (its options are not read)
    f"jsrun -n 2 --env_no_propagate python {FLAGS}",
])
def test_a_launcher_that_may_withhold_or_set_any_variable_leaves_them_open(tmp_path, launch):
    assert _check(tmp_path, launch) == []


@pytest.mark.parametrize("launch", [
    f"mpirun -np 16 --hostfile hosts.txt -x PATH python {FLAGS}",
    f"mpirun -np 16 -hostfile $HOSTS python {FLAGS}",
    f"mpirun -np 16 --machinefile hosts.txt python {FLAGS}",
    f"mpirun -np 16 -H node1:8,node2:8 -x PATH python {FLAGS}",
    f"mpirun -np 16 --host $HOSTS python {FLAGS}",
    # Kubeflow's MPIJob: the launcher pod's environment names the workers' hostfile, which the script reads
    f"NNODES=$(wc -l < $OMPI_MCA_orte_default_hostfile)\nmpirun -np $((NNODES*8)) -x PATH python {FLAGS}",
])
def test_an_mpirun_over_other_hosts_leaves_their_environment_open(tmp_path, launch):
    """Open MPI starts the ranks of other hosts with their own environment (a worker pod's, a node's login shell)
    and the variables `-x` names, not the others the script exports. Pai-Megatron-Patch's mpi_run_pretrain_llama3.sh
    runs over Kubeflow's hostfile; OFL301 said its ranks had no PYTORCH_CUDA_ALLOC_CONF (12 findings on Pai and 11
    of its forks, sweep 39). A variable `-x` gives is still known (above); the local host's ranks alone keep the
    finding (below)."""
    assert _check(tmp_path, launch) == []


@pytest.mark.parametrize("launch", [
    f"env NCCL_DEBUG=INFO torchrun --nproc-per-node 8 {FLAGS}",
    f"mpirun -np 8 -H localhost:8 -x PATH python {FLAGS}",
    f"mpirun -np 16 -x PATH python {FLAGS}",
    f"srun --export=ALL,NCCL_DEBUG=INFO python {FLAGS}",
    f"jsrun --nrs 12 --tasks_per_rs 1 python {FLAGS}",
    f"echo hi\n#SBATCH --export=ALL,PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\ntorchrun {FLAGS}",  # (ignored)
])
def test_a_launcher_that_sets_other_variables_leaves_the_finding(tmp_path, launch):
    assert [f.code for f in _check(tmp_path, launch)] == ["OFL301"]


@pytest.mark.parametrize("launch, fixed", [
    (f"mpirun -np 16 -x PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21 python {FLAGS}",
     "-x PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21,expandable_segments:True "),
    (f"env PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21 torchrun {FLAGS}",
     "env PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21,expandable_segments:True "),
    # commas part the variables of these options, and `-genv` gives the value as a word of its own: not edited
    (f"srun --export=ALL,PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21 python {FLAGS}", None),
    (f"apptainer exec --env PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21 img.sif torchrun {FLAGS}", None),
    (f"mpirun -np 16 -genv PYTORCH_CUDA_ALLOC_CONF max_split_size_mb:21 python {FLAGS}", None),
    (f"#SBATCH --export=ALL,PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:21\nsrun python {FLAGS}", None),
])
def test_the_options_a_launcher_sets_are_edited_only_where_a_value_is_one_word(tmp_path, launch, fixed, monkeypatch):
    from offlint.fix import run as fix_run

    found = _check(tmp_path, launch)
    assert [(f.code, f.severity) for f in found] == [("OFL301", "info")]
    monkeypatch.chdir(tmp_path)
    before = (tmp_path / "launch.sh").read_text()
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL301"], cache=False)
    outcome = fix_run.fix(["launch.sh"], options, unsafe=True, diff=False)
    after = (tmp_path / "launch.sh").read_text()
    if fixed is None:
        assert outcome.fixed == [] and after == before
    else:
        assert [p.finding.code for p in outcome.fixed] == ["OFL301"] and fixed in after


KUBERNETES = """\
spec:
  containers:
    - name: trainer
      env:
        - name: NCCL_DEBUG
          value: INFO
        - name: PYTORCH_CUDA_ALLOC_CONF
          value: {value}
      command: ["bash", "-c", "torchrun --nproc-per-node 8 {flags}"]
"""
SKYPILOT = "envs:\n  PYTORCH_CUDA_ALLOC_CONF: {value}\nrun: |\n  torchrun --nproc-per-node 8 {flags}\n"
COMPOSE = ("services:\n  train:\n    environment:\n      - PYTORCH_CUDA_ALLOC_CONF={value}\n"
           "    command: torchrun --nproc-per-node 8 {flags}\n")
ACTIONS = ("env:\n  PYTORCH_CUDA_ALLOC_CONF: {value}\njobs:\n  train:\n    steps:\n"
           "      - run: torchrun --nproc-per-node 8 {flags}\n")


def _yaml_findings(tmp_path: Path, text: str):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    (tmp_path / "job.yaml").write_text(text)
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL301"],
                                                 cache=False))
    assert not result.errors, result.errors
    return result.findings


@pytest.mark.parametrize("form", [KUBERNETES, SKYPILOT, COMPOSE, ACTIONS])
def test_the_environment_a_yaml_file_gives_its_command(tmp_path, form):
    """A Kubernetes container's `env`, SkyPilot's `envs`, Compose's `environment`, a workflow's `env`."""
    assert _yaml_findings(tmp_path, form.format(value="expandable_segments:True", flags=FLAGS)) == []
    other = _yaml_findings(tmp_path, form.format(value="max_split_size_mb:21", flags=FLAGS))
    assert [(f.code, f.severity) for f in other] == [("OFL301", "info")]
    assert "max_split_size_mb:21" in other[0].message


@pytest.mark.parametrize("runner", ["ray job submit --address http://127.0.0.1:8265 -- python3", "python3"])
def test_a_yaml_command_is_known_by_megatron_lms_flags_too(tmp_path, runner):
    """A SkyPilot task whose `run:` submits `python3 train.py <Megatron-LM flags>` to Ray (eigen-ai-labs' slime card
    was read only for a commented torchrun line): its command is read as a shell script's is, by its flags."""
    text = ("run: |\n  " + runner + " train.py --num-layers 8 --hidden-size 256 --num-attention-heads 4 "
            "--pipeline-model-parallel-size 2 --cpu-offloading-num-layers 2\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    (tmp_path / "task.yaml").write_text(text)
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL102"],
                                                 cache=False))
    assert not result.errors, result.errors
    assert [(f.code, Path(f.location.path).name) for f in result.findings] == [("OFL102", "task.yaml")]


def test_a_markdown_page_in_a_yaml_string_is_no_command(tmp_path):
    """NVIDIA's DGX Spark playbooks keep their Markdown pages in `content: |` values; a fenced example command there
    runs nowhere (the same page as README.md is not read), and OFL301 had been reported on it with a fix editing the
    prose (a helper's sweep, session 47). A command string is still read."""
    page = (f"tabs:\n  - content: |\n      # Step 2\n\n      ```bash\n      torchrun --nproc-per-node 8 {FLAGS}\n"
            "      ```\n")
    assert _yaml_findings(tmp_path, page) == []
    assert len(_yaml_findings(tmp_path, SKYPILOT.format(value="max_split_size_mb:21", flags=FLAGS))) == 1


def test_an_environment_entry_of_a_yaml_file_is_not_edited_as_a_command(tmp_path, monkeypatch):
    """The allocator options a container's entry sets are named by `name:` and given by `value:`: no prefix goes in
    front of the name (it had become `- name: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    PYTORCH_CUDA_ALLOC_CONF`)."""
    from offlint.fix import run as fix_run

    text = KUBERNETES.format(value="max_split_size_mb:21", flags=FLAGS)
    assert len(_yaml_findings(tmp_path, text)) == 1
    monkeypatch.chdir(tmp_path)
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, select=["OFL301"], cache=False)
    assert fix_run.fix(["job.yaml"], options, unsafe=True, diff=False).fixed == []
    assert (tmp_path / "job.yaml").read_text() == text


@pytest.mark.parametrize("entry", ["envFrom:\n        - configMapRef: {name: job-env}",
                                   "env:\n        - name: PYTORCH_CUDA_ALLOC_CONF\n"
                                   "          valueFrom: {secretKeyRef: {name: s, key: k}}"])
def test_an_environment_from_elsewhere_leaves_it_open(tmp_path, entry):
    text = (f"spec:\n  containers:\n    - name: trainer\n      {entry}\n"
            f"      command: [\"bash\", \"-c\", \"torchrun --nproc-per-node 8 {FLAGS}\"]\n")
    assert _yaml_findings(tmp_path, text) == []


def test_a_command_without_an_environment_entry_is_judged_as_before(tmp_path):
    text = f"spec:\n  containers:\n    - name: trainer\n      command: [\"bash\", \"-c\", \"torchrun {FLAGS}\"]\n"
    assert [f.code for f in _yaml_findings(tmp_path, text)] == ["OFL301"]


@pytest.mark.parametrize("layout, reported", [
    ("--moe-expert-parallel-size 64 --num-experts 128", []),
    ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4", []),
    ("--tensor-model-parallel-size 2 --moe-expert-parallel-size 16", []),
    # one node holds these: where no hostfile is named the run is local
    ("--moe-expert-parallel-size 8 --num-experts 8", [("OFL301", False)]),
    ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2", [("OFL301", False)]),
    ("--moe-expert-parallel-size $EP", [("OFL301", False)]),
])
def test_a_layout_no_node_holds_runs_deepspeed_on_its_default_hostfile(tmp_path, layout, reported):
    """Megatron-DeepSpeed's MoE examples (`NUM_GPUS=64`, `--moe-expert-parallel-size 64`; copied into ten forks a
    helper's sweep read in session 49) start `deepspeed pretrain_gpt.py ...` with no hostfile: DeepSpeed asserts that
    the data-parallel ranks divide by the expert-parallel size, so the job needs TP x PP x EP ranks at least, more
    than any one host has (16 GPUs at most): it runs on the hosts of DeepSpeed's default hostfile, /job/hostfile, and
    its ranks get that runner's environment, not the script's exports."""
    assert [(f.code, f.possible) for f in _check(tmp_path, f"deepspeed {FLAGS} {layout}")] == reported

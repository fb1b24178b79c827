"""A launch run through a command that runs its arguments: a container runner (`singularity exec --nv IMAGE python
train.py ...`, `apptainer exec`) or a wrapper of the cluster's own (a Megatron-LM fork's DeepSeek-V3 launcher runs
`numarun torchrun ... pretrain_gpt.py`). offlint took a command for a launch only when its first word was a known
launcher, python or a script: these gave no unit, and the fork's 4-layers-over-PP3 split passed unseen. A first
word the script defines as a function is that function's business (its body is read instead), and a command that
prints or inspects its words (`echo torchrun ...`, `which python`) runs none of them."""

from __future__ import annotations

import pytest

from offlint.sources.shell import read_shell

FLAGS = "pretrain_gpt.py --num-layers 4 --hidden-size 64 --num-attention-heads 4 --pipeline-model-parallel-size 3 " \
        "--train-iters 10"


def _launches(script: str) -> list[tuple[str, int]]:
    return [(unit.entry_script, unit.location.line) for unit in read_shell("run.sh", script)]


@pytest.mark.parametrize("prefix", ["numarun torchrun --nproc_per_node 4", "numarun python",
                                    "singularity exec --nv image.sif torchrun --nproc_per_node 4",
                                    "apptainer exec --nv -B .:/workspace image.sif python3",
                                    "sudo -E torchrun --nproc_per_node 4",
                                    # (GCP's GPU recipes: `nice -10 python ...`; `nice python` was read already)
                                    "nice -10 python", "nice -n 10 torchrun --nproc_per_node 4",
                                    # (IBM LSF's launcher, Summit's: a helper's sweep, session 44)
                                    "jsrun --nrs 12 --tasks_per_rs 1 --gpu_per_rs 1 python", "jsrun -n 2 -a 1 python3"])
def test_a_launch_behind_a_command_that_runs_it_is_read(prefix):
    assert _launches(f"#!/bin/bash\n{prefix} {FLAGS}\n") == [("pretrain_gpt.py", 2)]


@pytest.mark.parametrize("prefix", ["echo torchrun --nproc_per_node 4", "printf '%s ' torchrun", "which python",
                                    "echo python", "grep -n torchrun"])
def test_a_command_that_prints_its_words_runs_none_of_them(prefix):
    assert _launches(f"#!/bin/bash\n{prefix} {FLAGS}\n") == []


def test_a_function_of_the_script_is_read_through_its_body():
    shows = f'#!/bin/bash\nshow() {{ echo "+ $*"; }}\nshow torchrun --nproc_per_node 4 {FLAGS}\n'
    assert _launches(shows) == []
    runs = shows.replace('echo "+ $*";', 'echo "+ $*"; "$@";')
    assert _launches(runs) == [("pretrain_gpt.py", 2)]  # (the body's `"$@"`, as before)


def test_the_wrapped_launch_is_judged(tmp_path):
    from offlint.api import CheckOptions, check

    (tmp_path / "run.sh").write_text(f"#!/bin/bash\nnumarun torchrun --nproc_per_node 3 {FLAGS}\n")
    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                select=["OFL218"])).findings
    assert [(f.code, f.location.line) for f in found] == [("OFL218", 2)]


@pytest.mark.parametrize("command", ["llio_transfer ${HOME}/pretrain_gpt.py", "touch pretrain_gpt.py",
                                     "md5sum pretrain_gpt.py", "dos2unix pretrain_gpt.py",
                                     "python -m py_compile pretrain_gpt.py", "python3 -m pylint pretrain_gpt.py"])
def test_a_command_that_handles_the_script_file_runs_no_launch(command):
    """Fugaku-LLM's DeepSpeedFugaku stages its entry script into the node-local cache (`llio_transfer
    .../pretrain_gpt.py`) before the real launch (a helper's third-party sweep: OFL301 on it). A command given one
    script file alone handles the file; a wrapper runs a launch (`numarun python X.py ...`, above); a module that
    checks files runs none of them."""
    assert _launches(f"#!/bin/bash\n{command}\n") == []
    assert _launches(f"#!/bin/bash\n$WRAPPER {FLAGS}\n") == [("pretrain_gpt.py", 2)]  # (an unknown word: may run it)


@pytest.mark.parametrize("tool", ["mypy", "ruff check", "pylint", "black"])
def test_a_file_tool_given_scripts_and_options_runs_no_launch(tool):
    """vLLM's format.sh, copied into Yuan2.0-M32, type-checks its packages: `mypy vllm/attention/*.py
    --follow-imports=skip --config-file pyproject.toml`. mypy had been taken for a wrapper that runs the script it
    is given, and `--config-file` for Bridge's YAML override option: a launch per line, and on that CRLF file eight
    false OFL009 (a helper's sweep). A checker of files runs none of them, as `python -m mypy` already did not."""
    assert _launches(f"#!/bin/bash\n{tool} pkg/*.py --follow-imports=skip --config-file pyproject.toml\n") == []


@pytest.mark.parametrize("wrapper, reported", [
    ('#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\npython -u "$@"\n', []),
    ('#!/bin/bash\nsource venv/bin/activate\nexport RANK=$SLURM_PROCID\npython -u "$@"\n', []),
    ('#!/bin/bash\nexport NCCL_DEBUG=INFO\nexec "$@"\n', [("run.sh", 2)]),
])
def test_a_script_of_the_tree_each_rank_runs_gives_the_launch_its_environment(tmp_path, wrapper, reported):
    """`srun launch.sh pretrain_gpt.py ...` (LUMI's scaling runs): each rank runs launch.sh, which sets up the
    environment and runs its arguments. Its exports and the files it sources are the launch's: read as the wrapper
    of a cluster's own (numarun, above), its `source venv/bin/activate` had been unseen, and an allocator option it
    exports too."""
    from offlint.api import CheckOptions, check

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "launch.sh").write_text(wrapper)
    flags = FLAGS.replace("--pipeline-model-parallel-size 3 ", "")
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\nsrun launch.sh {flags}\n")
    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                select=["OFL301"])).findings
    assert [(f.location.path.rpartition("/")[2], f.location.line) for f in found] == reported


def test_a_script_each_rank_runs_that_launches_nothing_leaves_the_launch_as_written(tmp_path):
    """A script that only prints or checks what it is given (no launch offlint can read in it): the launch stays the
    command as the caller writes it."""
    from offlint.api import CheckOptions, check

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "launch.sh").write_text('#!/bin/bash\necho "starting $@"\nhostname\n')
    (tmp_path / "run.sh").write_text(f"#!/bin/bash\nsrun launch.sh {FLAGS}\n")
    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                select=["OFL301"])).findings
    assert [(f.location.path.rpartition("/")[2], f.location.line) for f in found] == [("run.sh", 2)]


@pytest.mark.parametrize("export, message", [
    ("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", None),
    ("export PYTORCH_HIP_ALLOC_CONF='max_split_size_mb:512'", "PYTORCH_HIP_ALLOC_CONF='max_split_size_mb:512'"),
    ("", "PYTORCH_CUDA_ALLOC_CONF unset")])
def test_a_wrapper_whose_launch_offlint_cannot_read_still_gives_it_its_exports(tmp_path, export, message):
    """LumiOpen's Megatron-LM runs `srun singularity exec IMG ./launch.sh $CMD`, $CMD holding flags offlint cannot
    read: the wrapper's `python "$@"` gives no launch of its own, so the launch is the command as written, in the
    environment the wrapper exports (its ROCm allocator options: 45 findings had said "unset")."""
    from offlint.api import CheckOptions, check

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "launch.sh").write_text(f'#!/bin/bash\n{export}\npython -u "$@"\n')
    (tmp_path / "run.sh").write_text('#!/bin/bash\nCMD="pretrain_gpt.py $GPT_ARGS --num-layers 4"\n'
                                     "srun singularity exec image.sif ./launch.sh $CMD\n")
    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, strict=True,
                                                select=["OFL301"])).findings
    assert [f.message.split("runs with ")[1].split(", without")[0].split(" (PyTorch")[0] for f in found] == \
        ([message] if message else [])


@pytest.mark.parametrize("strict", [False, True])
def test_a_wrapper_outside_the_tree_may_set_the_environment(tmp_path, strict):
    """LUMI's Megatron-LM scripts run `srun singularity exec $IMG ${MEGATRON_PATH}/launch.sh $CMD`, the wrapper in
    the Megatron-LM checkout, not in the linted tree: what it exports is unknown, as with a sourced file offlint
    cannot read, and OFL301 had said "unset" (a helper's sweep, session 46: 7 findings). A launch without such a
    wrapper is still reported."""
    from offlint.api import CheckOptions, check

    (tmp_path / "pyproject.toml").write_text("")
    cmd = 'MEGATRON_PATH=/scratch/project/Megatron-LM\nCMD="${MEGATRON_PATH}/pretrain_gpt.py --num-layers 4"\n'
    (tmp_path / "wrapped.sh").write_text(f"#!/bin/bash\n{cmd}srun singularity exec img.sif "
                                         "${MEGATRON_PATH}/launch.sh $CMD\n")
    (tmp_path / "direct.sh").write_text(f"#!/bin/bash\n{cmd}srun singularity exec img.sif python $CMD\n")
    found = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, strict=strict,
                                                select=["OFL301"])).findings
    assert [f.location.path.rpartition("/")[2] for f in found] == ["direct.sh"]


def test_a_base_command_platform_launch_is_read():
    """NVIDIA Base Command Platform's `bcprun --nnodes N --npernode M --env NAME=VALUE --cmd 'python
    pretrain_gpt.py ...'` runs its --cmd with a shell on each rank (LLM360's k2-train, a helper's sweep, session
    46): it gave no unit, so a launch that torchrun would have had checked passed unseen. Its --env settings are
    the launch's environment."""
    script = ("#!/bin/bash\nbcprun --nnodes 2 --npernode 8 --env 'CUDA_DEVICE_MAX_CONNECTIONS=1' "
              f"-e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True --cmd 'python {FLAGS}'\n"
              "bcprun -n 1 -p 8 -c \"echo ready\"\n")
    units = read_shell("run.sh", script)
    assert _launches(script) == [("pretrain_gpt.py", 2)]
    env = {a.key: a.value for layer in units[0].layers if layer.name == "environment" for a in layer.assignments}
    assert env["env.CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert env["env.PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


@pytest.mark.parametrize("word", ["torchrun", "/usr/bin/torchrun", "./bin/python3.11", "dir/", "/", "", "a//b"])
def test_a_programs_name_is_its_words_last_path_part(word):
    """launch_words.program, what every launch reader compares with "torchrun", "srun", "bash"...: posixpath.basename of a
    word in one call; a word offlint cannot read (None) names no program."""
    import posixpath

    from offlint.sources.launch_words import program

    assert program(word) == posixpath.basename(word)
    assert program(None) == ""

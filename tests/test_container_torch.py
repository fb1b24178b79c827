"""OFL301 stands aside where the launch's container image ships a PyTorch without the `expandable_segments` allocator
option: PyTorch before 2.1 stops the job at its first CUDA allocation on any option but `max_split_size_mb`
("Unrecognized CachingAllocator option"). A helper's third-party sweep: four Megatron-DeepSpeed forks' functional
tests run `srun --container-image .../pytorch:21.12-py3-devel ... bash -c "..."` (NGC 21.12, PyTorch 1.11), and
OFL301's safe fix would have broken them. Fixtures of our own, in those shapes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offlint.sources.launch_torch import container_image, image_torch
from offlint.types import Unknown
from tests.check_helpers import check_json

LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
          "--micro-batch-size 1 --global-batch-size 8 --seq-length 128 --max-position-embeddings 128 --train-iters 10")


@pytest.mark.parametrize("image, torch", [
    ("nvcr.io/nvidia/pytorch:21.12-py3", (1, 14)),
    ("gitlab-master.nvidia.com/dl/dgx/pytorch:22.12-py3-devel", (1, 14)),
    ("nvcr.io#nvidia/pytorch:23.05-py3", Unknown),  # (2023's releases shipped 2.0 and 2.1 previews)
    ("docker://nvcr.io/nvidia/pytorch:24.01-py3", (2, 1)),
    ("pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime", (1, 13)),
    ("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-devel", (2, 4)),
    ("pytorch/pytorch:latest", None),
    ("someone/my-pytorch:22.04", None),  # another registry's tag may count anything
    ("rocm/pytorch:rocm6.0_ubuntu22.04_py3.10_pytorch_2.1.1", None),
    # a vendor's `pytorch` image tagged with its three-part version (Hygon DCU's, in FlagPerf)
    ("image.sourcefind.cn:5000/dcu/admin/base/pytorch:1.13.1-centos7.6-dtk23.10-py38", (1, 13)),
    ("registry.example.com/team/pytorch:2.3.1", (2, 3)), ("registry.example.com/team/my-pytorch:1.13.1", None),
    # a Singularity image file whose name gives its PyTorch (LUMI's naming)
    ("/appl/images/pytorch-lumi_sles-rocm-5.5.1-python-3.10-pytorch-v2.0.1-apex.sif", (2, 0)),
    ("lumi-pytorch-rocm-6.2.4-python-3.12-pytorch-v2.7.1.sif", (2, 7)),
    ("my-pytorch-v2.0.1-notes.txt", None),
])
def test_the_pytorch_an_image_tag_says(image, torch):
    said = image_torch(image)
    assert isinstance(said, Unknown) if torch is Unknown else said == torch


def test_the_image_is_read_from_container_launchers_only():
    assert container_image(["srun", "-N", "1", "--container-image=nvcr.io/nvidia/pytorch:21.12-py3"]) == \
        "nvcr.io/nvidia/pytorch:21.12-py3"
    assert container_image(["docker", "run", "--gpus", "all", "pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime"]) == \
        "pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime"
    assert container_image(["echo", "nvcr.io/nvidia/pytorch:21.12-py3"]) == ""
    assert container_image(["srun", "singularity", "exec", "--nv", "megatron.sif", "./start.sh"]) == "megatron.sif"


def _ofl301(tmp_path, script: str, *args: str) -> list[tuple[str, int, bool]]:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.sh").write_text("#!/bin/bash\n" + script)
    found = check_json(tmp_path, "--no-cache", *args)
    return sorted((f["filename"], f["location"]["row"], f["possible"]) for f in found if f["code"] == "OFL301")


@pytest.mark.parametrize("script", [
    f"srun --container-image nvcr.io/nvidia/pytorch:21.12-py3 {LAUNCH}\n",
    f"srun --container-image=gitlab-master.nvidia.com/dl/dgx/pytorch:21.12-py3-devel --container-mounts /a:/b "
    f"bash -c \"cd /workspace; {LAUNCH}\"\n",
    f"docker run --gpus all pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime {LAUNCH}\n",
    f"IMAGE=nvcr.io/nvidia/pytorch:22.03-py3\nsrun --container-image $IMAGE bash -c '{LAUNCH}'\n",
    f"SIF=pytorch-lumi_sles-rocm-5.5.1-python-3.10-pytorch-v2.0.1-apex.sif\n"
    f"singularity exec -B /scratch $SIF {LAUNCH}\n",
])
def test_no_advice_where_the_image_ships_a_pytorch_without_the_option(tmp_path, script):
    assert _ofl301(tmp_path, script) == []
    assert _ofl301(tmp_path, script, "--strict") == []


def test_a_newer_image_or_none_is_advised_and_a_2023_one_is_possible(tmp_path):
    assert _ofl301(tmp_path, f"srun --container-image nvcr.io/nvidia/pytorch:24.01-py3 {LAUNCH}\n") == [
        ("train.sh", 2, False)]
    assert _ofl301(tmp_path, f"srun --container-image nvcr.io/nvidia/pytorch:23.05-py3 {LAUNCH}\n") == []
    assert _ofl301(tmp_path, f"srun --container-image nvcr.io/nvidia/pytorch:23.05-py3 {LAUNCH}\n", "--strict") == [
        ("train.sh", 2, True)]
    # (the possible finding says what it rests on)
    (finding,) = [f for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"]
    assert finding["message"].endswith("(depends on unknown values: its container image's PyTorch: NGC 23.05-py3 "
                                       "shipped PyTorch 2.0 or a 2.1 preview)")


def test_a_called_script_runs_in_its_callers_image(tmp_path):
    """The forks' sbatch scripts run their test scripts through the container: the launch read through the call
    gets no advice, and neither does the test script read alone, which runs in its callers' environment (a helper's
    sweeps: 40 such findings on 10 Megatron-DeepSpeed forks, whose safe fix would have stopped the job). Before
    session 44 the script alone was advised, as one run by hand."""
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + LAUNCH + "\n")
    script = "srun --container-image nvcr.io/nvidia/pytorch:21.12-py3 bash worker.sh\n"
    assert _ofl301(tmp_path, script) == []
    assert _ofl301(tmp_path, "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nbash worker.sh\n") == []


def _fix(tmp_path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--mcore-version", "0.20.0", "--no-cache",
                           "--fix", *args], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout + done.stderr


def test_a_called_script_s_launch_is_advised_where_every_call_lacks_the_option(tmp_path):
    """Every caller runs the launch without the option: reported at the launch, its fix made there. The fix had been
    made at the call, `bash PYTORCH_CUDA_ALLOC_CONF=... worker.sh`, which runs no script at all."""
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + LAUNCH + "\n")
    assert _ofl301(tmp_path, "bash worker.sh\n") == [("worker.sh", 2, False)]
    _fix(tmp_path)
    assert (tmp_path / "train.sh").read_text() == "#!/bin/bash\nbash worker.sh\n"
    assert (tmp_path / "worker.sh").read_text().startswith(
        "#!/bin/bash\nPYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} torchrun ")


def test_a_called_script_s_launch_is_advised_at_a_call_that_lacks_the_option_where_another_needs_it_so(tmp_path):
    """One caller runs the script in a PyTorch 1.11 container, another bare: reported at the bare call. The fix goes
    where the launch is written, which the container's call runs too: unsafe (--unsafe-fixes)."""
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + LAUNCH + "\n")
    (tmp_path / "old.sh").write_text("srun --container-image nvcr.io/nvidia/pytorch:21.12-py3 bash worker.sh\n")
    assert _ofl301(tmp_path, "bash worker.sh\n") == [("train.sh", 2, False)]
    assert "1 hidden fix" in _fix(tmp_path)
    assert (tmp_path / "worker.sh").read_text() == "#!/bin/bash\n" + LAUNCH + "\n"
    _fix(tmp_path, "--unsafe-fixes")
    assert (tmp_path / "train.sh").read_text() == "#!/bin/bash\nbash worker.sh\n"
    assert (tmp_path / "worker.sh").read_text().startswith("#!/bin/bash\nPYTORCH_CUDA_ALLOC_CONF=")


@pytest.mark.parametrize("flags", ["--use_hpu --distributed-backend=hccl", "--distributed-backend hccl",
                                   # (Moore Threads' MCCL, FlagScale's device switch: FlagPerf's MUSA launches)
                                   "--distributed-backend mccl --device-type mthreads", "--device-type=mthreads"])
def test_no_advice_where_the_launchs_own_flags_choose_another_accelerator(tmp_path, flags):
    """Habana's Megatron-DeepSpeed takes `--use_hpu`, and HCCL is a backend only Gaudi's and Ascend's PyTorch builds
    have: MLPerf v3.1's Gaudi Llama launches (their code outside the tree) had been given OFL301."""
    launch = "deepspeed --num_gpus 8 pretrain_llama.py --deepspeed " + LAUNCH.partition("pretrain_gpt.py ")[2]
    assert _ofl301(tmp_path, f"{launch} {flags}\n") == []
    assert _ofl301(tmp_path, f"{launch}\n") != []


def test_the_backend_is_the_last_one_the_launch_passes(tmp_path):
    """argparse keeps the last `--distributed-backend`: hccl before nccl runs on CUDA GPUs (the flags had been scanned
    for the first)."""
    launch = "deepspeed --num_gpus 8 pretrain_llama.py --deepspeed " + LAUNCH.partition("pretrain_gpt.py ")[2]
    assert _ofl301(tmp_path, f"{launch} --distributed-backend hccl --distributed-backend nccl\n") != []
    assert _ofl301(tmp_path, f"{launch} --distributed-backend nccl --distributed-backend=hccl\n") == []


@pytest.mark.parametrize("pin, default, possible", [
    ("--find-links https://download.pytorch.org/whl/torch_stable.html\ntorch==2.0.0+cu118\n", [], True),
    ("torch<2.1\n", [], True),
    ("torch==2.4.0\n", [("train.sh", 2, False)], False),
    ("torchvision==0.15.1\n", [("train.sh", 2, False)], False),  # (no torch pin: nothing said)
])
def test_a_pytorch_the_trees_requirements_pin_before_the_option_leaves_the_advice_open(tmp_path, pin, default,
                                                                                        possible):
    """Megatron-DeepSpeed forks of 2023 pin torch 2.0 in requirements.txt for the environment their launches activate
    (ABCI's: torch==2.0.0+cu118): its allocator stops the job at its first allocation on `expandable_segments`.
    Not known for sure (the environment is built elsewhere): possible with --strict, naming the pin."""
    (tmp_path / "requirements.txt").write_text(pin)
    assert _ofl301(tmp_path, f"{LAUNCH}\n") == default
    strict = check_json(tmp_path, "--no-cache", "--strict")
    said = [f["message"] for f in strict if f["code"] == "OFL301" and f["possible"]]
    assert bool(said) == possible
    assert not said or "requirements.txt pins torch" in said[0]


def test_a_rocm_launchs_own_allocator_options_are_named_and_kept(tmp_path):
    """PyTorch's ROCm builds read PYTORCH_HIP_ALLOC_CONF where PYTORCH_CUDA_ALLOC_CONF is unset (LUMI's launch.sh
    exports `max_split_size_mb:512` there): the finding names those options, is info (they may have been chosen
    against expandable segments) and offers no fix that sets PYTORCH_CUDA_ALLOC_CONF, which would replace them."""
    import subprocess
    import sys

    _ofl301(tmp_path, f"export PYTORCH_HIP_ALLOC_CONF=max_split_size_mb:512\n{LAUNCH}\n")
    found = [f for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL301"]
    assert [f["severity"] for f in found] == ["info"]
    assert found[0]["message"].startswith("this training launch runs with PYTORCH_HIP_ALLOC_CONF='max_split_size_mb:")
    shown = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--no-cache", "--mcore-version", "0.20.0",
                            "--unsafe-fixes"], cwd=tmp_path, capture_output=True, text=True)
    assert "OFL301" in shown.stdout and "fixable" not in shown.stdout + shown.stderr
    assert _ofl301(tmp_path, f"export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True\n{LAUNCH}\n") == []


@pytest.mark.parametrize("dispatch, reported", [
    # every task the main block can choose imports a module whose imports reach torch._six
    ("    if args.task == 'RACE':\n        from race import main\n    elif args.task in ['MNLI', 'QQP']:\n"
     "        from glue import main\n    else:\n        raise NotImplementedError(args.task)\n    main()\n", []),
    ("    from glue import main\n    main()\n", []),
    ("    if args.task == 'RACE':\n        from race import main\n    else:\n        print(args.task)\n"
     "        sys.exit(1)\n    main()\n", []),
    # one task does not reach it: which runs is the launch's `--task`
    ("    if args.task == 'RACE':\n        from race import main\n    else:\n        from plain import main\n"
     "    main()\n", [("train.sh", 2, False)]),
])
def test_torch_six_reached_from_the_main_blocks_imports_is_a_pytorch_1_launch(tmp_path, dispatch, reported):
    """Megatron's tasks/main.py imports its task's module inside `if __name__ == '__main__':`, by `--task`
    (`if args.task == 'RACE': from race.finetune import main` / `elif ...: from glue.finetune import main`), and
    each reaches megatron/optimizer/clip_grads.py's unguarded `from torch._six import inf`: the fine-tuning launches of
    four Megatron-DeepSpeed forks (14 findings, a helper's sweep, session 49) run on PyTorch 1.x only, where OFL301's
    safe fix stops them at their first allocation. Only the script's top-level imports had been followed."""
    files = {"tasks/main.py": "import sys\nfrom megatron import get_args\n\nif __name__ == '__main__':\n"
                              "    args = get_args()\n" + dispatch,
             "tasks/race.py": "from megatron.training import finetune\n\n\ndef main():\n    finetune()\n",
             "tasks/glue.py": "from megatron.training import finetune\n\n\ndef main():\n    finetune()\n",
             "tasks/plain.py": "from megatron.loop import finetune\n\n\ndef main():\n    finetune()\n",
             "megatron/__init__.py": "def get_args():\n    return None\n",
             "megatron/loop.py": "def finetune():\n    return None\n",
             "megatron/training.py": "from megatron.clip_grads import clip\n\n\ndef finetune():\n    clip()\n",
             "megatron/clip_grads.py": "from torch._six import inf\n\n\ndef clip():\n    return inf\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    launch = LAUNCH.replace("pretrain_gpt.py", "tasks/main.py --task MNLI")
    assert _ofl301(tmp_path, launch + "\n") == reported


@pytest.mark.parametrize("clip_grads, reported", [
    ("import torch\nfrom torch._six import inf\n", []),  # (PyTorch 2.0 removed torch._six: the job runs on 1.x)
    ("try:\n    from torch._six import inf\nexcept ModuleNotFoundError:\n    from torch import inf\n",
     [("train.sh", 2, False)]),  # (Megatron-DeepSpeed's forks: either PyTorch)
])
def test_no_advice_where_the_launchs_code_imports_what_pytorch_2_removed(tmp_path, clip_grads, reported):
    """Zenodia's and TurkuNLP's Megatron-LM copies (a helper's sweep) import `inf` from torch._six at the top of
    megatron/optimizer/clip_grads.py, which pretrain_gpt.py's imports reach: on PyTorch 2 the launch stops at the
    import, on 1.x OFL301's fix stops it at the first allocation."""
    files = {"pretrain_gpt.py": "from megatron.training import pretrain\n\nif __name__ == '__main__':\n    pretrain()\n",
             "megatron/__init__.py": "",
             "megatron/training.py": "from megatron.optimizer import get_optimizer\n\n\ndef pretrain():\n"
                                     "    get_optimizer()\n",
             "megatron/optimizer/__init__.py": "from .clip_grads import clip_grad_norm\n\n\ndef get_optimizer():\n"
                                               "    return None\n",
             "megatron/optimizer/clip_grads.py": clip_grads + "\n\ndef clip_grad_norm():\n    return inf\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _ofl301(tmp_path, LAUNCH + "\n") == reported
    assert _ofl301(tmp_path, LAUNCH + "\n", "--strict") == reported


@pytest.mark.parametrize("interpreter, reported", [
    ("/home/ec2-user/anaconda3/envs/pytorch_latest_p37/bin/python", []),  # (2020's AWS DLAMI: Python 3.7)
    ("/usr/bin/python3.6", []), ("python2.7", []),
    ("/opt/conda/envs/pytorch_p310/bin/python", [("train.sh", 2, False)]),  # (3.10: PyTorch 2 may be there)
    ("python3.8", [("train.sh", 2, False)]), ("/opt/venv/bin/python", [("train.sh", 2, False)]),
])
def test_no_advice_where_the_interpreter_predates_pytorch_2(tmp_path, interpreter, reported):
    """An AWS Deep Learning AMI's `.../envs/pytorch_latest_p37/bin/python -m torch.distributed.launch ...` (a helper's
    sweep, session 46): PyTorch 2.0 needs Python 3.8, so that job runs a 1.x whose allocator stops at the first
    allocation on expandable_segments; OFL301's fix would have broken it."""
    launch = f"{interpreter} -m torch.distributed.launch --nproc_per_node 8 {LAUNCH.split(' 8 ', 1)[1]}"
    assert _ofl301(tmp_path, launch + "\n") == reported
    assert _ofl301(tmp_path, launch + "\n", "--strict") == reported


@pytest.mark.parametrize("activate, launcher, reported", [
    ("conda activate pytorch_p37", "python", []),  # (2020's AWS DLAMI: Python 3.7)
    ("source activate pytorch_p36", "python3", []),
    ("conda activate /home/ubuntu/anaconda3/envs/pytorch_p37", "python", []),
    ("conda activate pytorch_p310", "python", [("train.sh", 3, False)]),
    ("conda activate myenv", "python", [("train.sh", 3, False)]),
    # an interpreter named by its path is not the environment's
    ("conda activate pytorch_p37", "/usr/bin/python3", [("train.sh", 3, False)]),
    ("conda activate pytorch_p37\nconda deactivate", "python", [("train.sh", 4, False)]),
])
def test_no_advice_where_the_conda_environment_predates_pytorch_2(tmp_path, activate, launcher, reported):
    """`conda activate pytorch_p37` (AWS Deep Learning AMIs name their conda environments for their Python), then
    `python -m torch.distributed.launch ...`: conda puts the environment's bin first on PATH and names it in
    CONDA_DEFAULT_ENV; PyTorch 2.0 needs Python 3.8, so that job runs a 1.x whose allocator stops at the first
    allocation on expandable_segments, and OFL301 had offered its safe fix (its interpreter named by path,
    `envs/pytorch_latest_p37/bin/python`, already gave none)."""
    launch = f"{launcher} -m torch.distributed.launch --nproc_per_node 8 {LAUNCH.split(' 8 ', 1)[1]}"
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.sh").write_text(f"#!/bin/bash\n{activate}\n{launch}\n")
    assert _ofl301_at(tmp_path) == reported
    assert _ofl301_at(tmp_path, "--strict") == reported


@pytest.mark.parametrize("base, default, possible", [
    ("image.sourcefind.cn:5000/dcu/admin/base/pytorch:1.13.1-centos7.6-dtk23.10-py38", [], True),
    ("nvcr.io/nvidia/pytorch:21.08-py3 AS build\nRUN make\nFROM nvcr.io/nvidia/pytorch:24.01-py3",
     [("train.sh", 2, False)], False),  # (the last stage's image is the one the launch runs in)
])
def test_a_pytorch_the_dockerfile_beside_the_launch_builds_from_leaves_the_advice_open(tmp_path, base, default,
                                                                                        possible):
    """FlagPerf keeps each vendor launch beside the Dockerfile of the image it runs in: Hygon DCU's builds from
    PyTorch 1.13.1, whose allocator stops at the first allocation on expandable_segments, and OFL301's safe fix had
    been offered (a helper's sweep, session 47). Not known for sure: possible with --strict, naming the file."""
    (tmp_path / "Dockerfile").write_text(f"FROM {base}\nRUN pip install flagscale\n")
    assert _ofl301(tmp_path, f"{LAUNCH}\n") == default
    said = [f["message"] for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"
            and f["possible"]]
    assert bool(said) == possible
    assert not said or "Dockerfile builds from image.sourcefind.cn" in said[0]


@pytest.mark.parametrize("launcher, reported", [
    ("python3 -m oneflow.distributed.launch --nproc_per_node 8", []),
    ("python -m paddle.distributed.launch --gpus 0,1", []),
    ("python3 -m torch.distributed.launch --nproc_per_node 8", [("train.sh", 2, False)]),
])
def test_another_frameworks_launcher_starts_no_pytorch_ranks(tmp_path, launcher, reported):
    """OneFlow's LiBai launches run `python3 -m oneflow.distributed.launch ... tools/train_net.py` (the script outside
    the tree): every rank runs OneFlow, whose allocator never reads PYTORCH_CUDA_ALLOC_CONF; --strict had given 24
    possible OFL301 (a helper's sweep, session 47)."""
    launch = f"{launcher} {LAUNCH.split(' 8 ', 1)[1]}"
    assert _ofl301(tmp_path, launch + "\n") == reported
    assert _ofl301(tmp_path, launch + "\n", "--strict") == reported


@pytest.mark.parametrize("flags, image, default, strict", [
    ("--checkpoint-activations", "", [], [("train.sh", 2, True)]),
    ("--data-impl mmap", "", [], [("train.sh", 2, True)]),
    ("--DDP-impl local", "", [], [("train.sh", 2, True)]),  # (removed 2023-09 too: 13 Pai-Megatron-Patch forks)
    # an image named decides
    ("--data-impl mmap", "srun --container-image nvcr.io/nvidia/pytorch:24.01-py3 ", [("train.sh", 2, False)],
     [("train.sh", 2, False)]),
    ("--recompute-activations", "", [("train.sh", 2, False)], [("train.sh", 2, False)]),
    # Megatron-DeepSpeed still takes both in 2024, on PyTorch 2
    ("--checkpoint-activations --deepspeed", "", [("train.sh", 2, False)], [("train.sh", 2, False)]),
])
def test_a_launch_for_a_megatron_lm_before_2023_09_leaves_the_advice_open(tmp_path, flags, image, default, strict):
    """`--checkpoint-activations` (validate_args exits on it since 2023-04) or `--data-impl` (removed 2023-09): the
    launch was written for a Megatron-LM of PyTorch 2.0's time or older (BigScience's of 2021); where no image says
    which PyTorch it runs on, the advice is possible, naming the option."""
    script = f"{image}{LAUNCH} {flags}\n"
    assert _ofl301(tmp_path, script) == default
    assert _ofl301(tmp_path, script, "--strict") == strict
    if not default:
        (finding,) = [f for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"]
        assert f"the launch passes {flags.split()[0]}, which only a Megatron-LM from before 2023-09" in \
            finding["message"]


@pytest.mark.parametrize("setting, image, default", [
    ("export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=true", "", [("train.sh", 3, False)]),  # (read since PyTorch 2.6)
    ("export TORCH_FORCE_WEIGHTS_ONLY_LOAD=1", "", [("train.sh", 3, False)]),  # (since 2.4)
    ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=true", "", []),  # (not exported: the ranks never see it)
    # an image named still decides
    ("export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=true", "srun --container-image nvcr.io/nvidia/pytorch:21.12-py3 ", []),
])
def test_a_variable_only_a_newer_pytorch_reads_says_which_it_runs_on(tmp_path, setting, image, default):
    """Pai-Megatron-Patch's legacy examples pass `--checkpoint-activations` to a Megatron-LM of 2023-05, and export
    `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=true  # for PyTorch >= 2.6` (that Megatron's torch.load calls fail on 2.6's
    default otherwise): they run on a PyTorch that has expandable_segments, and the old option had turned 12 real
    OFL301 findings into possible ones (session 48). PyTorch's documentation lists TORCH_FORCE_WEIGHTS_ONLY_LOAD from
    2.4 and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD from 2.6."""
    script = f"{setting}\n{image}{LAUNCH} --checkpoint-activations\n"
    assert _ofl301(tmp_path, script) == default
    if default:
        (finding,) = [f for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"]
        assert not finding["possible"]


@pytest.mark.parametrize("requirement, default", [
    ("torch==2.3.0", [("scripts/train.sh", 2, False)]),
    ("torch>=2.1", [("scripts/train.sh", 2, False)]),
    ("torch~=2.4.0", [("scripts/train.sh", 2, False)]),
    ("torch==2.0.1", []),  # (a PyTorch without the option: possible, as before)
    ("numpy", []),
])
def test_a_newer_pytorch_the_tree_pins_says_which_it_runs_on(tmp_path, requirement, default):
    """OpenLLM-France's Lucie-Training keeps launches passing `--data-impl` (a Megatron-LM of 2023) beside a
    requirements.txt pinning torch==2.3.0: the old option had made OFL301 possible, where the pin says the launch's
    PyTorch has expandable_segments (a helper's sweep, session 49)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "requirements.txt").write_text(f"{requirement}\nnumpy\n")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.sh").write_text(f"#!/bin/bash\n{LAUNCH} --data-impl mmap\n")
    assert _ofl301_at(tmp_path) == default


def test_an_option_the_trees_own_megatron_defines_says_nothing_of_the_version(tmp_path):
    """A Megatron-DeepSpeed fork in the tree still defines --checkpoint-activations and --data-impl in 2024 (its
    examples copied from Megatron-LM's pass them without --deepspeed): they are its own options there, whatever
    the version the run is checked against."""
    (tmp_path / "megatron").mkdir()
    (tmp_path / "megatron" / "arguments.py").write_text(
        "def _add_training_args(parser):\n    group = parser.add_argument_group(title='training')\n"
        "    group.add_argument('--checkpoint-activations', action='store_true')\n    return parser\n")
    (tmp_path / "pretrain_gpt.py").write_text("from megatron.training import pretrain\npretrain(None, None, None)\n")
    assert _ofl301(tmp_path, f"{LAUNCH} --checkpoint-activations\n", "--mcore-version", "0.20.0") == [
        ("train.sh", 2, False)]


@pytest.mark.parametrize("base, default, strict", [
    ("nvcr.io/nvidia/pytorch:21.08-py3", [], [("worker.sh", 2, True)]),  # (PyTorch 1.10)
    ("nvcr.io/nvidia/pytorch:24.01-py3", [("worker.sh", 2, False)], [("worker.sh", 2, False)]),
    (None, [("worker.sh", 2, False)], [("worker.sh", 2, False)]),  # no definition file of that name
])
def test_a_singularity_image_the_tree_defines_is_judged_by_its_base(tmp_path, base, default, strict):
    """LUMI's and Vega's Megatron scripts run `singularity exec --nv megatron.sif ./start_training.sh`, the image
    built by the tree's `megatron.def` (`Bootstrap: docker`, `From: nvcr.io/nvidia/pytorch:21.08-py3`, PyTorch
    1.10): OFL301's safe fix would stop that job. Most likely that build, not for sure: possible, naming it."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + LAUNCH + "\n")
    (tmp_path / "sbatch_run.sh").write_text("#!/bin/bash\nsrun singularity exec --nv megatron.sif ./worker.sh\n")
    if base:
        (tmp_path / "megatron.def").write_text(f"Bootstrap: docker\nFrom: {base}\n\n%post\n    pip install regex\n")
    assert _ofl301_at(tmp_path) == default
    assert _ofl301_at(tmp_path, "--strict") == strict
    if strict and strict[0][2]:
        (finding,) = [f for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"]
        assert "megatron.def builds megatron.sif from nvcr.io/nvidia/pytorch:21.08-py3" in finding["message"]


def _ofl301_at(tmp_path, *args: str) -> list[tuple[str, int, bool]]:
    found = check_json(tmp_path, "--no-cache", *args)
    return sorted((f["filename"], f["location"]["row"], f["possible"]) for f in found if f["code"] == "OFL301")


def test_the_definition_file_is_looked_for_up_to_the_root_of_an_absolute_path():
    """A launch named by an absolute path (files named on the command line): the search ends at "/" (it had looped
    forever there, posixpath.dirname("/") being "/")."""
    from offlint.sources.launch_torch import definition_torch

    assert definition_torch("image.sif", "/abs/dir/run.sh", lambda path: None) == ""
    base = "Bootstrap: docker\nFrom: nvcr.io/nvidia/pytorch:21.08-py3\n"
    assert definition_torch("image.sif", "/abs/dir/run.sh", {"/abs/image.def": base}.get) == \
        "/abs/image.def builds image.sif from nvcr.io/nvidia/pytorch:21.08-py3"


@pytest.mark.parametrize("dockerfile, default, possible", [
    ("ARG FROM_IMAGE_NAME=nvcr.io/nvidia/pytorch:22.08-py3\nFROM ${FROM_IMAGE_NAME}\nADD . /workspace\n", [], True),
    ("ARG BASE=nvcr.io/nvidia/pytorch:22.08-py3\nFROM $BASE AS base\nRUN pip install .\n", [], True),
    ("FROM nvcr.io/nvidia/pytorch:22.08-py3 AS base\nRUN make\nFROM base\n", [], True),  # (a stage's base)
    # an argument without a default is given at build time: the image is not known
    ("ARG FROM_IMAGE_NAME\nFROM ${FROM_IMAGE_NAME}\n", [("scripts/train.sh", 2, False)], False),
    ("ARG FROM_IMAGE_NAME=nvcr.io/nvidia/pytorch:24.01-py3\nFROM ${FROM_IMAGE_NAME}\n",
     [("scripts/train.sh", 2, False)], False),
])
def test_the_nearest_dockerfile_above_the_launch_and_its_arguments_decide(tmp_path, dockerfile, default, possible):
    """DeepLearningExamples keeps one Dockerfile per model folder, its base an `ARG` default
    (`ARG FROM_IMAGE_NAME=nvcr.io/nvidia/pytorch:22.08-py3`, PyTorch 1.13; `FROM ${FROM_IMAGE_NAME}`), and the
    launches one folder down (FastPitch's `scripts/train.sh`): OFL301 had offered its safe fix there (a helper's
    sweep, session 48), reading only a Dockerfile beside the launch and only a literal `FROM`."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "Dockerfile").write_text(dockerfile)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.sh").write_text(f"#!/bin/bash\n{LAUNCH}\n")
    assert _ofl301_at(tmp_path) == default
    said = [f["message"] for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"
            and f["possible"]]
    assert bool(said) == possible
    assert not said or "Dockerfile builds from nvcr.io/nvidia/pytorch:22.08-py3" in said[0]


@pytest.mark.parametrize("setup, default, possible", [
    ("module load gcc/11.3.0 cuda/11.7.0\nmodule load pytorch/1.12.1-cuda-11.7.0", [], True),  # (a site module)
    ("module load 2022 PyTorch/1.12.0-foss-2022a-CUDA-11.7.0", [], True),  # (EasyBuild's naming)
    ("ml PyTorch/1.13.1", [], True),  # (Lmod's shorthand)
    ("ml pytorch/2.1.0", [("train.sh", 3, False)], False),
    ("module load pytorch/1.12\nmodule purge", [("train.sh", 4, False)], False),
    ("module load pytorch/1.12\nmodule unload pytorch", [("train.sh", 4, False)], False),
    ("module load gcc/11.3.0 cuda/11.7.0", [("train.sh", 3, False)], False),
    ("echo module load pytorch/1.12", [("train.sh", 3, False)], False),  # (printed, not run)
])
def test_a_pytorch_module_the_launch_loads_leaves_the_advice_open(tmp_path, setup, default, possible):
    """HPC launch scripts take PyTorch from the site's environment modules (`module load pytorch/1.12.1-cuda-11.7.0`,
    EasyBuild's `PyTorch/1.12.0-foss-2022a-CUDA-11.7.0`): a PyTorch before 2.1 stops the job at its first allocation
    on expandable_segments, and OFL301's safe fix had been offered (sajal-vt's Summit launches, a helper's sweep,
    session 44: 'ML'). Lmod and Environment Modules list what is loaded in LOADEDMODULES; a virtual environment
    activated after it may hold another PyTorch: possible with --strict, naming the module."""
    script = f"{setup}\n{LAUNCH}\n"
    assert _ofl301(tmp_path, script) == default
    said = [f["message"] for f in check_json(tmp_path, "--no-cache", "--strict") if f["code"] == "OFL301"
            and f["possible"]]
    assert bool(said) == possible
    assert not said or "module" in said[0] and "orch/1.1" in said[0]

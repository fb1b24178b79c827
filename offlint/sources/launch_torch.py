"""Which PyTorch a launch runs, where its words or the tree's files say: its interpreter's Python (one before 3.8
has no PyTorch 2), a container image whose tag names a PyTorch (NGC's YY.MM, Docker Hub's, a Singularity image
file's name), and the files beside the launch (the nearest requirements.txt, Dockerfile, or Singularity definition
file). OFL301 and the conditions on PyTorch versions read these (Unit.container_image, Unit.old_torch).
"""

from __future__ import annotations

import posixpath
import re

from offlint.sources.launch_words import EnvArg
from offlint.types import Unknown

# An interpreter a PyTorch 2 wheel does not exist for (2.0 needs Python 3.8): `python3.7`, `python2`, and AWS Deep
# Learning AMIs' conda environments named for their Python (`envs/pytorch_latest_p37/bin/python`, 2020's DLAMI)
_OLD_PYTHON = re.compile(r"(?:^|/)(?:python(2(?:\.\d+)?|3\.[0-7])|envs/[\w.-]*_p(2\d|3[0-7])/bin/python[\d.]*)$")


def old_interpreter(launcher: list[str | None]) -> str:
    """Where the launch's interpreter is a Python that only PyTorch 1.x supports, why (Unit.old_torch); "" else."""
    for word in launcher:
        found = _OLD_PYTHON.search(word or "")
        if found:
            version = found.group(1) or found.group(2)
            version = version if "." in version or len(version) == 1 else f"{version[0]}.{version[1:]}"
            return f"its interpreter `{word}` is Python {version}, which PyTorch 2 does not support"
    return ""


_OLD_CONDA_ENVIRONMENT = re.compile(r"_p(2\d|3[0-7])$")  # (the DLAMI's naming: `pytorch_p37`, `pytorch_latest_p36`)


def conda_interpreter(launcher: list[str | None], env: dict[str, EnvArg]) -> str:
    """Where the launcher is found on PATH (its name has no `/`) and the conda environment the launch runs in
    (CONDA_DEFAULT_ENV, which `conda activate` sets: sources/shell_commands) is named for a Python that only PyTorch
    1.x supports, as AWS Deep Learning AMIs name theirs (`pytorch_p37`), why (Unit.old_torch); "" else."""
    held = env.get("CONDA_DEFAULT_ENV")
    name = posixpath.basename(held.value.rstrip("/")) if held is not None and held.value else ""
    found = _OLD_CONDA_ENVIRONMENT.search(name)
    if found is None or not launcher or launcher[0] is None or "/" in launcher[0]:
        return ""
    version = f"{found.group(1)[0]}.{found.group(1)[1:]}"
    return f"it runs in the conda environment `{name}`, Python {version}, which PyTorch 2 does not support"


# A PyTorch container image named among a launch's launcher words (`srun --container-image IMAGE`, `docker run ...
# IMAGE`, `singularity exec docker://IMAGE`): NGC's (`nvcr.io/nvidia/pytorch:21.12-py3`, enroot's `nvcr.io#nvidia/...`)
# or Docker Hub's (`pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime`)
_TORCH_IMAGE = re.compile(r"(?:^|[/#=:])(pytorch/pytorch|[\w.-]*pytorch):([\w.+-]+)$")
# A Singularity image file whose name gives its PyTorch (LUMI's `...-python-3.10-pytorch-v2.0.1-apex-....sif`)
_SIF_TORCH = re.compile(r"pytorch-v(\d+)\.(\d+)[^/]*\.sif$")
_CONTAINER_LAUNCHERS = frozenset({"srun", "salloc", "docker", "podman", "singularity", "apptainer", "enroot"})


def container_image(values: list[str | None]) -> str:
    """The PyTorch image `values` (a command's words before its script) run it in, as written ("" for none: the
    machine's own PyTorch, or an image offlint cannot read): a `pytorch` image, or a Singularity image file. The
    container launcher is one of the first three words (`srun ...`, `sudo docker run ...`, `timeout 1h singularity
    exec ...`): looked for there alone, as this is asked of every command of a script."""
    for value in values[:3]:  # (a loop, not any(): no generator's calls for each command)
        if value is not None and (value in _CONTAINER_LAUNCHERS or "/" in value
                                  and value.rpartition("/")[2] in _CONTAINER_LAUNCHERS):
            break
    else:
        return ""
    return next((value.rpartition("=")[2] if value.startswith("--") else value for value in values
                 if value is not None and (_TORCH_IMAGE.search(value) or value.endswith(".sif"))), "")


def image_torch(image: str) -> tuple[int, int] | Unknown | None:
    """The (major, minor) PyTorch version an image's tag says at most: NGC's YY.MM releases up to 22.12 ship PyTorch
    1.x (1.14 at most), Docker Hub's tags name it, as does another registry's `pytorch` image tagged with a
    three-part version; an Unknown for NGC's 2023 tags before 23.10 (2.0 or a 2.1 preview); None where the tag does
    not say (another registry's YY.MM or other tags)."""
    match = _TORCH_IMAGE.search(image)
    if match is None:
        named = _SIF_TORCH.search(image)
        return (int(named.group(1)), int(named.group(2))) if named is not None else None
    tag = match.group(2)
    if match.group(1) == "pytorch/pytorch":
        named = re.match(r"(\d+)\.(\d+)(?:\D|$)", tag)
        return (int(named.group(1)), int(named.group(2))) if named is not None else None
    version = re.match(r"(\d+)\.(\d+)\.\d+(?:[-+_]|$)", tag)  # (a vendor's `.../pytorch:1.13.1-centos7.6-dtk23.10`:
    if version is not None and match.group(1) == "pytorch":  # a three-part version, no YY.MM)
        return int(version.group(1)), int(version.group(2))
    ngc = re.match(r"(\d{2})\.(\d{2})(?:\D|$)", tag)
    if ngc is None or match.group(1) != "pytorch" or not ("nvcr.io" in image or "nvidia" in image):
        return None  # (another registry's image: its tag may count anything)
    release = (int(ngc.group(1)), int(ngc.group(2)))
    if (23, 1) <= release < (23, 10):
        return Unknown(f"NGC {tag} shipped PyTorch 2.0 or a 2.1 preview")
    return (1, 14) if release < (23, 1) else (2, 1)


# A requirements line pinning PyTorch at a version or below one (`torch==2.0.0+cu118`, `torch<2.1`, `torch~=1.13.1`)
_TORCH_REQUIREMENT = re.compile(r"^[ \t]*torch[ \t]*(==|~=|<=|<)[ \t]*(\d+)\.(\d+)", re.MULTILINE)


def requirements_torch(launch_path: str, read_text) -> str:
    """Where the requirements.txt nearest the launch (its folder's, or a folder's above it in the project) pins a
    PyTorch before 2.1, which has no `expandable_segments` allocator option: "FILE pins torch==2.0"; "" where none
    does. (Megatron-DeepSpeed forks of 2023 pin torch 2.0 for the environment their launches activate: ABCI's
    pins torch==2.0.0+cu118, and OFL301's fix would stop its jobs at their first allocation.)"""
    path, text = _torch_requirements(launch_path, read_text)
    match = _TORCH_REQUIREMENT.search(text)
    if match is None:
        return ""
    version = (int(match.group(2)), int(match.group(3)))
    if version < (2, 1) or match.group(1) == "<" and version <= (2, 1):
        return f"{path} pins torch{match.group(1)}{version[0]}.{version[1]}"
    return ""


def requirements_new_torch(launch_path: str, read_text) -> str:
    """Where the requirements.txt nearest the launch (as requirements_torch finds it) pins a PyTorch of 2.1 or later,
    which has `expandable_segments` (`torch==2.3.0`, `torch>=2.1`): "FILE pins torch==2.3"; "" otherwise. Lucie-Training
    pins torch==2.3.0 beside launches still passing a Megatron-LM of 2023's `--data-impl`."""
    path, text = _torch_requirements(launch_path, read_text)
    match = _TORCH_AT_LEAST.search(text)
    version = (int(match.group(2)), int(match.group(3))) if match else (0, 0)
    return f"{path} pins torch{match.group(1)}{version[0]}.{version[1]}" if version >= (2, 1) else ""


_TORCH_AT_LEAST = re.compile(r"^[ \t]*torch[ \t]*(==|~=|>=)[ \t]*(\d+)\.(\d+)", re.MULTILINE)


def _torch_requirements(launch_path: str, read_text) -> tuple[str, str]:
    """(path, text) of the requirements.txt nearest the launch that names torch (one that does not: the next one up
    may); ("", "") where none does."""
    for path, text in _files_upward(launch_path, "requirements.txt", read_text):
        if re.search(r"^[ \t]*torch\b", text, re.MULTILINE):
            return path, text
    return "", ""


def _files_upward(launch_path: str, name: str, read_text):
    """(path, text) of each file `name` in the launch's folder and the folders above it, the nearest first, up to
    the tree's root (or "/" for an absolute path)."""
    folder = posixpath.dirname(launch_path)
    while True:
        path = posixpath.join(folder, name) if folder else name
        text = read_text(path)
        if text is not None:
            yield path, text
        if not folder or folder == "." or posixpath.dirname(folder) == folder:
            return
        folder = posixpath.dirname(folder)


def dockerfile_torch(launch_path: str, read_text) -> str:
    """Where the Dockerfile nearest the launch (its folder's, or a folder's above it in the project) builds (its last
    stage) from an image whose tag says a PyTorch before 2.1: "DIR/Dockerfile builds from IMAGE"; "" otherwise.
    Which launches run in a Dockerfile's image is written nowhere, but the nearest one is the likeliest (FlagPerf's
    vendor folders hold each launch with the Dockerfile of the image it runs in: Hygon DCU's `FROM
    .../pytorch:1.13.1-centos7.6-dtk23.10-py38`; DeepLearningExamples' model folders hold one Dockerfile, built `FROM
    ${FROM_IMAGE_NAME}` of an `ARG` default, and their launches one folder down)."""
    path, text = next(_files_upward(launch_path, "Dockerfile", read_text), ("", ""))
    image = _last_base(text)
    torch = image_torch(image) if image else None
    if isinstance(torch, tuple) and torch < (2, 1):
        return f"{path} builds from {image} (PyTorch {torch[0]}.{torch[1]})"
    return ""


def _last_base(dockerfile: str) -> str:
    """The image a Dockerfile's last stage builds from: an `ARG` before the first `FROM` (`${NAME}`, `$NAME`) taken
    at its default, a stage named `AS name` followed to its own base; "" where an argument has no default (it is
    given when the image is built)."""
    defaults: dict[str, str] = {}
    stages: dict[str, str] = {}
    image = ""
    for line in dockerfile.splitlines():
        argument = _ARG.match(line)
        if argument is not None and not stages:  # (only those before the first FROM may name an image)
            defaults[argument.group(1)] = argument.group(2) or ""
            continue
        base = _FROM.match(line)
        if base is not None:
            image = _BASE_ARG.sub(lambda m: defaults.get(m.group(1) or m.group(2)) or m.group(0), base.group(1))
            image = stages.get(image.lower(), image)
            stages[(base.group(2) or f"#{len(stages)}").lower()] = image
    return "" if "$" in image else image


def definition_torch(image: str, launch_path: str, read_text) -> str:
    """Where the Singularity image file a launch runs in (`X.sif`, whose name says no PyTorch) is built by the tree's
    definition file of the same name (`X.def`, in the launch's folder or the nearest one above it holding one) from
    an image whose tag says a PyTorch before 2.1: "DIR/X.def builds X.sif from IMAGE"; "" otherwise
    (LUMI's and Vega's Megatron scripts build `megatron.sif` from NGC 21.08 so)."""
    name = posixpath.basename(image)
    if not name.endswith(".sif") or len(name) == 4:
        return ""
    path, text = next(_files_upward(launch_path, name[:-4] + ".def", read_text), ("", ""))
    bases = _DEF_FROM.findall(text)
    torch = image_torch(bases[0]) if bases else None
    return f"{path} builds {name} from {bases[0]}" if isinstance(torch, tuple) and torch < (2, 1) else ""


_FROM = re.compile(r"(?i)[ \t]*FROM[ \t]+(?:--\S+[ \t]+)*(\S+)(?:[ \t]+AS[ \t]+(\S+))?")
_ARG = re.compile(r"(?i)[ \t]*ARG[ \t]+([A-Za-z_]\w*)(?:=[\"']?([^\s\"']*))?")
_BASE_ARG = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
_DEF_FROM = re.compile(r"(?im)^[ \t]*From:[ \t]*(\S+)")  # a Singularity definition's base (its header)

"""The environment a launch's ranks get from its launcher's own words: `env A=1`, `sudo A=1`, `mpirun -x A=1`,
`srun --export=...`, a container runtime's `-e A=1`, `ray job submit --runtime-env-json`, and DeepSpeed's runner (what
its multi-node runs pass on); and why an environment may hold more than the script shows (Unit.env_open).
"""

from __future__ import annotations

import json
import re

from offlint.sources.launch_words import Arg, EnvArg, program
from offlint.types import Location, Unit


def opened_because(reason: str) -> str:
    """Unit.env_open's text for an environment `reason` says may hold more than the script shows."""
    return f"the launch environment may hold more: {reason}"


def opened(unit: Unit, env_open: str) -> Unit:
    """A launch whose environment may hold more than its script shows: what it does not set is unknown."""
    if env_open:
        unit.env_open, unit.env_known = env_open, False
        unit.default_sections = unit.default_sections - {"env"}
        unit.unknown_sections["env"] = env_open
    return unit


def srun_environment(values: list[str | None], texts: list[str]) -> str:
    """Why an `srun ... --environment=NAME` command's environment may hold more (CSCS's container environment
    definitions: TOML files outside the tree whose [env] table sets variables), from its words' values and texts; ""
    where it has no such option. The lsaie-ss26-gipfelsturm launchers run `srun ... --environment=alps3 ... bash -c
    ...`: OFL301 had said the allocator option was unset."""
    if not any(program(value) == "srun" for value in values):
        return ""
    for i, (value, text) in enumerate(zip(values, texts)):
        word = value if value is not None else text
        if word == "--environment" or word.startswith("--environment="):
            shown = f"{word} {texts[i + 1]}" if word == "--environment" and i + 1 < len(texts) else word
            return (f"`srun {shown}` runs it in a container environment whose definition file (outside the tree) "
                    f"may set variables")
    return ""


_RUNTIME_ENV_JSON = "--runtime-env-json"
# DeepSpeed's `ds_ssh` (pdsh over the hosts of /job/hostfile), or that file named: a script using the hosts of
# DeepSpeed's default hostfile, which its `deepspeed` launches without --hostfile then run on
_DS_SSH = re.compile(r"(?:^|[\s;&|(`$])ds_ssh(?=[\s;&|)`]|$)", re.MULTILINE)


def default_hostfiles(script_text: str) -> frozenset[str]:
    """The launchers whose default hostfile a script addresses the hosts of, in its code (a comment naming the file
    runs nothing; command_unit's `default_hostfiles`): "deepspeed" for /job/hostfile (or its `ds_ssh`), "mpirun" for
    Open MPI's `$OMPI_MCA_orte_default_hostfile`, which Kubeflow's MPIJob sets for its launcher."""
    if "/job/hostfile" not in script_text and "ds_ssh" not in script_text and _MPI_DEFAULT not in script_text:
        return frozenset()
    code = _COMMENT_LINE.sub("", script_text)
    deepspeed = "/job/hostfile" in code or ("ds_ssh" in code and bool(_DS_SSH.search(code)))
    return frozenset({"deepspeed"} if deepspeed else ()) | frozenset({"mpirun"} if _MPI_DEFAULT in code else ())


_MPI_DEFAULT = "OMPI_MCA_orte_default_hostfile"


_COMMENT_LINE = re.compile(r"(?m)^[ \t]*#.*$")


def ray_job(words: list[Arg]) -> tuple[str, dict[str, EnvArg]]:
    """A command Ray runs (`ray job submit [options] -- python3 train.py ...`, THUDM/slime's launches): (why its
    environment may hold more, "" for another command; the variables its `--runtime-env-json` sets). The entrypoint
    runs in the Ray cluster's environment, the one its `ray start` had (in the script, or wherever the cluster was
    started), plus the runtime environment's `env_vars`, which win."""
    if not words or program(words[0].value) != "ray":
        return "", {}
    env: dict[str, EnvArg] = {}
    for i, word in enumerate(words):
        if word.value == _RUNTIME_ENV_JSON and i + 1 < len(words):
            env.update(_runtime_env_vars(words[i + 1].value, words[i + 1].location))
        elif word.value and word.value.startswith(_RUNTIME_ENV_JSON + "="):
            env.update(_runtime_env_vars(word.value.partition("=")[2], word.location))
    return "`ray` runs it in the environment its Ray cluster was started with, plus its runtime environment's", env


_VARIABLE_SETTING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


# The launchers whose options launcher_environment reads (a command holding none of them sets nothing so)
SETTING_LAUNCHERS = frozenset(("env", "mpirun", "mpiexec", "srun", "singularity", "apptainer", "uv", "uvx", "sudo",
                               "jsrun"))


def launcher_environment(words: list[Arg], default_hostfile: bool = False) -> tuple[dict[str, EnvArg], str]:
    """The variables the launchers before the script set for it, and why other variables of the script may not
    reach it ("" where they do): `env NAME=VALUE ...` (`-i` starts with those alone), Open MPI's `mpirun -x
    NAME=VALUE` and Intel MPI's `-genv NAME VALUE`, `srun --export=ALL,NAME=VALUE` (without ALL the tasks get only
    the variables listed), Singularity's or Apptainer's `--env NAME=VALUE` (`--cleanenv` passes none of the
    host's; `--env-file` may set any), `sudo NAME=VALUE`, and `uv run --env-file` (may set any). Each form was in
    real launches of PYTORCH_CUDA_ALLOC_CONF, and OFL301 had called the variable unset. A word offlint cannot read
    where a setting may be leaves every variable open, and so does an `mpirun` over other hosts (_mpi_hosts;
    `default_hostfile`: the script addresses Open MPI's default hostfile, default_hostfiles)."""
    given: dict[str, EnvArg] = {}
    withheld = ""
    for at, word in enumerate(words):
        launcher = program(word.value)
        rest = words[at + 1:]
        if launcher == "env":
            found, why = _env_command(rest)
        elif launcher in ("mpirun", "mpiexec"):
            found, why = _mpi_settings(rest)
            why = why or _mpi_hosts(rest, default_hostfile)
        elif launcher == "srun":
            found, why = _srun_export(rest)
        elif launcher in ("singularity", "apptainer"):
            found, why = _container_env(rest, launcher)
        elif launcher in ("uv", "uvx"):
            found, why = {}, next((f"`{launcher} {w.text}` may set any variable" for w in rest
                                   if (w.value or "") == "--env-file" or (w.value or "").startswith("--env-file=")), "")
        elif launcher == "sudo":
            found, why = _sudo_settings(rest), ""
        elif launcher == "jsrun":  # (`-E NAME=VALUE`, `--env_no_propagate`, ...: its options are not read one by one)
            found, why = {}, next((f"`jsrun {w.text}` may set or withhold variables" for w in rest
                                   if (w.value or "").startswith("-") and (w.value == "-E" or "env" in w.value)), "")
        else:
            continue
        given.update(found)
        withheld = withheld or why
    return given, withheld


def _setting(text: str | None, arg: Arg) -> tuple[str, EnvArg] | None:
    """`NAME=VALUE` as an EnvArg (`text` None: the word as written, whose value offlint cannot read, as
    `PYTHONPATH=${ROOT}/src`); None for another word."""
    if text is None:
        written = _VARIABLE_SETTING.match(arg.text.lstrip("\"'"))
        return (written.group(1), EnvArg(written.group(1), None, arg.location, arg.unknown)) if written else None
    match = _VARIABLE_SETTING.match(text)
    return (match.group(1), EnvArg(match.group(1), match.group(2), arg.location)) if match else None


def _env_command(words: list[Arg]) -> tuple[dict[str, EnvArg], str]:
    def special(value: str) -> str:
        if value in ("-i", "--ignore-environment", "-"):
            return "`env -i` starts it with only the variables it names"
        if value in ("-S", "--split-string") or value.startswith(("-S", "--split-string=")):
            return "`env -S` splits a string offlint does not read into its words"
        return ""

    # (`-u NAME` unsets one: not modelled, as a script's `unset` is not)
    return _leading_settings(words, frozenset({"-C", "--chdir", "-u", "--unset"}), special,
                             lambda arg: f"`env` is given `{arg.text}`, which offlint cannot read")


_SUDO_VALUED = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group"})


def _sudo_settings(words: list[Arg]) -> dict[str, EnvArg]:
    """`sudo [options] NAME=VALUE ... command`: the variables it sets for the command."""
    return _leading_settings(words, _SUDO_VALUED)[0]


def _leading_settings(words: list[Arg], valued: frozenset[str], special=lambda value: "",
                      unreadable=lambda arg: "") -> tuple[dict[str, EnvArg], str]:
    """The `NAME=VALUE` words a runner takes before its command (`env`, `sudo`), past its options (`valued`: those
    taking the next word); and why other variables are open: `special(option)`, or `unreadable(word)` for a word
    offlint cannot read that is no setting ("" where the runner's command starts there)."""
    given: dict[str, EnvArg] = {}
    i = 0
    while i < len(words):
        value = words[i].value
        if value is not None and value.startswith("-"):
            why = special(value)
            if why:
                return given, why
            i += 2 if value in valued else 1
            continue
        found = _setting(value, words[i])
        if found is None:
            return given, unreadable(words[i]) if value is None else ""  # (the command)
        given[found[0]] = found[1]
        i += 1
    return given, ""


def _mpi_settings(words: list[Arg]) -> tuple[dict[str, EnvArg], str]:
    given: dict[str, EnvArg] = {}
    for i, word in enumerate(words[:-1]):
        following = words[i + 1]
        if word.value == "-x":
            found = _setting(following.value, following)
            if found is not None:
                given[found[0]] = found[1]
            elif following.value is None:
                return given, f"`-x {following.text}` may pass any variable"
        elif word.value in ("-genv", "-env") and following.value is not None and i + 2 < len(words):
            value = words[i + 2]
            given[following.value] = EnvArg(following.value, value.value, following.location, value.unknown)
    return given, ""


# Open MPI's and MPICH's options naming the hosts an `mpirun` runs on (a file of them, or a list)
_MPI_HOSTFILE = frozenset({"--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f", "--default-hostfile"})
_MPI_HOSTS = frozenset({"-H", "--host", "-host", "-hosts"})
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _mpi_hosts(words: list[Arg], default_hostfile: bool) -> str:
    """Why an `mpirun` launch's ranks may not see the script's variables ("" where it runs on this host only): its
    hosts are a hostfile's, a list other than this host, or the default hostfile the script addresses (Kubeflow's
    MPIJob: `$OMPI_MCA_orte_default_hostfile`). Open MPI starts the ranks of other hosts with their own environment
    and the variables `-x` names (Pai-Megatron-Patch's mpi_run_pretrain_llama3.sh; OFL301 had called its allocator
    option unset, 12 findings on Pai and its forks)."""
    for i, word in enumerate(words):
        name, eq, inline = (word.value if word.value is not None else word.text).partition("=")
        value = (inline if word.value is not None else None) if eq else \
            words[i + 1].value if i + 1 < len(words) else None
        if name in _MPI_HOSTFILE:
            return _MPI_OTHER_HOSTS
        if name in _MPI_HOSTS and not (value and all(host.partition(":")[0] in _LOCAL_HOSTS
                                                     for host in value.split(","))):
            return _MPI_OTHER_HOSTS
    return _MPI_OTHER_HOSTS if default_hostfile else ""


_MPI_OTHER_HOSTS = ("mpirun starts the ranks of other hosts with their own environment and the variables `-x` names, "
                    "not the others the script exports")


def _srun_export(words: list[Arg]) -> tuple[dict[str, EnvArg], str]:
    for i, word in enumerate(words):
        value = word.value or ""
        if value == "--export" and i + 1 < len(words):
            listed, arg = words[i + 1].value, words[i + 1]
        elif value.startswith("--export="):
            listed, arg = value.partition("=")[2], word
        else:
            continue
        if listed is None:
            return {}, f"`srun --export {arg.text}` lists the variables the tasks get"
        items = listed.split(",")
        given = dict(found for item in items for found in [_setting(item, arg)] if found)
        return given, "" if "ALL" in items else f"`srun --export={listed}` passes the tasks only those variables"
    return {}, ""


def _container_env(words: list[Arg], launcher: str) -> tuple[dict[str, EnvArg], str]:
    given: dict[str, EnvArg] = {}
    withheld = ""
    for i, word in enumerate(words):
        value = word.value
        if value in ("--env", "--env-file") and i + 1 < len(words):
            text, arg = words[i + 1].value, words[i + 1]
        elif value is not None and value.startswith(("--env=", "--env-file=")):
            text, arg = value.partition("=")[2], word
        elif value in ("-e", "--cleanenv", "-c", "--contain", "-C", "--containall"):
            if value in ("-e", "--cleanenv", "-C", "--containall"):
                withheld = withheld or f"`{launcher} {value}` passes none of the host's variables"
            continue
        else:
            continue
        if (value or "").startswith("--env-file") or text is None:
            withheld = withheld or f"`{launcher} {word.text} {arg.text if arg is not word else ''}`".rstrip() + \
                " may set any variable"
            continue
        given.update(found for item in text.split(",") for found in [_setting(item, arg)] if found)
    return given, withheld


# deepspeed's runner: its options that take a value (the others are switches), and the prefixes of the names of the
# launching shell's variables its multi-node runners pass on (runner.py's EXPORT_ENVS; NCCL is the CUDA accelerator's)
_DEEPSPEED_VALUED = frozenset({"-H", "--hostfile", "-i", "--include", "-e", "--exclude", "--num_nodes", "--num_gpus",
                               "--num_accelerators", "--min_elastic_nodes", "--max_elastic_nodes", "--master_port",
                               "--master_addr", "--node_rank", "--launcher", "--launcher_args",
                               "--enable_each_rank_log", "--autotuning", "--comment", "--account", "--bind_core_list",
                               "--ssh_port"})
_DEEPSPEED_EXPORTED = ("NCCL", "PYTHON", "MV2", "UCX", "MLFLOW")


def deepspeed_ranks_environment(words: list[Arg], env: dict[str, EnvArg], default_hostfile: bool = False,
                                several_nodes: bool = False) -> tuple[str, dict[str, EnvArg]]:
    """A `deepspeed` launch that may run on more than one node: (why its ranks' environment is not the script's, the
    script's variables as the ranks see them); ("", env) for any other command. DeepSpeed's runner starts a
    multi-node job's ranks over ssh (pdsh, or an MPI launcher), on every node, the first included: they get that
    node's login environment, the launching shell's variables whose names start with NCCL, PYTHON, MV2, UCX or
    MLFLOW, and the lines of `.deepspeed_env` in the home and working directories, not the other variables the script
    exports. A multi-node Megatron-DeepSpeed fork sets PYTORCH_CUDA_ALLOC_CONF in its committed `.deepspeed_env`:
    OFL301 had called 63 of its launches' allocator option unset. A run is multi-node with `--force_multi`,
    `--num_nodes` 2 or more (without a `--hostfile`, from its default, /job/hostfile), or an `--include` of two hosts
    (`a@b`) from a `--hostfile`; local (the launching shell's environment) with `--no_ssh`, one node or host, or no
    hostfile otherwise (its default is then taken as absent, unless `default_hostfile`: the script itself addresses
    that file's hosts, as Megatron-DeepSpeed's examples do with `ds_ssh`, or `several_nodes`: its parallel layout
    needs more ranks than a host has, layout_needs_several_nodes);
    otherwise (a hostfile whose hosts are not known) it may be either, and its variables are not known either way."""
    at = next((i for i, word in enumerate(words) if program(word.value) == "deepspeed"), None)
    if at is None:
        return "", env
    given: dict[str, str | None] = {}
    i = at + 1
    while i < len(words):
        word = words[i].value
        # (an option whose value is not known, `--hostfile=$1`: its name is still the word's text's)
        name, eq, inline = (word if word is not None else words[i].text).partition("=")
        if name in _DEEPSPEED_VALUED:
            value = (inline if word is not None else None) if eq else \
                words[i + 1].value if i + 1 < len(words) else None
            given[name] = value
            i += 1 if eq else 2
            continue
        if word is not None and word.startswith("-"):
            given[word] = ""
        elif word is None and words[i].flags and {"--hostfile", "-H"} & set(words[i].flags):
            given["--hostfile"] = None  # (`${HOST_ARGS}`, a hostfile on some paths: its hosts decide there)
        i += 1
    multi = _deepspeed_multi_node(given, default_hostfile, several_nodes)
    if multi is False:
        return "", env
    reason = ("deepspeed's multi-node runner starts the ranks over ssh with each node's login environment, the "
              "variables named NCCL*, PYTHON*, MV2*, UCX* or MLFLOW* and the lines of .deepspeed_env, not the other "
              "variables the script exports")
    if multi is None:
        reason += " (where its hostfile lists more than one node)"
    return reason, {name: arg if name.startswith(_DEEPSPEED_EXPORTED) else EnvArg(name, None, arg.location, reason)
                    for name, arg in env.items()}


def _deepspeed_multi_node(given: dict[str, str | None], default_hostfile: bool = False,
                          several_nodes: bool = False) -> bool | None:
    """Whether deepspeed runs multi-node with these options (the option -> its value, None where not known; "" for a
    switch): True, False, or None where its hostfile decides."""
    if "--no_ssh" in given:
        return False
    if "--force_multi" in given:
        return True
    if "--hostfile" not in given and "-H" not in given:
        # Its default, /job/hostfile, is taken as absent, where more than one node is refused ("Num nodes is >1 but
        # no extra nodes available via hostfile"): a literal `--num_nodes 16` runs only where that file is there;
        # where the script uses that file's hosts itself, its hosts decide (all of them, unless --num_nodes says)
        nodes = given.get("--num_nodes") or ""
        if nodes.strip().isdigit():
            return int(nodes) > 1
        if several_nodes:  # (the layout runs only on that file's hosts: locally it would not start)
            return True
        return None if default_hostfile else False
    nodes = given.get("--num_nodes", "")
    if nodes is None:
        return None
    if nodes.strip().isdigit() and int(nodes) > 0:  # (-1, its default: every host of the hostfile)
        return int(nodes) > 1
    include = given["--include"] if "--include" in given else given.get("-i", "")
    if include is None:
        return None
    if include:
        return "@" in include
    return None


# The most GPUs one host has (NVIDIA's DGX-2 and HGX-2: 16; today's 8-GPU hosts); the layout options whose product
# the ranks must be a multiple of (Megatron-LM's validate_args; DeepSpeed's MoE groups split the data-parallel ranks
# by --moe-expert-parallel-size, Megatron-LM's by --expert-model-parallel-size)
_HOST_GPUS_MAX = 16
_MODEL_PARALLEL = ("--tensor-model-parallel-size", "--pipeline-model-parallel-size")
_DATA_SPLITS = ("--context-parallel-size", "--moe-expert-parallel-size", "--expert-model-parallel-size")


def layout_needs_several_nodes(args: list[Arg]) -> bool:
    """Whether a launch's parallel layout needs more ranks than any host has: TP x PP times the largest of CP and EP
    (each option's last value; not where one is not known)."""
    given: dict[str, int] = {}
    for i, arg in enumerate(args):
        name, eq, inline = (arg.value or "").partition("=")
        if name in _MODEL_PARALLEL or name in _DATA_SPLITS:
            value = inline if eq else args[i + 1].value if i + 1 < len(args) else None
            if value is None or not value.strip().isdigit():
                return False
            given[name] = int(value)
    model = given.get(_MODEL_PARALLEL[0], 1) * given.get(_MODEL_PARALLEL[1], 1)
    return model * max([given.get(name, 1) for name in _DATA_SPLITS]) > _HOST_GPUS_MAX


def _runtime_env_vars(text: str | None, location: Location) -> dict[str, EnvArg]:
    """The `env_vars` of a Ray runtime environment given as JSON (a text offlint cannot read gives none)."""
    try:
        runtime_env = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):  # (not JSON Ray reads; nested past the decoder's depth)
        return {}
    variables = runtime_env.get("env_vars") if isinstance(runtime_env, dict) else None
    return {name: EnvArg(name, value if isinstance(value, str) else json.dumps(value), location)
            for name, value in (variables.items() if isinstance(variables, dict) else ())}

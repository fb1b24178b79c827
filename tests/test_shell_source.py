"""`source FILE` in a launch script: the tree's FILE is read for what it sets and exports; a file offlint cannot read
leaves the environment of the commands after it open, so no finding claims a variable is unset.

Seen on real trees: geodesic-megatron's launcher sources pipeline_env_activate.sh (it exports NVTE_CPU_OFFLOAD_V1=1),
HYGON-AI/Megatron-LM-das sources requirements/env.sh, Megatron-LM-AutoTuner sources a gitignored .secrets/env.sh.
`source` had been a plain command: a fine-grained launch whose sourced file exports the variable was an OFL112
*error* ("the launch environment has NVTE_CPU_OFFLOAD_V1 unset").
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from tests.check_helpers import write_tree
from offlint.sources.shell_parse import parse_shell

LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 28 --hidden-size 1024 --num-attention-heads 8 "
          "--train-iters 50 --bf16 --micro-batch-size 1 --seq-length 2048 --max-position-embeddings 2048 "
          "--transformer-impl transformer_engine --fine-grained-activation-offloading --offload-modules core_attn\n")
ENV_FILE = "export NVTE_CPU_OFFLOAD_V1=1\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"


def _codes(tmp_path: Path, monkeypatch, files: dict[str, str], target: str = "scripts/train.sh") -> dict[str, str]:
    write_tree(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    result = check([target], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert not result.errors, result.errors
    return {f.code: f.severity.value for f in result.findings}


@pytest.mark.parametrize("line", ["source scripts/env.sh", ". ./scripts/env.sh", "source env.sh",
                                  'source "$(dirname "$0")/env.sh"'])
def test_a_sourced_file_of_the_tree_gives_its_exports(tmp_path, monkeypatch, line):
    """Next to the script or from the tree's root, as launches are started from either."""
    codes = _codes(tmp_path, monkeypatch, {"scripts/env.sh": ENV_FILE, "scripts/train.sh": f"{line}\n{LAUNCH}"})
    assert codes == {}


def test_what_the_sourced_file_does_not_set_is_still_judged(tmp_path, monkeypatch):
    codes = _codes(tmp_path, monkeypatch, {"scripts/env.sh": "export NCCL_DEBUG=INFO\n",
                                           "scripts/train.sh": f"source scripts/env.sh\n{LAUNCH}"})
    assert codes == {"OFL112": "error", "OFL301": "warning"}


@pytest.mark.parametrize("line", ["source /opt/site/env.sh", "source scripts/missing.sh", 'source "$ENV_FILE"',
                                  "source ../outside.sh"])
def test_a_file_offlint_cannot_read_leaves_the_environment_open(tmp_path, monkeypatch, line):
    """The variable may be exported there: OFL112 is the warning that it cannot see it, OFL301 is not claimed."""
    codes = _codes(tmp_path, monkeypatch, {"scripts/train.sh": f"{line}\n{LAUNCH}"})
    assert codes == {"OFL112": "warning"}


def test_a_variable_set_after_the_unreadable_file_is_known(tmp_path, monkeypatch):
    codes = _codes(tmp_path, monkeypatch, {
        "scripts/train.sh": f"source /opt/site/env.sh\nexport NVTE_CPU_OFFLOAD_V1=0\n{LAUNCH}"})
    assert codes == {"OFL112": "error"}


def test_a_file_sourced_on_some_paths_only_leaves_the_other_paths_judged(tmp_path, monkeypatch):
    """Megatron-LM's examples/gptoss/02_train.sh sources the distributed config file a user may name: on the path
    without it (the script's own) the launch environment is what the script shows."""
    codes = _codes(tmp_path, monkeypatch, {
        "scripts/train.sh": f'if [ -n "$CONFIG" ]; then\n    source "$CONFIG"\nfi\n{LAUNCH}'})
    assert codes == {"OFL112": "error", "OFL301": "warning"}
    codes = _codes(tmp_path, monkeypatch, {
        "scripts/train.sh": f'if [ -n "$CONFIG" ]; then source "$CONFIG"; else source /opt/env.sh; fi\n{LAUNCH}'})
    assert codes == {"OFL112": "warning"}


@pytest.mark.parametrize("guard", ['if [[ -f $ENVF ]]; then source $ENVF; fi', '[ -f "$ENVF" ] && . "$ENVF"'])
def test_a_file_of_the_checkout_sourced_where_it_exists_leaves_the_environment_open(tmp_path, monkeypatch, guard):
    """Megatron-LM-AutoTuner: `if [[ -f $SECRET_ENV_FILE ]]; then source $SECRET_ENV_FILE; fi` with
    SECRET_ENV_FILE=".secrets/env.sh", a file of the checkout (gitignored) its README tells each user to create: the
    script expects it, unlike a file a user may name (`$CONFIG`) or keep in their home (`~/.env`). Its guard had
    made the script's own environment the one judged (a false OFL301)."""
    codes = _codes(tmp_path, monkeypatch, {"scripts/train.sh": f'ENVF=".secrets/env.sh"\n{guard}\n{LAUNCH}'})
    assert codes == {"OFL112": "warning"}
    codes = _codes(tmp_path, monkeypatch, {"scripts/train.sh": f'ENVF=~/.env\n{guard}\n{LAUNCH}'})
    assert codes == {"OFL112": "error", "OFL301": "warning"}


def test_the_open_environment_reaches_a_bash_c_child():
    script = parse_shell('source /opt/env.sh\nsrun bash -c "python train.py"\n', "train.sh", read_file=lambda p: None)
    assert [c.argv[0].value for c in script.commands] == ["source", "srun", "python"]
    assert all("source /opt/env.sh" in c.env_open for c in script.commands[1:])


def test_a_sourced_file_gives_variables_not_commands_nor_functions():
    files = {"env.sh": "export A=1\nB=2\nrun() { python other.py; }\npython setup_step.py\n"}
    script = parse_shell('source env.sh\nrun\npython train.py "$B"\n', "train.sh", read_file=files.get)
    assert script.errors == []
    assert [[w.value for w in c.argv] for c in script.commands] == [["source", "env.sh"], ["run"],
                                                                    ["python", "train.py", "2"]]
    assert script.commands[-1].env["A"].value == "1" and script.commands[-1].env_open == ""


def test_a_file_that_sources_itself_or_cannot_be_parsed_is_an_open_environment():
    files = {"env.sh": "export A=1\nsource env.sh\n", "bad.sh": "export A=1\nif then fi (\n"}
    looped = parse_shell("source env.sh\npython train.py\n", "train.sh", read_file=files.get)
    assert looped.errors == [] and looped.commands[-1].env["A"].value == "1"
    bad = parse_shell("source bad.sh\npython train.py\n", "train.sh", read_file=files.get)
    assert bad.errors == [] and "cannot be parsed" in bad.commands[-1].env_open
    assert "A" not in bad.commands[-1].env


def test_a_cached_run_reads_the_script_again_when_the_sourced_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "env.sh").write_text(ENV_FILE)
    (tmp_path / "scripts" / "train.sh").write_text(f"source scripts/env.sh\n{LAUNCH}")
    monkeypatch.chdir(tmp_path)

    def codes() -> dict[str, str]:
        result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path))
        return {f.code: f.severity.value for f in result.findings}

    assert codes() == {}
    (tmp_path / "scripts" / "env.sh").write_text("export NCCL_DEBUG=INFO\n")
    assert codes() == {"OFL112": "error", "OFL301": "warning"}
    (tmp_path / "scripts" / "env.sh").unlink()
    assert codes() == {"OFL112": "warning"}
    (tmp_path / "scripts" / "env.sh").write_text(ENV_FILE)
    assert codes() == {}


def test_sourcing_is_bounded_however_often_a_file_is_sourced():
    """A hostile script: a 400 KB file sourced 50 times (20 MB) reads at most SOURCE_BUDGET characters in all (5 of
    the 50); what it could not read leaves the environment open."""
    from offlint.sources.shell_values import SOURCE_BUDGET

    big = "export A=1\n" + "# padding\n" * 40_000
    assert 50 * len(big) > 5 * SOURCE_BUDGET
    script = parse_shell("source big.sh\n" * 50 + "python train.py\n", "train.sh", read_file={"big.sh": big}.get)
    assert script.errors == []
    assert "`source big.sh` (line " in script.commands[-1].env_open
    assert "is more than offlint reads" in script.commands[-1].env_open


@pytest.mark.parametrize("line", ["source /home/me/checkout/scripts/env.sh", "source /workspace/scripts/env.sh",
                                  'REPO="${REPO_DIR:-/home/me/checkout}"\nsource "$REPO/scripts/env.sh"'])
def test_an_absolute_path_ending_in_a_tree_file_reads_the_trees_copy(tmp_path, monkeypatch, line):
    """geodesic-megatron's launcher sources `$REPO_DIR/pipeline_env_activate.sh`, REPO_DIR its author's checkout on
    the cluster: the tree's file of that name is read for what it sets. What it leaves unset stays unknown (the
    file on the cluster may differ), so no finding claims a variable unset."""
    codes = _codes(tmp_path, monkeypatch, {"scripts/env.sh": "export NVTE_CPU_OFFLOAD_V1=1\n",
                                           "scripts/train.sh": f"{line}\n{LAUNCH}"})
    assert codes == {}
    codes = _codes(tmp_path, monkeypatch, {"scripts/env.sh": "export NVTE_CPU_OFFLOAD_V1=0\n",
                                           "scripts/train.sh": f"{line}\n{LAUNCH}"})
    assert codes == {"OFL112": "error"}


def test_an_absolute_path_the_tree_has_no_file_for_stays_open(tmp_path, monkeypatch):
    codes = _codes(tmp_path, monkeypatch, {"scripts/env.sh": ENV_FILE,
                                           "scripts/train.sh": f"source /home/me/checkout/scripts/other.sh\n{LAUNCH}"})
    assert codes == {"OFL112": "warning"}


def test_a_file_sourced_inside_a_branch_sets_its_variables_for_the_branch(tmp_path, monkeypatch):
    """geodesic-megatron sources its environment file again inside each `srun bash -c` of an `if` choosing the
    launcher: the launch in that branch sees NVTE_CPU_OFFLOAD_V1=1 (it had been "assigned differently on some
    paths"). After the branch, it is what the same `export` in the branch gives (set, on that path)."""
    inside = f'if [ "$USE_FT" = true ]; then\n    source scripts/env.sh\n    {LAUNCH}fi\n'
    assert _codes(tmp_path, monkeypatch, {"scripts/env.sh": ENV_FILE, "scripts/train.sh": inside}) == {}
    payload = (f'if [ "$USE_FT" = true ]; then\n    srun bash -c "\n        source scripts/env.sh\n        {LAUNCH}'
               f'    "\nfi\n')
    assert _codes(tmp_path, monkeypatch, {"scripts/env.sh": ENV_FILE, "scripts/train.sh": payload}) == {}
    after = f'if [ "$USE_FT" = true ]; then\n    source scripts/env.sh\nfi\n{LAUNCH}'
    exported = f'if [ "$USE_FT" = true ]; then\n    {ENV_FILE}fi\n{LAUNCH}'
    assert _codes(tmp_path, monkeypatch, {"scripts/env.sh": ENV_FILE, "scripts/train.sh": after}) == \
        _codes(tmp_path, monkeypatch, {"scripts/train.sh": exported})


def test_the_trees_own_file_named_by_its_absolute_path_is_read_as_it(tmp_path, monkeypatch):
    """`SCRIPT_DIR="$(dirname "$(readlink -f "$0")")"; source "${SCRIPT_DIR}/env.sh"` (Megatron-LM's ModelOpt
    examples): the path is absolute but in the tree, so what the file leaves unset is unset."""
    codes = _codes(tmp_path, monkeypatch, {
        "scripts/env.sh": "export NCCL_DEBUG=INFO\n",
        "scripts/train.sh": f'SCRIPT_DIR="$(dirname "$(readlink -f "$0")")"\nsource "${{SCRIPT_DIR}}/env.sh"\n{LAUNCH}'})
    assert codes == {"OFL112": "error", "OFL301": "warning"}


SBATCH_DOC = ('TP=2\nPP=16\nCMD="python pretrain_gpt.py --num-layers 28 --tensor-model-parallel-size $TP '
              '--pipeline-model-parallel-size $PP --micro-batch-size 1 --train-iters 10"\n'
              'sbatch {start}\n#!/bin/bash\n#SBATCH --nodes=4\nexport NVTE_CPU_OFFLOAD_V1=1\n'
              'srun bash -c "${{CMD}} --fine-grained-activation-offloading --offload-modules core_attn" \\$SLURM_JOB_ID\n'
              '{end}\n')


@pytest.mark.parametrize(("start", "end"), [("<<EOF", "EOF"), ("<<-EOF", "\tEOF"), ("--parsable <<EOF", "EOF")])
def test_the_script_a_here_document_gives_sbatch_is_read(tmp_path, monkeypatch, start, end):
    """Megatron-LM's examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh submits `sbatch <<EOF ... srun ... bash -c
    "${TRAINING_CMD}" ... EOF`: the document, expanded by the submitting shell, is the job's script. Its launch had
    been unread (0 units); here OFL218 (28 layers over PP16) is found in it, and NVTE_CPU_OFFLOAD_V1 it exports."""
    codes = _codes(tmp_path, monkeypatch, {"scripts/train.sh": SBATCH_DOC.format(start=start, end=end)})
    assert codes == {"OFL218": "error", "OFL301": "warning"}


def test_a_quoted_here_document_is_the_job_script_as_written_and_a_script_file_takes_none(tmp_path, monkeypatch):
    quoted = SBATCH_DOC.format(start="<<'EOF'", end="EOF")  # ${CMD} is the job's own variable: unset there
    assert "OFL218" not in _codes(tmp_path, monkeypatch, {"scripts/train.sh": quoted})
    to_file = SBATCH_DOC.format(start="job.sh <<EOF", end="EOF")  # job.sh runs; the document is its stdin
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": to_file}) == {}


@pytest.mark.parametrize("options, read", [('SBATCH_ARG=""', True), ('SBATCH_ARG=" --segment=8"', True),
                                           ('SBATCH_ARG="job.sh"', False), ("SBATCH_ARG=$1", False), ("", False)])
def test_a_here_document_submitted_with_a_variable_of_options_is_read(tmp_path, monkeypatch, options, read):
    """A MoE model zoo submits every benchmark with `sbatch ${SBATCH_ARG} <<EOF`, SBATCH_ARG empty or a
    `--segment=N` option: the document is the job's script (its launch had been unread). A variable holding a
    script's name, or one the script does not set (its caller's, or an argument), may give sbatch a file: the
    document is then its standard input, and not read."""
    doc = options + "\n" + SBATCH_DOC.format(start="${SBATCH_ARG} <<EOF", end="EOF")
    codes = _codes(tmp_path, monkeypatch, {"scripts/train.sh": doc})
    assert codes == ({"OFL218": "error", "OFL301": "warning"} if read else {})


def test_a_job_script_written_by_cat_and_submitted_is_read(tmp_path, monkeypatch):
    """haeggee/Megatron-LM's submit.sh writes its job with `cat > $ROOT_PATH/submission.sbatch <<- EOM ... EOM` and
    submits it with `sbatch $ROOT_PATH/submission.sbatch`: the launch in it had been unread (0 units)."""
    doc = SBATCH_DOC.format(start="<<EOF", end="EOF")
    written = doc.replace("sbatch <<EOF", 'cat > "$ROOT/job.sbatch" <<EOF') + 'sbatch "$ROOT/job.sbatch"\n'
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": written}) == {"OFL218": "error", "OFL301": "warning"}
    appended = written.replace('cat > "$ROOT/job.sbatch" <<EOF\n#!/bin/bash\n',
                               'cat > "$ROOT/job.sbatch" <<EOF\n#!/bin/bash\nEOF\ncat >> "$ROOT/job.sbatch" <<EOF\n')
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": appended}) == {"OFL218": "error", "OFL301": "warning"}
    unquoted = written.replace('sbatch "$ROOT/job.sbatch"', "sbatch $ROOT/job.sbatch")  # the same file
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": unquoted}) == {"OFL218": "error", "OFL301": "warning"}
    other = written.replace('sbatch "$ROOT/job.sbatch"', 'sbatch "$ROOT/other.sbatch"')  # not the file written
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": other}) == {}


def test_a_job_script_built_line_by_line_keeps_the_lines_of_each_path(tmp_path, monkeypatch):
    """The lsaie-ss26-gipfelsturm launchers write their job with here-documents and `echo "    --flag" >> "$SCRIPT"`
    on the paths that want a flag, then `sbatch "$SCRIPT"`. A line written on every path is read; one written on some
    is judged as the same flag appended to an array on those paths is: on the path that gives it (the message names
    the `if`, at its own line in each script), as the choice of whoever runs the script ($DEEP is theirs)."""
    head = ('SCRIPT="job.sbatch"\ncat > "$SCRIPT" << HEAD\n#!/bin/bash\nexport NVTE_CPU_OFFLOAD_V1=1\n'
            'ARGS=(\nHEAD\n')
    tail = (')\nsrun python pretrain_gpt.py --num-layers 28 --micro-batch-size 1 --train-iters 10 "\\${ARGS[@]}"\n'
            'TAIL\nsbatch "$SCRIPT"\n')
    always = head + 'echo "  --pipeline-model-parallel-size 16" >> "$SCRIPT"\ncat >> "$SCRIPT" << TAIL\n' + tail
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": always}) == {"OFL218": "error", "OFL301": "warning"}
    sometimes = head + ('if [ "$DEEP" = 1 ]; then\n  echo "  --pipeline-model-parallel-size 16" >> "$SCRIPT"\nfi\n'
                        'cat >> "$SCRIPT" << TAIL\n') + tail
    direct = ('export NVTE_CPU_OFFLOAD_V1=1\nARGS=()\nif [ "$DEEP" = 1 ]; then\n'
              '  ARGS+=(--pipeline-model-parallel-size 16)\nfi\n'
              'srun python pretrain_gpt.py --num-layers 28 --micro-batch-size 1 --train-iters 10 "${ARGS[@]}"\n')
    written, appended = _messages(tmp_path, monkeypatch, sometimes), _messages(tmp_path, monkeypatch, direct)
    assert [m.replace("at line 7", "at line 3") for m in written] == appended != []
    assert appended[0].endswith("(on the path where the script gives --pipeline-model-parallel-size 16 (inside if at "
                                "line 3))\n(only with the user's choice of --pipeline-model-parallel-size 16)")


def _messages(tmp_path, monkeypatch, script: str) -> list[str]:
    write_tree(tmp_path, {"scripts/train.sh": script})
    monkeypatch.chdir(tmp_path)
    result = check(["scripts/train.sh"], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    return sorted(f.message for f in result.findings if f.code == "OFL218")


@pytest.mark.parametrize("launch", [
    f"srun --environment=alps3 --mpi=pmix {LAUNCH}",
    f'srun -lu --environment alps3 bash -c "{LAUNCH.strip()}"\n',
])
def test_srun_with_a_container_environment_definition_leaves_the_environment_open(tmp_path, monkeypatch, launch):
    """CSCS's `srun --environment=NAME` runs the job in a container environment whose definition file (outside the
    tree) may set any variable: the lsaie-ss26-gipfelsturm launchers had OFL301 'PYTORCH_CUDA_ALLOC_CONF unset'."""
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": launch}) == {"OFL112": "warning"}
    plain = launch.replace("--environment=alps3 ", "").replace("--environment alps3 ", "")
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": plain}) == {"OFL112": "error", "OFL301": "warning"}


@pytest.mark.parametrize("launcher", ["", "srun --mpi=pmix "])
def test_a_batch_script_s_container_environment_directive_leaves_the_environment_open(tmp_path, monkeypatch,
                                                                                      launcher):
    """`#SBATCH --environment=FILE.toml` names the same container environment definition for the whole job (CSCS's
    Alps: a Megatron-LM fork's 12 run_*.sh scripts run torchrun in the batch step under it; 13 OFL301 said the
    allocator option was unset). A directive after the first command is no directive: sbatch stops reading there."""
    directive = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --environment=/scratch/me/ngc_pt.toml\n\n"
    launch = f"{launcher}{LAUNCH}"
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": directive + launch}) == {"OFL112": "warning"}
    late = "#!/bin/bash\nexport A=1\n#SBATCH --environment=/scratch/me/ngc_pt.toml\n"
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": late + launch}) == {"OFL112": "error",
                                                                                   "OFL301": "warning"}


EXPECT = ('#!/usr/bin/expect -f\nset timeout -1\nfor {set index 0} {$index < 2} {incr index} {\n'
          '    spawn ssh worker$index\n    send "bash ./pretrain.sh\\r"\n}\n')


@pytest.mark.parametrize("shebang", ["#!/usr/bin/expect -f", "#!/usr/bin/env python3", "#!/usr/bin/perl -w"])
def test_a_dot_sh_file_whose_shebang_names_another_interpreter_is_not_read_as_shell(tmp_path, monkeypatch, shebang):
    """A repository's `create_train_job_2n.sh` is an expect script (`#!/usr/bin/expect -f`, Tcl loops that ssh into
    workers): bash never runs it, and reading it as bash had stopped the check with exit 2 (a helper's sweep, session
    63). A launch in a `.sh` file with a shell's shebang, or none, is read as before."""
    script = EXPECT.replace("#!/usr/bin/expect -f", shebang)
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": script}) == {}
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": f"#!/usr/bin/env bash\n{LAUNCH}"}) == {
        "OFL112": "error", "OFL301": "warning"}


def test_an_echo_whose_first_word_is_empty_is_written_too(tmp_path, monkeypatch):
    """`echo "" --flag >> "$SCRIPT"` writes a line that starts with a space: joining its words had failed on the empty
    first one, and the script was 'not checked'."""
    script = 'SCRIPT=job.sh\necho "" --x >> "$SCRIPT"\nsbatch "$SCRIPT"\n'
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": script}) == {}


@pytest.mark.parametrize("export", ['export "${KEY}"="${VALUE}"', "export $KEY=$VALUE",
                                    'declare -x "GPU_${KEY}=$VALUE"'])
def test_an_export_of_a_name_read_at_run_time_leaves_the_environment_open(export):
    """A MoE model zoo's benchmarking script exports each `ENV_VARS` entry of its model's YAML (read with yq) in a
    `while read` loop: `export "${KEY}"="${VALUE}"`. Any variable may be set so, on every path (the loop runs
    whenever the config has entries): no finding may say one is unset (a helper's sweep: OFL119 on
    NCCL_GRAPH_REGISTER, which the YAML sets to 0)."""
    script = parse_shell("export A=1\nwhile IFS='=' read -r KEY VALUE; do\n    if [[ -n ${KEY} ]]; then\n"
                         f"        {export}\n    fi\ndone < <(yq '.ENV_VARS' env.yaml)\npython train.py\n",
                         "train.sh", read_file=lambda p: None)
    (train,) = [c for c in script.commands if c.argv[0].value == "python"]
    assert "sets a variable whose name it reads at run time" in train.env_open and train.env["A"].value == "1"


@pytest.mark.parametrize("export", ['export "A=1"', 'KEY=A; export "${KEY}"=1', 'echo "${KEY}"=1'])
def test_an_export_of_a_known_name_is_an_assignment(export):
    script = parse_shell(f"{export}\npython train.py\n", "train.sh", read_file=lambda p: None)
    assert script.commands[-1].env_open == ""


def test_a_called_script_taking_its_launch_from_a_sourced_file_is_read():
    """A MoE model zoo's best-practice scripts run `OPTIMIZER_OFFLOAD=1 ... bash sbatch_benchmarking.sh`, which
    takes its `pretrain_gpt.py` path from a sourced common.conf: with no `.py` in its own text, the called script had
    been skipped as one that cannot launch, and the caller's settings never reached its launch."""
    files = {"launch.sh": ('source conf/common.conf\nPARAMS="--num-layers 8"\n'
                           'if [[ ${OPT:-0} == 1 ]]; then PARAMS="$PARAMS --optimizer-cpu-offload"; fi\n'
                           "torchrun --nproc-per-node 8 ${TRAINING_SCRIPT_PATH} ${PARAMS}\n"),
             "conf/common.conf": 'export TRAINING_SCRIPT_PATH="${MEGATRON_PATH:-/opt/megatron}/pretrain_gpt.py"\n'}
    script = parse_shell("OPT=1 bash launch.sh\n", "bp/run.sh", read_file=files.get)
    assert [[w.value for w in c.argv] for c in script.commands][2:] == [
        ["torchrun", "--nproc-per-node", "8", "/opt/megatron/pretrain_gpt.py", "--num-layers", "8",
         "--optimizer-cpu-offload"]]


def test_a_worker_command_kept_in_a_cat_here_document_and_run_by_each_rank_is_read():
    """GCP's GPU recipes: `W=$(cat <<- EOM ... EOM)`, `echo "$W" > worker_command.sh`, then `torchrun ... --no-python
    bash worker_command.sh` (a helper's sweep: 85 launchers, none read). The substitution is the document as cat
    prints it, expanded here; each rank's shell runs the file the script wrote."""
    text = ('LR=3\nW=$(cat <<EOM\npython train.py --lr $LR \\\\$RANK\nEOM\n)\necho "$W" > worker.sh\n'
            "torchrun --nproc-per-node=8 --no-python bash worker.sh\n")
    script = parse_shell(text, "launch.sh", read_file=lambda path: None)
    assert [[w.value for w in c.argv] for c in script.commands if c.argv[0].value == "python"] == [
        ["python", "train.py", "--lr", "3", None]]  # ($RANK is the rank's, unknown here)
    for runs_python in ("torchrun --nproc-per-node=8 bash worker.sh", "echo bash worker.sh"):
        other = parse_shell(text.replace("torchrun --nproc-per-node=8 --no-python bash worker.sh", runs_python),
                            "launch.sh", read_file=lambda path: None)
        assert not [c for c in other.commands if c.argv[0].value == "python"], runs_python


def test_srun_running_a_script_of_the_tree_reads_it():
    files = {"job.sh": "python train.py --lr 1\n"}
    script = parse_shell("srun -N 2 --ntasks-per-node=8 bash job.sh\n", "launch.sh", read_file=files.get)
    assert [[w.value for w in c.argv] for c in script.commands][1:] == [["python", "train.py", "--lr", "1"]]


MARKDOWN = ("# Slurm Cluster Resolver\n\nThe rank is read from ```SLURM_PROCID``` and the task count from\n"
            "```SLURM_NTASKS```.\n\n## Example\n- In a shell: ```salloc --nodes=2 --ntasks-per-node=2```\n"
            "```\nresolver = SlurmClusterResolver({'ps': 1, 'worker': 3}, port_base=8888)\n```\n")


def test_a_markdown_document_named_like_a_batch_script_is_not_read_as_shell(tmp_path, monkeypatch):
    """A vendored TensorFlow README is named README.slurm (MLPerf training results v2.0 and v2.1): bash -n accepts
    it (its triple backticks open command substitutions bash never parses unless run), tree-sitter-bash does not,
    and the check stopped with exit 2 on a file nobody runs. A file tree-sitter-bash cannot read whose lines open
    Markdown code fences is a document, not a script; a script that only writes such a fence into a here-document
    is read as before, and a script with a real syntax error is still one."""
    assert _codes(tmp_path, monkeypatch, {"docs/README.slurm": MARKDOWN}, target="docs/README.slurm") == {}
    writes = f"cat > README.md <<'EOF'\n```bash\nsbatch run.slurm\n```\nEOF\n{LAUNCH}"
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": writes}) == {"OFL112": "error", "OFL301": "warning"}
    write_tree(tmp_path, {"scripts/broken.sh": "if [ -f x ]; then\n  echo ```\n"})
    result = check(["scripts/broken.sh"], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert [e.message.split(":")[0] for e in result.errors] == ["cannot parse shell script"]


@pytest.mark.parametrize("opening,closing", [("<<!", "!"), ("<< 'EOF'", "EOF"), ("<<-END", "\tEND")])
def test_a_bare_here_document_is_a_block_comment(tmp_path, monkeypatch, opening, closing):
    """`<<!` ... `!` with no command before it is a here-document fed to nothing, a block-comment idiom bash accepts
    and tree-sitter-bash refuses (a helper's sweep, session 64: 11 scripts of one tree unread, exit 2). Its lines are
    no commands: a launch written inside it is not read, the launch after it is."""
    inside = "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --cpu-offloading-num-layers 9\n"
    script = f"#!/bin/bash\n{opening}\necho skipped\n{inside}{closing}\n{LAUNCH}"
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert _codes(tmp_path, monkeypatch, {"scripts/train.sh": script}) == {"OFL112": "error", "OFL301": "warning"}


def test_a_megatron_lm_launch_s_nvte_refusal_quotes_megatron_lm(tmp_path, monkeypatch):
    """OFL112 on a Megatron-LM launch quotes validate_args' AssertionError (arguments.py: "... NVTE_CPU_OFFLOAD_V1
    should be set to 1 to avoid offloading weights."), not Bridge's ValueError, whose words differ (a seeded-mistake
    study, session 64); a Bridge recipe's keeps Bridge's."""
    write_tree(tmp_path, {"scripts/train.sh": LAUNCH})
    monkeypatch.chdir(tmp_path)
    result = check(["scripts/train.sh"], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    (message,) = [f.message for f in result.findings if f.code == "OFL112"]
    assert message == ("fine_grained_activation_offloading is on but the launch environment has NVTE_CPU_OFFLOAD_V1 "
                       "unset: with TE >= 2.10 Megatron-LM's validate_args refuses to start: it asserts \"For "
                       "fine-grained activation offloading with TE >= 2.10.0, NVTE_CPU_OFFLOAD_V1 should be set to 1 "
                       "to avoid offloading weights.\"")

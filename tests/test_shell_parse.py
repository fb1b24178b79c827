"""Tests for offlint.sources.shell_parse: bash launch script -> the commands it runs, statically."""

from __future__ import annotations

import os
from textwrap import dedent

import pytest

from offlint.sources.shell_parse import parse_shell
from offlint.sources.shell_values import Command, ShellScript, Word
from tests.check_helpers import check_json


def cmds(text: str) -> list[Command]:
    result = parse_shell(dedent(text))
    assert result.errors == [], result.errors
    return result.commands


def find(text: str, name: str) -> Command:
    matches = [c for c in cmds(text) if c.argv and c.argv[0].value == name]
    assert len(matches) == 1, [[w.value for w in c.argv] for c in cmds(text)]
    return matches[0]


def values(cmd: Command) -> list[str | None]:
    return [w.value for w in cmd.argv]


def word(cmd: Command, value: str) -> Word:
    return next(w for w in cmd.argv if w.value == value)


# --- simple commands, lists, continuations --------------------------------------------------------------


def test_continuation_lines_and_positions():
    c = find("python train.py \\\n  --tp 4 \\\n    --pp 2\n", "python")
    assert values(c) == ["python", "train.py", "--tp", "4", "--pp", "2"]
    assert (c.line, c.col) == (1, 1)
    assert (word(c, "--tp").line, word(c, "--tp").col) == (2, 3)
    assert (word(c, "2").line, word(c, "2").col, word(c, "2").text) == (3, 10, "2")


def test_lists_and_pipelines_give_every_command():
    names = [c.argv[0].value for c in cmds("a 1 && b 2; c | d || e &\nf\n")]
    assert names == ["a", "b", "c", "d", "e", "f"]


def test_comments_ignored_and_heredoc_skipped():
    text = """\
    # python commented.py
    cat <<EOF > run.sh
    python inside_heredoc.py
    EOF
    python real.py  # trailing comment
    """
    assert [values(c) for c in cmds(text)] == [["cat"], ["python", "real.py"]]


# --- variables and parameter expansion -------------------------------------------------------------------


def test_assignment_forms_and_references():
    text = """\
    A=1
    B="a b"
    C=${C:-default}
    echo $A ${A} "$B" $C
    """
    assert values(find(text, "echo")) == ["echo", "1", "1", "a b", "default"]


def test_default_and_alternative_operators():
    text = """\
    SET=v
    EMPTY=
    echo ${NOPE:-d1} ${NOPE-d2} ${EMPTY:-d3} ${EMPTY-d4} ${SET:+alt} ${NOPE:+alt} ${NEW:=d5} $NEW
    """
    # ${EMPTY-d4} is empty and ${NOPE:+alt} is empty: unquoted empty expansions vanish.
    assert values(find(text, "echo")) == ["echo", "d1", "d2", "d3", "alt", "d5", "d5"]


def test_unassigned_variable_is_unknown_with_reason():
    c = find("python train.py --pp $PP model.tp=${TP}\n", "python")
    pp, tp = c.argv[3], c.argv[4]
    assert pp.value is None and pp.unknown == "$PP is not set in this script" and pp.text == "$PP"
    assert tp.value is None and "$TP" in tp.unknown


def test_positional_special_and_substitutions_are_unknown():
    c = find('echo $1 "$@" $* $# $(hostname) `date` $$\n', "echo")
    reasons = [w.unknown for w in c.argv[1:]]
    assert all(w.value is None for w in c.argv[1:])
    assert reasons[0] == "positional parameter $1"
    assert "$@" in reasons[1] and "$*" in reasons[2] and "$#" in reasons[3]
    assert reasons[4] == reasons[5] == "command substitution"


def test_arithmetic_on_known_values():
    text = """\
    NNODES=2
    echo $((NNODES * 8)) $(( (NNODES + 1) / 2 )) $((UNSET + 1))
    """
    c = find(text, "echo")
    assert values(c)[:3] == ["echo", "16", "1"]
    assert c.argv[3].value is None and "UNSET" in c.argv[3].unknown


@pytest.mark.parametrize("layers, taken", [("32", "--recompute-granularity full"), ("8", None),
                                            ("$1", "undecided")])
def test_an_arithmetic_command_decides_a_branch_on_known_values(layers, taken):
    """`if (( NUM_LAYERS >= 32 ))` with the count known: round 5 of the recall study's launch took both branches, and
    OFL225 on the one the count chooses was reported as the user's choice. An assignment in it is not evaluated."""
    text = f"""\
    NUM_LAYERS={layers}
    ARGS=(--num-layers $NUM_LAYERS)
    if (( NUM_LAYERS >= 32 )); then
        ARGS+=(--recompute-granularity full)
    fi
    torchrun pretrain_gpt.py "${{ARGS[@]}}"
    """
    c = find(text, "torchrun")
    given = values(c)[4:] if taken != "undecided" else None
    if taken == "undecided":
        assert len(c.argv) > 4 and any(w.alternative for w in c.argv[4:])
    else:
        assert given == (taken.split() if taken else []) and not any(w.alternative for w in c.argv)


@pytest.mark.parametrize("unset, left", [
    ("unset 'ARGS[1]'", ["--bf16", "--overlap-param-gather"]),
    ('unset "ARGS[1]"', ["--bf16", "--overlap-param-gather"]),
    ("unset ARGS[1]", ["--bf16", "--overlap-param-gather"]),  # (unquoted: the same where no file matches)
    ('i=1\nunset "ARGS[$i]"', ["--bf16", "--overlap-param-gather"]),
    ("unset 'ARGS[-1]'", ["--bf16", "--use-distributed-optimizer"]),
    ("unset 'ARGS[7]'", ["--bf16", "--use-distributed-optimizer", "--overlap-param-gather"]),  # (no such element)
    ("unset -v ARGS", [None]),
    ("unset -f ARGS", ["--bf16", "--use-distributed-optimizer", "--overlap-param-gather"]),  # (a function)
    ('unset "ARGS[$j]"', [None]),
])
def test_an_element_unset_leaves_the_others(unset, left):
    """Round 5 of the recall study took `--use-distributed-optimizer` out of a launch's array with `unset
    'ARGS[1]'`: the array had stayed whole (and the unquoted `unset ARGS[1]` had unset all of it)."""
    text = f"""\
    ARGS=(--bf16 --use-distributed-optimizer --overlap-param-gather)
    {unset}
    torchrun pretrain_gpt.py "${{ARGS[@]}}"
    """
    assert values(find(text, "torchrun"))[2:] == left


def test_string_operations():
    text = """\
    RECIPE=llama3_8b_pretrain_config
    echo ${RECIPE%_config} ${RECIPE#*_} ${RECIPE//_/-} ${#RECIPE} ${RECIPE:0:6} ${RECIPE^^}
    """
    assert values(find(text, "echo"))[1:] == [
        "llama3_8b_pretrain", "8b_pretrain_config", "llama3-8b-pretrain-config", "25", "llama3",
        "LLAMA3_8B_PRETRAIN_CONFIG"]


# --- quoting and word splitting --------------------------------------------------------------------------


def test_quoting_and_word_splitting():
    text = """\
    PP=4
    ARGS="--a 1   --b"
    python '$PP' "$ARGS" $ARGS model.pp="${PP}" x\\ y ""
    """
    c = find(text, "python")
    assert values(c) == ["python", "$PP", "--a 1   --b", "--a", "1", "--b", "model.pp=4", "x y", ""]
    split = [w for w in c.argv if w.text == "$ARGS"]
    assert len(split) == 3 and {(w.line, w.col) for w in split} == {(3, 22)}


def test_backslash_newline_inside_double_quotes():
    text = 'V=7\nCLI_OVERRIDES="\\\n  key=$V \\\n  key2=v"\npython run.py $CLI_OVERRIDES\n'
    assert values(find(text, "python")) == ["python", "run.py", "key=7", "key2=v"]


# --- arrays ---------------------------------------------------------------------------------------------


def test_array_literal_append_and_expansion_positions():
    text = """\
    X="x y"
    CMD=( a b "$X" )
    CMD+=( c )
    run "${CMD[@]}" ${CMD[@]} "${CMD[*]}"
    """
    c = find(text, "run")
    assert values(c) == ["run", "a", "b", "x y", "c", "a", "b", "x", "y", "c", "a b x y c"]
    a, xy, cc = c.argv[1], c.argv[3], c.argv[4]
    assert (a.line, a.col, a.text) == (2, 7, "a")
    assert (xy.line, xy.col, xy.text) == (2, 11, '"$X"')
    assert (cc.line, cc.col) == (3, 8)
    joined = c.argv[-1]
    assert (joined.line, joined.col, joined.text) == (4, 27, '"${CMD[*]}"')


def test_empty_array_expands_to_nothing():
    assert values(find('EXTRA=()\npython x.py "${EXTRA[@]}" ${EXTRA[@]}\n', "python")) == ["python", "x.py"]


def test_array_append_inside_if_is_conditional():
    text = """\
    CMD=(python x.py)
    if [[ -n "$FLAG" ]]; then
      CMD+=(--flag "$FLAG")
    fi
    "${CMD[@]}"
    """
    c = find(text, "python")
    assert values(c) == ["python", "x.py", "--flag", None]
    assert c.argv[0].conditional == "" and c.argv[1].conditional == ""
    assert c.argv[2].conditional == "inside if at line 2" and (c.argv[2].line, c.argv[2].col) == (3, 9)


# --- string command variables and shell payloads ---------------------------------------------------------


def test_string_command_variable():
    text = """\
    CMD="python train.py"
    CMD="$CMD --x 1"
    $CMD --y
    """
    c = find(text, "python")
    assert values(c) == ["python", "train.py", "--x", "1", "--y"]
    assert all((w.line, w.col) == (3, 1) for w in c.argv[:4])


def test_bash_c_payload_is_parsed_with_positions_and_env():
    text = """\
    CMD="python train.py --tp 2"
    srun -N 2 bash -lc "export A=1; $CMD"
    """
    commands = cmds(text)
    assert [c.argv[0].value for c in commands] == ["srun", "python"]
    assert values(commands[0])[3:5] == ["bash", "-lc"]
    inner = commands[1]
    assert values(inner) == ["python", "train.py", "--tp", "2"]
    assert (inner.line, inner.col) == (1, 6)
    assert (word(inner, "--tp").line, word(inner, "--tp").col, word(inner, "--tp").text) == (1, 22, "--tp")
    a = inner.env["A"]
    assert (a.value, a.line, a.col) == ("1", 2, 28)
    assert "A" not in commands[0].env


def test_sh_c_single_quoted_payload_sees_only_exported_variables():
    text = """\
    export E=1
    LOCAL=2
    sh -c 'python x.py --e "$E" --l "${LOCAL:-unset}" $LOCAL'
    """
    inner = find(text, "python")
    assert values(inner)[:6] == ["python", "x.py", "--e", "1", "--l", "unset"]
    assert inner.argv[6].value is None and "not exported" in inner.argv[6].unknown
    assert (inner.line, inner.col) == (3, 8)
    assert inner.env["E"].value == "1"


def test_payload_keeps_conditional_marks_of_array_elements():
    text = """\
    CMD=(python x.py)
    if [[ -n "$DEBUG" ]]; then CMD+=(--debug); fi
    srun bash -c "${CMD[*]}"
    """
    srun, inner = cmds(text)
    assert srun.argv[-1].conditional == ""
    assert values(inner) == ["python", "x.py", "--debug"]
    assert [w.conditional for w in inner.argv] == ["", "", "inside if at line 2"]
    assert (inner.argv[2].line, inner.argv[2].col) == (2, 34)


def test_unknown_parts_keep_the_known_words_around_them():
    text = """\
    SRUN_CMD="srun --mpi=pmix --container-image=$CONTAINER_IMAGE"
    MASTER_ADDR=$(hostname)
    CMD="python -m torch.distributed.run --master_addr=$MASTER_ADDR train.py --tp 2"
    $SRUN_CMD bash -c "$CMD"
    """
    hostname, srun, inner = cmds(text)  # commands inside $(...) run too, so they are reported
    assert values(hostname) == ["hostname"]
    assert values(srun)[:5] == ["srun", "--mpi=pmix", None, "bash", "-c"]
    assert srun.argv[2].unknown == "$CONTAINER_IMAGE is not set in this script"
    assert srun.argv[5].value is None and srun.argv[5].unknown == "command substitution"
    assert values(inner) == ["python", "-m", "torch.distributed.run", None, "train.py", "--tp", "2"]
    assert inner.argv[3].unknown == "command substitution" and (inner.argv[3].line, inner.argv[3].col) == (3, 38)


def test_multiline_bash_lc_payload_with_exports():
    text = """\
    HF_HOME="${HF_HOME:-/workspace/hf_home}"
    CMD="python run_recipe.py --recipe r"
    srun bash -lc "
        set -euo pipefail
        export HF_HOME=$HF_HOME
        export PYTHONPATH=/opt/src:\\${PYTHONPATH:-}
        $CMD
    "
    """
    inner = find(text, "python")
    assert values(inner) == ["python", "run_recipe.py", "--recipe", "r"]
    assert (inner.env["HF_HOME"].value, inner.env["HF_HOME"].line, inner.env["HF_HOME"].col) == (
        "/workspace/hf_home", 5, 12)
    assert inner.env["PYTHONPATH"].value == "/opt/src:"
    assert [c.argv[0].value for c in cmds(text)] == ["srun", "set", "python"]


def test_string_append_inside_if_keeps_words_marked_conditional():
    text = """\
    SRUN="srun --ntasks=8"
    if [ -n "$MOUNTS" ]; then SRUN="$SRUN --container-mounts=/data"; fi
    PYTHONPATH=/a
    if [ -n "$B" ]; then PYTHONPATH="$PYTHONPATH:/b"; fi
    export SRUN PYTHONPATH
    $SRUN python x.py
    """
    c = find(text, "srun")
    assert values(c) == ["srun", "--ntasks=8", "--container-mounts=/data", "python", "x.py"]
    assert [w.conditional for w in c.argv] == ["", "", "inside if at line 2", "", ""]
    assert c.env["SRUN"].value is None and c.env["SRUN"].unknown.startswith("assigned differently on some paths")
    assert c.env["PYTHONPATH"].unknown == "assigned differently on some paths (lines 3, 4)"


def test_a_wrapper_put_in_front_inside_if_keeps_its_words_marked_conditional():
    """HYGON-AI/Megatron-LM-das's train_*.sh: `APP="hipprof ... ${APP}"` when profiling. A prefix is kept as an
    appended suffix is (the command is the same on both paths, under a profiler on one); the value had become
    unknown, and the training launch behind it gave no unit. A value changed otherwise on some path stays unknown."""
    text = """\
    APP="torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2"
    if [[ $profiling == "nsys" ]]; then
        APP="nsys profile -o out ${APP}"
    elif [[ $profiling == "hip" ]]; then
        APP="hipprof --hip-trace ${APP}"
    fi
    $APP
    """
    c = find(text, "nsys")
    assert values(c) == ["nsys", "profile", "-o", "out", "hipprof", "--hip-trace", "torchrun", "--nproc_per_node",
                         "8", "pretrain_gpt.py", "--num-layers", "2"]
    assert [w.conditional for w in c.argv[:6]] == ["inside if at line 2"] * 6
    assert [w.conditional for w in c.argv[6:]] == [""] * 6
    # words added before and after it on one path (HYGON's hip branch: `APP+=" ARGS"`, then the profiler in front)
    both = text.replace('APP="hipprof --hip-trace ${APP}"', 'APP+=" --profile"\n    APP="hipprof ${APP}"')
    c = find(both, "nsys")
    assert values(c) == ["nsys", "profile", "-o", "out", "hipprof", "torchrun", "--nproc_per_node", "8",
                         "pretrain_gpt.py", "--num-layers", "2", "--profile"]
    assert [bool(w.conditional) for w in c.argv] == [True] * 5 + [False] * 6 + [True]
    changed = text.replace('APP="hipprof --hip-trace ${APP}"', 'APP="${APP}-debug"')
    assert not [c for c in cmds(changed) if c.argv and c.argv[0].value in ("nsys", "torchrun")]


HEREDOC_LAUNCH = """\
read -r -d '' INNER <<'EOF' || true
cd "${BRIDGE}"
python scripts/training/run_recipe.py \\
    --recipe r_config \\
    ${CLI}
EOF
CLI="model.cpu_offloading=true"
srun --mpi=pmix bash -c "export CLI=\\"${CLI}\\"; ${INNER}"
"""


def test_a_script_read_from_a_here_document_is_run_where_it_is_expanded():
    """Megatron Bridge's stepfun Slurm launchers: `read -r -d '' INNER_SCRIPT <<'EOF' ... EOF`, then
    `srun ... bash -c "...; ${INNER_SCRIPT}"`. `read` had left the variable unknown, and the launch in it unread."""
    result = parse_shell(HEREDOC_LAUNCH)
    assert result.errors == []
    python = find(HEREDOC_LAUNCH, "python")
    assert values(python) == ["python", "scripts/training/run_recipe.py", "--recipe", "r_config",
                              "model.cpu_offloading=true"]
    assert python.line == 3  # inside the here-document
    # an unquoted delimiter expands the document where it is read, as bash does (GCP's GPU recipes keep their
    # worker's command so, `\$RANK` escaped for the worker): a value set before the read is in it
    expanded = "R=r_config\n" + HEREDOC_LAUNCH.replace("<<'EOF'", "<<EOF").replace("--recipe r_config", "--recipe $R")
    assert values(find(expanded, "python"))[:4] == ["python", "scripts/training/run_recipe.py", "--recipe", "r_config"]
    escaped = expanded.replace("--recipe $R", "--recipe \\$R")  # (left for the inner shell, which has no R)
    assert values(find(escaped, "python"))[:4] == ["python", "scripts/training/run_recipe.py", "--recipe", None]
    # so does a read of one line (no -d ''), or into several names
    for other in ("read -r INNER <<'EOF' || true", "read -r -d '' INNER REST <<'EOF' || true"):
        text = HEREDOC_LAUNCH.replace("read -r -d '' INNER <<'EOF' || true", other)
        assert not [c for c in cmds(text) if c.argv and c.argv[0].value == "python"], other


def test_a_here_document_without_r_joins_continued_lines_and_strips_tabs_with_a_dash():
    text = "read -d '' INNER <<-'EOF'\n\tpython train.py \\\n\t  --lr 1\nEOF\nbash -c \"$INNER\"\n"
    assert values(find(text, "python")) == ["python", "train.py", "--lr", "1"]


@pytest.mark.parametrize("use", ["echo $CMD", "printf '%s\\n' $CMD", "logger -t run $CMD", "$CMD"])
def test_a_shell_c_command_in_a_variable_that_is_printed_or_run_unquoted_is_no_parse_error(use):
    """MooreThreads' MT-MegatronLM: `cmd="bash -c '...; torchrun ...'"`, then `echo $cmd` and `eval $cmd`. Split
    without eval, the words keep their quotes as characters (`'cd`): echo, printf and logger print them and run
    nothing; run as a command, bash's `-c` payload is `'cd`, which that bash refuses when the job runs. Neither is a
    syntax error of the script (12 of its scripts had gone unread, exit 2): a payload offlint cannot parse is not
    read, as a sourced script it cannot parse is not, and the command `eval` runs is still read."""
    result = parse_shell(f"CMD=\"bash -c 'cd /work; python train.py --lr 1'\"\n{use}\neval $CMD\n")
    assert result.errors == []
    (python,) = [c for c in result.commands if c.argv and c.argv[0].value == "python"]
    assert values(python) == ["python", "train.py", "--lr", "1"]


def test_eval_payload():
    c = find('OPTS="--a 1"\neval "python x.py $OPTS"\n', "python")
    assert values(c) == ["python", "x.py", "--a", "1"]
    assert (c.line, c.col) == (2, 7)


def test_eval_of_an_unquoted_variable_holding_a_shell_c_command():
    """HYGON-AI/Megatron-LM-das's examples/*/run_*.sh: `CMD="mpirun ... bash -c '<script>'"` then `eval ${CMD}`.
    eval joins its words and reads them again, so the quotes inside the value are quotes: the payload is read from
    that text, not from eval's own split words (which gave the `-c` payload `'`: a false syntax error, exit 2)."""
    result = parse_shell("CMD=\"mpirun -np 2 bash -c 'python train.py --lr 1'\"\neval ${CMD}\n")
    assert result.errors == []
    (python,) = [c for c in result.commands if c.argv and c.argv[0].value == "python"]
    assert values(python) == ["python", "train.py", "--lr", "1"]


def test_eval_of_code_built_from_an_unknown_value_is_no_syntax_error():
    """Megatron-LM's .gitlab/scripts/build.sh: `eval "IMAGE=\\$$IMAGE"` is code only once $IMAGE is there
    (bash -n accepts the file); known eval text that bash would refuse stays an error."""
    assert parse_shell('eval "IMAGE=\\$$IMAGE"\npython train.py\n').errors == []
    bad = parse_shell('eval "X=(1 2"\n')
    assert bad.errors and "in eval: " in bad.errors[0]


# --- exports and environment -----------------------------------------------------------------------------


def test_exports_in_effect_for_later_commands():
    text = """\
    export A=1
    B=2
    export B
    C=3 D=4
    export C D UNSET_HERE
    declare -x E=5
    NOT_EXPORTED=6
    python x.py
    """
    env = find(text, "python").env
    assert {k: v.value for k, v in env.items()} == {
        "A": "1", "B": "2", "C": "3", "D": "4", "UNSET_HERE": None, "E": "5"}
    assert (env["B"].line, env["B"].col) == (2, 1)
    assert "not set" in env["UNSET_HERE"].unknown


def test_a_declaration_s_quoted_word_is_an_assignment_as_bash_reads_it():
    """`export 'X=v'` and `export "X=$Y"` assign as `export X=v` does (bash removes the quotes, then splits the word
    at its first `=`; the value is not split further). A third-party launch set its allocator options so, and offlint
    reported PYTORCH_CUDA_ALLOC_CONF unset (and, with expandable_segments:True written that way, advice to add it)."""
    text = """\
    Y="b  c"
    export 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True' "NCCL_DEBUG=$Y" 'RAW=$Y'
    declare -x "A=1=2"
    export "not a name=1" '=x' "$UNSET_NAME=3" B
    f() { local 'L=in'; python inner.py; }
    f
    python x.py
    """
    _call, inner, outer = cmds(text)
    got = {k: v.value for k, v in outer.env.items()}
    assert got == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_DEBUG": "b  c", "RAW": "$Y",
                   "A": "1=2", "B": None}
    assert (outer.env["NCCL_DEBUG"].line, outer.env["NCCL_DEBUG"].col) == (2, 59)
    assert "L" not in outer.env and "L" not in inner.env  # local and not exported


def test_a_quoted_export_of_expandable_segments_gives_no_allocator_advice(tmp_path):
    (tmp_path / "pretrain_gpt.py").write_text("from megatron.training import pretrain\n\npretrain(None, None, None)\n")
    launch = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16"
              " --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 8"
              " --bf16 --train-iters 100\n")
    (tmp_path / "set.sh").write_text("export 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'\n" + launch)
    (tmp_path / "other.sh").write_text('export "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32"\n' + launch)
    found = [(f["filename"], f["code"], f["message"].split(",")[0]) for f in check_json(tmp_path, "--no-cache")]
    assert found == [("other.sh", "OFL301",
                      "this training launch runs with PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:32'")]


def test_prefix_assignments_apply_to_that_command_only():
    text = """\
    X=1 Y="a b" python first.py $X
    python second.py
    """
    first, second = cmds(text)
    assert {k: v.value for k, v in first.env.items()} == {"X": "1", "Y": "a b"}
    assert first.argv[2].value is None  # the prefix does not affect the command's own words
    assert second.env == {}


def test_export_with_default_value():
    text = "export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}\nrun\n"
    setting = find(text, "run").env["PYTORCH_CUDA_ALLOC_CONF"]
    assert (setting.value, setting.line, setting.col) == ("expandable_segments:True", 1, 8)


# --- control flow ---------------------------------------------------------------------------------------


def test_commands_in_all_control_structures_are_yielded():
    text = """\
    if a; then b; elif c; then d; else e; fi
    case "$M" in x) f ;; *) g ;; esac
    for i in 1 2; do h "$i"; done
    while k; do l; done
    fn() { m; }
    fn
    """
    names = [c.argv[0].value for c in cmds(text)]
    assert names == ["a", "b", "c", "d", "e", "f", "g", "h", "h", "k", "l", "fn", "m"]  # (a pass of the loop per word)
    conds = {c.argv[0].value: c.argv[0].conditional for c in cmds(text)}
    assert conds["a"] == "" and conds["b"] == "inside if at line 1" and conds["e"] == "inside if at line 1"
    assert conds["f"] == "inside case at line 2" and conds["h"] == "" and conds["l"] == "inside while loop at line 4"
    assert conds["m"] == ""  # the function is called unconditionally


def test_conditional_assignment_new_and_reassigned():
    text = """\
    PP=1
    if [[ "$BIG" == 1 ]]; then
      PP=4
      NEW=yes
    fi
    if x; then SAME=1; else SAME=1; fi
    python train.py $PP $NEW $SAME
    """
    c = find(text, "python")
    pp, new, same = c.argv[2:]
    assert pp.value is None and pp.unknown == "assigned differently on some paths (lines 1, 3)"
    assert (new.value, new.conditional) == ("yes", "inside if at line 2")
    assert (same.value, same.conditional) == ("1", "")


def test_case_and_and_or_assignments():
    text = """\
    case "$MODEL" in
      8b) TP=1 ;;
      70b) TP=4 ;;
      *) echo "unknown model"; exit 1 ;;
    esac
    [[ -z "$NODES" ]] && NODES=1
    python x.py $TP $NODES
    """
    c = find(text, "python")
    assert c.argv[2].value is None and "lines 2, 3" in c.argv[2].unknown
    assert (c.argv[3].value, c.argv[3].conditional) == ("1", "after && at line 6")


def test_read_and_loop_variables_are_unknown():
    text = """\
    read -r TP PP EP
    IFS=',' read -r A B <<< "$CONFIG"
    for MODEL in $(ls models); do
      echo "$MODEL"
    done
    python x.py $TP $PP $EP $MODEL $A $B
    """
    c = find(text, "python")
    assert [w.unknown for w in c.argv[2:5]] == ["set by read"] * 3
    assert c.argv[5].unknown == "loop variable"
    assert [w.unknown for w in c.argv[6:8]] == ["set by read"] * 2  # (a here-string offlint cannot read)


def test_a_here_string_read_and_a_loop_over_known_words():
    """bash splits a here-string's line by IFS into the names; a `for` loop over words it can read runs its body
    once per word and leaves the last word in its variable."""
    text = """\
    CONFIG="1,2,8"
    IFS=',' read -r TP PP EP <<< "$CONFIG"
    for MODEL in a b c; do
      echo "$MODEL"
    done
    python x.py $TP $PP $EP $MODEL
    """
    c = find(text, "python")
    assert values(c)[2:] == ["1", "2", "8", "c"]
    assert [values(e) for e in cmds(text) if e.argv[0].value == "echo"] == [["echo", "a"], ["echo", "b"], ["echo", "c"]]
    assert [e.passes for e in cmds(text) if e.argv[0].value == "echo"] == [
        (("`for MODEL in a b c` (line 3)", "MODEL", word, ("a", "b", "c")),) for word in "abc"]
    assert c.passes == ()


def test_function_call_uses_call_site_values_and_locals():
    text = """\
    launch() {
      local TP=8
      srun python train.py --tp "$TP" --pp "$PP" "$@"
    }
    usage() { echo "usage: $0"; }
    TP=1
    PP=2
    launch --extra
    python after.py $TP
    """
    commands = cmds(text)
    srun = next(c for c in commands if c.argv[0].value == "srun")
    assert values(srun)[:7] == ["srun", "python", "train.py", "--tp", "8", "--pp", "2"]
    assert values(srun)[7:] == ["--extra"]  # "$@" in the body: this call's arguments
    assert values(find(text, "python")) == ["python", "after.py", "1"]
    echo = find(text, "echo")  # never called: still read, marked conditional
    assert echo.argv[0].conditional == "inside function usage at line 5"


# --- robustness and speed --------------------------------------------------------------------------------


def test_garbage_input_never_raises():
    for text in ["", "\n\n", 'echo "unterminated', "if then fi ((", "\x00\xff\ud800 echo $((1/0)) ${", "$(" * 500,
                 "{ " * 3000, "a=( ; ) ${X:?} ${!X} ${X@Q}", bytes(range(256)).decode("latin-1") * 4]:
        result = parse_shell(text)
        assert isinstance(result, ShellScript)
    assert parse_shell("").commands == [] and parse_shell("").errors == []
    bad = parse_shell('python ok.py\necho "unterminated\n')
    assert bad.errors and bad.errors[0].startswith("line 2: ")
    assert bad.commands[0].argv[0].value == "python"


def test_positions_are_in_characters_after_non_ascii():
    c = find('echo "héllo wörld" --x\n', "echo")
    assert (c.argv[2].line, c.argv[2].col) == (1, 20)


def test_non_string_input_does_not_crash():
    assert parse_shell(b"echo hi").commands[0].argv[1].value == "hi"  # type: ignore[arg-type]


MEGATRON_BRIDGE_SCRIPT = """\
#!/bin/bash
# Llama3 8B pretraining with Megatron Bridge, adapted from examples/recipes
set -euo pipefail

PYTHON_BIN=${PYTHON_BIN:-python}
RECIPE=${RECIPE:-llama3_8b_pretrain_config}
TP=${TP:-1}
PP=${PP:-2}
VP=${VP:-}
GBS=${GBS:-128}
MBS=1
OPTIMIZER_CPU_OFFLOAD=${OPTIMIZER_CPU_OFFLOAD:-}
NNODES=${SLURM_NNODES:-1}

export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
export NCCL_NVLS_ENABLE=0

CMD=(
  "${PYTHON_BIN}" -m torch.distributed.run
  --nproc_per_node=8 --nnodes="${NNODES}"
  scripts/training/run_recipe.py
  --recipe "${RECIPE}"
  model.tensor_model_parallel_size="${TP}"
  model.pipeline_model_parallel_size="${PP}"
  train.global_batch_size=${GBS}
  train.micro_batch_size=${MBS}
  logger.log_interval=$((GBS / 64))
)
if [[ -n "${VP}" ]]; then
  CMD+=(model.virtual_pipeline_model_parallel_size="${VP}")
fi
if [[ -n "${OPTIMIZER_CPU_OFFLOAD}" ]]; then
  CMD+=(optimizer.optimizer_cpu_offload="${OPTIMIZER_CPU_OFFLOAD}")
fi

CMD="${CMD[*]}"
echo "Running: ${CMD}"
srun --nodes="${NNODES}" --ntasks-per-node=1 bash -c "$CMD"
"""


def test_realistic_megatron_bridge_script():
    commands = cmds(MEGATRON_BRIDGE_SCRIPT)
    assert [c.argv[0].value for c in commands] == ["set", "echo", "srun", "python"]
    srun, inner = commands[2], commands[3]
    assert values(srun)[:5] == ["srun", "--nodes=1", "--ntasks-per-node=1", "bash", "-c"]
    assert values(inner) == [
        "python", "-m", "torch.distributed.run", "--nproc_per_node=8", "--nnodes=1",
        "scripts/training/run_recipe.py", "--recipe", "llama3_8b_pretrain_config",
        "model.tensor_model_parallel_size=1", "model.pipeline_model_parallel_size=2",
        "train.global_batch_size=128", "train.micro_batch_size=1", "logger.log_interval=2"]
    pp = word(inner, "model.pipeline_model_parallel_size=2")
    assert (pp.line, pp.col, pp.conditional) == (25, 3, "")
    assert word(inner, "--recipe").line == 23
    assert (inner.argv[0].line, inner.argv[0].col) == (5, 26)  # "python" as written in the default
    # VP and OPTIMIZER_CPU_OFFLOAD are empty by default: both `if [[ -n ... ]]` are decided (false), and the
    # command says which defaults that took
    assert inner.assumes == (
        '`[[ -n "${VP}" ]]` (line 30) is false, assuming the environment does not set VP',
        '`[[ -n "${OPTIMIZER_CPU_OFFLOAD}" ]]` (line 33) is false, assuming the environment does not set '
        'OPTIMIZER_CPU_OFFLOAD')
    # a value offlint cannot know leaves the branch open: its words are there, marked conditional
    undecided = cmds(MEGATRON_BRIDGE_SCRIPT.replace("VP=${VP:-}", "VP=$(cat vp.txt)"))[-1]
    vp = next(w for w in undecided.argv if w.text.startswith("model.virtual_pipeline_model_parallel_size="))
    assert (vp.line, vp.conditional) == (31, "inside if at line 30") and undecided.assumes[:1] == (
        '`[[ -n "${OPTIMIZER_CPU_OFFLOAD}" ]]` (line 33) is false, assuming the environment does not set '
        'OPTIMIZER_CPU_OFFLOAD',)
    env = inner.env
    assert env["PYTORCH_CUDA_ALLOC_CONF"].value == "expandable_segments:True"
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"].value == "1" and env["NCCL_NVLS_ENABLE"].line == 17


def test_three_hundred_lines_give_every_copy_of_the_commands():
    """Eight copies of the script: eight times its commands, in order, no parse error. How long that takes is
    measured by benchmarks/ (bench_check.py, hostile_inputs.py), not asserted here."""
    text = MEGATRON_BRIDGE_SCRIPT * 8
    assert text.count("\n") >= 300
    one, many = parse_shell(MEGATRON_BRIDGE_SCRIPT), parse_shell(text)
    assert not many.errors and len(one.commands) > 1
    assert [c.line for c in many.commands][:len(one.commands)] == [c.line for c in one.commands]
    assert len(many.commands) == 8 * len(one.commands)


# --- tree-sitter-bash's known gaps: the misread constructs are masked, the rest is read ------------------


def _command_of(result: ShellScript, name: str) -> Command:
    return next(c for c in result.commands if c.argv and c.argv[0].value == name)


def test_a_bracket_in_an_expansion_pattern_no_longer_loses_the_function():
    """tree-sitter-bash issues 274/285: `${v%%]*}` made one ERROR node of the whole function and what followed."""
    result = parse_shell(dedent("""\
        first_host() {
            local nodelist=$1
            if [[ "${nodelist}" != *"["* ]]; then
                echo "${nodelist%%,*}"
                return
            fi
            entries="${nodelist#*[}"
            entries="${entries%%]*}"
            echo "${entries%%,*}"
        }
        NODES="node[3-4,7]"
        entries="${NODES#*[}"
        echo "${entries%%]*}" end
        torchrun run_recipe.py --recipe llama3_8b_pretrain_config model.cpu_offloading=true
        """))
    assert result.errors == []
    echo = next(c for c in result.commands if c.argv[0].value == "echo" and c.line == 13)
    assert values(echo) == ["echo", "3-4,7", "end"]  # the pattern's `]` is read from the original text
    launch = _command_of(result, "torchrun")
    assert (launch.line, launch.argv[-1].col) == (14, 59)  # positions after the masked text are unchanged


def test_an_operator_in_an_expansion_word_is_unknown_not_a_parse_error():
    """Issue 267: `${s:+$s;}`; a plain word (`${L:-a|b}`) keeps its value, one with an expansion is unknown."""
    result = parse_shell(dedent("""\
        s=qos=high
        extra="${s:+$s;}nodelist=a"
        LAYOUT=${LAYOUT:-Et*3|t*2|tmL}
        python run_recipe.py "slurm=$extra" "model.pipeline_model_parallel_layout=$LAYOUT" after=1
        """))
    assert result.errors == []
    argv = _command_of(result, "python").argv
    assert argv[2].value is None and "${s:+$s;}" in argv[2].unknown and "tree-sitter-bash" in argv[2].unknown
    assert [w.value for w in argv[3:]] == ["model.pipeline_model_parallel_layout=Et*3|t*2|tmL", "after=1"]


def test_a_base_prefix_in_arithmetic_keeps_its_value():
    result = parse_shell('NGPUS="${NGPUS:-0192}"\nNGPUS=$((10#$NGPUS))\n(( 10#$NGPUS > 8 )) && echo many\n'
                         'echo $((NGPUS / 8)) $((16#ff))\n')
    assert result.errors == []
    assert [values(c) for c in result.commands] == [["echo", "many"], ["echo", "24", "255"]]


def test_a_base_prefix_in_a_c_style_for_header_is_no_parse_error():
    """AMD's Primus: `for (( n=10#$first; n<=10#$last; n++ ))` (zero-padded node numbers) is valid bash that
    tree-sitter-bash refuses in a for header; the whole script had gone unread (exit 2 in a CI gate)."""
    result = parse_shell('a=01\nb=04\nfor (( n=10#$a; n<=10#$b; n++ )); do echo "$n"; done\n'
                         'torchrun pretrain_gpt.py --num-layers 4\n')
    assert result.errors == []
    assert _command_of(result, "torchrun") is not None


def test_an_empty_command_substitution_on_a_line_of_its_own_is_no_parse_error():
    """Ascend's MindSpeed-LLM: a conversion script ends with "`" on two lines (an empty command substitution, which
    expands to nothing); bash accepts it, tree-sitter-bash refuses it and the script had gone unread."""
    result = parse_shell("python convert.py \\\n    --save-dir ./out/\n`\n`\n")
    assert result.errors == []
    assert values(_command_of(result, "python")) == ["python", "convert.py", "--save-dir", "./out/"]


def test_an_empty_command_substitution_glued_to_a_word_is_no_parse_error():
    """A vLLM copy's eval scripts print a blank line with echo`` (empty backticks glued to the command name);
    `x=$()` and `$( )` are empty too. Each expands to nothing, bash accepts them and tree-sitter-bash (0.25) refused
    the script (exit 2, the whole function around it unread). The words are read as bash reads them; one glued on
    both sides (a$()b) or inside double quotes is left as it was."""
    result = parse_shell("usage() {\n    echo``\n    echo \"usage\"\n}\nEXTRA=$()\nPAD=x$( )\n"
                         "torchrun pretrain_gpt.py --num-layers 4 $EXTRA $() --lr 1e-4${PAD}\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "pretrain_gpt.py", "--num-layers", "4", "--lr",
                                                        "1e-4x"]
    result = parse_shell("X=a$()b\ntorchrun pretrain_gpt.py --num-layers 4\n")
    assert result.errors, "glued on both sides: blanking would split the word, so it is not masked"


def test_a_command_substitution_holding_a_comment_alone_is_no_parse_error():
    """NVIDIA's GenerativeAIExamples (a helper's sweep) comments each line of a continued command with
    `` `# note` ``: bash reads the comment inside the substitution, which expands to nothing, and `bash -n` accepts
    it; tree-sitter-bash (0.25) read the `#` to the line's end, lost the closing backtick, and the run ended with
    exit 2. The command's words are read as bash reads them."""
    result = parse_shell("torchrun pretrain_gpt.py \\\n    --num-layers 4        `# the model's depth` \\\n"
                         "    --lr 1e-4 `#` \\\n    --pipeline-model-parallel-size 3\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "pretrain_gpt.py", "--num-layers", "4", "--lr",
                                                        "1e-4", "--pipeline-model-parallel-size", "3"]
    result = parse_shell("echo a`# note`b\n")
    assert result.errors, "glued on both sides: blanking would split the word, so it is not masked"


def test_a_read_write_redirection_is_no_parse_error():
    """`exec 3<>"/dev/tcp/127.0.0.1/$1"` opens a file (here a TCP socket) for reading and writing (a Ray cluster's
    start-up script, in a repository a helper swept, session 46): bash accepts it, tree-sitter-bash (0.25) refused
    it and the run ended with exit 2. It is read as a redirection of the same word; `<>` inside a string stays
    what it is."""
    result = parse_shell('exec 3<>"/dev/tcp/127.0.0.1/$1"\necho ping >&3\ncat <>f\n'
                         'torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4\n')
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py",
                                                        "--num-layers", "4"]
    result = parse_shell('echo "a <> b" 3<>log\n')
    assert result.errors == [] and values(_command_of(result, "echo")) == ["echo", "a <> b"]


@pytest.mark.parametrize("redirections", [">/dev/null", "2>&1", "&>/dev/null", ">>log", ">/dev/null 2>&1",
                                          "< in", "2>/dev/null"])
def test_a_here_string_after_another_redirection_is_no_parse_error(redirections):
    """`until ... && jq -e '.ready' >/dev/null <<<"${output}"; do` (a NeMo platform's test script, a helper's sweep,
    session 63): bash accepts a here-string after any other redirection, tree-sitter-bash (0.25) refuses it, and
    the whole script, its launch with it, was not checked (exit 2). The here-string is read as the redirection from
    its word that it is; its word is no argument."""
    result = parse_shell(f'until s="$(curl -s host/health)" && grep -q ready {redirections} <<<"${{s}}"; do\n'
                         '  sleep 5\ndone\ntorchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4\n')
    assert result.errors == []
    assert values(_command_of(result, "grep")) == ["grep", "-q", "ready"]
    assert values(_command_of(result, "torchrun")) == ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py",
                                                        "--num-layers", "4"]
    text = parse_shell('echo "a >b <<<c"\ncat <<<"$x" >/dev/null\n')  # (a string's text; the order that parses)
    assert text.errors == [] and values(_command_of(text, "echo")) == ["echo", "a >b <<<c"]


def test_a_for_loop_without_in_and_do_on_its_line_is_no_parse_error():
    """`for arg do ... done` loops over the positional parameters (POSIX; Gradle's wrapper script, in a repository
    a helper swept): bash accepts it, tree-sitter-bash (0.25) refused it and the run ended with exit 2. The loop is
    read as `for arg; do` is; words that only look like it (`echo for x do`) stay words."""
    result = parse_shell('set -- a b\nfor arg do\n    echo "$arg"\ndone\nif true; then for x do echo "$x"; done; fi\n'
                         "torchrun pretrain_gpt.py --num-layers 4\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "pretrain_gpt.py", "--num-layers", "4"]
    echo = parse_shell("echo for x do\n")
    assert echo.errors == [] and values(_command_of(echo, "echo")) == ["echo", "for", "x", "do"]


def test_a_here_document_line_of_blanks_inside_a_compound_is_no_parse_error():
    """aws-samples' ec2md.sh prints its help from a here-document inside a function: after a line with an
    expansion, a line of blanks alone made tree-sitter-bash (0.25) end the document there, and the whole script
    went unread (exit 2 in a CI gate). The document's text is still read as written."""
    result = parse_shell("show() {\ncat << EOF\nusage\nversion ${VERSION}\n  \t\nEOF\n}\nshow\n"
                         "if true; then\ncat << EOF\n$(date)\n \nEOF\nfi\n"
                         "torchrun pretrain_gpt.py --num-layers 4\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "pretrain_gpt.py", "--num-layers", "4"]


def test_a_command_that_only_assigns_may_redirect():
    """`X=1 2>&1` and `out=$(Y=$(cmd) 2>&1)` (aws-samples' HyperPod cluster scripts): bash assigns and opens the
    files; tree-sitter-bash reads a command missing its name, and the scripts went unread."""
    result = parse_shell("X=1 2>&1\nout=$(Y=$(date) 2>/dev/null)\nZ=$X >> log.txt\necho $X $Z\n")
    assert result.errors == []
    assert values(_command_of(result, "echo")) == ["echo", "1", "1"]


def test_a_command_that_only_assigns_and_redirects_ends_at_its_line():
    """Followed by a line, such a command is no error to tree-sitter-bash: it reads the next line's command as the
    one the assignments and redirections belong to, so the variable was that command's alone and unset after."""
    result = parse_shell("NPROC=8 2>/dev/null\ntorchrun --nproc-per-node $NPROC pretrain_gpt.py\necho $NPROC\n")
    assert result.errors == []
    launch = _command_of(result, "torchrun")
    assert values(launch) == ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py"] and "NPROC" not in launch.env
    assert values(_command_of(result, "echo")) == ["echo", "8"]


@pytest.mark.parametrize("compound", ["while true; do break; done", "if true; then :; fi", "for i in 1; do :; done",
                                      "until false; do break; done", "case $A in 1) :;; esac", "{ :; }",
                                      "[[ -n $A ]] && :"])
@pytest.mark.parametrize("end", ["", "  # the sizes"])
def test_a_line_of_assignments_before_a_compound_command_ends_at_its_line(compound, end):
    """A helper's third-party sweep: after a comment, tree-sitter-bash (0.25) read `A=1 B=2` as the assignments of
    the next line's command, whose name it took to be `while` (or `if`, `[[`, `{`), its `do` and `done` as commands
    of their own, and refused the script (exit 2 in a CI gate). bash ends the command at the line's end: A and B
    are the shell's, and the compound command is read as one."""
    result = parse_shell(f"echo start\n# sizes\nA=1 B=2{end}\n{compound}\ntorchrun pretrain_gpt.py --tp $A --pp $B\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun")) == ["torchrun", "pretrain_gpt.py", "--tp", "1", "--pp", "2"]
    assert not [c for c in result.commands if c.argv[0].value in ("while", "if", "do", "done", "then", "fi", "{")]


@pytest.mark.parametrize("pattern", ['*"gpt"*"moe"*', '*"gpt"?"moe"*', '*"gpt"x"moe"*|*"llama"*'])
def test_a_case_pattern_tree_sitter_bash_refuses_leaves_the_case_undecided(pattern):
    """`case "$1" in *"a"*"b"*) ...`: a glob starting unquoted with two quoted parts, which bash reads and
    tree-sitter-bash (0.25) refuses (a helper's third-party sweep: the whole script went unread). The pattern is
    masked: which item runs is undecided, every item's commands are read on their paths, and the rest after."""
    result = parse_shell(f'MODEL=gpt_moe\ncase "$MODEL" in\n  {pattern}) TP=2 ;;\n  *) TP=1 ;;\nesac\n'
                         "torchrun pretrain_gpt.py --tp $TP\n")
    assert result.errors == []
    tp = _command_of(result, "torchrun").argv[-1]
    assert tp.value is None and tp.unknown


def test_arithmetic_in_an_expansion_word_is_unknown_not_a_parse_error():
    """LLaVA-OneVision-2's launch scripts default a count to a sum: `${ITERS:-$(( (N + G - 1) / G ))}`, which bash
    reads and tree-sitter-bash does not (it reads `$((` as a command substitution of a subshell there). The
    expansion is masked: its value is unknown, the rest of the script is read."""
    result = parse_shell(dedent("""\
        G="${GBS:-16}"
        N="${N_SAMPLES:-8000000}"
        ITERS="${ITERS:-$(( (N + G - 1) / G ))}"
        torchrun --nproc-per-node 4 run_recipe.py --recipe a_config train.train_iters=$ITERS train.global_batch_size=$G
        """))
    assert result.errors == []
    argv = _command_of(result, "torchrun").argv
    assert argv[-2].value is None and "tree-sitter-bash" in argv[-2].unknown
    assert argv[-1].value == "train.global_batch_size=16"


def test_an_array_subscript_in_a_c_style_for_header_is_read():
    """NeMo RL's tools loop `for (( i = 0; i < replicas[${pool}]; i++ ))`, which bash reads and tree-sitter-bash
    does not (its recovery swallowed the next 620 lines). Masking `${pool}` alone leaves the subscript; the header
    is masked around it, and the loop and what follows are read."""
    result = parse_shell(dedent("""\
        declare -A replicas
        replicas[a]=2
        for pool in a; do
          for (( i = 0; i < replicas[${pool}]; i++ )); do
            echo "$pool" "$i"
          done
        done
        torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8
        """))
    assert result.errors == []
    assert _command_of(result, "torchrun").line == 8


def test_a_test_tree_sitter_misreads_is_read_and_still_decided():
    """Issue 321: a glob with a quoted blank after `=`; an extglob (issue 246) is masked and left undecided."""
    result = parse_shell(dedent("""\
        CERT="-----BEGIN CERTIFICATE-----"
        if [[ "${CERT}" = *"BEGIN CERT"* ]]; then MODE=pem; else MODE=der; fi
        F=notes.md
        if [[ $F == *.@(md|mkd) ]]; then KIND=doc; fi
        echo "$MODE" "$KIND"
        """))
    assert result.errors == []
    echo = _command_of(result, "echo")
    assert values(echo) == ["echo", "pem", "doc"]
    assert (echo.argv[1].conditional, echo.argv[2].conditional) == ("", "inside if at line 4")  # only if it ran


def test_real_syntax_errors_are_still_errors():
    for text in ['python run_recipe.py "unterminated\n', "if [[ a b ]]; then echo; fi\n", "echo ${x:-a\n",
                 "case x in\n a) echo\n"]:
        assert parse_shell(text).errors, text


# --- directory idioms: $0, BASH_SOURCE, dirname, realpath, cd && pwd ------------------------------------


DIR_IDIOMS = """\
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd -P)
SCRIPT_DIR=$(dirname "$(realpath "$0")")
HERE="$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd )"
REL=$(dirname "${BASH_SOURCE[0]}")
LINK=$(readlink -f "$0")
WORKDIR=$(pwd)
echo "$ROOT_DIR" "$SCRIPT_DIR" "$HERE" "$REL" "$LINK" "$WORKDIR"
"""


def test_directory_idioms_resolve_relative_to_the_script(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    echo = _command_of(parse_shell(DIR_IDIOMS, "examples/llm/run.sh"), "echo")
    here = f"{tmp_path}/examples/llm"
    assert values(echo)[:6] == ["echo", str(tmp_path), here, here, "examples/llm", f"{here}/run.sh"]
    assert echo.argv[6].value is None  # the shell's working directory is not known


def test_directory_idioms_without_a_script_path_stay_unknown():
    echo = _command_of(parse_shell(DIR_IDIOMS), "echo")
    assert all(w.value is None for w in echo.argv[1:])
    assert echo.argv[1].unknown == "script name $0" and "BASH_SOURCE" in echo.argv[3].unknown


def test_seq_prints_its_integers():
    # THUDM/slime: `--sglang-cuda-graph-bs 1 2 4 8 $(seq 16 8 256)` gives that flag's values, not a word that may be
    # any flag; a `seq` offlint does not model stays unknown
    echo = _command_of(parse_shell('N=3\necho 1 $(seq 16 8 32) "$(seq $N)" $(seq 5 -2 1) $(seq 3 1) end\n'), "echo")
    assert values(echo) == ["echo", "1", "16", "24", "32", "1\n2\n3", "5", "3", "1", "end"]
    unread = _command_of(parse_shell('echo $(seq -w 1 3) $(seq 1 0 3) $(seq 1.5) $(seq $UNSET) $(seq 1 100000)\n'),
                         "echo")
    assert values(unread) == ["echo"] + [None] * 5


# --- branches decided from known values ----------------------------------------------------------------


def test_if_elif_else_and_case_are_decided_from_defaults_with_the_assumption_noted():
    result = parse_shell(dedent("""\
        PRESET=${PRESET:-small}
        if [[ "${PRESET}" == large ]]; then
          PP=8
        elif [ "$PRESET" = "small" ]; then
          PP=2
        else
          PP=1
        fi
        case "$PRESET" in
          large|huge) OFFLOAD=false ;;
          "sm"*) OFFLOAD=true ;;
          *) OFFLOAD=false ;;
        esac
        python run_recipe.py pp=$PP offload=$OFFLOAD
        python run_recipe.py unrelated=1
        """), where=("run.sh", 0))
    assert result.errors == []
    first, second = [c for c in result.commands if c.argv[0].value == "python"]
    assert values(first)[2:] == ["pp=2", "offload=true"] and all(w.conditional == "" for w in first.argv)
    assert first.assumes == (
        '`[[ "${PRESET}" == large ]]` (run.sh:2) is false, assuming the environment does not set PRESET',
        '`[ "$PRESET" = "small" ]` (run.sh:4) is true, assuming the environment does not set PRESET',
        'case `"$PRESET"` (run.sh:9) takes `"sm"*)`, assuming the environment does not set PRESET')
    assert second.assumes == ()  # nothing on its path rests on a default


def test_a_value_the_script_sets_decides_without_an_assumption():
    result = parse_shell('MODE=fixed\n[ "$MODE" = fixed ] && X=1 || X=2\n[[ $MODE == f* && -n $MODE ]] || exit 1\n'
                         'python run_recipe.py x=$X\n')
    python = _command_of(result, "python")
    assert values(python) == ["python", "run_recipe.py", "x=1"] and python.assumes == ()


def test_unknown_values_and_what_fnmatch_cannot_read_stay_undecided():
    result = parse_shell(dedent("""\
        P=$1
        if [[ $P == big ]]; then A=1; else A=2; fi
        Q=abc
        if [[ $Q =~ ^a ]]; then B=1; else B=2; fi
        if [[ $Q == [[:alpha:]]* ]]; then C=1; else C=2; fi
        if [ -f "$Q" ]; then D=1; else D=2; fi
        echo "$A" "$B" "$C" "$D"
        """))
    assert values(_command_of(result, "echo")) == ["echo", None, None, None, None]


def test_a_guard_that_would_stop_the_script_makes_its_variable_unknown_instead():
    """Under the assumption, `[[ -z "${HF_TOKEN:-}" ]] && exit 1` would end the script: runs that matter set it."""
    result = parse_shell(dedent("""\
        DATA=${DATA:-}
        if [[ -z "${DATA}" ]]; then
          echo "set DATA" >&2
          exit 1
        fi
        [[ -n "${TOKEN:-}" ]] || { echo "set TOKEN"; exit 2; }
        MODE=${MODE:-}
        python run_recipe.py "data=$DATA" "token=${TOKEN:-none}" "mode=$MODE"
        """))
    python = _command_of(result, "python")
    assert python.argv[2].value is None and "stops at line 2 unless $DATA" in python.argv[2].unknown
    assert python.argv[3].value is None and "stops at line 6 unless $TOKEN" in python.argv[3].unknown
    assert python.argv[4].value == "mode="  # no guard on MODE: its default stands


def test_only_the_decisions_a_command_rests_on_are_its_path_condition():
    result = parse_shell(dedent("""\
        if [[ "${DEBUG:-0}" == 1 ]]; then echo debugging; fi
        EP=${EP:-}
        [[ -z "$EP" ]] && EP=1
        CMD="python run_recipe.py ep=$EP"
        bash -c "$CMD"
        python run_recipe.py plain=1
        """))
    inner = [c for c in result.commands if c.argv[0].value == "python"]
    assert values(inner[0]) == ["python", "run_recipe.py", "ep=1"]
    assert inner[0].assumes == ('`[[ -z "$EP" ]]` (line 3) is true, assuming the environment does not set EP',)
    assert inner[1].assumes == ()
    assert not any(c.argv[0].value == "echo" for c in result.commands)  # DEBUG is 0 by default


def test_a_here_document_line_starting_with_its_delimiter_does_not_end_it():
    """tree-sitter-bash 0.25 ends a here-document at a line that only starts with its delimiter (`TRAINING_ARGS=(`
    in a `<< TRAINING` document): two users' Slurm launchers (lsaie-ss26-gipfelsturm) were "cannot parse", though
    bash reads them. The document is read to its real end; the commands after it are read."""
    result = parse_shell(dedent("""\
        cat >> job.sbatch << TRAINING
        TRAINING_ARGS=(
            --micro-batch-size 1
        )
        TRAINING
        cat >> job.sbatch <<- 'EOF'
        \tEOF_MARKER=1
        \tEOF
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--num-layers", "4"]


def test_a_document_ending_early_is_unmasked_before_what_its_misreading_suggests():
    """A document whose first line starts with its delimiter, then a second document of array lines: the misread
    tree takes the second document's lines for commands, and what it suggests masking there (an assignment's end)
    spoils the parse that unmasking the early end alone makes clean (two more lsaie-ss26-gipfelsturm launchers
    were "cannot parse": MariSchn's, wangyuyan03's)."""
    result = parse_shell(dedent("""\
        cat >> "$SCRIPT" << 'TOKENIZER'
        TOKENIZER_ARGS=(
            --vocab-file $WORKDIR/vocab.json
        DATA_ARGS=(
        TOKENIZER
        cat >> "$SCRIPT" << WORKERS
            --num-workers ${WORKERS_PER_RANK}
        )
        WORKERS
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--num-layers", "4"]


def test_a_here_document_whose_line_goes_on_after_a_semicolon_is_read():
    """tree-sitter-bash 0.25 refuses a here-document whose operator's line goes on after `;` or `&`
    (`if python3 - <<'PY'; then`, `cat <<EOF; echo`), which bash runs: a cloud vendor's test script had made the whole
    run exit 2. The document itself is not read there (its command reads it from a file of no name); the rest is."""
    result = parse_shell(dedent("""\
        if python3 - cfg.yaml <<'PY'; then
        import sys
        PY
            echo updated
        fi
        cat <<EOF; echo after
        hello
        EOF
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--num-layers", "4"]
    assert values(_command_of(result, "echo")) in (["echo", "updated"], ["echo", "after"])


def test_a_here_document_followed_by_a_redirection_and_a_pipe_or_another_document_is_read():
    """tree-sitter-bash 0.25 refuses a here-document whose line goes on to another redirection and a pipe (dlrover's
    pstack: `$GDB -batch <<EOF 2>&1 |`, the pipeline going on after the document), or to a second here-document
    (`cat <<EOF <<EOG`); bash runs both, and the whole script had been an exit-2 error. As after a `;`, the
    documents themselves are not read there; the rest is."""
    result = parse_shell(dedent("""\
        gdb -p "$1" -batch <<EOF 2>&1 |
        thread apply all bt
        EOF
        sed -e 's/^/  /'
        cat <<EOF >/dev/null | sed s/h/H/
        hello
        EOF
        cat <<EOF <<EOG | wc -l
        hello
        EOF
        world
        EOG
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--num-layers", "4"]
    assert values(_command_of(result, "wc")) == ["wc", "-l"]


def test_arithmetic_gluing_a_literal_to_an_expansion_is_read():
    """`$((0x${HASH:0:4} % 50001))` (a port from a hash): tree-sitter-bash 0.25 refuses the literal glued to the
    expansion, bash computes it. Its value is unknown here; the script is read."""
    result = parse_shell(dedent("""\
        HASH=$(echo -n run | md5sum | cut -c1-8)
        PORT=$((10000 + (0x${HASH:0:4} % 50001)))
        torchrun --master_port $PORT pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    torchrun = _command_of(result, "torchrun")
    assert torchrun.argv[2].value is None and torchrun.argv[-1].value == "4"


def test_a_double_bracketed_placeholder_is_a_command_word():
    """A job template's `[[EXTRA_SBATCH_ARGS]]` line (a launcher substitutes it before sbatch): bash reads a word,
    not the `[[` keyword, which needs a blank after it; tree-sitter-bash 0.25 opened a test and refused the file."""
    result = parse_shell(dedent("""\
        #!/bin/bash
        #SBATCH --nodes=[[NODES]]
        [[EXTRA_SBATCH_ARGS]]
        export OUT_DIR="[[OUT_DIR]]"
        if [[ -n "$OUT_DIR" ]]; then echo set; fi
        torchrun pretrain_gpt.py --num-layers 4
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--num-layers", "4"]


def test_a_bracketed_placeholder_starting_a_command_is_its_name():
    """azurehpc's licence set-up runs `[your installation directory]/bin/lmgrd -c ...` (a template): bash reads the
    words `[your`, `installation`, `directory]/bin/lmgrd` (`[` opens a test only before a blank), tree-sitter-bash
    (0.25) a broken test, and the file had been refused (a helper's sweep, session 47). A test stays a test."""
    result = parse_shell("#!/bin/bash\n[your install dir]/bin/lmgrd -c license.txt\n[ab]/bin/tool --flag\n"
                         "[ -f x ] && echo yes\ntorchrun pretrain_gpt.py --num-layers 4\n", "t.sh")
    assert not result.errors
    assert [values(c) for c in result.commands][:2] == [["[your", "install", "dir]/bin/lmgrd", "-c", "license.txt"],
                                                        ["[ab]/bin/tool", "--flag"]]
    assert values(_command_of(result, "torchrun"))[-2:] == ["--num-layers", "4"]


def test_the_root_directory_as_a_tests_operand_is_read():
    """tree-sitter-bash 0.25 reads a lone `/` in `[ ]` or `[[ ]]` as a division and refuses the script, which bash
    runs (radixark/miles' CI host setup: `if [[ "$(id -u)" -ne 0 ]] && ! [ -w / ]; then`): the whole run had
    exited 2. The word is still `/`; the test is read from the script's own text."""
    result = parse_shell(dedent("""\
        if [[ "$(id -u)" -ne 0 ]] && ! [ -w / ]; then SUDO=sudo; fi
        X=/
        [[ -d / && $X == / ]] && ROOT=/ || ROOT=none
        [ "$X" = / ] && SAME=yes
        echo "$ROOT" "$SAME" $(( 16 / 2 ))
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --save /
        """), "t.sh")
    assert not result.errors
    assert [w.value for w in _command_of(result, "torchrun").argv][-2:] == ["--save", "/"]
    assert values(_command_of(result, "echo")) == ["echo", None, "yes", "8"]  # (`-d /` asks the disk)


# --- scripts of the tree called with arguments, and their argument loops ---------------------------------------

WRAPPER = """\
#!/usr/bin/env bash
OFFLOAD=""
MODULES=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --offload) OFFLOAD="$2"; shift 2 ;;
        --modules=*) MODULES="${1#*=}"; shift ;;
        --verbose) shift ;;
        *) echo "unknown $1"; exit 2 ;;
    esac
done
torchrun --nproc_per_node=8 run_recipe.py --recipe a_config model.fine_grained_activation_offloading=${OFFLOAD} \\
    model.offload_modules=${MODULES} "$@"
"""


def _called(text: str) -> list[list]:
    files = {"bench/run_one.sh": WRAPPER}
    script = parse_shell(dedent(text), "bench/bench.sh", read_file=files.get)
    assert not script.errors
    return [values(c) for c in script.commands if c.argv[0].value == "torchrun"]


def test_a_script_of_the_tree_called_with_arguments_reads_them():
    """BochunZhang's Megatron-Bridge-Scale-Down: benchmark scripts call a wrapper with the flags its `while [[ $# -gt
    0 ]]; case "$1"` loop reads; the wrapper's launch had every value unknown. Read as bash runs it: each call's
    launch with its arguments, located at the call."""
    assert _called("bash run_one.sh --verbose --offload true --modules=[mlp_norm]\n") == [[
        "torchrun", "--nproc_per_node=8", "run_recipe.py", "--recipe", "a_config",
        "model.fine_grained_activation_offloading=true", "model.offload_modules=[mlp_norm]"]]
    runs = _called("""\
        DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
        run_case() {
            "${DIR}/run_one.sh" --offload "$1" --modules="$2"
        }
        run_case false null
        run_case true mlp_norm
        """)
    assert [r[5:7] for r in runs] == [["model.fine_grained_activation_offloading=false", "model.offload_modules=null"],
                                      ["model.fine_grained_activation_offloading=true",
                                       "model.offload_modules=mlp_norm"]]


def test_arguments_offlint_cannot_all_read_are_all_unknown():
    """A word offlint cannot read may be several words or none, so no `$N` after it is known: the call is read as
    a user's run of the script, as before."""
    (run,) = _called("bash run_one.sh --offload $FLAG --modules=x\n")
    assert run[5:7] == [None, None]
    # an array the script sets: its words; a name it never sets may come from the environment (as a scalar)
    (run,) = _called('EXTRA=(--offload true)\nbash run_one.sh "${EXTRA[@]}"\n')
    assert run[5:7] == ["model.fine_grained_activation_offloading=true", "model.offload_modules="]
    (run,) = _called('bash run_one.sh "${EXTRA[@]}"\n')
    assert run[5:7] == [None, None]
    # a word that may hold any arguments leaves what the loop sets unknown
    (run,) = _called("bash run_one.sh $ARGS\n")
    assert run[5] is None and run[6] is None


def test_a_script_run_by_a_user_keeps_its_arguments_unknown():
    script = parse_shell(WRAPPER, "bench/run_one.sh")
    (launch,) = [c for c in script.commands if c.argv[0].value == "torchrun"]
    assert launch.argv[5].value is None  # the user's `--offload`: as before


def test_a_called_script_locates_itself_by_its_own_bash_source():
    """NVIDIA-NeMo/RL's functional tests call another test script (`bash "$SCRIPT_DIR/grpo_non_colocated.sh" k=v`),
    which finds the repository from `${BASH_SOURCE[0]}`: in the called script that is its own path. The called
    reading had lost it (only `$0` was set), so its launch's entry script was unknown."""
    callee = ('SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)\n'
              'ROOT=$(realpath $SCRIPT_DIR/../..)\n'
              'uv run $ROOT/examples/run.py a=1 "$@"\n')
    caller = ('SCRIPT_DIR=$( cd -- "$( dirname -- "${BASH_SOURCE[0]}" )" &> /dev/null && pwd)\n'
              'bash "$SCRIPT_DIR/b.sh" b=2\n')
    files = {"tests/functional/b.sh": callee}
    script = parse_shell(caller, "tests/functional/a.sh", read_file=files.get)
    (run,) = [values(c) for c in script.commands if c.argv[0].value == "uv"]
    assert run == ["uv", "run", os.path.join(os.getcwd(), "examples/run.py"), "a=1", "b=2"]


WORKER = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 "
          "--micro-batch-size 1 --global-batch-size 8 --seq-length 128 --max-position-embeddings 128 "
          "--train-iters 10\n")


@pytest.mark.parametrize("wrapper, expected", [
    # the wrapper adds nothing: the launch's finding, where the worker writes it
    ("set -e\nbash worker.sh\n", [("OFL301", "worker.sh", 2, [])]),
    # the wrapper sets what the worker lacks: the worker runs in its environment (before session 44: the worker's
    # own reading, taken for a run by hand, still lacked it)
    ("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nbash worker.sh\n", []),
])
def test_a_launch_a_called_script_writes_is_reported_once(tmp_path, wrapper, expected):
    """A wrapper that only runs `bash worker.sh` (a helper's third-party sweep) got an OFL301 of its own at the call,
    beside the worker's at its torchrun: one launch, reported twice. The worker's own reading takes its environment
    from its callers (open), and a finding every call reports is the launch's, where the worker writes it."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + WORKER)
    (tmp_path / "wrapper.sh").write_text("#!/bin/bash\n" + wrapper)
    found = [(f["code"], f["filename"], f["location"]["row"], f["shared_with"])
             for f in check_json(tmp_path, "--no-cache")]
    assert found == expected
    # a run of the wrapper alone, with no cache of the worker's reading, still reports the launch, at the call
    alone = check_json(tmp_path, "--no-cache", paths=("wrapper.sh",))
    expected_alone = [("wrapper.sh", 3)] if "set -e" in wrapper else []
    assert [(f["filename"], f["location"]["row"]) for f in alone] == expected_alone


def test_a_run_of_one_script_with_the_cache_reports_a_called_launch_where_the_whole_tree_does(tmp_path):
    """Pre-commit on the caller alone, or on the worker alone, with the cache of a run on the tree: the launch the
    worker writes is reported at its own line, as the whole tree reports it (the worker's reading is chosen for the
    caller's run: changed.expand)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "worker.sh").write_text("#!/bin/bash\n" + WORKER)
    (tmp_path / "wrapper.sh").write_text("#!/bin/bash\nset -e\nbash worker.sh\n")
    where = [("worker.sh", 2)]
    assert [(f["filename"], f["location"]["row"]) for f in check_json(tmp_path)] == where
    for alone in ("wrapper.sh", "worker.sh"):
        assert [(f["filename"], f["location"]["row"]) for f in check_json(tmp_path, paths=(alone,))] == where


def test_a_template_placeholder_at_a_lines_start_is_a_command_that_opens_the_environment():
    """kpoeppel/megatron-train's Slurm templates start lines with `{{ sbatch_cmds }}` (a helper's sweep): bash
    reserves `{` alone, so `{{` is a command name and `bash -n` accepts the file; tree-sitter-bash (0.25) opened a
    group there and the valid file was an error (exit 2). What a placeholder renders to may set any variable: the
    environment after it is open."""
    result = parse_shell("#!/bin/bash\n{{ sbatch_cmds }}\n  {{env_exports}}\nsrun torchrun pretrain_gpt.py --lr 1\n")
    assert result.errors == []
    launch = _command_of(result, "srun")
    assert values(launch) == ["srun", "torchrun", "pretrain_gpt.py", "--lr", "1"]
    assert "template placeholder" in launch.env_open
    assert parse_shell("{ echo a; }\n{\necho b\n}\n").errors == []  # (a group, as before)


def test_four_shapes_tree_sitter_bash_refuses_are_read_as_bash_reads_them():
    """A helper's sweep (session 40) found four valid scripts refused (exit 2; `bash -n` accepts each): a line
    continuation ending the file, an assignment of nothing closing a backtick substitution inside a string, a
    single-bracket test comparing with an escaped `<`, and a template's `<placeholder>` as an assignment's value."""
    for end in ("\\\n", "\\"):  # (bash drops the backslash whether a newline follows it or not)
        final = parse_shell("ps -ef | xargs -I {} kill -9 {}\npython run.py \\\n    --tp 2 " + end)
        assert final.errors == []
        assert values(_command_of(final, "python")) == ["python", "run.py", "--tp", "2"]
    backtick = parse_shell('echo "to move it, run `export DATA_DIR=` first"\nX=`date`\npython a.py "$X"\n')
    assert backtick.errors == []
    assert values(_command_of(backtick, "echo")) == ["echo", None]  # (a substitution's output is not known)
    assert _command_of(backtick, "python").argv[2].value is None
    assert [c.argv[0].value for c in backtick.commands] == ["echo", "date", "python"]  # (`date` substituted in X)
    test = parse_shell('v=2.8.1\nif [ "${v}" \\< "3.0.0" ]\nthen\n  python old.py\nelse\n  python new.py\nfi\n')
    assert test.errors == []
    assert {c.argv[1].value: c.argv[0].conditional for c in test.commands} == {
        "old.py": "inside if at line 2", "new.py": "inside if at line 2"}  # undecided: both paths
    template = parse_shell("TOKENIZER=<path to tokenizer>/vocab.json\npython train.py --tokenizer $TOKENIZER\n")
    assert template.errors == []
    word = _command_of(template, "python").argv[3]
    assert word.value is None and "<path to tokenizer>" in word.unknown
    # what bash refuses stays refused
    assert parse_shell("TOKENIZER=<PATH>\nif [ a \\< b ]; then\n").errors


def test_a_double_quoted_string_of_blanks_keeps_them():
    """tree-sitter-bash gives `" "` no string content (its closing token holds the blank): the blank is the string's
    text. A fork's launch builds `CMD="torchrun ... pretrain_gpt.py "${MODEL[@]}" "${TRAIN[@]}""` and runs
    `bash -c "$CMD"`; offlint had joined the arrays' words (`--bf16--micro-batch-size`, OFL007 x3 in a helper's
    sweep)."""
    text = 'A=(--bf16); B=(--micro-batch-size 1)\nCMD="python t.py "${A[@]}" "${B[@]}""\nbash -c "$CMD"\n' \
           'python u.py " " "a  " "  " "" "x"\n'
    assert [[w.value for w in c.argv] for c in cmds(text) if c.argv[0].value == "python"] == [
        ["python", "t.py", "--bf16", "--micro-batch-size", "1"], ["python", "u.py", " ", "a  ", "  ", "", "x"]]


def test_an_unbraced_expansion_inside_a_word_keeps_the_word_whole():
    """tree-sitter-bash (0.25) ends a word at an unbraced `$NAME` followed by `/` or `.` in some words, with no
    error: `[1.0,$DATA_DIR/x]` and `$D/a,$D/b` became two words, `...,$` and `DATA_DIR/x]`, and after an
    assignment the second was taken for a command's name. NeMo launch scripts' Hydra lists
    (`model.data.data_prefix=[1.0,$DATA_DIR/x]`, neuronx-nemo-megatron, a helper's sweep in session 46) then failed
    to parse (exit 2). bash reads one word, and so does offlint now."""
    result = parse_shell("DATA_DIR=/data\nD=/d\nX=$D/a,$D/b\n"
                         "torchrun pretrain.py model.data.data_prefix=[1.0,$DATA_DIR/my_text] "
                         "dataset.blend=[[$D/a,$D/b],null] --paths $D/a,$1/b x=[$D.c] \"$X\"\n")
    assert result.errors == []
    assert [values(c) for c in result.commands] == [[
        "torchrun", "pretrain.py", "model.data.data_prefix=[1.0,/data/my_text]", "dataset.blend=[[/d/a,/d/b],null]",
        "--paths", None, "x=[/d.c]", "/d/a,/d/b"]]
    kept = parse_shell("echo a$ b\nD=/d\nX=[a,$D] ; echo $X\n")  # (no split: nothing masked)
    assert kept.errors == [] and [values(c) for c in kept.commands] == [["echo", "a$", "b"], ["echo", "[a,/d]"]]


def test_an_unclosed_expansion_is_named_where_it_opens():
    """bigscience's Slurm scripts have `${six_ALL_CCFRWORK/code/...` without its `}` (line 32): tree-sitter-bash's
    recovery put the error at line 1 ("lines 1-52 not read", a helper's sweep, session 47), far from the mistake;
    bash says "unexpected EOF while looking for matching `}'". The message now names the opener and its line."""
    result = parse_shell("#!/bin/bash\nexport X=1\nCODE=${six_ALL_CCFRWORK/code/tr1\nMEGA=$CODE/Megatron\n"
                         "torchrun pretrain_gpt.py --num-layers 4\n")
    assert result.errors and result.errors[0].endswith("the `${` at line 3 is never closed")
    other = parse_shell("#!/bin/bash\nif true; then\necho x\n")
    assert other.errors and "never closed" not in other.errors[0]


@pytest.mark.parametrize("text, opener, line", [
    ('run() {\n  echo start\n  torchrun pretrain_gpt.py --global-batch-size "64\n  echo done\n}\nrun\n', '"', 3),
    ("run() {\n  echo 'it''s\n}\nrun\n", "'", 2),
    ('run() {\n  X=`hostname\n}\nrun\n', "`", 2),
])
def test_an_unclosed_quote_is_named_where_it_opens(text, opener, line):
    """A quote never closed inside a function: tree-sitter-bash's error covers the whole function ("line 1: syntax
    error near '() {'", a helper's sweep, session 67), bash says "line 3: unexpected EOF while looking for matching
    `"'". The message names the quote and its line, as for an unclosed `${`."""
    result = parse_shell(text)
    assert result.errors and result.errors[0].endswith(f"the `{opener}` at line {line} is never closed")


def test_a_subshell_opening_a_subshell_is_not_arithmetic():
    """MLPerf v2.0/v2.1's Baidu `run_and_time.sh` frees its port with `((lsof ... | xargs kill -9) || true)`. bash
    reads `((` as arithmetic only when it closes with `))`; here the first `)` stands alone, so it is a subshell
    inside a subshell (`$((cat a) | wc -l)` likewise a command substitution of one). tree-sitter-bash (0.25) takes
    both for arithmetic and refuses the script, and offlint called the `((` never closed: the whole valid script
    was an error (exit 2). The inner group's parentheses are masked, which keeps every command and what the outer
    group scopes."""
    text = ("#!/bin/bash\n((lsof -i :29500 | awk '{print $2}' | xargs kill -9) || true)\n"
            "N=$((cat hosts) | wc -l)\n(( Y = (1 + 2) * 3 ))\nX=$(( (1 + 2) * 3 ))\n"
            "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $X\n")
    result = parse_shell(text)
    assert result.errors == []
    assert [c.argv[0].value for c in result.commands] == ["lsof", "awk", "xargs", "true", "cat", "wc", "torchrun"]
    assert values(_command_of(result, "torchrun"))[-1] == "9"  # (real arithmetic is still arithmetic)
    nested = parse_shell("echo \"$( ((cd /x; ls) || true) )\"\nX=$( (A=1) ; echo b )\npython t.py\n")
    assert nested.errors == [] and [c.argv[0].value for c in nested.commands] == ["cd", "ls", "true", "echo", "echo",
                                                                                 "python"]


def test_a_placeholder_value_before_a_command_is_read_as_the_template_means():
    """`VAR=<path/to/x> cmd`: bash reads redirections there (`bash -n` accepts it), so the message that sent the user
    to `bash -n` told them nothing; like `X=<path>/vocab.json`, the placeholder is an unknown value of the command's
    environment. `X=<path>` ending its line bash refuses, and so does offlint."""
    result = parse_shell("DATA=<path/to/data> torchrun --nproc_per_node 8 pretrain_gpt.py --data-path $DATA\n")
    assert result.errors == []
    assert values(_command_of(result, "torchrun"))[:3] == ["torchrun", "--nproc_per_node", "8"]
    assert parse_shell("DATA=<path/to/data>\ntorchrun pretrain_gpt.py\n").errors


def test_environment_modules_are_listed_in_loadedmodules():
    """Lmod and Environment Modules keep the loaded modules in LOADEDMODULES (NAME/VERSION joined by `:`), exported:
    where a launch takes its PyTorch from (conditions.settings reads a `pytorch/1.12` module from it)."""
    text = ("module load gcc/11.3.0 pytorch/1.12.1\nmodule swap pytorch/1.12.1 pytorch/2.1.0\nml -gcc cuda/12.1\n"
            "module -q load $SITE_MODULE nccl/2.18\nmodule list\npython a.py\nmodule purge\npython b.py\n")
    first, second = [c for c in cmds(text) if c.argv[0].value == "python"]
    assert first.env["LOADEDMODULES"].value == "pytorch/2.1.0:cuda/12.1:nccl/2.18"
    assert second.env["LOADEDMODULES"].value == ""


def test_a_command_run_over_ssh_is_read_in_the_remote_environment():
    """`ssh HOST COMMAND...` (also behind `xargs -I {} ssh {} ...` and `pdsh -w HOSTS ...`) runs the words after the
    host, joined by spaces, with the remote user's login shell: a multi-node launch written inline had given no
    command (LambdaLabs' distributed-training-guide, a helper's sweep, session 48). Its environment is the remote
    one: what this script exports does not reach it, and what it holds is not known."""
    text = ('export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nDIR=/work\n'
            'for h in n1 n2; do\n  ssh -p 2222 -o StrictHostKeyChecking=no $h "cd $DIR && torchrun --nnodes 2 '
            'pretrain_gpt.py --num-layers 4" &\ndone\n'
            'cat hosts | xargs -I {} ssh {} \'echo $PYTORCH_CUDA_ALLOC_CONF\'\n'
            'pdsh -w n[1-2] python train.py --tp 2\nssh n1 nvidia-smi -L\nrsync -a -e ssh a n1:b\nssh n1\n')
    result = parse_shell(text)
    assert result.errors == []
    torchrun = _command_of(result, "torchrun")
    assert values(torchrun) == ["torchrun", "--nnodes", "2", "pretrain_gpt.py", "--num-layers", "4"]
    assert "ssh" in torchrun.env_open and "PYTORCH_CUDA_ALLOC_CONF" not in torchrun.env
    assert _command_of(result, "cd").argv[1].value == "/work"  # (expanded here, before ssh sends it)
    echo = _command_of(result, "echo")
    assert echo.argv[1].value is None  # (not this script's export: the remote shell's)
    assert values(_command_of(result, "python")) == ["python", "train.py", "--tp", "2"]
    assert values(_command_of(result, "nvidia-smi")) == ["nvidia-smi", "-L"]
    assert [c.argv[0].value for c in result.commands].count("ssh") == 4


def test_a_command_tmux_starts_is_read_in_its_servers_environment():
    """`tmux new-session -d -s NAME [-e VAR=VALUE]... COMMAND...` (also new-window, split-window) runs COMMAND in a new
    pane, in the tmux server's environment plus the `-e` settings; LambdaLabs' distributed-training-guide starts its
    405B run so on each host, over ssh."""
    text = ("xargs -a hosts -I {} ssh {} tmux new-session -d -s run -c /work -e OMP_NUM_THREADS=26 "
            "-e NCCL_CROSS_NIC=1 python -m torch.distributed.run --nproc-per-node 8 train.py --batch-size 1\n"
            "tmux new -d 'torchrun --nproc_per_node 2 t.py'\ntmux ls\n")
    result = parse_shell(text)
    assert result.errors == []
    python = _command_of(result, "python")
    assert values(python)[:4] == ["python", "-m", "torch.distributed.run", "--nproc-per-node"]
    assert python.env["OMP_NUM_THREADS"].value == "26" and "tmux" in python.env_open
    assert values(_command_of(result, "torchrun")) == ["torchrun", "--nproc_per_node", "2", "t.py"]


def test_a_placeholder_ending_a_line_is_named_where_bash_refuses_it():
    """`--megatron-path <xxx>` ending a command (a template FlagScale ships): bash reads `<xxx` and then `>` with no
    file, and refuses the line; tree-sitter-bash read on and put its error at the last such line (FlagScale's
    tools/checkpoint/run.sh: line 109, bash's line 38), and the message gave no count of the others."""
    result = parse_shell("#!/bin/bash\npython convert.py \\\n    --load-dir a \\\n    --megatron-path <xxx>\n\n"
                         "python convert.py \\\n    --load-dir b \\\n    --megatron-path <xxx>\n")
    assert result.errors and result.errors[0].startswith("line 4: ")
    assert "<xxx>" in result.errors[0] and len(result.errors) > 1
    quoted = parse_shell('echo "use <xxx>"\n# run with <path>\npython a.py --x <y> \\\n  --z 1\n')
    assert quoted.errors == []


def test_a_placeholder_inside_the_unreadable_stretch_is_named_too():
    """tree-sitter-bash may begin the unreadable stretch before the placeholder (two backtick substitutions with awk
    programs above `export DATAPATH=<IMAGENET PATH>`, an MLPerf submitter's run_benchmark.sh): the message named line
    1, a valid line, where bash names the placeholder's (a helper's sweep, session 63)."""
    result = parse_shell("#!/bin/bash\nNCPU=`lscpu | grep Core | awk '{print $4}'`\n"
                         "NSOCK=`lscpu | grep Socket | awk '{print $2}'`\nexport DATAPATH=<DATASET PATH>\n"
                         "python train.py --data $DATAPATH --workers $NCPU\n")
    assert result.errors and result.errors[0].startswith("line 4: ") and "<DATASET PATH>" in result.errors[0]


def test_an_operator_character_in_an_array_elements_key_is_no_parse_error():
    """`declare -A T=( [llama|90]=0.40 )`: bash reads the key whole up to `]=` (`bash -n` accepts it); tree-sitter-bash
    0.25 reads a pipe, and its recovery took a 2,255-line MLPerf launcher for one error at line 1, so none of its
    launches was checked (a helper's sweep, session 66). The launch after the table is read; an entry of the table
    is unknown, as any associative array's is."""
    script = """\
        declare -A STEP_TIME=(
            [llama31_8b|89]=0.40 [llama31_8b|100]=0.20 [a&b]=1 [x;y]=2 [plain]=3
        )
        N=${STEP_TIME[llama31_8b|89]}
        torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --seed "$N"
        """
    launch = find(script, "torchrun")
    assert values(launch)[-4:] == ["--tensor-model-parallel-size", "2", "--seed", None]


def test_a_function_that_only_echoes_known_words_gives_its_output():
    """`$(extra_args)` of a function of the script that echoes its flags: read as the words it prints. It had been a
    hole, which made every flag the launch leaves unset unknown (a possible OFL118 under --strict for a launch that
    never passes --nccl-ub) and hid the function's own flags (no OFL101 for 8 of 8 layers offloaded): a helper's
    study of correct configurations, session 66."""
    script = """\\
        LAYERS=2
        extra_args() {
            echo "--cpu-offloading-num-layers $LAYERS"
            echo --bf16
        }
        torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 $(extra_args)
        """
    assert values(find(script, "torchrun"))[-4:] == ["8", "--cpu-offloading-num-layers", "2", "--bf16"]
    # (it runs in the substitution's subshell: what its words assign stays there)
    subshell = """\
        f() {
            echo "--seed ${SEED:=7}"
        }
        torchrun --nproc_per_node 8 pretrain_gpt.py $(f) --num-layers "${SEED:-unset}"
        """
    assert values(find(subshell, "torchrun"))[-4:] == ["--seed", "7", "--num-layers", "unset"]


@pytest.mark.parametrize("body", [
    'echo "--tp $1"',  # its positional parameters: it is called without any
    "echo -n --bf16",  # an option of echo
    "echo --bf16; rm -rf /tmp/x",  # more than echo
    'echo "--seed $UNSET_SEED"',  # a word offlint cannot read
    'echo "$(f) --bf16"',  # itself again: bash never gets its output (and no file error for nesting too deep)
])
def test_a_function_doing_more_than_echoing_known_words_stays_unread(body):
    script = f"""\\
        f() {{
            {body}
        }}
        torchrun --nproc_per_node 8 pretrain_gpt.py $(f) --num-layers 8
        """
    launch = find(script, "torchrun")
    assert None in values(launch) and values(launch)[-2:] == ["--num-layers", "8"]

"""A flag a launch script's branches choose between (Pai-Megatron-Patch's checkpoint convertors pick a model's sizes
with `if [ $MODEL_SIZE = 0.5B ]; then ARGS+=(--num-layers 24 ...) elif ...`): each alternative appends its own value,
so no run gets two of them. It is no conflict on one command line (OFL004 reported 79 such on that tree), and no
value argparse keeps: the key is unknown, naming where each value is given, unless every path gives the same."""

from __future__ import annotations

from offlint.api import CheckOptions, check
from offlint.sources.shell import read_shell
from offlint.types import KEY_DEFAULT, OneOf, Unknown

ALTERNATIVES = """\
#!/bin/bash
MODEL_SIZE=$1
ARGS=(
    --seq-length 4096
    --group-query-attention
    --num-query-groups 2
)
if [ $MODEL_SIZE = 0.5B ]; then
    ARGS+=(
        --num-layers 24
        --num-query-groups 2
    )
elif [ $MODEL_SIZE = 1.5B ]; then
    ARGS+=(
        --num-layers 28
        --num-query-groups 2
    )
fi
torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${ARGS[@]}
"""


def _values(script: str, key: str, name: str = "run.sh") -> list:
    [unit] = read_shell(name, script)
    return [(a.value, a.location.line) for a in unit.all_assignments() if a.key == key]


def test_alternatives_appending_their_own_value_give_the_key_one_value_per_path():
    """Each alternative's own value, Megatron-LM's default where none gives one: the rules judge each path
    (engine._by_path), and no run gets two of them."""
    [(value, line)] = _values(ALTERNATIVES, "model.num_layers")
    assert isinstance(value, OneOf) and line == 15
    assert "--num-layers 24 at line 10, --num-layers 28 at line 15" in value.reason
    assert [(on_path, [step[:2] for step in steps]) for on_path, steps, _, _ in value.paths] == [
        (24, [("inside if at line 8", 0)]), (28, [("inside if at line 8", 1)]), (KEY_DEFAULT, [("inside if at line 8", 2)])]
    # every path gives the same: that value, as before
    assert {value for value, _ in _values(ALTERNATIVES, "model.num_query_groups")} == {2}
    assert _values(ALTERNATIVES, "model.seq_length") == [(4096, 4)]


def test_a_string_built_on_alternative_paths_too():
    script = ('SIZE=$1\nARGS="--seq-length 4096"\nif [ "$SIZE" = big ]; then\n    ARGS="$ARGS --num-layers 48"\n'
              'else\n    ARGS="$ARGS --num-layers 24"\nfi\ntorchrun pretrain_gpt.py --train-iters 10 $ARGS\n')
    [(value, _)] = _values(script, "model.num_layers")
    assert isinstance(value, Unknown) and "'48'" in str(value) and "'24'" in str(value)


def test_a_value_one_path_appends_over_the_base_one_is_unknown():
    """`if ...; then ARGS+=(--seq-length 32768); fi` over a base value: which one a run gets is the branch's."""
    script = ('LONG=$1\nARGS=(--seq-length 4096)\nif [ "$LONG" = 1 ]; then\n    ARGS+=(--seq-length 32768)\nfi\n'
              'torchrun pretrain_gpt.py --train-iters 10 "${ARGS[@]}"\n')
    [(value, line)] = _values(script, "model.seq_length")
    assert isinstance(value, Unknown) and line == 4


def test_a_flag_given_twice_on_every_path_is_still_a_conflict():
    script = 'torchrun pretrain_gpt.py --train-iters 10 --num-layers 24 --hidden-size 1024 --num-layers 28\n'
    assert _values(script, "model.num_layers") == [(24, 1), (28, 1)]


def test_hydra_overrides_appended_on_alternative_paths():
    script = ('MODE=$1\nOVERRIDES=()\nif [ "$MODE" = a ]; then\n    OVERRIDES+=(model.tensor_model_parallel_size=2)\n'
              'else\n    OVERRIDES+=(model.tensor_model_parallel_size=4)\nfi\n'
              'python scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config "${OVERRIDES[@]}"\n')
    [(value, line)] = _values(script, "model.tensor_model_parallel_size")
    assert isinstance(value, OneOf) and line == 6
    assert [on_path for on_path, *_ in value.paths] == [2, 4]


def test_no_conflict_reported_between_alternatives(tmp_path):
    (tmp_path / "run.sh").write_text(ALTERNATIVES)
    plain = tmp_path / "plain.sh"
    plain.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 --num-layers 24 --num-layers 28\n")
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                 select=["OFL004"]))
    assert not result.errors
    assert [(f.location.path.rsplit("/", 1)[-1], f.location.line) for f in result.findings] == [("plain.sh", 1)]


# A word offlint cannot read that is no flag's value may give flags: the keys it may set are not argparse's defaults.
# Pai-Megatron-Patch's scripts choose `do_options` ("--use-distributed-optimizer" or nothing) on their branches and
# force it on where they offload the optimizer: OFL116 (precision-aware optimizer without the distributed one) was
# reported on 7 of them from the default.

def _resolved(script: str):
    from offlint.resolve import resolve
    from offlint.versions import parse_version

    [unit] = read_shell("run.sh", script)
    return unit, resolve(unit, parse_version("0.16.1"))


OFFLOAD = "torchrun pretrain_gpt.py --train-iters 10 --optimizer-cpu-offload --use-precision-aware-optimizer "


DO_OPTIONS = ('DO=$1\nif [ $DO = true ]; then\n    do_options="--use-distributed-optimizer"\n'
              'elif [ $DO = false ]; then\n    do_options=" "\nfi\n' + OFFLOAD + "${do_options}\n")


def test_a_flag_one_path_gives_is_its_value_there_and_the_others_default():
    unit, resolved = _resolved(DO_OPTIONS)
    assert unit.path_flags == () and unit.opaque_words == ()
    value = resolved.get("optimizer.use_distributed_optimizer")
    assert value.state == "unknown" and isinstance(value.value, OneOf)
    assert [(on_path, steps[0][:2]) for on_path, steps, _, _ in value.value.paths] == [
        (True, ("inside if at line 2", 0)), (KEY_DEFAULT, ("inside if at line 2", 1)),
        (KEY_DEFAULT, ("inside if at line 2", 2))]
    assert resolved.get("optimizer.overlap_cpu_optimizer_d2h_h2d").state == "default"


def test_a_rule_holding_only_where_a_branch_leaves_a_flag_out_is_possible(tmp_path):
    """Pai's launchers force DO=true where they offload the optimizer, before the branch above: the path without
    the flag may never run, so OFL116 there is possible (--strict), not the certain error it was on 7 of them."""
    (tmp_path / "run.sh").write_text("#!/bin/bash\n" + DO_OPTIONS)
    options = dict(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL116"])
    assert check([str(tmp_path)], CheckOptions(**options)).findings == []
    [found] = check([str(tmp_path)], CheckOptions(**options, strict=True)).findings
    assert found.possible


def test_a_flag_value_a_path_gives_is_no_word_of_its_own():
    """`--num-layers-per-virtual-pipeline-stage ${MP_VP}` on one path: MP_VP is that flag's value, not more flags;
    an unknown flag is followed by its value unless the next word is a flag (as read_flags reads them)."""
    unit, resolved = _resolved('MP_VP=$2\nX=$3\nif [ -z "$MP_VP" ]; then\n    vp=""\nelse\n'
                               '    vp="--num-layers-per-virtual-pipeline-stage ${MP_VP} --convert-x --hf-path $X"'
                               '\nfi\n' + OFFLOAD + "${vp}\n")
    assert unit.opaque_words == () and unit.path_flags == ()
    given = {flag: on for flag, _, on in unit.launch_flags if on}
    assert set(given) == {"--num-layers-per-virtual-pipeline-stage", "--convert-x", "--hf-path"}
    assert resolved.get("optimizer.use_distributed_optimizer").state == "default"


def test_a_word_that_may_hold_anything_leaves_every_default_unknown():
    unit, resolved = _resolved(OFFLOAD + "${EXTRA_ARGS}\n")
    assert unit.opaque_words == ("`${EXTRA_ARGS}` at line 1 ($EXTRA_ARGS is not set in this script)",)
    value = resolved.get("optimizer.use_distributed_optimizer")
    assert value.state == "unknown" and "`${EXTRA_ARGS}` at line 1" in str(value.value)
    # what the command gives is still known
    assert resolved.get("optimizer.use_precision_aware_optimizer").value is True
    # and a field no Megatron-LM flag sets keeps its default: OptimizerConfig's decoupled_weight_decay (slime's
    # launches, whose unreadable data paths had made OFL113 possible with --strict on some 30 of them)
    assert resolved.get("optimizer.decoupled_weight_decay").state == "default"


def test_a_word_with_a_known_beginning_that_is_no_flag_gives_none():
    """`--save <some dir>/$NAME` splits at the placeholder's space: `dir>/...` is no flag whatever $NAME is."""
    unit, resolved = _resolved('WORKSPACE="<some dir>"\n' + OFFLOAD + "--save ${WORKSPACE}/${NAME}\n")
    assert unit.opaque_words == () and unit.path_flags == ()
    assert resolved.get("optimizer.use_distributed_optimizer").state == "default"


def test_no_distributed_optimizer_finding_where_a_path_turns_it_on(tmp_path):
    (tmp_path / "run.sh").write_text('DO=$1\nOFFLOAD=$2\nif [ $OFFLOAD != false ] && [ $DO = false ]; then\n'
                                     '    DO=true\nfi\nif [ $DO = true ]; then\n'
                                     '    do_options="--use-distributed-optimizer"\nelif [ $DO = false ]; then\n'
                                     '    do_options=" "\nfi\n' + OFFLOAD + "${do_options}\n")
    (tmp_path / "plain.sh").write_text(OFFLOAD + "\n")
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.16.1", root=tmp_path, cache=False,
                                                 select=["OFL116"]))
    assert [f.location.path.rsplit("/", 1)[-1] for f in result.findings] == ["plain.sh"]


def test_a_flag_given_twice_by_a_command_inside_an_undecided_branch_is_still_a_conflict():
    """The command itself is inside an `if` offlint cannot decide: its words all carry that branch, and a flag it
    gives twice is given twice on that path."""
    script = ('MODE=$1\nif [ "$MODE" = a ]; then\n'
              '    torchrun pretrain_gpt.py --train-iters 10 --num-layers 24 --hidden-size 64 --num-layers 28\nfi\n')
    assert _values(script, "model.num_layers") == [(24, 3), (28, 3)]


def test_the_commands_on_one_configuration_take_a_launch_as_written_and_say_so(tmp_path):
    """`estimate`, `replay` and bisect's probes act on one launch: an unreadable word is assumed to give no flags
    (the defaults hold, as before) and the assumption is a note, where `check` leaves those defaults unknown."""
    from offlint.units import load_unit

    script = tmp_path / "run.sh"
    script.write_text(OFFLOAD + "${EXTRA_ARGS}\n")
    loaded = load_unit(str(script), root=tmp_path, mcore_version="0.16.1")
    assert loaded.resolved.get("optimizer.use_distributed_optimizer").state == "default"
    assert loaded.assumed == ("assuming `${EXTRA_ARGS}` at line 1 ($EXTRA_ARGS is not set in this script) gives "
                              "no flags",)


GUARDED = """\
#!/usr/bin/env bash
OFFLOAD_MODULES=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --offload-modules) OFFLOAD_MODULES="$2"; shift 2 ;;
        *) exit 2 ;;
    esac
done
if [[ -z "${OFFLOAD_MODULES}" ]]; then exit 2; fi
export NVTE_CPU_OFFLOAD_V1=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
python -m torch.distributed.run --nproc_per_node=4 scripts/training/run_recipe.py --recipe r_config \\
    model.fine_grained_activation_offloading=true "model.offload_modules=${OFFLOAD_MODULES}"
"""


def test_a_quoted_override_whose_value_is_unknown_sets_its_key(tmp_path, monkeypatch):
    """A Bridge fork's scale-down launchers quote the whole override (`"model.offload_modules=${OFFLOAD_MODULES}"`,
    the modules an option gives). With the value unknown, the key was read from the raw word, quote and all: the
    recipe's offload_modules stayed None, and OFL107 was a false error ("offload_modules is None")."""
    [(value, line)] = _values(GUARDED, "model.offload_modules")
    assert isinstance(value, Unknown) and line == 12
    [unit] = read_shell("run.sh", GUARDED)
    assert not [a.key for a in unit.all_assignments() if not a.key[:1].isalpha()]
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(
        "def r_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    return cfg\n")
    (tmp_path / "run.sh").write_text(GUARDED)
    monkeypatch.chdir(tmp_path)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert not result.errors and not [f for f in result.findings if f.code == "OFL107"], result.findings
    known = GUARDED.replace('"model.offload_modules=${OFFLOAD_MODULES}"', '"model.offload_modules=[]"')
    (tmp_path / "run.sh").write_text(known)
    result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
    assert [f.code for f in result.findings if f.code == "OFL107"] == ["OFL107"]  # a known empty list still is


CPU_OFFLOAD_BY_CONFIG = """\
#!/bin/bash
OFF=$(yaml_get "$INFRA_CONFIG" optimizer_cpu_offload)
ARGS=(--tensor-model-parallel-size 1)
if [ "$OFF" = "true" ]; then
    ARGS+=(--use-cpu-optimizer-offload)
    ARGS+=(--use-precision-aware-optimizer)
fi
torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --train-iters 10 "${ARGS[@]}"
"""


def test_a_flag_one_alternative_appends_is_judged_on_the_path_that_gives_it(tmp_path):
    """Pai-Megatron-Patch's cooldown launcher appends the optimizer's CPU offload flags only where a value it reads
    from a YAML file at run time says so (every shipped file says no). OFL116 had said, as a certain error, that
    the job is refused; it is refused on that path only, which the user's input chooses: a warning naming it."""
    [(value, line)] = _values(CPU_OFFLOAD_BY_CONFIG, "optimizer.use_precision_aware_optimizer")
    assert isinstance(value, OneOf) and line == 6
    assert value.reason == ("given on some paths of the script only (--use-precision-aware-optimizer at line 6, "
                            "inside if at line 4)")
    assert [(held, steps[0][:2]) for held, steps, _, _ in value.paths] == [
        (True, ("inside if at line 4", 0)), (KEY_DEFAULT, ("inside if at line 4", 1))]
    assert _values(CPU_OFFLOAD_BY_CONFIG, "model.tensor_model_parallel_size") == [(1, 3)]  # on every path
    (tmp_path / "run.sh").write_text(CPU_OFFLOAD_BY_CONFIG)
    options = {"mcore_version": "0.20.0", "root": tmp_path, "cache": False, "select": ["OFL116"]}
    [found] = check([str(tmp_path)], CheckOptions(**options)).findings
    assert found.severity.value == "warning" and found.location.line == 6
    assert found.message.endswith("\n(on the path where the script gives --use-precision-aware-optimizer (inside if "
                                  "at line 4))\n(only with the user's choice of --use-precision-aware-optimizer)")
    # run through `eval` of a string the array was expanded into: the same
    evaluated = CPU_OFFLOAD_BY_CONFIG.replace('torchrun', 'cmd="torchrun').replace('"${ARGS[@]}"\n',
                                                                                  '${ARGS[@]}"\neval $cmd\n')
    (tmp_path / "run.sh").write_text(evaluated)
    assert [f.message for f in check([str(tmp_path)], CheckOptions(**options)).findings] == [found.message]
    # a branch the script's default decides: its flags are given, as before
    decided = CPU_OFFLOAD_BY_CONFIG.replace('$(yaml_get "$INFRA_CONFIG" optimizer_cpu_offload)', '"${OFF:-true}"')
    assert _values(decided, "optimizer.use_precision_aware_optimizer") == [(True, 6)]


def test_flags_of_exclusive_alternatives_never_go_together():
    """Each alternative of an `if`/`elif` is a branch of one split: flags one of them gives go together, those of two
    never do (engine._consistent). A flag a nested branch appends stays as it was read before (no alternative)."""
    script = ('MODE=$(cat mode)\nARGS=()\nif [ "$MODE" = a ]; then\n    ARGS+=(--use-precision-aware-optimizer '
              '--optimizer-cpu-offload)\nelif [ "$MODE" = b ]; then\n    ARGS+=(--use-distributed-optimizer)\nfi\n'
              'if [ "$MODE" = c ]; then\n    if [ -n "$X" ]; then\n        ARGS+=(--num-layers 24)\n    fi\nfi\n'
              'torchrun pretrain_gpt.py --train-iters 10 "${ARGS[@]}"\n')
    splits = {}
    for key in ("optimizer.use_precision_aware_optimizer", "optimizer.optimizer_cpu_offload",
                "optimizer.use_distributed_optimizer"):
        [(value, _)] = _values(script, key)
        splits[key] = value.paths[0][1][0][:2]
    assert splits == {"optimizer.use_precision_aware_optimizer": ("inside if at line 3", 0),
                      "optimizer.optimizer_cpu_offload": ("inside if at line 3", 0),
                      "optimizer.use_distributed_optimizer": ("inside if at line 3", 1)}
    assert _values(script, "model.num_layers") == [(24, 10)]


OFFLOAD_BY_MODE = """\
#!/bin/bash
MODE=$(cat mode.txt)
OVERRIDES=(train.train_iters=10)
if [ "$MODE" = "offload" ]; then
    OVERRIDES+=(model.cpu_offloading=true model.cpu_offloading_num_layers=2)
fi
python scripts/training/run_recipe.py --recipe r_config "${OVERRIDES[@]}"
"""

PIPELINED_RECIPE = """\
def r_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8, pipeline_model_parallel_size=2),
                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())
    return cfg
"""


def test_a_hydra_override_one_alternative_appends_is_judged_on_the_path_that_gives_it(tmp_path, monkeypatch):
    """A Hydra override that one alternative of an undecided branch appends was taken as given on every path: an
    error where the job is refused on that path only, which the user's input chooses. It is a OneOf: its value on
    that path, on the others what the layers below give (the linked recipe's value, or the key's own when the
    recipe leaves it unset), so a rule holding on that path only is a warning naming it, as for Megatron-LM flags."""
    [(value, line)] = _values(OFFLOAD_BY_MODE, "model.cpu_offloading")
    assert isinstance(value, OneOf) and line == 5
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(PIPELINED_RECIPE)
    (tmp_path / "run.sh").write_text(OFFLOAD_BY_MODE)
    monkeypatch.chdir(tmp_path)
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL102"])
    [found] = [f for f in check(["."], options).findings if f.location.path.endswith("run.sh")]
    assert found.severity.value == "warning" and found.location.line == 5
    assert found.message.endswith("\n(on the path where the script gives model.cpu_offloading=true (inside if at "
                                  "line 4))\n(only with the user's choice of model.cpu_offloading=true)")
    # the recipe turning offloading on itself: refused on every path, whatever the branch adds
    offloading = PIPELINED_RECIPE.replace("num_layers=8,", "num_layers=8, cpu_offloading=True,")
    (tmp_path / "recipes.py").write_text(offloading)
    found = [f for f in check(["."], options).findings if f.location.path.endswith("run.sh")]
    assert [(f.severity.value, "on the path" in f.message) for f in found] == [("error", False)], found
    # a branch the script decides: given, as before
    (tmp_path / "recipes.py").write_text(PIPELINED_RECIPE)
    (tmp_path / "run.sh").write_text(OFFLOAD_BY_MODE.replace("$(cat mode.txt)", "offload"))
    [found] = [f for f in check(["."], options).findings if f.location.path.endswith("run.sh")]
    assert found.severity.value == "error" and "on the path" not in found.message
    # a spelling rule reads the override as written, on whichever path it is given
    (tmp_path / "run.sh").write_text(OFFLOAD_BY_MODE.replace("model.cpu_offloading=true", "model.cpu_offloading=no"))
    spelling = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL005"])
    assert [(f.code, f.location.line) for f in check(["."], spelling).findings] == [("OFL005", 5)]


# Pai-Megatron-Patch's launchers choose their option strings by positional parameters, each branch assigning the
# variable anew (`if [ $AC = full ]; then activation_checkpoint_options="..." elif [ $AC = sel ]; then ...`), the
# variable set nowhere before. Those strings had merged into one unreadable word: flags written together in one branch
# never met, and a seeded `--cpu-offloading-num-layers` beside `--recompute-activations` in the `sel` branch (which
# TransformerConfig refuses) went unreported, even with --strict (session 64's recall study, P02).
CHOSEN = """\
#!/bin/bash
AC=$1
if [ $AC = full ]; then
    ac_options=" \\
        --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
elif [ $AC = sel ]; then
    ac_options=" \\
        --recompute-activations {sel}"
elif [ $AC = offload ]; then
    ac_options=" \\
        --cpu-offloading --cpu-offloading-num-layers 1"
fi
if [ $AC = sel ]; then PP=2; else PP=1; fi
torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 --num-attention-heads 16 \\
    --micro-batch-size 1 --global-batch-size 8 --bf16 --pipeline-model-parallel-size $PP ${{ac_options}}
"""


def test_flags_written_together_in_a_branch_chosen_by_a_parameter_meet(tmp_path):
    (tmp_path / "run.sh").write_text(CHOSEN.format(sel="--cpu-offloading-num-layers 1"))
    [found] = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                  select=["OFL103"])).findings
    assert not found.possible and "recompute_granularity='selective'" in found.message
    assert "the script gives --recompute-activations (inside if at line 3)" in found.message


def test_flags_of_two_branches_of_it_never_meet(tmp_path):
    (tmp_path / "run.sh").write_text(CHOSEN.format(sel=""))
    options = dict(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL103"])
    assert check([str(tmp_path)], CheckOptions(**options)).findings == []
    assert check([str(tmp_path)], CheckOptions(**options, strict=True)).findings == []


def test_a_size_assigned_differently_on_two_paths_stays_unknown():
    """`PP=2` or `PP=1`: a value, not options added to nothing; read as alternatives it would give two words."""
    [(value, _)] = _values(CHOSEN.format(sel=""), "model.pipeline_model_parallel_size")
    assert type(value) is Unknown and "assigned differently on some paths" in str(value)

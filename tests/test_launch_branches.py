"""A flag a launch script's branches choose between (Pai-Megatron-Patch's checkpoint convertors pick a model's sizes
with `if [ $MODEL_SIZE = 0.5B ]; then ARGS+=(--num-layers 24 ...) elif ...`): each alternative appends its own value,
so no run gets two of them. It is no conflict on one command line (OFL004 reported 79 such on that tree), and no
value argparse keeps: the key is unknown, naming where each value is given, unless every path gives the same."""

from __future__ import annotations

from offlint.api import CheckOptions, check
from offlint.sources.shell import read_shell
from offlint.types import Unknown

ALTERNATIVES = """\
#!/bin/bash
MODEL_SIZE=$1
ARGS=(
    --seq-length 4096
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


def test_alternatives_appending_their_own_value_leave_the_key_unknown():
    [(value, line)] = _values(ALTERNATIVES, "model.num_layers")
    assert isinstance(value, Unknown) and line == 14
    assert "'24' at line 9, '28' at line 14" in str(value) and "depends on the path" in str(value)
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
    assert isinstance(value, Unknown) and "depends on the path" in str(value) and line == 6


def test_no_conflict_reported_between_alternatives(tmp_path):
    (tmp_path / "run.sh").write_text(ALTERNATIVES)
    plain = tmp_path / "plain.sh"
    plain.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 --num-layers 24 --num-layers 28\n")
    result = check([str(tmp_path)], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False,
                                                 select=["OFL004"]))
    assert not result.errors
    assert [(f.location.path.rsplit("/", 1)[-1], f.location.line) for f in result.findings] == [("plain.sh", 1)]

"""OFL008: `$ARGS[@]` is, to bash, the first element of ARGS and a literal `[@]` (a Megatron-LM fork's DeepSeek-V3
launcher passed `$OFFLOADING_ARGS[@]`: `[@]` alone while its offload options were off, which the parser refuses,
`--cpu-offloading[@]` when on). Only bash/sh launch words outside single quotes and not escaped; zsh's `$ARGS[@]`
is the whole array."""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check

LAUNCH = "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --train-iters 10 {words}\n"


def _found(tmp_path, script: str, name: str = "run.sh") -> list[tuple[int, int, str]]:
    (tmp_path / name).write_text(script)
    options = CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False, select=["OFL008"])
    return [(f.location.line, f.location.col, f.message) for f in check([str(tmp_path)], options).findings]


def test_an_array_expanded_without_braces_is_reported_at_its_word(tmp_path):
    script = "#!/bin/bash\nEXTRA=()\nA=(--bf16 --seq-length 128)\n" + LAUNCH.format(words='$EXTRA[@] "$A[*]"')
    found = _found(tmp_path, script)
    assert [(line, col) for line, col, _ in found] == [(4, 77), (4, 87)]
    assert found[0][2] == ("`$EXTRA[@]` is the first element of EXTRA followed by a literal `[@]` to bash, not the "
                           "array (`${EXTRA[@]}` is): the launch gets the word `[@]` and none of the array's other "
                           "elements")
    assert "gets the word `--bf16[*]`" in found[1][2]


@pytest.mark.parametrize("words", ['"${A[@]}"', "${A[@]}", "'$A[@]'", "\\$A[@]", "${A}", "$A", "${A[0]}"])
def test_braced_quoted_or_escaped_words_are_not(tmp_path, words):
    assert _found(tmp_path, "#!/bin/bash\nA=(--bf16)\n" + LAUNCH.format(words=words)) == []


def test_not_in_zsh_where_it_is_the_whole_array(tmp_path):
    assert _found(tmp_path, "#!/usr/bin/env zsh\nA=(--bf16)\n" + LAUNCH.format(words="$A[@]")) == []
    from offlint.sources.shell import read_shell

    [unit] = read_shell("run.zsh", "A=(--bf16)\n" + LAUNCH.format(words="$A[@]"))
    assert unit.unbraced == ()
    [unit] = read_shell("run.sh", "A=(--bf16)\n" + LAUNCH.format(words="$A[@]"))
    assert [written for written, _, _ in unit.unbraced] == ["$A[@]"]


def test_not_outside_a_launch(tmp_path):
    assert _found(tmp_path, "#!/bin/bash\nA=(x y)\necho $A[@]\nfor f in $A[@]; do ls $f; done\n") == []

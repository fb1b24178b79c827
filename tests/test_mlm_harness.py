"""A functional test case's MODEL_ARGS values as the tree's own harness passes them (sources/mlm_harness.py): through
`echo "$value" | xargs`, then a quoted or bare `eval`, with the rule for quoting read from the harness script.

Megatron-LM 94f1633a9c~1: its harness quoted only values with a space, so a pipeline layout was written escaped
(`Et*3\\\\|\\\\(tt\\\\|\\\\)*6tL`), and the job received `Et*3|(tt|)*6tL`, without the MTP layer `--mtp-num-layers 1`
asks for; offlint read the backslashes as part of the value and missed it. The harness texts below are our own, in
the shape of that loop.
"""

from __future__ import annotations

import pytest

from offlint.api import CheckOptions, check
from offlint.sources import mlm_harness

LOOP = """\
#!/bin/bash
set -euo pipefail
TRAINING_PARAMS_STR=$(yq '.[env(KEY)] | to_entries | .[] | .key + ": " + (.value | tostring)' "$TRAINING_PARAMS_PATH")
TRAINING_PARAMS_FROM_CONFIG=""
while IFS= read -r line; do
    if [[ -n "$line" ]]; then
        key="${line%%:*}"
        value="${line#*: }"
        value="$(echo "$value" | xargs)"
        if [[ "$value" == "true" ]]; then
            TRAINING_PARAMS_FROM_CONFIG+="${key} "
        elif echo "$value" | grep -Eq '^\\([^)]+\\)$'; then
            TRAINING_PARAMS_FROM_CONFIG+="$key \\"$value\\" "
        elif echo "$value" | grep -Eq '^\\[[^]]+\\]$'; then
            value=$(echo "$value" | sed 's/^\\[//;s/\\]$//')
            TRAINING_PARAMS_FROM_CONFIG+="$key $value "
        elif [[ TEST ]]; then
            TRAINING_PARAMS_FROM_CONFIG+="$key \\"$value\\" "
        else
            TRAINING_PARAMS_FROM_CONFIG+="$key $value "
        fi
    fi
done <<<"$TRAINING_PARAMS_STR"
eval "TRAINING_PARAMS_ARRAY=($TRAINING_PARAMS_FROM_CONFIG)"
"""
OLD_HARNESS = LOOP.replace("TEST", '"$value" == *" "*')
NEW_HARNESS = LOOP.replace("TEST", '"$value" == *" "* || "$value" == *"|"* || "$value" == *"("* || '
                                   '"$value" == *")"*')
OLD, NEW = frozenset({" "}), frozenset({" ", "|", "(", ")"})

ESCAPED = r"Et*3\\|\\(tt\\|\\)*6tL"  # as the YAML file holds it (a plain scalar keeps its backslashes)


def test_the_quoting_rule_is_read_from_the_harness():
    assert mlm_harness.quoting(OLD_HARNESS) == OLD
    assert mlm_harness.quoting(NEW_HARNESS) == NEW == mlm_harness.CURRENT
    assert mlm_harness.quoting(None) is None and mlm_harness.quoting("#!/bin/bash\ntorchrun train.py\n") is None
    assert mlm_harness.quoting(OLD_HARNESS + NEW_HARNESS) is None  # two rules: which one runs is not read


@pytest.mark.parametrize("value, triggers, words", [
    (ESCAPED, OLD, ["Et*3|(tt|)*6tL"]),  # xargs leaves one backslash each, the bare eval takes it
    (ESCAPED, NEW, [r"Et*3\|\(tt\|\)*6tL"]),  # quoted: the eval keeps a backslash before | and (
    ("Et*3|(tt|)*6tL", NEW, ["Et*3|(tt|)*6tL"]),
    ("Et*3|(tt|)*6tL", OLD, None),  # bare: the eval would read a pipe
    ("Et*3|(tt|)*6tL", None, ["Et*3|(tt|)*6tL"]),  # no harness read: today's rule
    ("([0]*3+[1]*11)", OLD, ["([0]*3+[1]*11)"]),
    ("[layernorm mlp moe_act]", NEW, ["layernorm", "mlp", "moe_act"]),
    ("0:384  200B:768", NEW, ["0:384 200B:768"]),  # xargs joins the words with one space
    ('a "b c" d', OLD, ["a b c d"]),  # xargs takes the quotes away; the space quotes it
    ("it's", NEW, None),  # an unmatched quote: xargs stops
    ("trailing\\", NEW, None),
    ("selective", OLD, ["selective"]),
    ("1e-4", NEW, ["1e-4"]),
])
def test_the_words_the_job_receives(value, triggers, words):
    assert mlm_harness.arguments(value, triggers) == words


CASE = f"""\
MODEL_ARGS:
  --num-layers: 16
  --pipeline-model-parallel-size: 2
  --pipeline-model-parallel-layout: {ESCAPED}
  --mtp-num-layers: 1
  --micro-batch-size: 1
  --global-batch-size: 8
  --train-iters: 10
"""
CASE_PATH = "tests/functional_tests/test_cases/moe/gpt3_layout/model_config.yaml"


def _tree(root, harness: str) -> None:
    for path, text in {"pyproject.toml": "", CASE_PATH: CASE, mlm_harness.HARNESS: harness}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def _layout_findings(root, cache: bool = False) -> list[str]:
    result = check([CASE_PATH], CheckOptions(root=root, cache=cache, mcore_version="0.16.1"))
    assert not result.errors
    return [f.code for f in result.findings if "layout" in f.message]


def test_an_escaped_layout_is_read_as_the_older_harness_passed_it(tmp_path, monkeypatch):
    _tree(tmp_path, OLD_HARNESS)
    monkeypatch.chdir(tmp_path)
    result = check([CASE_PATH], CheckOptions(root=tmp_path, cache=False, mcore_version="0.16.1"))
    [finding] = [f for f in result.findings if f.code == "OFL221"]
    assert "'Et*3|(tt|)*6tL'" in finding.message and "mtp_num_layers=1" in finding.message
    assert finding.location.line == 4


def test_with_todays_harness_the_backslashes_stay_and_no_layout_is_claimed(tmp_path, monkeypatch):
    _tree(tmp_path, NEW_HARNESS)
    monkeypatch.chdir(tmp_path)
    assert "OFL221" not in _layout_findings(tmp_path)


def test_an_edit_of_the_harness_reads_the_case_again(tmp_path, monkeypatch):
    """The case's reading depends on the harness script (noted like a file a recipe imports): a cached outcome is
    not reused once the harness changes."""
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    _tree(tree, OLD_HARNESS)
    monkeypatch.chdir(tree)
    assert "OFL221" in _layout_findings(tree, cache=True)
    (tree / mlm_harness.HARNESS).write_text(NEW_HARNESS)
    assert "OFL221" not in _layout_findings(tree, cache=True)
    (tree / mlm_harness.HARNESS).write_text(OLD_HARNESS)
    assert "OFL221" in _layout_findings(tree, cache=True)

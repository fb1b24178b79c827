"""Saved bisect plans (`offlint bisect --plan bisect/NAME.yaml`): the same answer as the command line they
stand for, flags typed on the command line win, one-line errors, the shipped plans load against the current
options, and the top-level `bisect/` folder never hides the standard library's `bisect` module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml

from offlint.bisect.command import bisect_command
from offlint.bisect.plan import PlanError, load_plan, plan_keys
from tests.bisect_helpers import bisect, history, read_json

ROOT = Path(__file__).resolve().parent.parent
PLANS = sorted((ROOT / "bisect").glob("*.yaml"))


def _tested(report: dict) -> list[tuple[str, str]]:
    return [(t["commit"]["sha"], t["verdict"]) for t in report["tested"]]


@pytest.mark.slow
def test_a_plan_gives_the_same_answer_as_the_command_line_it_stands_for(tmp_path):
    h = history(tmp_path, "config", commits=20, culprit=13, merge_every=0)
    by_hand, by_plan = tmp_path / "hand.json", tmp_path / "plan.json"
    typed = bisect(h["repo"], "--good", h["good"], "--bad", h["bad"], "--probe", "lint", "--config",
                   "conf/offload.yaml", "--jobs", "2", "--select", "OFL107", "--report-json", str(by_hand))
    assert typed.returncode == 0, typed.stderr
    plan = tmp_path / "plan.yaml"
    # The plan names a wrong bad end on purpose: --bad on the command line must win over it.
    plan.write_text(yaml.safe_dump({"description": "the planted culprit", "good": h["good"],
                                    "bad": h["main_line"][5], "probe": "lint", "config": "conf/offload.yaml",
                                    "jobs": 2, "select": ["OFL107"], "report-json": str(by_plan)}))
    planned = bisect(h["repo"], "--plan", str(plan), "--bad", h["bad"])
    assert planned.returncode == 0, planned.stderr
    hand, saved = read_json(by_hand), read_json(by_plan)
    assert saved["first_bad_commit"] == hand["first_bad_commit"] == h["culprit"]
    assert _tested(saved) == _tested(hand)
    assert saved["probe"] == hand["probe"]
    assert planned.stdout == typed.stdout


@pytest.mark.parametrize("text, error", [
    ("prob: lint\n", "unknown key 'prob'; did you mean 'probe'?"),
    ("report_json: r.json\n", "unknown key 'report_json'; did you mean 'report-json'?"),
    ("plan: other.yaml\n", "unknown key 'plan'"),
    ("jobs: many\n", "jobs: expected an integer, not 'many'"),
    ("jobs: 99\n", "jobs: 99 is not in the range 1<=x<=64"),
    ("good: 0123\n", "good: expected text (quote it), not 83"),  # YAML reads 0123 as an octal number
    ("probe: bisect\n", "probe: 'bisect' is not one of 'lint', 'validate', 'replay', 'command'"),
    ("resume: yes please\n", "resume: expected true or false, not 'yes please'"),
    ("override: {a: 1}\n", "override: expected text, not a mapping"),
    ("description: [a]\n", "description must be text"),
    ("- probe: lint\n", "a plan is a mapping of option names to values"),
    ("probe: [lint\n", "not valid YAML"),
])
def test_a_bad_plan_is_one_line_naming_the_file(tmp_path, text, error):
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    done = bisect(str(tmp_path), "--plan", str(plan))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"offlint: error: {plan}"), done.stderr
    assert error in done.stderr


def test_a_missing_plan_is_one_line(tmp_path):
    done = bisect(str(tmp_path), "--plan", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2 and done.stderr == f"offlint: error: {tmp_path}/nope.yaml: no such plan; plans " \
                                                   "are YAML files such as bisect/NAME.yaml\n"


def test_plan_keys_are_the_options_of_the_command(tmp_path):
    """Derived from click's params: an option renamed in the command is renamed in plans with it, and a hidden
    old spelling is not a plan key."""
    keys = plan_keys(bisect_command)
    assert {"good", "bad", "probe", "config", "bad-on", "mcore-from-checkout", "launcher", "slurm-arg"} <= set(keys)
    assert "plan" not in keys and "help" not in keys
    renamed = click.Command("bisect", params=[click.Option(["--probe-kind", "probe_kind"]),
                                              click.Option(["--old"], hidden=True)])
    assert list(plan_keys(renamed)) == ["probe-kind"]
    plan = tmp_path / "plan.yaml"
    plan.write_text("probe: lint\n")
    with pytest.raises(PlanError, match="unknown key 'probe'; did you mean 'probe-kind'"):
        load_plan(plan, renamed, click.Context(renamed))


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_every_shipped_plan_loads_against_the_current_options(path):
    data = yaml.safe_load(path.read_text())
    assert isinstance(data.get("description"), str) and len(data["description"]) > 40
    values = load_plan(path, bisect_command, click.Context(bisect_command))
    assert values["probe_kind"] in ("lint", "validate", "replay", "command")
    config = data.get("config")
    if config and config.startswith("bisect/"):  # the Megatron-LM plans' configurations ship with them
        assert (ROOT / config).is_file()


def test_the_shipped_plans_cover_the_documented_bisects_a_replay_and_slurm():
    plans = {p.name: yaml.safe_load(p.read_text()) for p in PLANS}
    assert plans["megatron-lm-fg7-rejected.yaml"]["bad"] == "d98e8a6"
    assert plans["megatron-lm-ao4-accepted.yaml"]["bad-on"] == "pass"
    assert any(p["probe"] == "replay" for p in plans.values())
    assert any(p.get("launcher") == "slurm" for p in plans.values())


def test_the_bisect_folder_does_not_shadow_the_standard_library():
    assert not (ROOT / "bisect" / "__init__.py").exists()
    done = subprocess.run([sys.executable, "-c", "import bisect, sys; print(bisect.__file__); "
                           "print(bisect.bisect_left([1, 2, 3], 2))"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    path, answer = done.stdout.split()
    assert Path(path).parent == Path(subprocess.__file__).parent and answer == "1"

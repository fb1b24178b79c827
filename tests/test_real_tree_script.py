"""benchmarks/real_tree.py: matching findings to a triage file, on small synthetic findings (no Bridge needed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "real_tree.py"
_spec = importlib.util.spec_from_file_location("real_tree", SCRIPT)
rt = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("real_tree", rt)  # dataclasses look their module up while the class is made
_spec.loader.exec_module(rt)


def finding(path: str, line: int, code: str, unit: str = "recipe", message: str = "msg", possible: bool = False,
            column: int = 5) -> dict:
    return {"code": code, "filename": path, "location": {"row": line, "column": column}, "unit": unit,
            "message": message, "possible": possible}


def entry(path: str, line: int, code: str, verdict: str = "real", **extra) -> dict:
    return {"path": path, "line": line, "code": code, "verdict": verdict, "reason": "read the code", **extra}


def triage(entries=(), groups=()) -> "rt.Triage":
    return rt.Triage(list(entries), list(groups), [])


def test_entries_match_by_path_code_and_line_and_count_per_rule():
    findings = [finding("a.py", 3, "OFL102"), finding("a.py", 9, "OFL301"), finding("b.py", 1, "OFL303")]
    result = rt.compare(findings, triage([entry("a.py", 3, "OFL102"), entry("a.py", 9, "OFL301", "false-positive")]))
    assert result.counts() == {"OFL102": {"real": 1}, "OFL301": {"false-positive": 1}, "OFL303": {"untriaged": 1}}
    assert [rt.finding_path(f) for f in result.untriaged()] == ["b.py"]
    assert result.gone_entries == []


def test_a_finding_on_another_line_or_with_another_code_is_untriaged_and_the_entry_gone():
    result = rt.compare([finding("a.py", 4, "OFL102"), finding("a.py", 3, "OFL103")],
                        triage([entry("a.py", 3, "OFL102")]))
    assert len(result.untriaged()) == 2
    assert result.gone_entries == [entry("a.py", 3, "OFL102")]


def test_two_findings_at_one_line_are_told_apart_by_unit_whatever_their_order():
    entries = [entry("r.py", 7, "OFL303", "false-positive", unit="fp4_recipe"), entry("r.py", 7, "OFL303", unit="bf16")]
    findings = [finding("r.py", 7, "OFL303", unit="bf16"), finding("r.py", 7, "OFL303", unit="fp4_recipe")]
    result = rt.compare(findings, triage(entries))
    verdicts = [(f["unit"], m["verdict"]) for f, m in result.matched]
    assert verdicts == [("bf16", "real"), ("fp4_recipe", "false-positive")]


def test_a_renamed_unit_still_matches_its_line():
    result = rt.compare([finding("r.py", 7, "OFL303", unit="new name")],
                        triage([entry("r.py", 7, "OFL303", unit="old")]))
    assert result.untriaged() == [] and result.gone_entries == []


def test_fingerprint_and_possible_are_always_required():
    entries = [entry("r.py", 7, "OFL109", fingerprint="min_offloaded_tensor_size", possible=True)]
    findings = [finding("r.py", 7, "OFL109", message="activation_offload_fraction=? is outside [0, 1]", possible=True),
                finding("r.py", 7, "OFL109", message="min_offloaded_tensor_size=? is negative", possible=False),
                finding("r.py", 7, "OFL109", message="min_offloaded_tensor_size=? is negative", possible=True)]
    result = rt.compare(findings, triage(entries))
    assert [m is not None for _, m in result.matched] == [False, False, True]


def test_groups_take_what_entries_leave_first_match_wins_and_count():
    groups = [{"group": "tests", "path": "tests/*", "possible": True, "verdict": "false-positive", "reason": "r"},
              {"group": "helpers", "possible": True, "unknown": r"parameter `cfg`", "verdict": "false-positive",
               "reason": "r"},
              {"group": "oom", "code": ["OFL303", "OFL304"], "verdict": "false-positive", "reason": "r"},
              {"group": "never", "code": "OFL999", "verdict": "real", "reason": "r"}]
    helper_msg = "x is on (depends on unknown values: model.cpu_offloading: parameter `cfg` of f())"
    findings = [finding("tests/unit/t.py", 1, "OFL101", possible=True, message=helper_msg),
                finding("src/h.py", 2, "OFL101", possible=True, message=helper_msg),
                finding("src/h.py", 2, "OFL101", possible=False, message="x is on"),
                finding("src/r.py", 3, "OFL304", possible=True),
                finding("src/r.py", 4, "OFL303")]
    result = rt.compare(findings, triage([entry("src/r.py", 4, "OFL303")], groups))
    assert [m and m.get("group", "entry") for _, m in result.matched] == ["tests", "helpers", None, "oom", "entry"]
    assert [result.group_counts[id(g)] for g in groups] == [1, 1, 1, 0]
    assert [g["group"] for g in result.gone_groups] == ["never"]
    assert result.lost_real() == [groups[3]]


def test_unknown_part_is_only_the_strict_explanation():
    assert rt.unknown_part("a (b) (depends on unknown values: k: why; j: other)") == "k: why; j: other"
    assert rt.unknown_part("no strict part") == ""


@pytest.mark.parametrize(("findings", "entries", "code"), [
    ([finding("a.py", 1, "OFL102")], [entry("a.py", 1, "OFL102")], 0),
    ([finding("a.py", 1, "OFL102")], [], 1),                                              # untriaged
    ([finding("a.py", 1, "OFL102")], [entry("a.py", 1, "OFL102", "false-positive")], 1),  # false positive still there
    ([], [entry("a.py", 1, "OFL102")], 1),                                                # a real finding lost
    ([], [entry("a.py", 1, "OFL102", "false-positive")], 0),                              # a false positive fixed
])
def test_exit_code(findings, entries, code):
    assert rt.compare(findings, triage(entries)).exit_code() == code


def test_report_shows_counts_untriaged_gone_and_false_positives():
    findings = [finding("a.py", 1, "OFL102"), finding("a.py", 2, "OFL301"), finding("b.py", 3, "OFL303", unit="u")]
    entries = [entry("a.py", 1, "OFL102"), entry("a.py", 2, "OFL301", "false-positive"), entry("c.py", 5, "OFL104")]
    tri = triage(entries)
    text = rt.report(rt.compare(findings, tri), tri)
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:5]}
    assert rows == {"OFL102": ["1", "0", "0", "1"], "OFL301": ["0", "1", "0", "1"], "OFL303": ["0", "0", "1", "1"],
                    "total": ["1", "1", "1", "3"]}
    assert "untriaged: 1\n  b.py:3:5: OFL303 [u]" in text
    assert "c.py:5: OFL104 (real)  LOST REAL FINDING" in text
    assert "false-positive entries still reported: 1\n  a.py:2:5: OFL301: read the code" in text


def test_load_triage_extends_and_accepts_a_bare_list(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps({"offlint_args": ["--mcore-version", "0.20.0"],
                                                    "entries": [entry("a.py", 1, "OFL102")]}))
    (tmp_path / "strict.json").write_text(json.dumps({"extends": "base.json", "groups": [
        {"group": "g", "verdict": "false-positive", "reason": "r"}]}))
    (tmp_path / "list.json").write_text(json.dumps([entry("b.py", 2, "OFL103")]))
    strict = rt.load_triage(tmp_path / "strict.json")
    assert [e["path"] for e in strict.entries] == ["a.py"] and [g["group"] for g in strict.groups] == ["g"]
    assert strict.offlint_args == ["--mcore-version", "0.20.0"]
    assert [e["path"] for e in rt.load_triage(tmp_path / "list.json").entries] == ["b.py"]


@pytest.mark.parametrize("content", [
    "not json",
    json.dumps([{"path": "a.py", "line": 1, "code": "OFL102", "verdict": "real"}]),             # no reason
    json.dumps([entry("a.py", 1, "OFL102", verdict="maybe")]),
    json.dumps([{**entry("a.py", 1, "OFL102"), "reason": "  "}]),
    json.dumps({"groups": [{"group": "g", "verdict": "real"}]}),
    json.dumps({"extends": "t.json"}),                                                         # extends itself
])
def test_unusable_triage_files_are_refused(tmp_path, content):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(rt.TriageError):
        rt.load_triage(path)


def test_main_prints_the_comparison_and_exits_non_zero_on_a_false_positive(tmp_path, monkeypatch, capsys):
    (tmp_path / "t.json").write_text(json.dumps({"offlint_args": ["--mcore-version", "0.20.0"], "entries": [
        entry("a.py", 1, "OFL102"), entry("a.py", 2, "OFL301", "false-positive")]}))
    seen = {}

    def fake_run(tree, args, strict):
        seen.update(tree=tree, args=args, strict=strict)
        return [finding("a.py", 1, "OFL102"), finding("a.py", 2, "OFL301")], []

    monkeypatch.setattr(rt, "run_offlint", fake_run)
    assert rt.main([str(tmp_path), "--expected", str(tmp_path / "t.json"), "--write-untriaged",
                    str(tmp_path / "u.json")]) == 1
    assert seen == {"tree": tmp_path, "args": ["--mcore-version", "0.20.0"], "strict": False}
    out = capsys.readouterr().out
    assert "false-positive entries still reported: 1" in out and "untriaged: 0" in out
    assert json.loads((tmp_path / "u.json").read_text()) == []
    assert rt.main([str(tmp_path), "--expected", str(tmp_path / "t.json"), "--strict", "--", "--select", "OFL1"]) == 1
    assert seen == {"tree": tmp_path, "args": ["--select", "OFL1"], "strict": True}


def test_main_fails_when_offlint_could_not_check_a_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "t.json").write_text(json.dumps([entry("a.py", 1, "OFL102")]))
    monkeypatch.setattr(rt, "run_offlint", lambda tree, args, strict: (
        [finding("a.py", 1, "OFL102")], ["offlint: error: x.sh: cannot parse shell script"]))
    assert rt.main([str(tmp_path), "--expected", str(tmp_path / "t.json")]) == 1
    assert "files offlint could not check: 1\n  offlint: error: x.sh" in capsys.readouterr().out


def test_main_refuses_a_bad_triage_file_with_one_line(tmp_path, capsys):
    (tmp_path / "t.json").write_text("{")
    assert rt.main([str(tmp_path), "--expected", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("real_tree: error: ") and len(err.strip().splitlines()) == 1


def test_run_offlint_runs_the_real_command_line_from_the_tree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "recipe.py").write_text(
        "def recipe():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.model.cpu_offloading = True\n"
        "    cfg.model.cpu_offloading_num_layers = 2\n"
        "    cfg.model.pipeline_model_parallel_size = 2\n"
        "    return cfg\n")
    findings, errors = rt.run_offlint(tmp_path, ["--select", "OFL102", "--no-cache"], strict=False)
    assert errors == []
    assert [(rt.finding_path(f), f["code"]) for f in findings] == [("recipe.py", "OFL102")]

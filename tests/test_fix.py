"""`offlint check --fix / --unsafe-fixes / --diff / --show-fixes` (issue 16): every rule with a fix, on each of
its invalid examples, and the file-safety promises (atomic writes, files that change, read-only, unparsable)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from offlint.api import CheckOptions, check
from offlint.fix import apply, run as fix_run
from offlint.fix.spec import autofixes
from offlint.rules import load_rules
from offlint.versions import NEWEST_KNOWN

FILE_NAMES = {"python": "recipe.py", "yaml": "override.yaml", "card": "card.yaml", "hydra": "launch.sh",
              "mlm": "launch.sh", "shell": "launch.sh"}
RULES = load_rules()
FIXABLE = [rule for rule in RULES.values() if rule.autofix or any(c.autofix for c in rule.checks)]
CASES = [pytest.param(rule, example, id=f"{rule.code}-{example.form}-{i}")
         for rule in FIXABLE for i, example in enumerate(rule.examples) if not example.valid]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _options(root: Path, version: str = "", select=()) -> CheckOptions:
    return CheckOptions(select=list(select), mcore_version=version or NEWEST_KNOWN, root=root, cache=False)


def test_the_rules_the_issue_names_have_fixes():
    assert {"OFL001", "OFL002", "OFL003", "OFL005", "OFL006", "OFL102", "OFL103", "OFL201", "OFL202", "OFL301",
            "OFL302"} <= {rule.code for rule in FIXABLE}
    safety = {rule.code: {f.applicability for f in (*rule.autofix, *(f for c in rule.checks for f in c.autofix))}
              for rule in FIXABLE}
    assert safety["OFL102"] == {"unsafe"} and safety["OFL103"] == {"unsafe"} and safety["OFL201"] == {"unsafe"}
    assert safety["OFL202"] == {"safe", "unsafe"}
    # overlapping the optimizer's copies builds it otherwise (memory, speed), and a False may have been chosen: a
    # verified model card of Bridge's writes `overlap_cpu_optimizer_d2h_h2d=false`, which the safe fix had flipped
    assert safety["OFL302"] == {"unsafe"}
    # expandable segments added where the variable is unset; appended to allocator options a launch chose, only
    # with --unsafe-fixes (they may have been chosen against it: LLaVA-OneVision-2's GB200 launcher)
    assert safety["OFL301"] == {"safe", "unsafe"}
    # a did-you-mean rename is a guess: the key may be a field of a provider the linted tree defines (Bridge's
    # FluxProvider.in_channels, one letter from kv_channels, at f565adb82)
    assert safety["OFL003"] == {"unsafe"}


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_fix_removes_the_finding_adds_none_and_is_idempotent(rule, example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / FILE_NAMES[example.form]
    path.write_text(example.code, encoding="utf-8")
    options = _options(tmp_path, example.version)
    before = check([path.name], options)
    assert rule.code in {f.code for f in before.findings}
    outcome = fix_run.fix([path.name], options, unsafe=True, diff=False)
    assert not outcome.problems, outcome.problems
    fixed = path.read_text(encoding="utf-8")
    assert fixed != example.code
    assert any(p.finding.code == rule.code for p in outcome.fixed)
    after = check([path.name], options)
    assert not after.errors, after.errors
    assert rule.code not in {f.code for f in after.findings}, [f"{f.location}: {f.message}" for f in after.findings]
    assert {f.code for f in after.findings} <= {f.code for f in before.findings}, \
        [f"{f.location}: {f.code} {f.message}" for f in after.findings]
    again = fix_run.fix([path.name], options, unsafe=True, diff=False)
    assert again.fixed == [] and path.read_text(encoding="utf-8") == fixed


def test_every_form_of_every_fixable_rule_is_covered():
    for rule in FIXABLE:
        forms = {e.form for e in rule.examples if not e.valid}
        assert forms == set(rule.forms), rule.code


def test_unsafe_fixes_are_applied_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "model:\n  cpu_offloading: true\n  pipeline_model_parallel_size: 4\n"
    (tmp_path / "o.yaml").write_text(text)
    outcome = fix_run.fix(["o.yaml"], _options(tmp_path), unsafe=False, diff=False)
    assert outcome.fixed == [] and outcome.hidden == 1 and (tmp_path / "o.yaml").read_text() == text
    outcome = fix_run.fix(["o.yaml"], _options(tmp_path), unsafe=True, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL102"]
    assert (tmp_path / "o.yaml").read_text() == text.replace("size: 4", "size: 1")


def test_python_edits_keep_comments_quotes_and_trailing_commas(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = (
        "def recipe():\n"
        "    # the optimizer\n"
        "    optimizer = OptimizerConfig(\n"
        "        optimizer_cpu_offload=True,  # offload it\n"
        "        optimizer_offload_fraction=1.0,\n"
        "    )\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=optimizer,\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.env_vars = {'CUDA_DEVICE_MAX_CONNECTIONS': '1',}  # keep\n"
        "    return cfg\n")
    (tmp_path / "recipe.py").write_text(source)
    outcome = fix_run.fix(["recipe.py"], _options(tmp_path), unsafe=True, diff=False)
    assert sorted(p.finding.code for p in outcome.fixed) == ["OFL301", "OFL302"]
    assert (tmp_path / "recipe.py").read_text() == source.replace(
        "        optimizer_offload_fraction=1.0,\n",
        "        optimizer_offload_fraction=1.0,\n        overlap_cpu_optimizer_d2h_h2d=True,\n").replace(
        "{'CUDA_DEVICE_MAX_CONNECTIONS': '1',}",
        "{'CUDA_DEVICE_MAX_CONNECTIONS': '1', 'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True',}")


def test_a_removed_statement_keeps_its_comment_and_an_emptied_block_gets_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = ("def recipe():\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
              "                          ddp=DistributedDataParallelConfig())\n"
              "    if True:\n"
              "        cfg.model.cpu_offloading_num_layers = 4\n"
              "    # the end\n"
              "    cfg.model.cpu_offloading_weights = False\n"
              "    return cfg\n")
    (tmp_path / "recipe.py").write_text(source)
    # (a recipe's inert setting may be a launch's preset: its removal is an unsafe fix, plan.is_safe)
    outcome = fix_run.fix(["recipe.py"], _options(tmp_path), unsafe=False, diff=False)
    assert outcome.fixed == [] and (tmp_path / "recipe.py").read_text() == source
    outcome = fix_run.fix(["recipe.py"], _options(tmp_path), unsafe=True, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL202"]
    assert (tmp_path / "recipe.py").read_text() == source.replace(
        "        cfg.model.cpu_offloading_num_layers = 4\n", "        pass\n")


def test_the_fix_edits_the_file_the_value_comes_from_and_names_both(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    common = ("def _base():\n"
              "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
              "                          ddp=DistributedDataParallelConfig())\n"
              "    cfg.optimizer.optimizer_offload_fraction = 0.0\n"
              "    return cfg\n")
    (tmp_path / "common.py").write_text(common)
    recipe = ("from common import _base\n\n\n"
              "def recipe():\n"
              "    cfg = _base()\n"
              "    cfg.optimizer.optimizer_cpu_offload = True\n"
              "    return cfg\n")
    (tmp_path / "recipe.py").write_text(recipe)
    # the fraction is written in common.py: that is where OFL201's fix sets it
    outcome = fix_run.fix(["."], _options(tmp_path, select=["OFL201"]), unsafe=True, diff=False)
    assert [p.paths for p in outcome.fixed] == [("common.py",)]
    assert (tmp_path / "recipe.py").read_text() == recipe
    assert (tmp_path / "common.py").read_text() == common.replace("fraction = 0.0", "fraction = 1.0")
    shown = fix_run.show_fixes(outcome.fixed)
    assert "- common.py:\n    1 × OFL201 (optimizer-offload-zero-fraction), for recipe in recipe.py" in shown, shown
    # a setting the unit leaves at its default goes into the unit's own file, next to its assignment to the
    # section, not into the base builder other recipes share
    outcome = fix_run.fix(["."], _options(tmp_path, select=["OFL302"]), unsafe=True, diff=False)
    assert [p.paths for p in outcome.fixed] == [("recipe.py",)]
    assert (tmp_path / "recipe.py").read_text() == recipe.replace(
        "    cfg.optimizer.optimizer_cpu_offload = True\n",
        "    cfg.optimizer.optimizer_cpu_offload = True\n    cfg.optimizer.overlap_cpu_optimizer_d2h_h2d = True\n")


def _tree(root: Path) -> None:
    (root / "conf").mkdir()
    (root / "conf" / "o.yaml").write_text("# overrides\nmodel:\n  recompute_granularity: None  # oops\n"
                                          "  recompute_modules: mlp\n")
    (root / "launch.sh").write_text(
        "#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "python run_recipe.py --recipe r \\\n    model.cpu_offloading=no \\\n    model.cpu_ofloading_num_layers=2\n")
    (root / "recipe.py").write_text(
        "def recipe():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.optimizer.optimizer_offload_fraction = 0.5  # no switch\n"
        "    return cfg\n")
    (root / "nofix.py").write_text("X = 1\n")


@pytest.mark.slow
def test_diff_applies_with_git_apply_and_equals_the_fix(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        root.mkdir()
        _tree(root)
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    # (with the unsafe fixes: OFL003's rename is one, a guess at the key meant)
    diff = run_cli("check", "--diff", "--unsafe-fixes", "--no-cache", ".", cwd=first)
    assert diff.returncode == 1, diff.stderr
    # 5 findings, and the OFL202 the corrected key then gives (cpu_offloading is off): fixed in a second pass
    assert "Would fix 6 findings." in diff.stderr, diff.stderr
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == before  # nothing written
    assert "nofix.py" not in diff.stdout
    (tmp_path / "fix.diff").write_text(diff.stdout)
    applied = subprocess.run(["git", "apply", "--verbose", str(tmp_path / "fix.diff")], cwd=first,
                             capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    fixed = run_cli("check", "--fix", "--unsafe-fixes", "--show-fixes", "--no-cache", ".", cwd=second)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    for path in second.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (first / path.relative_to(second)).read_bytes(), path
    assert "Fixed 6 findings:" in fixed.stdout and "- conf/o.yaml:" in fixed.stdout
    assert "    1 × OFL001 (hydra-none-string)" in fixed.stdout
    assert "Found 6 findings (6 fixed, 0 remaining)" in fixed.stderr
    assert (second / "launch.sh").read_text().endswith("--recipe r \\\n    model.cpu_offloading=false\n")
    clean = run_cli("check", "--diff", "--no-cache", ".", cwd=second)
    assert clean.returncode == 0 and clean.stdout == "" and "No findings would be fixed" in clean.stderr


@pytest.mark.slow
def test_check_reports_what_fix_would_fix_in_ruffs_words(tmp_path):
    _tree(tmp_path)
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 1
    # OFL003's rename (a guess) is unsafe: shown as hidden; so is the removal of recipe.py's inert fraction (a
    # recipe's value may be a launch's preset), while the command line's inert layer count is safe to remove
    assert "[*] 3 fixable with the `--fix` option (2 hidden fixes can be enabled with the `--unsafe-fixes` option)." \
        in result.stderr, result.stderr
    (tmp_path / "o.yaml").write_text("model:\n  cpu_offloading: true\n  pipeline_model_parallel_size: 4\n")
    result = run_cli("check", "--no-cache", "o.yaml", cwd=tmp_path)
    assert "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in result.stderr


def test_the_fixable_count_leaves_out_what_fix_cannot_place(tmp_path):
    """A launch inside a `bash -c '...'` string (or `bcprun --cmd '...'`): OFL301's fix would edit inside the
    string, which --fix refuses (tree-sitter-bash reads the string as one word); `[*] N fixable` had counted it all
    the same, and --fix then fixed nothing. A launch written as a command of the script is still counted."""
    launch = ("python pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 8 --micro-batch-size 1 "
              "--global-batch-size 8 --seq-length 128 --max-position-embeddings 128 --train-iters 10")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "inside.sh").write_text(f"#!/bin/bash\nsrun bash -c '{launch}'\n")
    found = check([str(tmp_path)], _options(tmp_path, select=["OFL301"])).findings
    assert len(found) == 1
    from offlint.fix.request import FixRequest

    assert FixRequest._counts(found, RULES) == (0, 0)
    (tmp_path / "direct.sh").write_text(f"#!/bin/bash\n{launch}\n")
    found = check([str(tmp_path)], _options(tmp_path, select=["OFL301"])).findings
    assert len(found) == 2 and FixRequest._counts(found, RULES) == (1, 0)


@pytest.mark.slow
def test_check_without_fix_does_not_import_libcst(tmp_path):
    _tree(tmp_path)
    probe = ("import sys\nfrom offlint.cli import main\n"
             "try:\n    main(['check', '--no-cache', '.'], standalone_mode=False)\nexcept SystemExit:\n    pass\n"
             "print('LIBCST' if any(m == 'libcst' or m.startswith('libcst.') for m in sys.modules) else 'NONE')\n")
    plain = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert plain.stdout.strip().splitlines()[-1] == "NONE", plain.stdout + plain.stderr
    with_fix = subprocess.run([sys.executable, "-c", probe.replace("'--no-cache'",
                                                                   "'--no-cache', '--diff', '--unsafe-fixes'")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert with_fix.stdout.strip().splitlines()[-1] == "LIBCST", with_fix.stdout + with_fix.stderr


@pytest.mark.slow
def test_read_only_file_is_reported_in_one_line_and_untouched(tmp_path):
    _tree(tmp_path)
    target = tmp_path / "conf" / "o.yaml"
    text = target.read_text()
    target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    try:
        result = run_cli("check", "--fix", "--no-cache", ".", cwd=tmp_path)
    finally:
        target.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert target.read_text() == text
    errors = [line for line in result.stderr.splitlines() if line.startswith("offlint: error:")]
    assert errors == ["offlint: error: conf/o.yaml: the file is read-only, so it is not fixed"], result.stderr
    assert result.returncode == 1  # its findings remain
    assert "model.cpu_offloading=false" in (tmp_path / "launch.sh").read_text()  # the others are fixed


@pytest.mark.slow
def test_unparsable_file_is_reported_in_one_line_and_untouched(tmp_path):
    _tree(tmp_path)
    (tmp_path / "broken.py").write_bytes(b"def f(:\n    cfg.optimizer.optimizer_offload_fraction = 0.5\n")
    result = run_cli("check", "--fix", "--no-cache", ".", cwd=tmp_path)
    assert (tmp_path / "broken.py").read_bytes() == b"def f(:\n    cfg.optimizer.optimizer_offload_fraction = 0.5\n"
    errors = [line for line in result.stderr.splitlines() if line.startswith("offlint: error:")]
    assert len(errors) == 1 and errors[0].startswith("offlint: error: broken.py:"), result.stderr
    assert result.returncode == 2
    assert "recompute_granularity: null" in (tmp_path / "conf" / "o.yaml").read_text()


def test_a_write_keeps_the_files_mode_and_its_hard_links(tmp_path):
    """A fixed file keeps its permission bits (a launch script stays executable) and, where it has other hard
    links, its inode: renaming a new file over one name had left the other names on the old text."""
    script, shared, other = tmp_path / "run.sh", tmp_path / "shared.yaml", tmp_path / "elsewhere.yaml"
    script.write_text("old\n")
    script.chmod(0o750)
    shared.write_text("old\n")
    os.link(shared, other)
    assert apply.write(str(script), "old\n", "new\n") is None
    assert script.read_text() == "new\n" and stat.S_IMODE(script.stat().st_mode) == 0o750
    assert apply.write(str(shared), "old\n", "new\n") is None
    assert other.read_text() == "new\n" and shared.stat().st_ino == other.stat().st_ino
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".offlint-fix-")]


def test_a_hard_linked_file_on_a_full_disk_is_left_whole(tmp_path, monkeypatch):
    """Written in place, a hard-linked file reserves the new text's room first: a full disk refuses that, before a
    byte of the old text is overwritten (truncating first had lost the file where the new text did not fit)."""
    import errno

    shared = tmp_path / "shared.yaml"
    shared.write_text("old\n")
    os.link(shared, tmp_path / "elsewhere.yaml")

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    assert apply.write(str(shared), "old\n", "new and longer\n") == \
        "cannot write it (No space left on device), so it is not fixed"
    assert shared.read_text() == "old\n" and (tmp_path / "elsewhere.yaml").read_text() == "old\n"


@pytest.mark.parametrize("linked", [False, True])
def test_a_fixed_file_keeps_its_byte_order_mark(tmp_path, linked):
    """Reading drops a UTF-8 BOM from the text the fixes are planned on; the fixed file had been written without it."""
    recipe = tmp_path / "recipe.py"
    recipe.write_bytes(b"\xef\xbb\xbfx = 1\r\n")
    if linked:
        os.link(recipe, tmp_path / "other.py")
    assert apply.write(str(recipe), "x = 1\r\n", "x = 2\r\n") is None
    assert recipe.read_bytes() == b"\xef\xbb\xbfx = 2\r\n"


def test_a_file_that_changes_during_the_run_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    target = tmp_path / "conf" / "o.yaml"
    real_make = apply.make

    def make_then_edit(planned, reader=None):
        edited = real_make(planned, reader)
        if not target.read_text().endswith("meanwhile\n"):
            target.write_text(target.read_text() + "# edited meanwhile\n")  # someone saves the file
        return edited

    monkeypatch.setattr(fix_run.apply, "make", make_then_edit)
    outcome = fix_run.fix(["."], _options(tmp_path), unsafe=False, diff=False)
    assert target.read_text().endswith("  recompute_modules: mlp\n# edited meanwhile\n")
    assert "None" in target.read_text()
    assert outcome.problems == {"conf/o.yaml": "the file changed while offlint ran, so it is not fixed; "
                                               "run offlint again"}
    assert "model.cpu_offloading=false" in (tmp_path / "launch.sh").read_text()


def test_a_failed_write_leaves_the_file_whole_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "o.yaml"
    target.write_text("a: 1\n")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    problem = apply.write(str(target), "a: 1\n", "a: 2\n")
    assert problem == "cannot write it (No space left on device), so it is not fixed"
    assert target.read_text() == "a: 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.yaml"]


def test_written_file_keeps_its_mode(tmp_path):
    target = tmp_path / "launch.sh"
    target.write_text("echo 1\n")
    target.chmod(0o755)
    assert apply.write(str(target), "echo 1\n", "echo 2\n") is None
    assert target.read_text() == "echo 2\n" and stat.S_IMODE(target.stat().st_mode) == 0o755


def test_yaml_edit_refuses_what_it_cannot_do_exactly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = "model: &m\n  recompute_granularity: None\nother: *m\n"
    (tmp_path / "o.yaml").write_text(text)
    outcome = fix_run.fix(["o.yaml"], _options(tmp_path), unsafe=False, diff=False)
    # the alias repeats the mapping: changing one entry changes both places, so the result is checked and refused
    assert (tmp_path / "o.yaml").read_text() in (text, text.replace("None", "null"))
    if outcome.fixed:
        assert check(["o.yaml"], _options(tmp_path)).findings == []


def test_possible_findings_get_no_fix():
    rule = RULES["OFL302"]
    from offlint.types import Finding, Location, Severity
    finding = Finding("OFL302", rule.slug, Severity.INFO, "m", Location("a.py", 1, 1), fix=rule.fix, possible=True)
    assert autofixes(finding, RULES) == ()


def test_rule_command_shows_the_fix_as_data(tmp_path):
    text = run_cli("rule", "OFL202", cwd=tmp_path).stdout
    assert "Autofix (`offlint check --fix`; unsafe ones with `--unsafe-fixes`):" in text
    assert "(safe: remove optimizer.optimizer_offload_fraction" in text
    assert "Turn model.cpu_offloading on (unsafe: set model.cpu_offloading to true)" in text
    import json
    data = json.loads(run_cli("rule", "OFL102", "--output-format", "json", cwd=tmp_path).stdout)
    assert data["autofix"][0]["applicability"] == "unsafe" and data["autofix"][0]["action"] == "set"


def test_fix_of_standard_input_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "offlint", "check", "--fix", "-", "--stdin-filename", "o.yaml"],
                          cwd=tmp_path, input="model:\n  recompute_granularity: None\n", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == ("offlint: error: --fix and --diff edit files: name them instead of "
                                            "reading standard input"), done.stderr


def test_a_token_whose_value_is_a_shell_variable_gets_the_variables_default_fixed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = ("#!/bin/bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nFRACTION=${FRACTION:-0}\n"
              "python run_recipe.py --recipe r optimizer.optimizer_cpu_offload=true "
              "optimizer.optimizer_offload_fraction=\"${FRACTION}\"\n")
    (tmp_path / "launch.sh").write_text(script)
    options = _options(tmp_path, select=["OFL201"])
    assert [f.code for f in check(["launch.sh"], options).findings] == ["OFL201"]
    outcome = fix_run.fix(["launch.sh"], options, unsafe=True, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL201"]
    # the script keeps its parameter; only the default the finding assumed changes
    assert (tmp_path / "launch.sh").read_text() == script.replace("${FRACTION:-0}", "${FRACTION:-1.0}")
    # a variable the script computes, or assigns more than once, is not guessed at
    twice = script.replace("FRACTION=${FRACTION:-0}\n", "FRACTION=0\nif [ -n \"$X\" ]; then FRACTION=0; fi\n")
    (tmp_path / "launch.sh").write_text(twice)
    if check(["launch.sh"], options).findings:
        assert fix_run.fix(["launch.sh"], options, unsafe=True, diff=False).fixed == []
    assert (tmp_path / "launch.sh").read_text() == twice


def _card_with_recipe(root: Path, command: str) -> str:
    """A model card whose H100 item runs `command` (its lines, then `logger.log_interval=1`), and the recipe `r`."""
    card = ("model: Qwen/Qwen2-1.5B\nitems:\n  finetune_0:\n    H100:\n      description: sft\n      command: >\n"
            + command + "        logger.log_interval=1\n")
    (root / "card.yaml").write_text(card)
    (root / "recipe.py").write_text(
        "def r():\n    return ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                           ddp=DistributedDataParallelConfig())\n")
    return card


def test_an_inserted_override_goes_next_to_its_sibling_in_a_card(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    card = _card_with_recipe(tmp_path, "        ./scripts/training/train.sh --recipe r --mode finetune\n"
                                       "        optimizer.optimizer_cpu_offload=true"
                                       " optimizer.optimizer_offload_fraction=1.0\n")
    outcome = fix_run.fix(["."], _options(tmp_path, select=["OFL302"]), unsafe=True, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL302"]
    assert (tmp_path / "card.yaml").read_text() == card.replace(
        "optimizer_offload_fraction=1.0\n",
        "optimizer_offload_fraction=1.0 optimizer.overlap_cpu_optimizer_d2h_h2d=true\n")


def test_a_python_file_libcst_cannot_parse_is_one_problem_and_untouched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    text = (tmp_path / "recipe.py").read_text()
    import libcst

    def refuse(source, *args, **kwargs):
        raise libcst.ParserSyntaxError("unsupported syntax", lines=[source], raw_line=1, raw_column=0)

    monkeypatch.setattr(libcst, "parse_module", refuse)
    outcome = fix_run.fix(["."], _options(tmp_path), unsafe=True, diff=False)
    assert (tmp_path / "recipe.py").read_text() == text
    assert list(outcome.problems) == ["recipe.py"]
    assert outcome.problems["recipe.py"].startswith("libcst cannot parse it (") and \
        outcome.problems["recipe.py"].endswith(", so it is not fixed")
    assert "recompute_granularity: null" in (tmp_path / "conf" / "o.yaml").read_text()


def test_a_fix_that_cannot_be_made_gives_way_to_the_rules_next_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from offlint.fix.edits import Change
    from offlint.fix.plan import PlannedFix
    from offlint.fix.spec import AutoFix
    from offlint.types import Finding, Location, Severity

    (tmp_path / "o.yaml").write_text("optimizer:\n  optimizer_offload_fraction: 0.5\n")
    finding = Finding("OFL202", "inert-offload-setting", Severity.WARNING, "m", Location("o.yaml", 2, 3))
    remove = PlannedFix(finding, AutoFix("remove", "safe", "remove"),
                        (Change("o.yaml", 2, 3, "remove", "optimizer.optimizer_offload_fraction"),))
    switch_on = PlannedFix(finding, AutoFix("on", "unsafe", "set"),
                           (Change("o.yaml", 2, 3, "insert", "optimizer.optimizer_cpu_offload", value=True),))
    # removing the section's only entry would turn `optimizer:` into null: refused, so the switch goes on
    edited = apply.make([PlannedFix(remove.finding, remove.autofix, remove.changes, fallbacks=(switch_on,))])
    assert edited.made == [switch_on]
    assert edited.texts["o.yaml"] == ("optimizer:\n  optimizer_offload_fraction: 0.5\n"
                                      "  optimizer_cpu_offload: true\n")


def test_a_finding_the_fixes_make_appear_is_named(tmp_path):
    # the base builder's fraction is inert in its own unit (OFL202), but another recipe turns optimizer offloading on
    # over it: without the fraction that recipe offloads nothing (OFL201 appears). The removal of a recipe's setting
    # is an unsafe fix for that reason (plan.is_safe): `--fix` alone leaves it, `--unsafe-fixes` makes it and says so
    (tmp_path / "common.py").write_text(
        "def base_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.optimizer.optimizer_offload_fraction = 0.5\n"
        "    return cfg\n")
    (tmp_path / "recipe.py").write_text(
        "from common import base_config\n\n\ndef offload_config():\n    cfg = base_config()\n"
        "    cfg.optimizer.optimizer_cpu_offload = True\n    return cfg\n")
    result = run_cli("check", "--fix", "--no-cache", "--select", "OFL201,OFL202", ".", cwd=tmp_path)
    assert "cfg.optimizer.optimizer_offload_fraction = 0.5" in (tmp_path / "common.py").read_text()
    assert "OFL201" not in result.stdout and "fixes made" not in result.stderr
    # with --unsafe-fixes the removal is made: the layer count a recipe relies on goes, and OFL210 (offloading on
    # with no layer to offload), which no fix removes, appears
    (tmp_path / "common.py").write_text(
        "def base_config():\n"
        "    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),\n"
        "                          ddp=DistributedDataParallelConfig())\n"
        "    cfg.model.cpu_offloading_num_layers = 2\n"
        "    return cfg\n")
    (tmp_path / "recipe.py").write_text(
        "from common import base_config\n\n\ndef offload_config():\n    cfg = base_config()\n"
        "    cfg.model.cpu_offloading = True\n    return cfg\n")
    result = run_cli("check", "--fix", "--unsafe-fixes", "--no-cache", "--select", "OFL202,OFL210", ".",
                     cwd=tmp_path)
    assert "cfg.model.cpu_offloading_num_layers" not in (tmp_path / "common.py").read_text()
    assert "OFL210" in result.stdout
    assert "offlint: warning: the fixes made 1 finding appear that no fix removes (OFL210 at " in result.stderr, \
        result.stderr


@pytest.mark.parametrize(("name", "text"), [
    ("recipe.py", 'NOTE = "x  # offlint: ignore[OFL102]"\n'),
    ("o.yaml", 'note: "x  # offlint: ignore[OFL102]"\n'),
    ("launch.sh", "#!/bin/bash\necho 'x  # offlint: ignore[OFL102]'\n"),
])
def test_an_unused_suppression_inside_a_string_is_not_deleted(tmp_path, monkeypatch, name, text):
    monkeypatch.chdir(tmp_path)
    from offlint.fix.edits import Change
    from offlint.fix.plan import PlannedFix
    from offlint.fix.spec import AutoFix
    from offlint.types import Finding, Location, Severity

    (tmp_path / name).write_text(text)
    line = text.count("\n", 0, text.index("# offlint")) + 1
    col = text.splitlines()[line - 1].index("# offlint") + 1
    finding = Finding("OFL006", "unused-suppression", Severity.WARNING, "m", Location(name, line, col))
    drop = PlannedFix(finding, AutoFix("drop", "safe", "drop-suppression"),
                      (Change(name, line, col, "drop-suppression"),))
    edited = apply.make([drop])
    assert edited.made == [] and edited.texts == {}


def test_allocator_options_a_launch_chose_get_expandable_segments_only_with_unsafe_fixes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = ("#!/bin/bash\n"
              "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256  # expandable segments faulted here\n"
              "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --use-distributed-optimizer\n")
    (tmp_path / "train.sh").write_text(script)
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert outcome.fixed == [] and (tmp_path / "train.sh").read_text() == script
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=True, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]
    assert "max_split_size_mb:256,expandable_segments:True" in (tmp_path / "train.sh").read_text()


def test_an_environment_prefix_keeps_a_value_the_caller_exported(tmp_path, monkeypatch):
    """The script does not set PYTORCH_CUDA_ALLOC_CONF, but whoever runs it may have (sbatch passes the submitting
    shell's exports on): the prefix `VAR=${VAR:-option}` gives expandable segments where it is unset and keeps a
    value chosen outside. The fixed line is run by bash with a stand-in torchrun that prints what it got."""
    monkeypatch.chdir(tmp_path)
    script = "#!/bin/bash\ntorchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --train-iters 10\n"
    (tmp_path / "train.sh").write_text(script)
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]
    fixed = (tmp_path / "train.sh").read_text()
    prefix = "PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} "
    assert fixed == script.replace("torchrun", prefix + "torchrun", 1)
    stand_in = 'torchrun() { printf "%s" "${PYTORCH_CUDA_ALLOC_CONF-unset}"; }\n'
    (tmp_path / "run.sh").write_text(stand_in + fixed.split("\n", 1)[1])
    environment = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    unset = subprocess.run(["bash", "run.sh"], capture_output=True, text=True, env=environment, check=True)
    chosen = subprocess.run(["bash", "run.sh"], capture_output=True, text=True, check=True,
                            env={**environment, "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:256"})
    assert (unset.stdout, chosen.stdout) == ("expandable_segments:True", "max_split_size_mb:256")
    assert fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=True, diff=False).fixed == []


EVALUATED = """#!/bin/bash
ARGS="--nproc-per-node 8"
run_cmd="torchrun $ARGS pretrain_gpt.py --num-layers 8 --train-iters 10"
echo ${run_cmd}
RUN
"""


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_a_launch_held_in_a_string_that_eval_runs_gets_the_prefix_inside_it(tmp_path, monkeypatch, shell):
    """Pai-Megatron-Patch writes its launches as `run_cmd="torchrun ..."` and runs `eval ${run_cmd}` (81 of them
    had no fix): eval parses the string as a command line, so the prefix goes inside the string, before the
    command. The fixed script runs with a stand-in torchrun on PATH that prints the variable it was given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sh").write_text(EVALUATED.replace("RUN", "eval ${run_cmd}"))
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]
    fixed = (tmp_path / "train.sh").read_text()
    prefix = "PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} "
    assert fixed == EVALUATED.replace("RUN", "eval ${run_cmd}").replace('="torchrun', '="' + prefix + "torchrun")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "torchrun").write_text('#!/bin/sh\nprintf "%s" "${PYTORCH_CUDA_ALLOC_CONF-unset}"\n')
    (tmp_path / "bin" / "torchrun").chmod(0o755)
    environment = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    environment["PATH"] = f"{tmp_path / 'bin'}:{environment['PATH']}"
    ran = subprocess.run([shell, "train.sh"], capture_output=True, text=True, env=environment, check=True)
    assert ran.stdout.endswith("expandable_segments:True")
    assert check([str(tmp_path)], _options(tmp_path, select=["OFL301"])).findings == []


@pytest.mark.parametrize("run", ["${run_cmd}", "$run_cmd 2>&1 | tee log"])
def test_a_string_run_as_a_command_gets_the_prefix_where_it_runs(tmp_path, monkeypatch, run):
    """Run as a command itself (`${run_cmd}`), the string's words are not parsed again: a prefix inside it would be
    taken for the command's name. The prefix goes before the expansion that runs it instead."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.sh").write_text(EVALUATED.replace("RUN", run))
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]
    prefix = "PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} "
    assert (tmp_path / "train.sh").read_text() == EVALUATED.replace("RUN", prefix + run)


def test_a_string_run_by_bash_c_gets_no_prefix(tmp_path):
    """`bash -c "$run_cmd"`: offlint places nothing inside a string it does not see eval run."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.sh").write_text(EVALUATED.replace("RUN", 'bash -c "$run_cmd"'))
    found = check([str(tmp_path)], _options(tmp_path, select=["OFL301"])).findings
    from offlint.fix.request import FixRequest

    assert len(found) == 1 and FixRequest._counts(found, RULES) == (0, 0)


def test_a_cards_command_gets_the_plain_prefix(tmp_path, monkeypatch):
    """A command held in a YAML card: its reader (OmegaConf) would take `${...}` for an interpolation, so the
    prefix there is the plain `VAR=option`."""
    monkeypatch.chdir(tmp_path)
    card = _card_with_recipe(tmp_path,
                             "        torchrun --nproc-per-node 8 scripts/training/run_recipe.py --recipe r\n")
    outcome = fix_run.fix(["."], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]
    assert (tmp_path / "card.yaml").read_text() == card.replace(
        "        torchrun", "        PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun")


@pytest.mark.parametrize("launcher", ["mpirun", "/usr/local/bin/mpirun"])
def test_no_environment_prefix_on_an_mpi_launch(tmp_path, monkeypatch, launcher):
    """An MPI launcher passes variables to the ranks it starts on other nodes only when told (Open MPI's `-x NAME`):
    `PYTORCH_CUDA_ALLOC_CONF=... mpirun ...` reaches none of them, yet the finding disappeared (Pai-Megatron-Patch's
    `mpi_run_pretrain_llama3.sh` lists its variables with `-x`). No fix is made there; a launch exporting it is
    edited at its export as before."""
    monkeypatch.chdir(tmp_path)
    script = (f"#!/bin/bash\nMPI_ARGS=(-np 16 -x PATH -x MASTER_ADDR)\n"
              f"{launcher} \"${{MPI_ARGS[@]}}\" python pretrain_gpt.py --num-layers 8 --train-iters 10\n")
    (tmp_path / "train.sh").write_text(script)
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=True, diff=False)
    assert outcome.fixed == [] and (tmp_path / "train.sh").read_text() == script
    plain = script.replace(f"{launcher} \"${{MPI_ARGS[@]}}\" python", "torchrun --nproc-per-node 8")
    (tmp_path / "train.sh").write_text(plain)
    outcome = fix_run.fix(["train.sh"], _options(tmp_path, select=["OFL301"]), unsafe=False, diff=False)
    assert [p.finding.code for p in outcome.fixed] == ["OFL301"]

"""The command line as a user runs it: real subprocesses, exit codes, one-line errors, formats, configuration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"

BAD_RECIPE = """\
def recipe():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.cpu_offloading = True
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offlint", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120)


def assert_one_line_errors(stderr: str, count: int) -> None:
    errors = [line for line in stderr.splitlines() if line.startswith("offlint: error:")]
    assert len(errors) == count, stderr
    assert "Traceback" not in stderr


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "bad.py").write_text(BAD_RECIPE)
    return tmp_path


def test_findings_exit_1_and_concise_format(project):
    result = run("check", "bad.py", "--mcore-version", "0.16.1", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith("bad.py:4:5: OFL102 ")
    assert "megatron-core 0.16.1 from --mcore-version" in result.stderr


def test_clean_exit_0(project):
    (project / "bad.py").write_text(BAD_RECIPE.replace("= 2", "= 1"))
    result = run("check", ".", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed!" in result.stderr


@pytest.mark.parametrize(("name", "content", "message"), [
    ("blob.py", b"\x00\x01\x02binary", "binary file"),
    ("broken.yaml", b"model: [unclosed\n", "invalid YAML"),
    ("broken.py", b"def f(:\n    pass\n", "Python syntax error"),
    ("latin1.py", "x = '\u00e9'\n".encode("latin-1"), "not UTF-8"),
    ("huge.yaml", b"model:\n" + b"  # padding padding padding padding padding padding padding padding\n" * 80000,
     "limit"),
    ("data.bin", b"whatever", "not a Python, YAML or shell file"),
], ids=["blob.py", "broken.yaml", "broken.py", "latin1.py", "huge.yaml", "data.bin"])  # (a content id would
# put megabytes into PYTEST_CURRENT_TEST, and the subprocess's environment would be too large to start it)
def test_garbage_gives_one_line_error_exit_2_and_other_files_still_checked(project, name, content, message):
    (project / name).write_bytes(content)
    result = run("check", name, "bad.py", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert message in result.stderr and name in result.stderr
    assert "OFL102" in result.stdout  # the good file was still checked and reported


def test_missing_path_is_an_error_but_others_are_checked(project):
    result = run("check", "nope.py", "bad.py", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "nope.py: no such file or directory" in result.stderr
    assert "OFL102" in result.stdout
    assert "1 file not checked" in result.stderr


def test_nothing_checked_is_not_reported_as_passing(project):
    result = run("check", "nope.py", cwd=project)
    assert result.returncode == 2
    assert "All checks passed" not in result.stderr and "No findings, 1 file not checked" in result.stderr


def test_empty_files_are_clean(project):
    for name in ("empty.py", "empty.yaml", "empty.sh"):
        (project / name).write_text("")
    result = run("check", "empty.py", "empty.yaml", "empty.sh", cwd=project)
    assert result.returncode == 0, result.stderr


def test_unknown_selector_is_a_usage_error(project):
    result = run("check", "bad.py", "--select", "OFL999", cwd=project)
    assert result.returncode == 2
    assert_one_line_errors(result.stderr, 1)
    assert "OFL999" in result.stderr


def test_select_ignore_and_fail_on(project):
    assert run("check", "bad.py", "--ignore", "OFL102", cwd=project).returncode == 0
    assert run("check", "bad.py", "--select", "OFL2", cwd=project).returncode == 0
    assert run("check", "bad.py", "--select", "OFL1", cwd=project).returncode == 1
    (project / "info.py").write_text(
        "def r():\n    o = OptimizerConfig(optimizer_cpu_offload=True, optimizer_offload_fraction=1.0,\n"
        "                        use_distributed_optimizer=True, overlap_cpu_optimizer_d2h_h2d=True)\n    return o\n")
    info = run("check", "info.py", "--select", "OFL207", cwd=project)
    assert "OFL207" in info.stdout and info.returncode == 0  # info never fails by default
    assert run("check", "info.py", "--select", "OFL207", "--fail-on", "info", cwd=project).returncode == 1


def test_stdin(project):
    result = run("check", "-", "--stdin-filename", "recipe.py", cwd=project, stdin=BAD_RECIPE)
    assert result.returncode == 1
    assert result.stdout.startswith("recipe.py:4:5: OFL102")
    missing = run("check", "-", cwd=project, stdin=BAD_RECIPE)
    assert missing.returncode == 2 and "--stdin-filename" in missing.stderr


def test_json_sarif_github_junit_statistics(project):
    data = json.loads(run("check", "bad.py", "--output-format", "json", cwd=project).stdout)
    assert data[0]["code"] == "OFL102" and data[0]["location"] == {"row": 4, "column": 5}
    sarif = json.loads(run("check", "bad.py", "--output-format", "sarif", cwd=project).stdout)
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(sarif)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "OFL102"
    github = run("check", "bad.py", "--output-format", "github", cwd=project).stdout
    assert github.startswith("::error file=bad.py,line=4,col=5,title=offlint (OFL102)::")
    junit = run("check", "bad.py", "--output-format", "junit", cwd=project).stdout
    assert "<testsuites" in junit and "offlint.OFL102" in junit
    stats = run("check", "bad.py", "--statistics", cwd=project).stdout
    assert stats.splitlines()[0].split("\t")[:2] == ["1", "OFL102"]


def test_suppressions_and_unused_suppression(project):
    text = BAD_RECIPE.replace("cfg.model.cpu_offloading = True",
                              "cfg.model.cpu_offloading = True  # offlint: ignore[OFL102]")
    text += "# offlint: ignore\nX = 1\n"
    (project / "bad.py").write_text(text)
    result = run("check", "bad.py", cwd=project)
    assert "OFL102" not in result.stdout
    assert "OFL006" in result.stdout and "bad.py:8:1:" in result.stdout
    (project / "launch.sh").write_text(
        "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
        "# offlint: ignore[OFL102]\n"
        "python run_recipe.py model.cpu_offloading=true model.pipeline_model_parallel_size=2\n")
    assert run("check", "launch.sh", cwd=project).returncode == 0
    (project / "o.yaml").write_text("model:\n  cpu_offloading: true  # offlint: ignore\n"
                                    "  pipeline_model_parallel_size: 2\n")
    assert run("check", "o.yaml", cwd=project).returncode == 0  # the finding points at line 2
    (project / "o.yaml").write_text("model:\n  cpu_offloading: true\n"
                                    "  pipeline_model_parallel_size: 2  # offlint: ignore[OFL102]\n")
    related_only = run("check", "o.yaml", cwd=project)  # line 3 is only a related location: not suppressed
    assert "o.yaml:2:3: OFL102" in related_only.stdout and "o.yaml:3:36: OFL006" in related_only.stdout


def test_pyproject_configuration(project):
    (project / "pyproject.toml").write_text(
        "[tool.offlint]\nignore = ['OFL102']\nmegatron-core-version = '0.16'\n")
    result = run("check", "bad.py", cwd=project)
    assert result.returncode == 0 and "0.16.0 from [tool.offlint]" in result.stderr
    (project / "pyproject.toml").write_text("[tool.offlint]\nper-file-ignores = {'bad.py' = ['OFL1']}\n")
    assert run("check", "bad.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text("[tool.offlint]\nselct = ['OFL1']\n")
    bad = run("check", "bad.py", cwd=project)
    assert bad.returncode == 2 and "selct" in bad.stderr
    assert_one_line_errors(bad.stderr, 1)


def test_rule_and_rules_commands(project):
    listing = run("rules", cwd=project)
    assert listing.returncode == 0 and "OFL102  activation-offload-pipeline" in listing.stdout
    doc = run("rule", "OFL102", cwd=project)
    assert "Currently there is no support for Pipeline parallelism with CPU offloading" in doc.stdout
    assert run("rule", "OFL999", cwd=project).returncode == 2


def test_quickstart_on_bundled_fixtures(tmp_path):
    good = run("check", str(FIXTURES / "good"), cwd=tmp_path)
    assert good.returncode == 0, good.stdout
    bad = run("check", str(FIXTURES / "bad"), cwd=tmp_path)
    assert bad.returncode == 1 and len(bad.stdout.splitlines()) >= 10


def test_an_unset_environment_variable_points_at_the_env_vars_assignment(tmp_path):
    result = run("check", str(FIXTURES / "bad" / "recipes" / "llama_offload.py"), "--select", "OFL301", cwd=tmp_path)
    assert result.stdout.splitlines() == [line for line in result.stdout.splitlines() if ":31:5: OFL301" in line]
    assert result.stdout.strip()

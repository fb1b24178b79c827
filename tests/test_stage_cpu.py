"""benchmarks/stage_cpu.py: every stage of a cold check timed, in one process; a bad tree is one line and exit 2."""

import subprocess

from tests.benchmark_helpers import RECIPE, run_benchmark


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_benchmark("stage_cpu.py", *args, cwd=cwd)


def test_each_stage_of_a_cold_check_gets_its_cpu_time(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "llama.py").write_text(RECIPE.format(name="llama_pretrain_config"))
    (tmp_path / "train.sh").write_text("torchrun pretrain_gpt.py --cpu-offloading --num-layers 8\n")
    done = _run(str(tmp_path), "--", "--mcore-version", "0.16.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(" s CPU in all")
    total = float(lines[0].split()[0])
    timed = {line.rsplit(None, 2)[0].strip(): float(line.rsplit(None, 2)[1]) for line in lines[1:]}
    assert set(timed) == {"reading (all kinds)", "Python files", "shell scripts", "YAML files",
                          "rules (engine.check_unit)", "noting what each reading used",
                          "storing outcomes (encoding)", "writing the cache"}
    assert 0 < timed["Python files"] <= timed["reading (all kinds)"] <= total  # (a part, not more than the whole)
    assert all(0 <= spent <= total for spent in timed.values())


def test_a_tree_that_is_not_a_directory_is_one_line_and_exit_2(tmp_path):
    done = _run(str(tmp_path / "missing"), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "not a directory" in done.stderr

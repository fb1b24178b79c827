"""benchmarks/call_count.py: builds compared by the Python calls of one profiled cold check, the same figure on every
run; a folder without an offlint package, or a tree that is not a folder, is one line and exit 2."""

import re
import shutil
import subprocess

from tests.benchmark_helpers import RECIPE, ROOT, run_benchmark


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_benchmark("call_count.py", *args, cwd=cwd, timeout=300)


def test_a_build_gets_its_calls_and_the_ratio_and_a_second_run_counts_the_same(tmp_path):
    tree = tmp_path / "tree"
    (tree / "recipes").mkdir(parents=True)
    (tree / "recipes" / "llama.py").write_text(RECIPE.format(name="llama_pretrain_config"))
    build = tmp_path / "build"
    shutil.copytree(ROOT / "offlint", build / "offlint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "rules", build / "rules")
    done = _run(str(tree), str(build), str(build), "--", "--mcore-version", "0.16.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    counts = [re.fullmatch(r".+: ([\d,]+) calls \((\d+) units, (\d+) findings\), ([\d.]+)x the first", line)
              for line in lines]
    assert all(counts), lines
    assert [m.group(2, 3) for m in counts] == [("1", "1"), ("1", "1")]  # the recipe, and its OFL202
    first, second = (int(m.group(1).replace(",", "")) for m in counts)
    # the same code, the same count: summed over the profiler's code objects, the methods dataclasses generate
    # (sharing one file, line and name, of which pstats keeps one count) each count
    assert first > 1000 and first == second and counts[1].group(4) == "1.000"


def test_bad_arguments_are_one_line_and_exit_2(tmp_path):
    done = _run(str(tmp_path / "missing"), str(ROOT), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "not a directory" in done.stderr
    done = _run(str(tmp_path), str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "holds no offlint package" in done.stderr

"""benchmarks/timeline.py: the parent's stages of a cold check in order, each worker's takes, the launch commands'
rules as one line; bad input is one line and exit 2."""

import subprocess

from tests.benchmark_helpers import RECIPE, run_benchmark


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_benchmark("timeline.py", *args, cwd=cwd)


def test_the_stages_come_in_order_with_each_workers_takes(tmp_path):
    (tmp_path / "recipes").mkdir()
    for index in range(20):  # enough files for two workers (workers.MIN_FILES_PER_WORKER)
        (tmp_path / "recipes" / f"llama{index}.py").write_text(RECIPE.format(name=f"llama{index}_pretrain_config"))
    (tmp_path / "train.sh").write_text("torchrun pretrain_gpt.py --cpu-offloading --num-layers 8\n")
    done = _run(str(tmp_path), "--workers", "2", "--", "--mcore-version", "0.16.1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    spans = [line.split(None, 3) for line in lines if not line.startswith(("worker", "parent", "end"))]
    labels = [span[3] for span in spans]
    for earlier, later in [("offlint imported", "rules loaded"), ("rules loaded", "files discovered"),
                           ("files discovered", "files read (workers forked)"),
                           ("files read (workers forked)", "launches linked")]:
        assert labels.index(earlier) < labels.index(later), labels
    assert "cache saved" in labels
    [checks] = [label for label in labels if label.startswith("rules on the launch commands")]
    assert checks.startswith("rules on the launch commands (1 unit, ")  # the one launch, after reading
    for start, end, length, _ in spans:
        assert 0 <= float(start) <= float(end) and abs(float(end) - float(start) - float(length)) < 0.002
    workers = [line for line in lines if line.startswith("worker ")]
    assert len(workers) == 2
    assert sum(int(line.split(", ")[1].split()[0]) for line in workers) == 21  # every file read by one of them
    assert lines[-2].startswith("parent CPU while the files were read: ")
    assert lines[-1].startswith("end ") and float(lines[-1].split()[1]) >= max(float(s[1]) for s in spans)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    for args in ([str(tmp_path / "missing")], [str(tmp_path), "--workers", "0"]):
        done = _run(*args, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "timeline.py: error:" in done.stderr

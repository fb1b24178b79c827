"""OFL202 (a sub-setting with its master switch off has no effect) where the switch is off only because its key or
flag is misspelt beside it: `model.cpu_ofloading=true model.cpu_offloading_num_layers=4` (OFL003: did you mean
model.cpu_offloading?), a Megatron-LM fork's `--optimizer-offload --optimizer-offload-fraction 0.5` (OFL007: did
you mean --optimizer-cpu-offload?). The settings wait for the typo's fix; OFL202's safe fix removed them, so that
`--fix` threw away what the user meant and left the typo. The typo is the finding."""

from __future__ import annotations

import subprocess
import sys

from tests.test_mlm_arguments import ARGUMENTS, _tree

RECIPE = """\
def r_config():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    return cfg
"""


def _fix(root, path: str) -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-m", "offlint", "check", path, "--no-cache", "--mcore-version", "0.20.0",
                           "--fix", "--output-format", "concise"], cwd=root, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    codes = [line.split(" ")[1] for line in done.stdout.splitlines() if ": OFL" in line]
    return codes, (root / path).read_text()


def test_a_misspelt_switch_key_keeps_its_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPE)
    launch = ("torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe r_config "
              "model.cpu_ofloading=true model.cpu_offloading_num_layers=4\n")
    (tmp_path / "run.sh").write_text(launch)
    codes, text = _fix(tmp_path, "run.sh")
    assert "OFL003" in codes and "OFL202" not in codes
    assert "model.cpu_offloading_num_layers=4" in text
    # spelt right and left off: inert, and removed as before
    (tmp_path / "run.sh").write_text(launch.replace("cpu_ofloading=true", "cpu_offloading=false"))
    codes, text = _fix(tmp_path, "run.sh")
    assert "model.cpu_offloading_num_layers" not in text


def test_a_misspelt_switch_flag_keeps_its_settings(tmp_path):
    launch = ("torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 8 --optimizer-offload "
              "--optimizer-offload-fraction 0.5\n")
    optimizer = ('    group.add_argument("--use-flash", action=argparse.BooleanOptionalAction)\n'
                 '    group.add_argument("--optimizer-cpu-offload", action="store_true")\n'
                 '    group.add_argument("--optimizer-offload-fraction", type=float, default=1.0)\n')
    arguments = ARGUMENTS.replace('    group.add_argument("--use-flash", action=argparse.BooleanOptionalAction)\n',
                                  optimizer)
    _tree(tmp_path, {"run.sh": launch, "megatron/training/arguments.py": arguments})
    codes, text = _fix(tmp_path, "run.sh")
    assert "OFL007" in codes and "OFL202" not in codes and "--optimizer-offload-fraction 0.5" in text


def test_a_recipes_misspelt_attribute_still_gets_it(tmp_path):
    """Python sets a misspelt attribute without a word and OFL003 judges command lines and YAML files only: there
    OFL202 stays the one sign of the typo."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "recipes.py").write_text(RECIPE.replace(
        "    return cfg", "    cfg.model.cpu_ofloading = True\n    cfg.model.cpu_offloading_num_layers = 4\n    return cfg"))
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--no-cache", "--mcore-version", "0.20.0",
                           "--select", "OFL202", "--output-format", "concise"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert "OFL202" in done.stdout, done.stdout + done.stderr


def test_a_recipes_inert_setting_is_removed_only_with_unsafe_fixes(tmp_path):
    """A recipe's (or a YAML file's) setting under a switch it leaves off may be a preset for runs that turn the
    switch on from the command line: Megatron Bridge's DeepSeek-V4 performance recipe sets
    `optimizer_offload_fraction = 1.0` with offloading off, and its own test asserts the 1.0. Removing it changes
    those runs, so the removal is an unsafe fix there; on a command line, the last layer, it stays safe."""
    (tmp_path / "pyproject.toml").write_text("")
    recipe = RECIPE.replace("    return cfg", "    cfg.optimizer.optimizer_offload_fraction = 1.0\n    return cfg")
    (tmp_path / "recipes.py").write_text(recipe)
    done = subprocess.run([sys.executable, "-m", "offlint", "check", "recipes.py", "--no-cache", "--mcore-version",
                           "0.20.0", "--fix", "--select", "OFL202"], cwd=tmp_path, capture_output=True, text=True)
    assert (tmp_path / "recipes.py").read_text() == recipe, done.stdout + done.stderr
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option" in done.stderr, done.stderr
    subprocess.run([sys.executable, "-m", "offlint", "check", "recipes.py", "--no-cache", "--mcore-version", "0.20.0",
                    "--fix", "--unsafe-fixes", "--select", "OFL202"], cwd=tmp_path, capture_output=True, text=True)
    assert "optimizer_offload_fraction" not in (tmp_path / "recipes.py").read_text()
    (tmp_path / "recipes.py").write_text(RECIPE)
    launch = ("torchrun --nproc_per_node 8 scripts/training/run_recipe.py --recipe r_config "
              "optimizer.optimizer_offload_fraction=0.5\n")
    (tmp_path / "run.sh").write_text(launch)
    codes, text = _fix(tmp_path, "run.sh")
    assert "optimizer_offload_fraction" not in text and "OFL202" not in codes

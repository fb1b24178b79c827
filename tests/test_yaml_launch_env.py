"""A YAML override file is checked with the environment of the launches that run it.

Seen on GeodesicResearch/geodesic-megatron (a Megatron Bridge fork): its configs/*.yaml are run by
`pipeline_training_launch.sh CONFIG --model M --mode S`, which sources the environment file exporting
NVTE_CPU_OFFLOAD_V1=1 and starts `ft_launcher ... pipeline_training_run.py --config-file $CONFIG_FILE` (the project's
own entry script) inside `srun bash -c`. OFL112 warned "cannot see whether the launch environment sets
NVTE_CPU_OFFLOAD_V1=1" on each of its 24 fine-grained YAML files. The trees here are fixtures of our own in that
shape.
"""

from __future__ import annotations

from pathlib import Path

from offlint.api import CheckOptions, check
from tests.check_helpers import write_tree

FINE_GRAINED = "model:\n  fine_grained_activation_offloading: true\n  offload_modules: [core_attn]\n"
ENTRY = ("import argparse\nfrom omegaconf import OmegaConf\nfrom megatron.bridge.training.finetune import finetune\n"
         "from megatron.bridge.recipes.llama.llama3 import llama3_8b_finetune_config\n\n"
         "def main():\n    parser = argparse.ArgumentParser()\n    parser.add_argument('--config-file')\n"
         "    args = parser.parse_args()\n    cfg = llama3_8b_finetune_config()\n"
         "    OmegaConf.load(args.config_file)\n    finetune(cfg, forward_step)\n\n"
         "if __name__ == '__main__':\n    main()\n")
RUNTIME_LAUNCHER = ('CONFIG_FILE="$1"\nsource env.sh\n'
                    'srun bash -c "\n    ft_launcher --nproc_per_node=4 run_training.py --config-file $CONFIG_FILE\n"\n')


def _findings(tmp_path: Path, monkeypatch, files: dict[str, str], targets=(".",), cache: bool = False):
    write_tree(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path / ".cache-dir"))
    result = check(list(targets), CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=cache))
    assert not result.errors, result.errors
    return {(f.location.path, f.code, f.severity.value) for f in result.findings}


def test_a_yaml_file_alone_cannot_see_its_environment(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, {"configs/a.yaml": FINE_GRAINED}) == \
        {("configs/a.yaml", "OFL112", "warning")}


def test_a_launch_naming_the_file_gives_it_the_environment_it_sets(tmp_path, monkeypatch):
    launch = ("export NVTE_CPU_OFFLOAD_V1=1\ntorchrun --nproc-per-node 8 scripts/training/run_recipe.py "
              "--recipe llama3_8b_pretrain_config --config-file configs/a.yaml\n")
    assert _findings(tmp_path, monkeypatch, {"configs/a.yaml": FINE_GRAINED, "launch.sh": launch}) == set()


def test_a_launch_setting_it_wrong_is_an_error_at_the_file(tmp_path, monkeypatch):
    launch = ("export NVTE_CPU_OFFLOAD_V1=0\ntorchrun --nproc-per-node 8 scripts/training/run_recipe.py "
              "--recipe llama3_8b_pretrain_config --config-file configs/a.yaml\n")
    found = _findings(tmp_path, monkeypatch, {"configs/a.yaml": FINE_GRAINED, "launch.sh": launch})
    assert ("configs/a.yaml", "OFL112", "error") in found and ("configs/a.yaml", "OFL112", "warning") not in found


def test_launches_that_disagree_leave_it_unknown(tmp_path, monkeypatch):
    run = "torchrun scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config --config-file configs/a.yaml\n"
    found = _findings(tmp_path, monkeypatch, {"configs/a.yaml": FINE_GRAINED,
                                              "a.sh": f"export NVTE_CPU_OFFLOAD_V1=1\n{run}", "b.sh": run})
    assert ("configs/a.yaml", "OFL112", "warning") in found


def test_a_file_chosen_when_the_launch_runs_takes_the_environment_every_such_launch_sets(tmp_path, monkeypatch):
    """The project's own entry script given `--config-file "$CONFIG_FILE"` (the caller's `$1`) under ft_launcher,
    inside `srun bash -c`: every YAML override of the tree may be the file it runs."""
    files = {"configs/a.yaml": FINE_GRAINED, "configs/b.yaml": FINE_GRAINED, "run_training.py": ENTRY,
             "env.sh": "export NVTE_CPU_OFFLOAD_V1=1\n", "launch.sh": RUNTIME_LAUNCHER}
    assert _findings(tmp_path, monkeypatch, files) == set()
    files["other.sh"] = "torchrun run_training.py --config-file $1\n"  # a launch that does not set it
    found = _findings(tmp_path, monkeypatch, files)
    assert {("configs/a.yaml", "OFL112", "warning"), ("configs/b.yaml", "OFL112", "warning")} <= found


def test_a_launch_naming_the_file_decides_over_those_choosing_at_run_time(tmp_path, monkeypatch):
    files = {"configs/a.yaml": FINE_GRAINED, "run_training.py": ENTRY, "env.sh": "export NVTE_CPU_OFFLOAD_V1=1\n",
             "launch.sh": RUNTIME_LAUNCHER, "named.sh": "torchrun run_training.py --config-file configs/a.yaml\n"}
    assert ("configs/a.yaml", "OFL112", "warning") in _findings(tmp_path, monkeypatch, files)


def test_a_pre_commit_run_of_the_yaml_file_reads_its_launches(tmp_path, monkeypatch):
    """`offlint check configs/a.yaml`, as pre-commit runs it, reports what the whole tree reports about the file."""
    files = {"configs/a.yaml": FINE_GRAINED, "run_training.py": ENTRY, "env.sh": "export NVTE_CPU_OFFLOAD_V1=1\n",
             "launch.sh": RUNTIME_LAUNCHER}
    for cache in (False, True):
        assert _findings(tmp_path, monkeypatch, files, cache=cache) == set()
        assert _findings(tmp_path, monkeypatch, files, ["configs/a.yaml"], cache=cache) == set()
    edited = files | {"configs/a.yaml": FINE_GRAINED.replace("[core_attn]", "[core_attn, mlp_norm]")}
    assert _findings(tmp_path, monkeypatch, edited, ["configs/a.yaml"], cache=True) == set()


def test_the_projects_own_entry_script_is_a_launch_whose_environment_its_recipe_may_add_to(tmp_path, monkeypatch):
    """Its recipe is its own choice, and a recipe's cfg.env_vars may set NVTE_CPU_OFFLOAD_V1: a shell that does not
    set it is no error, only the warning that offlint cannot see it. What the YAML file sets is checked on it."""
    files = {"configs/a.yaml": FINE_GRAINED + "  cpu_offloading: true\n  pipeline_model_parallel_size: 2\n",
             "run_training.py": ENTRY, "launch.sh": "torchrun run_training.py --config-file configs/a.yaml\n"}
    found = _findings(tmp_path, monkeypatch, files)
    assert ("configs/a.yaml", "OFL102", "error") in found and ("configs/a.yaml", "OFL112", "warning") in found
    assert ("configs/a.yaml", "OFL112", "error") not in found

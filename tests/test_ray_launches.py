"""Launches Ray runs, and entry scripts that set their parsed arguments themselves (THUDM/slime's shapes).

slime's launch scripts start a Ray cluster and submit the job: `ray job submit --runtime-env-json=... -- python3
train.py <Megatron-LM flags>`. offlint had given them no unit (46 scripts, 24 of them with optimizer offload). Once
read, five would have been false OFL116 errors: slime's argument parser turns the distributed optimizer on itself
(`args.use_distributed_optimizer = True`) before Megatron-LM validates the arguments. The fixtures are our own, in
that shape.
"""

from __future__ import annotations

import textwrap

import pytest

from offlint.sources import entry_scripts, entry_writes, launch, launch_env, launch_words
from offlint.types import Location
from tests.check_helpers import check_json, write_tree

LAUNCH = """\
#!/bin/bash
MODEL_ARGS=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 512 --max-position-embeddings 512)
OPTIMIZER_ARGS=(--optimizer adam --lr 1e-6 --optimizer-cpu-offload --overlap-cpu-optimizer-d2h-h2d
                --use-precision-aware-optimizer)
ray start --head --num-gpus 8
RUNTIME_ENV_JSON='{"env_vars": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}}'
ray job submit --address="http://127.0.0.1:8265" --runtime-env-json="${RUNTIME_ENV_JSON}" \\
   -- python3 SCRIPT --actor-num-gpus-per-node 8 ${MODEL_ARGS[@]} ${OPTIMIZER_ARGS[@]} \\
   --micro-batch-size 1 --global-batch-size 8 --train-iters 10 --bf16
"""
TRAIN = """\
from rl.arguments import parse_args


def train(args):
    pass


if __name__ == "__main__":
    train(parse_args())
"""
ARGUMENTS = """\
from megatron.training.arguments import parse_args as megatron_parse_args


def _defaults(args):
    args.use_distributed_optimizer = True
    return args


def parse_args():
    args = megatron_parse_args(extra_args_provider=None, ignore_unknown_args=True)
    return _defaults(args)
"""


def _tree(tmp_path, arguments: str = ARGUMENTS, script: str = "train.py"):
    write_tree(tmp_path, {"launch.sh": LAUNCH.replace("SCRIPT", script), "train.py": TRAIN,
                          "rl/__init__.py": "", "rl/arguments.py": arguments})


def _tree_text(tmp_path, files: dict[str, str]):
    """Writes `files` under tmp_path; the tree_text entry_scripts reads them with."""
    write_tree(tmp_path, files)

    def tree_text(path, near):
        file = tmp_path / path
        return file.read_text() if file.is_file() else None
    return tree_text


def _codes(findings: list[dict]) -> list[str]:
    return sorted(f["code"] for f in findings)


def test_a_ray_job_is_a_launch(tmp_path):
    """Without the parser's own default, the launch asks for optimizer offload and the precision-aware optimizer
    without the distributed optimizer: megatron-core refuses both."""
    _tree(tmp_path, ARGUMENTS.replace("    args.use_distributed_optimizer = True\n", ""))
    assert _codes(check_json(tmp_path)) == ["OFL116", "OFL206"]


def test_what_the_entry_scripts_code_sets_is_not_the_command_lines(tmp_path):
    """slime's parser sets a literal on every run (`args.use_distributed_optimizer = True`, reached from the
    `__main__` block through `train(parse_args())`): the run has it, and megatron-core refuses nothing. A value
    the code sets on some runs only, or computes, is unknown: only --strict says what may fail, naming the line."""
    _tree(tmp_path)
    assert check_json(tmp_path) == []
    assert _codes(check_json(tmp_path, "--strict")) == ["OFL301"]
    for some_runs in ("    if args.optimizer == 'adam':\n        args.use_distributed_optimizer = True\n",
                      "    args.use_distributed_optimizer = args.optimizer == 'adam'\n",
                      "    if args.seq_length is None:\n        return args\n    args.use_distributed_optimizer = True\n"):
        _tree(tmp_path, ARGUMENTS.replace("    args.use_distributed_optimizer = True\n", some_runs))
        assert check_json(tmp_path) == []
        strict = {f["code"]: f for f in check_json(tmp_path, "--strict")}
        assert sorted(strict) == ["OFL116", "OFL206", "OFL301"] and all(f["possible"] for f in strict.values())
        line = 6 if some_runs.startswith("    if args.optimizer") else 5 if "==" in some_runs else 7
        assert f"use_distributed_optimizer: set by the entry script's code at rl/arguments.py:{line}" in \
            strict["OFL116"]["message"]


def test_a_literal_some_runs_set_is_one_of_it_and_the_command_lines(tmp_path):
    """LoongForge's validator turns fine-grained offloading off for a model that cannot use it: `if args.x:
    args.x = False`. The run has the command line's value or False, never on where the command line leaves it off:
    no finding, not even a possible one (it had been: "set by the entry script's code"). Where the command line
    turns it on, it stays on for the runs the code does not switch off, which are not read: possible only."""
    switch_off = ("    if args.fine_grained_activation_offloading:\n"
                  "        args.fine_grained_activation_offloading = False\n")
    _tree(tmp_path, ARGUMENTS.replace("    return args\n", switch_off + "    return args\n"))
    fine_grained = ["OFL107", "OFL112"]  # (no offload_modules; NVTE_CPU_OFFLOAD_V1 unset)
    assert not set(fine_grained) & set(_codes(check_json(tmp_path, "--strict")))
    launch_sh = tmp_path / "launch.sh"
    launch_sh.write_text(launch_sh.read_text().replace("--bf16", "--bf16 --fine-grained-activation-offloading"))
    assert not set(fine_grained) & set(_codes(check_json(tmp_path)))
    strict = [f for f in check_json(tmp_path, "--strict") if f["code"] in fine_grained]
    assert sorted(f["code"] for f in strict) == fine_grained and all(f["possible"] for f in strict)
    assert "set by the entry script's code at rl/arguments.py:7 on some runs: args.fine_grained_activation_" \
           "offloading = False (rl/arguments.py:7), else the command line's" in strict[0]["message"]


def test_a_rule_holding_on_every_run_the_code_may_choose_is_certain(tmp_path):
    """The code turns the distributed optimizer off on some runs and the command line leaves it off: every run is
    without it, and megatron-core refuses optimizer offload (and the precision-aware optimizer) on every one."""
    some_runs = "    if args.seq_length > 4096:\n        args.use_distributed_optimizer = False\n"
    _tree(tmp_path, ARGUMENTS.replace("    args.use_distributed_optimizer = True\n", some_runs))
    findings = [f for f in check_json(tmp_path) if f["code"] in ("OFL116", "OFL206")]
    assert sorted(f["code"] for f in findings) == ["OFL116", "OFL206"] and not any(f["possible"] for f in findings)


def test_an_entry_script_in_another_checkout_is_read_from_the_trees_copy(tmp_path):
    """slime's kimi-k2 launcher runs `python3 /personal/slime/slime/train.py`: its author's checkout. (Started
    by torchrun here: a launch offlint read before Ray's were.)"""
    _tree(tmp_path, script="/personal/slime/slime/train.py")
    text = (tmp_path / "launch.sh").read_text()
    (tmp_path / "launch.sh").write_text(text[:text.index("ray job submit")] + "torchrun --nproc-per-node 8 "
                                        + text[text.index("/personal"):])
    assert _codes(check_json(tmp_path)) == ["OFL301"]  # (torchrun's environment is the script's)
    (tmp_path / "rl" / "arguments.py").write_text(ARGUMENTS.replace("    args.use_distributed_optimizer = True\n", ""))
    assert _codes(check_json(tmp_path)) == ["OFL116", "OFL206", "OFL301"]


@pytest.mark.parametrize("layout", ["absent", "nested"])
def test_an_entry_script_offlint_cannot_read_may_set_any_argument(tmp_path, layout):
    """A scripts-only repository of slime's launches (kennethzhao24/slime-tests: no train.py), or one whose launch
    runs `python3 train.py` from inside a checkout nested elsewhere in the tree (ljkkkkkkkkk/slime_RL's slime/):
    offlint cannot read the script, whose code sets the distributed optimizer on; argparse's default is then no
    value the run has (OFL116 and OFL206 had been errors): the launch's flags no Megatron-LM release has show a
    parser, and code, of the script's own. A script outside the tree taking Megatron-LM's flags alone (an upstream
    example, `pretrain_*.py`) takes argparse's defaults."""
    _tree(tmp_path)
    (tmp_path / "train.py").unlink()
    if layout == "nested":
        (tmp_path / "slime").mkdir()
        (tmp_path / "slime" / "train.py").write_text(TRAIN)
    assert _codes(check_json(tmp_path)) == []
    strict = [f for f in check_json(tmp_path, "--strict") if f["code"] in ("OFL116", "OFL206")]
    assert sorted(f["code"] for f in strict) == ["OFL116", "OFL206"] and all(f["possible"] for f in strict)
    assert "train.py, which offlint cannot read" in strict[0]["message"]
    launch = tmp_path / "launch.sh"
    launch.write_text(launch.read_text().replace("--actor-num-gpus-per-node 8 ", ""))
    assert _codes(check_json(tmp_path)) == ["OFL116", "OFL206"]


def test_the_job_runs_in_the_clusters_environment_plus_its_runtime_env(tmp_path):
    """The runtime environment's variables are the job's; any other may be set where the cluster started, so the
    allocator advice is only possible (the launch leaves PYTORCH_ALLOC_CONF to the cluster)."""
    _tree(tmp_path)
    assert check_json(tmp_path) == []
    (finding,) = [f for f in check_json(tmp_path, "--strict") if f["code"] == "OFL301"]
    assert "PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:512'" in finding["message"]
    assert "its Ray cluster was started with" in finding["message"]


def _args(*words: str) -> list[launch_words.Arg]:
    return [launch_words.Arg(word, Location("launch.sh", 1, 1 + i), word or "$X") for i, word in enumerate(words)]


def test_ray_job_reads_the_runtime_env_json_in_either_spelling():
    json_text = '{"env_vars": {"A": "1", "B": 2}, "working_dir": "."}'
    for words in (("ray", "job", "submit", "--runtime-env-json", json_text, "--"),
                  ("ray", "job", "submit", f"--runtime-env-json={json_text}", "--")):
        reason, env = launch_env.ray_job(_args(*words))
        assert "Ray cluster" in reason
        assert {name: arg.value for name, arg in env.items()} == {"A": "1", "B": "2"}
    for unreadable in ("{not json", None, '["a list"]', '{"env_vars": "A=1"}', "[" * 5000 + "]" * 5000):
        assert launch_env.ray_job(_args("ray", "job", "submit", "--runtime-env-json", unreadable, "--"))[1] == {}
    assert launch_env.ray_job(_args("torchrun", "--nproc-per-node", "8")) == ("", {})


def test_namespace_writes_follows_the_trees_calls_not_megatrons(tmp_path):
    files = {
        "train.py": textwrap.dedent("""\
            from megatron.training import initialize_megatron
            from rl import setup
            import rl.more as more

            class Trainer:
                def __init__(self, args):
                    self.args = args  # an object's own attribute: not an argument

            def main():
                args = setup.defaults(initialize_megatron())
                more.tune(args)
                setattr(args, "seq_length", 4096)

            main()
            """),
        "rl/__init__.py": "",
        "rl/setup.py": ("def defaults(args):\n    args.bf16, args.fp16 = True, False\n"
                        "    config = build()\n    config.recompute_granularity = 'full'  # another object's\n"
                        "    return args\n"),
        "rl/more.py": ("def tune(megatron_args):\n    megatron_args.micro_batch_size += 1\n\n"
                       "def unused(args):\n    args.lr = 1\n"),
        "megatron/training.py": "def initialize_megatron():\n    args.num_layers = 2\n",  # not followed
    }
    tree_text = _tree_text(tmp_path, files)
    writes = entry_scripts.namespace_writes("train.py", "launch.sh", tree_text)
    assert [(attribute, path, line) for attribute, path, line, *_ in writes] == [
        ("seq_length", "train.py", 12), ("micro_batch_size", "rl/more.py", 2), ("bf16", "rl/setup.py", 2),
        ("fp16", "rl/setup.py", 2)]
    # (setattr, a tuple's parts and `+=` are not read as literals)
    assert all(w.value is entry_writes.UNREAD for w in writes)
    assert entry_scripts.namespace_writes("missing.py", "launch.sh", tree_text) == ()


def test_a_literal_is_known_where_every_run_sets_it_in_one_place(tmp_path):
    files = {
        "train.py": textwrap.dedent("""\
            import sys
            from rl.setup import defaults, tune, maybe

            def main():
                args = defaults(parse())
                tune(args)
                maybe(args)
                for _ in range(2):
                    args.in_loop = 1
                if args.x:
                    sys.exit(0)
                args.after_exit = True

            if __name__ == "__main__":
                main()
            """),
        "rl/__init__.py": "",
        "rl/setup.py": textwrap.dedent("""\
            def defaults(args):
                args.use_distributed_optimizer = True
                args.lr: float = -1.5
                args.twice = 1
                args.computed = args.lr * 2
                return args

            def tune(args):
                args.twice = 2
                args.recompute_method = "uniform"

            def maybe(args):
                if args.y:
                    args.conditional = 4
                args.in_branchy_function = 8
            """),
    }
    tree_text = _tree_text(tmp_path, files)
    values = {w.attribute: w.value for w in entry_scripts.namespace_writes("train.py", "launch.sh", tree_text)}
    unread = entry_writes.UNREAD
    assert values == {"use_distributed_optimizer": True, "lr": -1.5, "twice": unread, "computed": unread,
                      "recompute_method": "uniform", "conditional": unread, "in_branchy_function": 8,
                      "in_loop": unread, "after_exit": unread}
    # where each place sets a literal, a run has one of them (or the command line's value): each with its place
    choices = {w.attribute: set(w.choices) for w in entry_scripts.namespace_writes("train.py", "launch.sh", tree_text)}
    assert choices == {"use_distributed_optimizer": set(), "lr": set(), "computed": set(), "recompute_method": set(),
                       "in_branchy_function": set(), "twice": {("rl/setup.py", 4, 1), ("rl/setup.py", 9, 2)},
                       "conditional": {("rl/setup.py", 14, 4)}, "in_loop": {("train.py", 9, 1)},
                       "after_exit": {("train.py", 12, True)}}


def test_a_value_set_after_megatron_validated_the_arguments_is_not_known(tmp_path):
    # Megatron-LM's export.py shape: `initialize_megatron()` (which validates the arguments) runs first, then the
    # script sets one; and the same through a function of the tree that initializes
    files = {
        "export.py": textwrap.dedent("""\
            from megatron.training import get_args
            from megatron.training.initialize import initialize_megatron
            from rl.setup import early, start, late, run

            if __name__ == "__main__":
                early(get_args())
                initialize_megatron(allow_no_cuda=True)
                args = get_args()
                args.use_cpu_initialization = True
                start()
                late(args)
            """),
        "rl/__init__.py": "",
        "rl/setup.py": textwrap.dedent("""\
            from megatron.training import pretrain

            def early(args):
                args.use_distributed_optimizer = True

            def start():
                run()

            def run():
                pretrain(None, None, None)

            def late(args):
                args.bf16 = True
            """),
    }
    tree_text = _tree_text(tmp_path, files)
    values = {w.attribute: w.value for w in entry_scripts.namespace_writes("export.py", "launch.sh", tree_text)}
    unread = entry_writes.UNREAD
    assert values == {"use_distributed_optimizer": True, "use_cpu_initialization": unread, "bf16": unread}
    # a tree function that trains through another is found as validating, so what comes after it is unknown
    (tmp_path / "export.py").write_text(files["export.py"].replace("initialize_megatron(allow_no_cuda=True)", "pass"))
    values = {w.attribute: w.value for w in entry_scripts.namespace_writes("export.py", "launch.sh", tree_text)}
    assert values == {"use_distributed_optimizer": True, "use_cpu_initialization": True, "bf16": unread}
    # a call whose arguments validate first runs after them: `early(initialize_megatron())`; the call in them does not
    (tmp_path / "export.py").write_text(files["export.py"].replace("early(get_args())", "early(get_args(), run())"))
    values = {w.attribute: w.value for w in entry_scripts.namespace_writes("export.py", "launch.sh", tree_text)}
    assert values == {"use_distributed_optimizer": unread, "use_cpu_initialization": unread, "bf16": unread}
    (tmp_path / "export.py").write_text(files["export.py"].replace("early(get_args())", "early(late(get_args()))"))
    values = {w.attribute: w.value for w in entry_scripts.namespace_writes("export.py", "launch.sh", tree_text)}
    # (`late` runs before the validation too now, and its one place sets one constant whenever it runs)
    assert values == {"use_distributed_optimizer": True, "bf16": True, "use_cpu_initialization": unread}


# NVIDIA-NeMo/RL's shape: a launch runs the tree's own entry script with `--config` and `key=value` overrides; the
# script starts Ray through the tree's code and trains in Ray's workers, whose environment that code builds (the
# driver's variables passed on, then the `env_vars` of the run's YAML, which its performance recipes use to turn
# expandable segments off on purpose).
RL_LAUNCH = """\
#!/bin/bash
cd $(dirname $0)
uv run examples/SCRIPT --config examples/configs/grpo.yaml cluster.gpus_per_node=8 policy.train_global_batch_size=64
"""
RL_SCRIPT = """\
from rl.cluster import start_cluster
from rl.algorithms import grpo_train


def main():
    start_cluster()
    policy, data = object(), []
    grpo_train(policy, data)


if __name__ == "__main__":
    main()
"""
RL_ALGORITHMS = "def grpo_train(policy, data):\n    for batch in data:\n        policy.train(batch)\n"
RL_EVAL = ("from rl.cluster import start_cluster\n\n\ndef main():\n    start_cluster()\n    return score()\n\n\n"
           "def score():\n    return 0\n\n\nmain()\n")


def _rl_tree(tmp_path, cluster: str, script: str = "run_grpo.py") -> None:
    write_tree(tmp_path, {"run.sh": RL_LAUNCH.replace("SCRIPT", script), "examples/run_grpo.py": RL_SCRIPT,
                          "examples/run_eval.py": RL_EVAL, "examples/configs/grpo.yaml": "policy: {}\n",
                          "rl/__init__.py": "", "rl/algorithms.py": RL_ALGORITHMS, "rl/cluster.py": cluster})


def test_a_ray_driver_trains_in_workers_whose_environment_its_code_builds(tmp_path):
    """The launch's PYTORCH_CUDA_ALLOC_CONF is not the trainers': no allocator advice, not even as possible (NeMo
    RL: 295 possible OFL301 under --strict). The same script starting no Ray cluster trains in the launch's own
    processes: the advice stands, possible where the recipe it runs is unknown."""
    _rl_tree(tmp_path, "import ray\n\n\ndef start_cluster():\n    ray.init(runtime_env={'env_vars': {}})\n")
    assert check_json(tmp_path, "--strict") == []
    for spelling in ("from ray import init\n\n\ndef start_cluster():\n    init()\n",
                     "import ray as r\n\n\ndef start_cluster():\n    r.init()\n"):
        (tmp_path / "rl" / "cluster.py").write_text(spelling)
        assert check_json(tmp_path, "--strict") == []
    (tmp_path / "rl" / "cluster.py").write_text("def start_cluster():\n    pass\n")
    (finding,) = check_json(tmp_path, "--strict")
    assert finding["code"] == "OFL301" and finding["possible"]


def test_a_script_taking_overrides_stays_a_training_launch_unless_its_code_starts_ray(tmp_path):
    """Its code is read for Ray only: a framework's launcher dispatches through its own classes (Pai-Megatron-Patch's
    ChatLearn entry point runs `ChatlearnLauncher().run()`, which loads its algorithm by name), so reaching no
    training call by name does not make it a launch that does not train."""
    _rl_tree(tmp_path, "def start_cluster():\n    pass\n", script="run_eval.py")
    (finding,) = check_json(tmp_path, "--strict")
    assert finding["code"] == "OFL301" and finding["possible"]
    (tmp_path / "rl" / "cluster.py").write_text("import ray\n\n\ndef start_cluster():\n    ray.init()\n")
    assert check_json(tmp_path, "--strict") == []


def test_ray_driver_names_where_ray_starts(tmp_path):
    _rl_tree(tmp_path, "import ray\n\n\ndef start_cluster():\n    ray.init()\n")
    tree_text = _tree_text(tmp_path, {})
    assert entry_scripts.ray_driver("examples/run_grpo.py", "run.sh", tree_text) == "rl/cluster.py:5"
    assert entry_scripts.ray_driver("examples/run_eval.py", "run.sh", tree_text) == "rl/cluster.py:5"
    assert entry_scripts.ray_driver("missing.py", "run.sh", tree_text) == ""


def test_an_overrides_path_value_is_not_the_script(tmp_path):
    """volcengine/verl runs `python3 -m verl.trainer.main_ppo ... data.custom_cls.path=recipe/minicpmo/rl_dataset.py`:
    the override's value was taken for the script (a unit "rl_dataset.py at line 3", possible OFL301s under
    --strict). A module run with `-m` other than Bridge's entry points is not read as a launch (as before)."""
    assert not launch.runs_script(["python3", "-m", "verl.trainer.main_ppo", "data.custom_cls.path=recipe/ds.py"])
    assert not launch.runs_script(["python3", "train.sh.bak", "--script=pkg/run.py"])
    assert launch.runs_script(["python3", "pkg/run.py", "data.path=recipe/ds.py"])
    write_tree(tmp_path, {"run.sh": "python3 -m verl.trainer.main_ppo data.custom_cls.path=recipe/ds.py "
                                    "trainer.n_gpus_per_node=8\n"})
    assert check_json(tmp_path, "--strict") == []
    write_tree(tmp_path, {"run.sh": 'python3 -m verl.trainer.main_ppo custom_reward_function.path="$DIR/reward.py" '
                                    "trainer.n_gpus_per_node=8\n"})
    assert check_json(tmp_path, "--strict") == []

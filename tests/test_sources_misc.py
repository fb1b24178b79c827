"""Hydra override semantics, Megatron-LM flag rewrites, YAML reading and version detection."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offlint.resolve import resolve
from offlint.sources import read_source
from offlint.sources.hydra import looks_like_override, parse_override
from offlint.sources.mlm_flags import read_flags
from offlint.versions import detect_version, in_range, parse_version

V = parse_version("0.16.1")


@pytest.mark.parametrize(("token", "value"), [
    ("model.cpu_offloading=true", True), ("model.cpu_offloading=TRUE", True), ("model.cpu_offloading=1", 1),
    ("model.cpu_offloading=no", "no"), ("model.recompute_granularity=None", "None"),
    ("model.recompute_granularity=null", None), ("model.recompute_modules=core_attn", "core_attn"),
    ("model.recompute_modules=[core_attn,mlp]", ["core_attn", "mlp"]), ("model.pipeline_model_parallel_size=\"4\"", "4"),
    ("optimizer.optimizer_offload_fraction=1e-1", 0.1),
])
def test_hydra_values_are_what_bridge_sees(token, value):
    (override,) = parse_override(token)
    assert override.value == value and type(override.value) is type(value)


def test_hydra_prefixes_dicts_and_shapes():
    assert parse_override("+model.x=[a,b]")[0].op == "add"
    assert parse_override("++model.x=1")[0].op == "force"
    assert parse_override("~model.cpu_offloading")[0].op == "delete"
    assert [o.key for o in parse_override("model={cpu_offloading:true,num_layers:4}")] == [
        "model.cpu_offloading", "model.num_layers"]
    assert parse_override("+env_vars.NVTE_CPU_OFFLOAD_V1=1")[0].key == "env.NVTE_CPU_OFFLOAD_V1"
    assert not looks_like_override("--recipe") and not looks_like_override("x=1")
    assert looks_like_override("mixed_precision=bf16_mixed")


def test_mlm_rewrites():
    values, problems = read_flags("--cpu-offloading-num-layers 4 --recompute-activations --use-distributed-optimizer "
                                  "--offload-modules core_attn attn_proj --exp-avg-dtype bf16 --lr 1e-4".split())
    got = {v.key: v.value for v in values}
    assert got["model.cpu_offloading"] is True and got["model.cpu_offloading_num_layers"] == 4
    assert got["model.recompute_granularity"] == "selective"
    assert got["ddp.use_distributed_optimizer"] is True and got["optimizer.use_distributed_optimizer"] is True
    assert got["model.offload_modules"] == ["core_attn", "attn_proj"]
    assert got["optimizer.exp_avg_dtype"] == "torch.bfloat16"
    assert not problems
    zero, _ = read_flags(["--cpu-offloading-num-layers", "0"])
    assert "model.cpu_offloading" not in {v.key for v in zero}


def test_a_valued_flag_without_its_value_points_at_itself():
    """A flag that takes a value, given none (the command's last word: Pai-Megatron-Patch's qwen2_vl script ends
    `--optimizer-offload-fraction ${OPTIMIZER_OFFLOAD}`, a variable unset there) or an unresolvable one, is an
    unknown setting located at the flag: it pointed past the end of the command, an internal error."""
    values, _ = read_flags(["--bf16", "--optimizer-offload-fraction"])
    assert [(v.key, v.value, v.flag_index) for v in values if v.key.endswith("offload_fraction")] == \
        [("optimizer.optimizer_offload_fraction", None, 1)]
    values, _ = read_flags(["--tensor-model-parallel-size", None, "--micro-batch-size", "2"])
    assert [(v.key, v.value, v.flag_index) for v in values] == \
        [("model.tensor_model_parallel_size", None, 0), ("train.micro_batch_size", 2, 2)]


def test_a_launch_ending_in_a_flag_without_its_value_is_read():
    from offlint.sources.shell import read_shell

    script = ('OPTIMIZER_OFFLOAD=${1}\n'
              'offload_option="--optimizer-cpu-offload --use-precision-aware-optimizer '
              '--optimizer-offload-fraction ${OPTIMIZER_OFFLOAD}"\n'
              'run_cmd="torchrun --nproc-per-node 8 pretrain_gpt.py --train-iters 10 ${offload_option}"\n'
              'eval ${run_cmd}\n')
    [unit] = read_shell("run.sh", script)
    fraction = [a for a in unit.all_assignments() if a.key == "optimizer.optimizer_offload_fraction"]
    assert len(fraction) == 1 and fraction[0].location.line == 2


def test_mlm_flags_the_memory_model_and_replay_read():
    values, problems = read_flags("--manual-gc --untie-embeddings-and-output-weights --attention-backend local".split())
    got = {v.key: v.value for v in values}
    assert got == {"train.manual_gc": True, "model.share_embeddings_and_output_weights": False,
                   "model.attention_backend": "local"}
    assert not problems


def test_mlm_unit_takes_argparse_defaults_and_derives_vpp():
    (unit,) = read_source("l.sh", "shell", "torchrun pretrain_gpt.py --num-layers 16 --pipeline-model-parallel-size 2 "
                                             "--num-layers-per-virtual-pipeline-stage 2 --optimizer-cpu-offload\n")
    resolved = resolve(unit, V)
    assert resolved.get("optimizer.optimizer_offload_fraction").value == 1.0  # CLI-3
    assert resolved.get("model.virtual_pipeline_model_parallel_size").value == 4
    assert resolved.get("optimizer.exp_avg_dtype").value == "torch.float32"


def test_yaml_reading_is_yaml_1_1_with_positions_and_duplicates():
    text = "model:\n  cpu_offloading: yes\n  recompute_granularity: None\n  recompute_granularity: ~\n" \
           "env_vars:\n  NVTE_CPU_OFFLOAD_V1: 1\n"
    (unit,) = read_source("o.yaml", "yaml", text)
    assignments = unit.all_assignments()
    assert [(a.key, a.value, a.location.line, a.location.col) for a in assignments] == [
        ("model.cpu_offloading", True, 2, 3), ("model.recompute_granularity", "None", 3, 3),
        ("model.recompute_granularity", None, 4, 3), ("env.NVTE_CPU_OFFLOAD_V1", "1", 6, 3)]


@pytest.mark.parametrize("fast", [True, False])
def test_an_anchor_defined_again_names_the_node_after_it(monkeypatch, fast):
    """A helper's third-party sweep: a GitLab CI file defines `script: &launcher` in two jobs. YAML gives an alias
    the closest anchor of its name before it; PyYAML and libyaml refuse the second definition, and the valid file
    was an error (exit 2). With libyaml or without it; an undefined alias is still an error."""
    from offlint.sources import yaml_file

    if not fast:
        monkeypatch.setattr(yaml_file, "_FAST_LOADER", None)
    (root,) = yaml_file.compose("a: &x 1\nb: *x\nc: &x [2]\nd: *x\n")
    assert yaml_file.construct(root) == {"a": 1, "b": 1, "c": [2], "d": [2]}
    with pytest.raises(yaml_file.YamlError, match="undefined alias"):
        yaml_file.compose("a: *nope\n")


def test_card_command_positions():
    text = "items:\n  a:\n    command: >\n      ./scripts/training/train.sh --recipe r\n" \
           "      model.cpu_offloading=true model.pipeline_model_parallel_size=2\n"
    (unit,) = read_source("card.yaml", "yaml", text)
    pp = [a for a in unit.all_assignments() if a.key == "model.pipeline_model_parallel_size"][0]
    assert (pp.location.line, pp.location.col) == (5, 33)


def test_version_parsing_ranges_and_detection(tmp_path):
    assert str(parse_version("0.16")) == "0.16.0" and str(parse_version("0.20.0rc1")) == "0.20.0"
    assert in_range(parse_version("0.18.0"), ">=0.16,<0.19") and not in_range(parse_version("0.19.1"), "<0.19")
    info = tmp_path / "3rdparty" / "Megatron-LM" / "megatron" / "core"
    info.mkdir(parents=True)
    (info / "package_info.py").write_text("MAJOR = 0\nMINOR = 19\nPATCH = 2\n")
    detected = detect_version(None, None, tmp_path)
    assert str(detected.version) == "0.19.2" and "package_info.py" in detected.origin
    assert detect_version("0.16", "0.19", tmp_path).origin == "--mcore-version"
    assert detect_version(None, "0.19", tmp_path).origin == "[tool.offlint] megatron-core-version"
    # A Megatron-LM checkout is its own megatron-core (a pin, where there is one, comes first).
    own = tmp_path / "lm"
    (own / "megatron" / "core").mkdir(parents=True)
    (own / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 18\nPATCH = 1\n")
    detected = detect_version(None, None, own)
    assert str(detected.version) == "0.18.1" and detected.origin.endswith("megatron/core/package_info.py")
    # A pin .gitmodules names but the checkout lacks (submodules not initialised): said, as the version is a guess
    fork = tmp_path / "fork"
    (fork / "3rdparty" / "Megatron-LM").mkdir(parents=True)
    (fork / ".gitmodules").write_text('[submodule "3rdparty/Megatron-LM"]\n\tpath = 3rdparty/Megatron-LM\n'
                                      "\turl = https://github.com/NVIDIA/Megatron-LM.git\n")
    detected = detect_version(None, None, fork)
    assert detected.note.startswith("3rdparty/Megatron-LM (the tree's megatron-core) is not checked out")
    assert "git submodule update --init 3rdparty/Megatron-LM" in detected.note
    assert not detect_version("0.19", None, fork).note  # named: no guess
    # A Megatron-LM from before megatron-core (Megatron-DeepSpeed): its own code runs, said
    legacy = tmp_path / "deepspeed"
    (legacy / "megatron").mkdir(parents=True)
    (legacy / "megatron" / "arguments.py").write_text("")
    (legacy / "megatron" / "training.py").write_text("")
    assert "has no megatron/core" in detect_version(None, None, legacy).note
    assert not detect_version("0.16", None, legacy).note


def test_a_named_version_that_is_not_the_checkouts_is_said(tmp_path):
    """--mcore-version (or [tool.offlint]) wins over the tree's own checkout (rules.md), but a version that is not the
    checkout's is said: the rules applied are then not what the code the tree's scripts run does (a Megatron-LM-FL
    fork of 0.16.0rc0, checked with --mcore-version 0.20.0, was told of 0.20's deprecated CUDA-graph scope)."""
    own = tmp_path / "lm"
    (own / "megatron" / "core").mkdir(parents=True)
    (own / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 16\nPATCH = 0\n")
    detected = detect_version("0.20.0", None, own)
    assert (str(detected.version), detected.origin) == ("0.20.0", "--mcore-version")
    assert detected.note == ("--mcore-version names megatron-core 0.20.0, but the tree's own "
                             "megatron/core/package_info.py is 0.16.0, the code its scripts run: checking with the "
                             "rules of 0.20.0, not with what that checkout's code does (without --mcore-version "
                             "offlint checks with the checkout)")
    assert detect_version(None, "0.19", own).note.startswith("[tool.offlint] megatron-core-version names "
                                                             "megatron-core 0.19.0, but the tree's own")
    assert detect_version("0.16.0", None, own).note == ""  # the checkout's own version: nothing to say
    assert detect_version(None, None, own).note == ""
    # A Bridge tree's pin, checked out: the same
    pin = tmp_path / "bridge" / "3rdparty" / "Megatron-LM" / "megatron" / "core"
    pin.mkdir(parents=True)
    (pin / "package_info.py").write_text("MAJOR = 0\nMINOR = 19\nPATCH = 0\n")
    assert "the tree's own 3rdparty/Megatron-LM/megatron/core/package_info.py is 0.19.0" in \
        detect_version("0.20", None, tmp_path / "bridge").note


def test_a_named_version_that_is_not_the_checkouts_is_a_warning_of_the_run(tmp_path):
    own = tmp_path / "lm"
    (own / "megatron" / "core").mkdir(parents=True)
    (own / "megatron" / "core" / "package_info.py").write_text("MAJOR = 0\nMINOR = 16\nPATCH = 0\n")
    (own / ".git").mkdir()
    (own / "train.sh").write_text("#!/bin/bash\necho hello\n")
    done = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--mcore-version", "0.20.0", "--no-cache"],
                          cwd=own, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "offlint: warning: --mcore-version names megatron-core 0.20.0, but the tree's own " \
           "megatron/core/package_info.py is 0.16.0" in done.stderr
    quiet = subprocess.run([sys.executable, "-m", "offlint", "check", ".", "--mcore-version", "0.20.0", "--no-cache",
                            "-q"], cwd=own, capture_output=True, text=True)
    assert quiet.stderr == ""


def test_the_release_a_uv_lock_pins_is_the_trees_version(tmp_path):
    """A Bridge tree from before the submodule was megatron-core's source pins a release in uv.lock (0.14.0rc6 in
    August 2025): that is what its jobs run, not whatever is installed here. An editable entry pins none."""
    lock = tmp_path / "uv.lock"
    lock.write_text('version = 1\n\n[[package]]\nname = "megatron-bridge"\nversion = "0.1.0"\n\n'
                    '[[package]]\nname = "megatron-core"\nversion = "0.18.0rc2"\nsource = { registry = "x" }\n')
    detected = detect_version(None, None, tmp_path)
    assert (str(detected.version), detected.origin, detected.note) == ("0.18.0", "uv.lock", "")
    lock.write_text(lock.read_text().replace("0.18.0rc2", "0.14.0rc6"))
    detected = detect_version(None, None, tmp_path)
    assert detected.origin == "uv.lock" and str(detected.requested) == "0.14.0"
    assert detected.note.startswith("megatron-core 0.14.0 (from uv.lock) is older than any version offlint knows")
    assert detect_version("0.19", None, tmp_path).origin == "--mcore-version"
    lock.write_text('[[package]]\nname = "megatron-core"\nsource = { editable = "3rdparty/Megatron-LM" }\n')
    assert detect_version(None, None, tmp_path).origin != "uv.lock"


def test_discovered_paths_are_shown_relative_to_the_working_directory_or_as_given(tmp_path, monkeypatch):
    from offlint.discover import discover

    (tmp_path / "tree" / "pkg").mkdir(parents=True)
    (tmp_path / "tree" / "pkg" / "recipe.py").write_text("x = 1\n")
    (tmp_path / "tree" / "run").write_text("#!/bin/bash\necho hi\n")  # no extension: a shell script by its #!
    (tmp_path / "tree" / "notes").write_text("plain text\n")  # no extension, no #!: not ours
    (tmp_path / "tree" / ".gitignore").write_text("ignored/\n")
    (tmp_path / "tree" / "ignored").mkdir()
    (tmp_path / "tree" / "ignored" / "skip.py").write_text("x = 1\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")

    files, problems = discover(["../tree", str(tmp_path / "tree" / "pkg" / "recipe.py")])
    assert [(f.path, f.kind, f.explicit) for f in files] == [
        ("../tree/run", "shell", False), ("../tree/pkg/recipe.py", "python", False)]  # outside: as given, once
    assert not problems

    monkeypatch.chdir(tmp_path)
    files, _ = discover(["./tree/", str(tmp_path / "tree" / "run")])
    assert [f.path for f in files] == ["tree/run", "tree/pkg/recipe.py"]  # inside: relative, each once


def test_a_walked_file_is_parsed_when_a_function_returns_a_config_container():
    """A file of recipes that build their config by helpers alone names no key the rules read: it is read in a check
    of the whole tree when a function returns a ConfigContainer, as a pre-commit run that names it reads it; the
    training loop's files, which take one as a parameter, are not."""
    from offlint.sources.python import may_give_units

    assert may_give_units(b"def x_config() -> ConfigContainer:\n    return helper()\n")
    assert may_give_units(b"def x_config(**kw) -> 'megatron.bridge.training.config.ConfigContainer':\n    pass\n")
    assert not may_give_units(b"def train(cfg: ConfigContainer) -> None:\n    run(cfg)\n")
    assert not may_give_units(b"def helper():\n    return make()\n")


def test_a_yaml_file_of_mostly_other_keys_is_another_programs_configuration(tmp_path, monkeypatch):
    """verl's sft_trainer.yaml has a `model:` section of its own (partial_pretrain, fsdp_config, lora_rank, ...):
    OFL003 took `lora_rank` for a typo of q_lora_rank; NeMo 1's megatron_gpt_config.yaml shares 40 of its 116 keys
    with megatron-core's configs, and gave 54 such findings. A file gives a unit when at least as many of its keys are
    fields of a Bridge config (of any release offlint knows) or near-misses of them (typos, OFL003's to report) as
    are neither, and at least as many of its top-level keys are ConfigContainer's sections as are not (where exactly
    as many, near-misses do not count)."""
    from offlint.api import CheckOptions, check

    def run(text: str):
        (tmp_path / "sft_trainer.yaml").write_text(text)
        return check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))

    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    foreign = ("data:\n  train_batch_size: 256\nmodel:\n  partial_pretrain: ~/models/x\n  fsdp_config:\n"
               "    cpu_offload: false\n  lora_rank: 0\n  strategy: fsdp2\noptim:\n  lr: 1e-5\n")
    result = run(foreign)
    assert (result.findings, result.units) == ([], 0)
    # its model section alone (the top level Bridge's): a field and a near-miss among three other keys
    result = run("model:\n  partial_pretrain: x\n  fsdp_config: {}\n  strategy: fsdp2\n  lora_rank: 0\n"
                 "  num_layers: 8\n")
    assert (result.findings, result.units) == ([], 0)
    result = run("train:\n  train_iters: 10\nmodel:\n  lora_rank: 0\n  num_layers: 8\n  hidden_size: 8\n")
    assert result.units == 1 and [f.code for f in result.findings] == ["OFL003"]  # lora_rank, in a Bridge file
    assert run("model:\n  pipeline_model_paralel_size: 2\n").units == 1  # a file of typos
    # NeMo 1's shape: most model keys are fields, the top level is NeMo's own (name, trainer, exp_manager)
    nemo = ("name: megatron_gpt\ntrainer:\n  devices: 1\nexp_manager:\n  explicit_log_dir: null\nmodel:\n"
            "  num_layers: 12\n  hidden_size: 768\n  activation: gelu\n  rotary_percentage: 1.0\n")
    assert run(nemo).units == 0
    assert run(nemo.replace("name: megatron_gpt\ntrainer:\n  devices: 1\nexp_manager:\n  explicit_log_dir: null\n",
                            "train:\n  train_iters: 10\n")).units == 1  # with ConfigContainer's sections: Bridge's
    # NeMo Framework Launcher's conversion and evaluation configs: `run` beside `model` (a tie at the top level), a
    # model section of its own with a few fields and near-misses (`model_parallel_size`, which its own `run` reads):
    # at a tie, near-misses are no evidence of Bridge's
    launcher = ("run:\n  nodes: ${divide_ceil:${conversion.model.model_parallel_size}, 8}\nmodel:\n"
                "  model_type: gpt\n  checkpoint_folder: /ckpt\n  hparams_file: /ckpt/hparams.yaml\n"
                "  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 1\n"
                "  model_parallel_size: ${multiply:${.tensor_model_parallel_size}, ${.pipeline_model_parallel_size}}\n"
                "  vocab_file: /ckpt/vocab.txt\n")
    assert (run(launcher).findings, run(launcher).units) == ([], 0)
    assert run("run:\n  name: x\nmodel:\n  num_layers: 8\n  hidden_size: 8\n  num_layerz: 2\n").units == 1


def test_an_omegaconf_interpolation_in_yaml_is_unknown_and_a_value_of_the_wrong_type_fails_no_check(tmp_path,
                                                                                                     monkeypatch):
    """NeMo's megatron_gpt_config.yaml: `cpu_offloading_num_layers: ${sum:${.num_layers},-1}` was read as that
    string, and the memory model's int() of it ended the whole check ("invalid literal for int()", exit 2, no file
    named). An interpolation is resolved only when the file is loaded: unknown; a value of the wrong type makes the
    estimate unknown, as an unknown value does."""
    from offlint.api import CheckOptions, check
    from offlint.sources.yaml_file import compose, override_unit
    from offlint.types import Unknown

    text = ("model:\n  num_layers: 8\n  hidden_size: 1024\n  num_attention_heads: 8\n  seq_length: 2048\n"
            "  cpu_offloading: true\n  cpu_offloading_num_layers: ${sum:${.num_layers},-1}\n")
    [value] = [a.value for a in override_unit("o.yaml", compose(text)).all_assignments()
               if a.key == "model.cpu_offloading_num_layers"]
    assert isinstance(value, Unknown) and "OmegaConf interpolation" in str(value)
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    for wrong in ("two", "[1, 2]", "{a: 1}"):
        (tmp_path / "o.yaml").write_text(text.replace("${sum:${.num_layers},-1}", wrong) +
                                         f"  moe_router_topk: {wrong}\n  activation_offload_fraction: {wrong}\n")
        result = check(["."], CheckOptions(mcore_version="0.20.0", root=tmp_path, cache=False))
        assert result.units == 1 and not result.errors, (wrong, result.errors)


def test_recompute_activations_wins_wherever_it_is_given(tmp_path):
    """validate_args sets recompute_granularity='selective' after parsing whenever --recompute-activations is given
    (megatron/training/arguments.py), so a `--recompute-granularity full` after it is dead, not the winner. A
    Megatron-Llama2 launch passing both had an OFL004 saying 'full' wins, and an OFL224 about full recompute."""
    from tests.check_helpers import check_json, write_tree

    values, _ = read_flags("--recompute-activations --recompute-granularity full --num-layers 4".split())
    assert [v.value for v in values if v.key == "model.recompute_granularity"][-1] == "selective"
    write_tree(tmp_path, {"train.sh": "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 \\\n"
                                      "    --recompute-activations \\\n    --recompute-granularity full \\\n"
                                      "    --recompute-method uniform\n"})
    [finding] = [f for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL004"]
    assert finding["location"]["row"] == 2
    assert finding["message"] == (
        "model.recompute_granularity is set twice with different values ('full' at line 3, and "
        "--recompute-activations at line 2): validate_args sets recompute_granularity='selective' whenever "
        "--recompute-activations is given, wherever it is, so 'full' has no effect")


def test_a_repeated_megatron_lm_flag_is_named_as_the_script_writes_it(tmp_path):
    """OFL004 on a launch's flag said `model.num_layers is set twice`, where the script says `--num-layers` (a
    helper's sweep, session 66: a ModelLink chat script giving it 32, then 80)."""
    from tests.check_helpers import check_json, write_tree

    write_tree(tmp_path, {"chat.sh": "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n    --num-layers 32 \\\n"
                                     "    --num-layers 80 --hidden-size 1024 --num-attention-heads 16\n"})
    [finding] = [f for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL004"]
    assert finding["location"]["row"] == 3
    assert finding["message"] == ("--num-layers is given twice with different values (32 at line 2, then 80); "
                                  "argparse keeps the last one silently")
    assert finding["related"][0]["note"] == "--num-layers = 32 (first)"

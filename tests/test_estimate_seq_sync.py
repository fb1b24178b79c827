"""A recipe whose model and dataset seq_length differ runs at the length its tree's launcher keeps.

Megatron Bridge's ConfigContainer.validate asserts the two equal for its canonical dataset configs; its training
launcher (scripts/training) sets the model's to the dataset's before training, for any recipe of the packages it
loads. offlint reads that from the launcher's code (AST only): a function under `scripts/` writing one section's
seq_length from the other's, called from an entry script, applies to a recipe in a package the launcher names.
Without such a launcher both lengths are estimated and a verdict is given only where both agree. The fixtures are
our own, in the shape Bridge writes recipes and launchers."""

from __future__ import annotations

import textwrap

import pytest

from offlint.estimate import oom
from offlint.estimate.inputs import launcher_sync, read_inputs
from offlint.units import load_unit
from tests.estimate_helpers import write_recipe_tree

TOKENIZER_UTILS = "DEFAULT_NULL_TOKENIZER_VOCAB_SIZE: int = 32000\n"

COMMON = textwrap.dedent('''
    from megatron.bridge.training.config import ConfigContainer, GPTDatasetConfig, TrainingConfig
    from megatron.bridge.training.tokenizers.config import TokenizerConfig


    def _pretrain_common() -> ConfigContainer:
        return ConfigContainer(
            model=None,
            train=TrainingConfig(global_batch_size=16, micro_batch_size=1),
            dataset=GPTDatasetConfig(seq_length=4096, split="98,1,1"),
            tokenizer=TokenizerConfig(tokenizer_type="NullTokenizer", vocab_size=32000,
                                      use_tokenizer_vocab_size=False),
        )
''')

RECIPES = textwrap.dedent('''
    from megatron.bridge.models.gpt_provider import GPTModelProvider
    from megatron.bridge.recipes.common import _pretrain_common


    def long_context_pretrain_2gpu_config():
        cfg = _pretrain_common()
        cfg.model = GPTModelProvider(num_layers=8, hidden_size=2048, num_attention_heads=16, seq_length=65536,
                                     vocab_size=32000, tensor_model_parallel_size=2,
                                     pipeline_model_parallel_size=1)
        cfg.dataset.seq_length = 2048
        return cfg


    def matching_pretrain_2gpu_config():
        cfg = _pretrain_common()
        cfg.model = GPTModelProvider(num_layers=8, hidden_size=2048, num_attention_heads=16, seq_length=2048,
                                     vocab_size=32000, tensor_model_parallel_size=2,
                                     pipeline_model_parallel_size=1)
        cfg.dataset.seq_length = 2048
        return cfg
''')

# A runner module and an entry script, as a training launcher lays them out: the runner loads recipes from
# named packages and aligns the lengths; the entry script calls it before handing the config to training.
RUNNER = textwrap.dedent('''
    import importlib

    LIBRARY = "megatron.bridge.recipes"


    def load(name):
        return getattr(importlib.import_module(LIBRARY), name)()


    def align_lengths(cfg):
        """Keep the model's length equal to what the data loader yields."""
        if cfg.dataset is None:
            return cfg
        tokens = getattr(cfg.dataset, "seq_length", None)
        if tokens is None:
            tokens = getattr(cfg.dataset, "sequence_length", None)
        if tokens is not None and cfg.model.seq_length != tokens:
            cfg.model.seq_length = tokens
        return cfg
''')

ENTRY = textwrap.dedent('''
    import sys

    from runner import align_lengths, load


    def main(argv):
        cfg = load(argv[1])
        cfg = align_lengths(cfg)
        print(cfg)


    if __name__ == "__main__":
        main(sys.argv)
''')

NAME = "long_context_pretrain_2gpu_config"


def _tree(root, monkeypatch, files: dict[str, str]) -> str:
    monkeypatch.chdir(root)
    path = write_recipe_tree(root, TOKENIZER_UTILS, COMMON, "long_context", RECIPES)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return path


def _inputs(path: str, name: str = NAME):
    loaded = load_unit(path, name, mcore_version="0.20.0")
    return read_inputs(loaded.resolved.get, name), loaded


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_a_launcher_that_sets_the_model_to_the_dataset_length_decides_the_estimate(tmp_path, monkeypatch):
    path = _tree(tmp_path, monkeypatch, {"scripts/training/runner.py": RUNNER, "scripts/training/train.py": ENTRY})
    inputs, loaded = _inputs(path)
    assert inputs.complete and inputs.model.seq_length == 2048
    assert inputs.other_seq_length is None
    assert len(oom.architectures(inputs)) == 1
    where = f"scripts/training/runner.py:{_line_of(RUNNER, 'cfg.model.seq_length = tokens')}"
    note = inputs.assumed["model.seq_length"]
    assert where in note and "align_lengths" in note and "scripts/training/train.py" in note
    assert "65536" in note and "2048" in note
    sync = launcher_sync(loaded.resolved.get)
    assert (sync.keeps, sync.where, sync.function) == ("dataset", where, "align_lengths")
    matching, _ = _inputs(path, "matching_pretrain_2gpu_config")  # nothing to reconcile: no note
    assert matching.model.seq_length == 2048 and "model.seq_length" not in matching.assumed


def test_without_a_launcher_both_lengths_are_estimated(tmp_path, monkeypatch):
    inputs, loaded = _inputs(_tree(tmp_path, monkeypatch, {}))
    assert inputs.model.seq_length == 65536 and inputs.other_seq_length == ("dataset.seq_length", 2048)
    assert [v.model.seq_length for v in oom.architectures(inputs)] == [2048, 65536]
    assert launcher_sync(loaded.resolved.get) is None and "model.seq_length" not in inputs.assumed


@pytest.mark.parametrize("files, why", [
    ({"scripts/training/runner.py": RUNNER}, "no entry script calls the sync"),
    ({"scripts/training/runner.py": RUNNER.replace("megatron.bridge.recipes", "other_project.recipes"),
      "scripts/training/train.py": ENTRY}, "the launcher loads recipes of another package"),
    ({"scripts/training/runner.py": RUNNER.replace("cfg.model.seq_length = tokens", "cfg.model.seq_length = 1024")
      .replace("tokens = getattr", "tokens = len"), "scripts/training/train.py": ENTRY},
     "the launcher writes the model's length from something else"),
    ({"tools/runner.py": RUNNER, "tools/train.py": ENTRY}, "the launcher is not under scripts/"),
])
def test_what_is_not_a_launcher_sync_leaves_both_lengths(tmp_path, monkeypatch, files, why):
    inputs, _ = _inputs(_tree(tmp_path, monkeypatch, files))
    assert inputs.other_seq_length == ("dataset.seq_length", 2048), why
    assert inputs.model.seq_length == 65536, why


def test_a_launcher_that_rebuilds_the_dataset_from_the_model_keeps_the_models(tmp_path, monkeypatch):
    runner = textwrap.dedent('''
        LIBRARY = "megatron.bridge.recipes"


        def follow_model(recipe):
            wanted = recipe.model.seq_length
            recipe.dataset.seq_length = wanted
            return recipe
    ''')
    entry = ENTRY.replace("align_lengths", "follow_model")
    inputs, _ = _inputs(_tree(tmp_path, monkeypatch, {"scripts/run/runner.py": runner, "scripts/run/go.py": entry}))
    assert inputs.model.seq_length == 65536 and inputs.other_seq_length is None
    assert "the model's 65536 tokens" in inputs.assumed["model.seq_length"]


def test_launchers_that_disagree_leave_both_lengths(tmp_path, monkeypatch):
    other = textwrap.dedent('''
        import sys

        LIBRARY = "megatron.bridge.recipes"


        def follow_model(recipe):
            recipe.dataset.seq_length = recipe.model.seq_length
            return recipe


        if __name__ == "__main__":
            follow_model(sys.argv)
    ''')
    files = {"scripts/training/runner.py": RUNNER, "scripts/training/train.py": ENTRY, "scripts/bench/run.py": other}
    inputs, loaded = _inputs(_tree(tmp_path, monkeypatch, files))
    assert inputs.other_seq_length == ("dataset.seq_length", 2048) and inputs.model.seq_length == 65536
    assert launcher_sync(loaded.resolved.get) is None


def test_a_launcher_file_that_does_not_parse_is_skipped(tmp_path, monkeypatch):
    files = {"scripts/training/runner.py": RUNNER, "scripts/training/train.py": ENTRY,
             "scripts/training/broken.py": "def align(cfg):\n    cfg.model.seq_length = (\n",
             "scripts/training/odd.py": "if __name__ == '__main__':\n    align_lengths(\n"}
    inputs, _ = _inputs(_tree(tmp_path, monkeypatch, files))
    assert inputs.model.seq_length == 2048 and inputs.other_seq_length is None

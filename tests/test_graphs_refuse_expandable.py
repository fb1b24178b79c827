"""Megatron-LM's validate_args up to 0.15 (and main until 2b343d739f, 2025-12-31, whose package_info already said
0.16.0) asserts that PYTORCH_CUDA_ALLOC_CONF holds no expandable_segments:True whenever CUDA graphs are on, whatever
NCCL_GRAPH_REGISTER says ("expandable_segments:True may not be safe when using CUDA Graphs with some specific
parallel settings"); 0.16 allows it with NCCL_GRAPH_REGISTER=0. OFL301's advice (and its fix, which adds both
variables) would stop such a launch at its start. Read from the text of the tree's checkout, whatever its label says
(a helper's probe, session 63: a main snapshot labelled 0.16.0 refuses it). Fixtures of our own (check_json checks
with 0.20.0, the checkouts' label, so that they are read)."""

from __future__ import annotations

import pytest

from tests.check_helpers import check_json, write_tree

REFUSING = '''
import os


def validate_args(args, defaults={}):
    if args.cuda_graph_impl != "none":
        assert "expandable_segments:True" not in os.getenv("PYTORCH_CUDA_ALLOC_CONF", ""), (
            "expandable_segments:True may not be safe when using CUDA Graphs with some specific parallel settings. "
            "The training may crash with illegal memory access."
        )
'''
ALLOWING = '''
import os


def validate_args(args, defaults={}):
    if args.cuda_graph_impl == "transformer_engine":
        assert (
            "expandable_segments:True" not in os.getenv("PYTORCH_CUDA_ALLOC_CONF", "")
            or os.getenv("NCCL_GRAPH_REGISTER", "") == "0"
        ), (
            "Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using "
            "CUDA Graph with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
        )
'''
TRAINER = "from megatron.training import pretrain\n\nif __name__ == '__main__':\n    pretrain(None, None, None, None)\n"
LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 "
          "--micro-batch-size 1 --train-iters 10 {graphs}\n")


def _ofl301(tmp_path, arguments: str | None, graphs: str, version: str = "0.20.0") -> list[str]:
    files = {"train.sh": LAUNCH.format(graphs=graphs), "pretrain_gpt.py": TRAINER}
    if arguments is not None:
        major, minor, patch = version.split(".")
        files.update({"megatron/core/package_info.py": f"MAJOR = {major}\nMINOR = {minor}\nPATCH = {patch}\n",
                      "megatron/core/transformer/transformer_config.py": "class TransformerConfig:\n    pass\n",
                      "megatron/training/__init__.py": "", "megatron/training/arguments.py": arguments})
    write_tree(tmp_path, files)
    (tmp_path / ".git").mkdir()
    return [f["message"].split(";")[0] for f in check_json(tmp_path, "--no-cache") if f["code"] == "OFL301"]


@pytest.mark.parametrize("graphs", ["--cuda-graph-impl transformer_engine", "--cuda-graph-impl local",
                                    "--external-cuda-graph"])
def test_a_checkout_refusing_expandable_segments_beside_graphs_gets_no_such_advice(tmp_path, graphs):
    assert _ofl301(tmp_path, REFUSING, graphs) == []


def test_a_checkout_allowing_it_with_nccl_graph_register_is_advised(tmp_path):
    assert len(_ofl301(tmp_path, ALLOWING, "--cuda-graph-impl transformer_engine")) == 1


def test_without_graphs_the_refusal_does_not_matter(tmp_path):
    assert len(_ofl301(tmp_path, REFUSING, "")) == 1


def test_without_a_checkout_a_release_allows_it(tmp_path):
    """Every release offlint has rules for (0.16 on) takes expandable_segments:True beside graphs with
    NCCL_GRAPH_REGISTER=0."""
    assert len(_ofl301(tmp_path, None, "--cuda-graph-impl transformer_engine")) == 1

"""An `if` test that compares a value with a literal fixes that value on the branch it guards (python_branches.
narrowings): Bridge's dump_perf_configs.py turns the precision-aware optimizer on only under
`if precision == "bf16" and cfg.optimizer.optimizer == "adam"`, so on that path the optimizer is Adam and OFL116's
"only supported with adam" cannot happen. Fixtures of our own in that shape."""

from __future__ import annotations

import ast
import textwrap

from offlint.api import CheckOptions, check
from offlint.sources.python_branches import narrowings

RECIPE = textwrap.dedent('''
    from megatron.bridge.models import GPTModelProvider
    from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig


    def llama_pretrain_config(precision: str = "bf16") -> ConfigContainer:
        cfg = ConfigContainer(model=GPTModelProvider(num_layers=16), optimizer=make_optimizer(),
                              ddp=DistributedDataParallelConfig(use_distributed_optimizer=True))
        if precision == "bf16" and cfg.optimizer.optimizer {test}:
            cfg.optimizer.use_precision_aware_optimizer = True
        return cfg
''')


def _adam_findings(tmp_path, test: str):
    (tmp_path / "recipe.py").write_text(RECIPE.format(test=test))
    result = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False, select=["OFL116"]))
    return [f for f in result.findings if "only supported with adam" in f.message]


def test_equality_with_a_literal_fixes_the_value_on_its_branch(tmp_path):
    assert _adam_findings(tmp_path, '== "adam"') == []
    assert _adam_findings(tmp_path, 'in ("adam",)') == []


def test_getattr_with_a_literal_name_is_the_attribute_it_reads(tmp_path):
    # Bridge's run_recipe.py: `optimizer = getattr(recipe, "optimizer", None)`, then
    # `if ... and getattr(optimizer, "optimizer", None) == "adam": optimizer.use_precision_aware_optimizer = True`
    aliased = RECIPE.replace('    if precision == "bf16" and cfg.optimizer.optimizer {test}:\n'
                             '        cfg.optimizer.use_precision_aware_optimizer = True\n',
                             '    optimizer = getattr(cfg, "optimizer", None)\n'
                             '    if precision == "bf16" and getattr(optimizer, "optimizer", None) {test}:\n'
                             '        optimizer.use_precision_aware_optimizer = True\n')
    assert aliased != RECIPE
    (tmp_path / "recipe.py").write_text(aliased.format(test='== "adam"'))
    result = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False, select=["OFL116"]))
    assert [f for f in result.findings if "only supported with adam" in f.message] == []
    (tmp_path / "recipe.py").write_text(aliased.format(test='!= "sgd"'))
    result = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False, select=["OFL116"]))
    assert [f for f in result.findings if "only supported with adam" in f.message]


def test_a_test_that_does_not_fix_the_value_leaves_it_unknown(tmp_path):
    # `!=` says nothing about which optimizer runs on the branch: still a "possible" finding
    assert _adam_findings(tmp_path, '!= "sgd"')


def test_narrowings_reads_conjuncts_of_the_forms_it_knows():
    def facts(source):
        return [(ast.unparse(t), lit.value) for t, lit in narrowings(ast.parse(source, mode="eval").body)]

    assert facts('p == "bf16" and cfg.optimizer.optimizer == "adam"') == [("p", "bf16"),
                                                                           ("cfg.optimizer.optimizer", "adam")]
    assert facts('"adam" == x') == [("x", "adam")]
    assert facts("x is True") == [("x", True)]
    assert facts('x in ("a",)') == [("x", "a")]
    assert facts('x in ("a", "b")') == [] and facts("x or y == 1") == [] and facts("x < 3") == []
    assert facts('getattr(cfg.optimizer, "optimizer", None) == "adam"') == [("cfg.optimizer.optimizer", "adam")]
    assert facts('getattr(o, "optimizer") is None') == [("o.optimizer", None)]
    assert facts('getattr(o, name) == "adam"') == [] and facts('getattr(o, "not a name") == 1') == []
    assert facts('o.get("optimizer") == "adam"') == []


def test_hasattr_of_a_field_of_the_sections_class_is_true_whatever_built_it(tmp_path):
    """A benchmark guards its writes with `if hasattr(m, "cuda_graph_impl"):` on a provider built by code offlint
    cannot see (a helper's sweep): every model provider is a TransformerConfig, so the branch is taken, and full
    recompute beside the local graphs it turns on is refused (OFL225), on every path, not only "where hasattr(...)
    is true"."""
    (tmp_path / "recipe.py").write_text(textwrap.dedent('''
        from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
        from site_models import make_provider


        def build_config():
            cfg = ConfigContainer(model=make_provider(), optimizer=OptimizerConfig(),
                                  ddp=DistributedDataParallelConfig())
            m = cfg.model
            if hasattr(m, "cuda_graph_impl"):
                m.cuda_graph_impl = "local"
                m.cuda_graph_scope = ["attn"]
            m.recompute_granularity = "full"
            return cfg
    '''))
    result = check([str(tmp_path)], CheckOptions(strict=True, root=tmp_path, cache=False, select=["OFL225"],
                                                 mcore_version="0.16.1"))
    assert [(f.code, f.possible) for f in result.findings] == [("OFL225", False)]
    assert "on the path where" not in result.findings[0].message  # (the branch is no condition: it is taken)

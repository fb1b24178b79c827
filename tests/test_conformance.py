"""offlint's verdict equals megatron-core's, on random configurations rendered in every source form.

For each megatron-core found (the installed package, and each Megatron-LM or megatron-core source tree in
OFFLINT_MCORE_SRC, os.pathsep-separated), hypothesis generates configurations over the keys of rules.md; each
is rendered as a Python recipe, a YAML override file, a Hydra command line and Megatron-LM flags (where the
CLI can express it), read back through offlint's own sources and resolver, and judged by offlint's rules.
megatron-core judges the same values (TransformerConfig, OptimizerConfig, and get_megatron_optimizer's
checks before it needs a GPU). They must agree: megatron-core accepts => no construction-stage rule fires;
megatron-core raises an error a rule mirrors => that rule fires. Values must also read back unchanged.
Seeded (derandomized) and reproducible; OFFLINT_CONFORMANCE_EXAMPLES sets the count (default 2000).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import (compare, configs, describe, ep_overlap_configs, fine_grained_graph_configs,
                         graph_recompute_configs, optimizer_dtype_configs, version_of)
from offlint.rules import load_rules
from offlint.validate import Environment, MegatronCore, environments

pytestmark = pytest.mark.slow  # the fast lane (`pytest -m "not slow"`) leaves this module out

EXAMPLES = int(os.environ.get("OFFLINT_CONFORMANCE_EXAMPLES", "2000"))
REPO = Path(__file__).resolve().parent.parent
# The installed megatron-core, OFFLINT_MCORE_SRC trees, and sdists unpacked by scripts/fetch_mcore_sdist.py.
ENVIRONMENTS = environments() + [Environment(sys.executable, str(tree))
                                 for tree in sorted((REPO / ".mcore").glob("megatron_core-*"))
                                 if (tree / "megatron" / "core").is_dir()]
SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck),
                print_blob=False)

needs_mcore = pytest.mark.skipif(not ENVIRONMENTS, reason="megatron-core is not installed and OFFLINT_MCORE_SRC is "
                                                          "not set (see README: conformance)")


@pytest.fixture(scope="module", params=ENVIRONMENTS or [None], ids=lambda e: e.describe() if e else "none")
def mcore(request):
    if request.param is None:
        pytest.skip("megatron-core is not installed and OFFLINT_MCORE_SRC is not set")
    with MegatronCore(request.param) as probe:
        yield probe


@needs_mcore
def test_offlint_agrees_with_megatron_core(mcore):
    rules = load_rules()
    outcomes: Counter = Counter()

    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(st.data())
    def agree(data):
        config = data.draw(configs(mcore.version))
        result = compare(config, mcore, rules)
        outcomes[result.outcome] += 1
        assert not result.problems, f"megatron-core {mcore.version_text}: {describe(config)}\n" + "\n".join(
            result.problems)

    agree()
    total = sum(outcomes.values())
    print(f"\nmegatron-core {mcore.version_text} ({mcore.environment.describe()}): {total} configurations, "
          f"{dict(outcomes)}, 0 disagreements")
    assert total >= EXAMPLES * 0.9
    assert outcomes["accepted"] + outcomes["rejected"] >= total * 0.6  # most configurations are comparable


def _agree_on(mcore, generator, codes: set[str]) -> tuple[Counter, Counter]:
    """Run `generator`'s configurations (a quarter of EXAMPLES, at least 300) through `compare` in every form, with
    no disagreement allowed: the outcomes, and (rule, the start of megatron-core's error) for each refusal one of
    `codes` mirrors."""
    rules = load_rules()
    outcomes: Counter = Counter()
    refused: Counter = Counter()

    @settings(max_examples=max(EXAMPLES // 4, 300), **SETTINGS)
    @given(st.data())
    def agree(data):
        config = data.draw(generator(mcore.version))
        result = compare(config, mcore, rules)
        outcomes[result.outcome] += 1
        for code in result.expected & codes:
            refused[(code, result.error.split(" when ")[0][:60])] += 1
        assert not result.problems, f"megatron-core {mcore.version_text}: {describe(config)}\n" + "\n".join(
            result.problems)

    agree()
    print(f"\nmegatron-core {mcore.version_text}: {dict(outcomes)}; refusals mirrored: {dict(refused)}")
    return outcomes, refused


@needs_mcore
def test_ep_overlap_agrees_with_megatron_core(mcore):
    """The same comparison over MoE configurations with expert-parallel overlap and no offloading (OFL224: what
    megatron-core asserts beside the overlap differs by release), in every form."""
    outcomes, refused = _agree_on(mcore, ep_overlap_configs, {"OFL224"})
    assert outcomes["accepted"] >= sum(outcomes.values()) * 0.1  # overlap runs megatron-core accepts: no finding
    assert len(refused) >= 6  # most of the overlap block's asserts are reached


@needs_mcore
def test_graph_recompute_agrees_with_megatron_core(mcore):
    """The same comparison over recompute beside CUDA graphs (OFL225, OFL226: the recomputed modules a graph
    covers, with dropout and input jitter), in every form."""
    outcomes, refused = _agree_on(mcore, graph_recompute_configs, {"OFL225", "OFL226"})
    assert outcomes["accepted"] >= sum(outcomes.values()) * 0.1
    assert len({error for code, error in refused if code == "OFL226"}) >= 3  # dropout, hidden dropout, jitter...


@needs_mcore
def test_fine_grained_graphs_agree_with_megatron_core(mcore):
    """The same comparison over fine-grained activation offloading beside CUDA graphs (OFL121: what the graph block
    asserts from 0.18, and from 0.19 of local graphs), in every form. Before 0.18 megatron-core accepts them all."""
    outcomes, refused = _agree_on(mcore, fine_grained_graph_configs, {"OFL121"})
    assert outcomes["accepted"] >= sum(outcomes.values()) * 0.1
    if mcore.version >= version_of("0.19"):
        assert len(refused) >= 5  # local modules, whole layers, the implementation, graphed MoE, warm-up, in-flight
    elif mcore.version < version_of("0.18"):
        assert not refused


@needs_mcore
def test_optimizer_dtypes_agree_with_megatron_core(mcore):
    """The same comparison over the optimizer's dtypes with the precision-aware optimizer on or off (OFL122: each
    must be fp32 without it, OC-8), in every form."""
    outcomes, refused = _agree_on(mcore, optimizer_dtype_configs, {"OFL122"})
    assert outcomes["accepted"] >= sum(outcomes.values()) * 0.1
    assert len(refused) == 4  # main_grads_dtype, main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype


@needs_mcore
def test_a_deliberately_broken_rule_is_caught(mcore):
    """OFL102 with its comparison inverted (PP <= 1 instead of > 1), in memory: the suite must notice."""
    rules = dict(load_rules())
    broken = rules["OFL102"]
    check = broken.checks[0]
    rules["OFL102"] = replace(broken, checks=(replace(check, condition=check.condition.replace("> 1", "<= 1")),))
    assert rules["OFL102"].checks[0].condition != check.condition
    caught = []

    @settings(max_examples=300, **SETTINGS)
    @given(st.data())
    def run(data):
        result = compare(data.draw(configs(mcore.version)), mcore, rules, forms=("python",))
        caught.extend(p for p in result.problems if "OFL102" in p)

    run()
    assert caught, "an inverted OFL102 went unnoticed"


@needs_mcore
def test_rule_examples_agree_with_megatron_core(mcore):
    """Every rule example's values, built with megatron-core: its verdict equals offlint's, in every form."""
    from offlint.resolve import resolve
    from offlint.sources import read_source
    from offlint.types import Unknown

    rules = load_rules()
    kinds = {"python": ("recipe.py", "python"), "yaml": ("o.yaml", "yaml"), "hydra": ("l.sh", "shell"),
             "mlm": ("l.sh", "shell"), "shell": ("l.sh", "shell")}
    outcomes: Counter = Counter()
    problems = []
    for rule in rules.values():
        if rule.scope != "unit":
            continue
        for example in rule.examples:
            path, kind = kinds.get(example.form, (None, None))
            if path is None or example.files:
                continue  # (an example with files of its tree is judged by that tree: OFL120's checkout, OFL223's Bridge)
            for unit in read_source(path, kind, example.code):
                resolved = resolve(unit, mcore.version)
                config = {k: a.value for k, a in resolved.values.items()
                          if k.split(".", 1)[0] in ("model", "optimizer") and "." in k}
                if not config or any(isinstance(v, Unknown) for v in config.values()):
                    outcomes["not fully known"] += 1
                    continue
                config.setdefault("model.num_layers", 4)  # what the probe builds with when a unit does not say
                result = compare(config, mcore, rules, forms=("python", "yaml", "hydra"))
                outcomes[result.outcome] += 1
                problems.extend(f"{rule.code} {example.form} example: {p}" for p in result.problems)
    print(f"\nrule examples on megatron-core {mcore.version_text}: {dict(outcomes)}")
    assert outcomes["accepted"] + outcomes["rejected"] >= 50
    assert not problems, "\n".join(problems[:20])

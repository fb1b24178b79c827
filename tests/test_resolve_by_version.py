"""resolve: a ByVersion value acts as its choice for the unit's version, and a version it leaves alone keeps the
earlier layer's value (resolve tests ByVersion inline before calling for_version: the same answers)."""

from __future__ import annotations

from offlint.resolve import for_version, resolve
from offlint.types import ABSENT, Assignment, ByVersion, Layer, Location, Source, Unit, UnitKind
from offlint.versions import parse_version


def _unit() -> Unit:
    recipe = [Assignment("model.cuda_graph_scope", "attn", Location("recipe.py", 2, 5), Source.PYTHON),
              Assignment("model.cuda_graph_modules", ["attn"], Location("recipe.py", 3, 5), Source.PYTHON)]
    mutated = ByVersion((("<0.18", "full"), (">=0.18", ABSENT)))
    helper = [Assignment("model.cuda_graph_scope", mutated, Location("helper.py", 7, 5), Source.PYTHON),
              Assignment("model.cuda_graph_modules", ByVersion(((">=0.18", ["mlp"]), ("<0.18", ABSENT))),
                         Location("helper.py", 8, 5), Source.PYTHON),
              Assignment("model.num_layers", 4, Location("helper.py", 9, 5), Source.PYTHON)]
    return Unit("r", UnitKind.RECIPE, Location("recipe.py", 1, 1),
                layers=[Layer("recipe", recipe), Layer("helper", helper)], default_sections=frozenset({"model"}))


def test_a_by_version_value_is_its_versions_choice_or_leaves_the_key():
    unit = _unit()
    for version, scope, modules in (("0.16.1", "full", ["attn"]), ("0.20.0", "attn", ["mlp"])):
        resolved = resolve(unit, parse_version(version))
        got = resolved.get("model.cuda_graph_scope"), resolved.get("model.cuda_graph_modules")
        assert [v.value for v in got] == [scope, modules]
        assert [v.assignment.location.path for v in got] == (["helper.py", "recipe.py"] if version == "0.16.1"
                                                             else ["recipe.py", "helper.py"])
        # the same winners as for_version on each assignment in order
        expected = {}
        for layer in unit.layers:
            for a in layer.assignments:
                a = for_version(a, parse_version(version))
                if a is not None:
                    expected[a.key] = a
        assert resolved.values == expected

"""The reader's fast constructors of frozen dataclasses (python_values.new_assignment, with_via, new_location) build
exactly what the dataclasses' own constructors build."""

import copy
import dataclasses
import pickle

from offlint.sources.python_values import new_assignment, new_location, with_via
from offlint.types import Assignment, Location, Source, Unknown


def _same(made, built) -> None:
    assert type(made) is type(built)
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert list(vars(made).items()) == list(vars(built).items())  # the fields, in the dataclass's order
    assert pickle.dumps(made) == pickle.dumps(built)
    assert copy.deepcopy(made) == built


def test_new_location_is_a_location():
    _same(new_location("recipes/a.py", 3, 7), Location("recipes/a.py", 3, 7))
    assert new_location("a.py", 1, 2) < Location("a.py", 1, 3)  # ordered as the dataclass orders


def test_new_assignment_is_an_assignment():
    where = Location("a.py", 2, 5)
    _same(new_assignment("model.x", 4, where, Source.PYTHON, "4", ("via f()",)),
          Assignment("model.x", 4, where, Source.PYTHON, "4", ("via f()",)))
    _same(new_assignment("env.A", Unknown("why"), where, Source.ENV),
          Assignment("env.A", Unknown("why"), where, Source.ENV))
    _same(new_assignment("model.y", None, where, Source.PYTHON, "", (), "delete"),
          Assignment("model.y", None, where, Source.PYTHON, "", (), "delete"))


def test_with_via_is_replace():
    a = Assignment("model.x", (1, 2), Location("a.py", 2, 5), Source.PYTHON, "(1, 2)", ("one",), "add")
    _same(with_via(a, ("outer", *a.via)), dataclasses.replace(a, via=("outer", *a.via)))
    _same(with_via(a, ()), dataclasses.replace(a, via=()))
    assert a.via == ("one",)  # the original is not changed


def test_the_dataclasses_stay_plain():
    """The fast constructors fill the instance's dict: that needs these to stay frozen dataclasses without slots or
    __post_init__, with these fields in this order."""
    for cls, names in ((Assignment, ["key", "value", "location", "source", "text", "via", "op"]),
                       (Location, ["path", "line", "col"])):
        assert [f.name for f in dataclasses.fields(cls)] == names
        assert cls.__dataclass_params__.frozen and not hasattr(cls, "__slots__")
        assert not hasattr(cls, "__post_init__")

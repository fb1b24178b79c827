"""`_Opt.NAME` where the module's plain class binds NAME to a literal: round 5 of the recall study kept a recipe's
optimizer name so in Megatron Bridge's llama3.py (`class _Opt: NAME = "sgd"`, then `cfg.optimizer.optimizer =
_Opt.NAME` beside the precision-aware optimizer), and the whole-tree check said nothing (the file checked alone did).
An Enum's member, a class with bases or decorators, and a name the module assigns again are no such constant."""

from __future__ import annotations

import ast

import pytest

from offlint.sources.python_expressions import _class_constants

MODULE = '''
import enum


class _Opt:
    NAME = "sgd"
    LAYERS: int = 4
    SIZES = (1, 2)
    TABLE = {"a": 1}
    TWICE = 1
    TWICE = 2


class _Kind(enum.Enum):
    NAME = "sgd"


@register
class _Decorated:
    NAME = "sgd"


class _Moved(object):
    NAME = "sgd"


_Moved.NAME = "adam"
'''


def test_the_literals_a_plain_class_binds_once():
    constants = _class_constants(ast.parse(MODULE), "_Opt")
    assert constants == {"NAME": "sgd", "LAYERS": 4, "SIZES": (1, 2)}  # (a dict may be changed in place)


@pytest.mark.parametrize("cls", ["_Kind", "_Decorated", "_Moved", "_Missing"])
def test_no_constant_where_the_value_may_be_another(cls):
    assert _class_constants(ast.parse(MODULE), cls) == {}

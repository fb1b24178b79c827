"""The Python reader's per-node shortcuts (issue 19) give what the plain computation gives: what a call's syntax
alone rules out (python_call_effects._call_kinds), a chain of `if` tests' leaves sorted out once (_input_flags), one
look-up of an imported name for both a dataclass and a function, a default read without a frame of the constants,
a config object's copy, and the memos of a branch body's writes and a comprehension's nesting. Each against the
plain code it replaces, kept here as the reference. Fixtures of our own."""

from __future__ import annotations

import ast

import pytest

from offlint.sources import python_inputs
from offlint.sources.hf_models import HFModel
from offlint.sources.python_calls import NOT_PURE
from offlint.sources.python_call_effects import _NOT_SPECIAL, _call_kinds
from offlint.sources.python_project import PythonProject
from offlint.sources.python_statements import Statements, _writes_through
from offlint.sources.python_syntax import _attr_chain, _call_name, _statements
from offlint.sources.python_values import ConfigObj, Frame, ObjectTuple, Record
from offlint.types import Assignment, Location, Source, Unknown, UserInput

CALLS = '''\
import argparse
import importlib
import logging
from typing import cast

from lib.things import Settings, helper
from megatron.bridge.models import AutoBridge
from megatron.bridge.training.pretrain import pretrain
from megatron.core.optimizer import get_megatron_optimizer
from transformers import AutoConfig

logger = logging.getLogger(__name__)
NAMES = {"a": 1}


def calls(cfg, x, parser):
    cast(int, x)
    parser.parse_args()
    parser.parse_known_args()
    len("abc")
    "a-b".split("-")
    NAMES.get("a")
    x.get("a")
    getattr(x, "y", 1)
    hasattr(cfg, "model")
    isinstance(x, str)
    logger.info("hi")
    print("x")
    AutoBridge.from_hf_pretrained("meta-llama/Llama-3.2-1B")
    AutoBridge.from_hf_pretrained()
    AutoConfig.from_pretrained("meta-llama/Llama-3.2-1B")
    AutoBridge.from_hf_config(AutoConfig.from_pretrained("meta-llama/Llama-3.2-1B"))
    AutoBridge.from_hf_pretrained("meta-llama/Llama-3.2-1B").to_megatron_provider()
    x.get_model_config()
    ConfigContainer(model=GPTModelProvider(), optimizer=None)
    GPTModelProvider(num_layers=2)
    OptimizerConfig(lr=1.0)
    TransformerConfig(num_layers=2)
    set_cuda_graph_modules(cfg, ["attn"])
    cfg.env_vars.update({"A": "1"})
    x.update({"A": "1"})
    replace(Settings(), a=2)
    dataclasses.replace(Settings(), a=3)
    pretrain(cfg)
    importlib.import_module("configs.x")
    get_megatron_optimizer(cfg)
    helper(cfg)
    x.y.z(1)
    NAMES["a"]()
    (lambda: 1)()
    f"{x}".upper()
'''

THINGS = '''\
from dataclasses import dataclass


@dataclass
class Settings:
    a: int = 1


def helper(cfg):
    cfg.model.num_layers = 4
'''


def _reader(texts: dict[str, str], path: str):
    project = PythonProject(sorted(texts), texts.get)
    return project, project.reader(path)


def _call_frame() -> Frame:
    cfg = ConfigObj("container", "default")
    return Frame(names={"cfg": cfg, "x": Unknown("x"), "parser": Unknown("parser")}, depth=1)


def test_what_a_calls_syntax_rules_out_never_applies_to_it():
    """A call _call_kinds rules out as pure or logging is NOT_PURE by _pure_call, one it rules out as special is
    none of _special_call's, one it rules out as early is neither `cast` nor a parser's; and the fixture holds calls
    of each kind that do apply (a classification too narrow for one of them fails here)."""
    project, reader = _reader({"r.py": CALLS, "lib/things.py": THINGS}, "r.py")
    with project.tracking():
        fn = reader.functions.quietly("calls")
        found = {"early": 0, "pure": 0, "special": 0}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            name, short, early, maybe_pure, special = _call_kinds(node)
            assert (name, short) == (_call_name(node.func), _call_name(node.func).rsplit(".", 1)[-1])
            is_early = (short == "cast" and len(node.args) == 2) or python_inputs.is_parse_call(node)
            assert early == is_early, ast.unparse(node)
            found["early"] += early
            pure = reader._pure_call(node, _call_frame())
            if not maybe_pure:
                assert pure is NOT_PURE, ast.unparse(node)
            found["pure"] += pure is not NOT_PURE
            done = reader._special_call(node, _call_frame(), name, short)
            if not special:
                assert done is _NOT_SPECIAL, ast.unparse(node)
            found["special"] += done is not _NOT_SPECIAL
    assert found["early"] == 3 and found["pure"] >= 7 and found["special"] >= 12, found


def test_a_call_reads_as_before_through_the_reader():
    project, reader = _reader({"r.py": CALLS, "lib/things.py": THINGS}, "r.py")
    with project.tracking():
        fn = reader.functions.quietly("calls")
        values = [reader._eval(stmt.value, _call_frame()) for stmt in fn.body]
    kinds = [type(v).__name__ for v in values]
    assert kinds[:3] == ["Unknown", "UserInput", "ObjectTuple"]  # cast(int, x) is x; the parser's namespace
    assert values[3] == 3 and values[4] == ["a", "b"]  # a pure builtin, a literal's method
    assert isinstance(values[12], HFModel) and isinstance(values[14], HFModel)
    assert isinstance(values[18], ConfigObj) and values[18].kind == "container"
    assert [values[i].section for i in (19, 20, 21)] == ["model", "optimizer", "model"]
    assert isinstance(values[25], Record) and values[25].fields["a"] == 2
    assert isinstance(values[26], Record) and values[26].fields["a"] == 3
    assert values[27] == Unknown("`pretrain(...)` runs training")


def _leaves_last_first(test: ast.expr) -> list[ast.expr]:
    """A test's leaves (not constants), its last operand's first, depth first: the order the reader reads them."""
    if isinstance(test, ast.BoolOp):
        return [leaf for value in reversed(test.values) for leaf in _leaves_last_first(value)]
    if isinstance(test, ast.UnaryOp):
        return _leaves_last_first(test.operand)
    if isinstance(test, ast.Compare):
        return [leaf for part in reversed([test.left, *test.comparators]) for leaf in _leaves_last_first(part)]
    return [] if isinstance(test, ast.Constant) else [test]


def _input_flags_reference(reader, node: ast.If, frame: Frame) -> tuple[str, ...]:
    """_input_flags as it was before its leaves were sorted out once per statement."""
    flags: list[str] = []
    tests = [node.test]
    while len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        node = node.orelse[0]
        tests.append(node.test)
    for leaf in [leaf for test in reversed(tests) for leaf in _leaves_last_first(test)]:
        if isinstance(leaf, ast.Call) and _call_name(leaf.func) == "getattr" and len(leaf.args) >= 2 and \
                isinstance(leaf.args[1], ast.Constant) and isinstance(leaf.args[1].value, str):
            namespace = reader._eval(leaf.args[0], frame)
            value = python_inputs.attribute(namespace, leaf.args[1].value, reader._segment(leaf)) \
                if isinstance(namespace, UserInput) and not namespace.flags else Unknown("")
        elif isinstance(leaf, (ast.Name, ast.Attribute)):
            value = reader._eval(leaf, frame)
        else:
            return ()
        if isinstance(value, UserInput) and value.flags:
            flags.extend(value.flags)
        elif isinstance(value, (Unknown, ConfigObj, Record, HFModel, ObjectTuple)):
            return ()
    return tuple(dict.fromkeys(flags))


FLAGS = '''\
import argparse


def helper():
    return 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-ol", "--offload_layers", type=int, default=0)
    parser.add_argument("--fp8", action="store_true")
    args = parser.parse_args()
    cfg = ConfigContainer(model=GPTModelProvider())
    if args.offload_layers > 0:
        cfg.model.cpu_offloading = True
    if args.fp8 and getattr(args, "offload_layers", 0):
        cfg.model.fp8 = "hybrid"
    elif not args.fp8:
        cfg.model.fp8 = None
    elif getattr(args, "fp8"):
        cfg.model.fp8 = "e4m3"
    if args.fp8 and helper():
        cfg.model.num_layers = 2
    if helper() and args.fp8:
        cfg.model.num_layers = 3
    if args.fp8 or unknown_name:
        cfg.model.num_layers = 4
    if getattr(cfg, "fp8", None) and args.fp8:
        cfg.model.num_layers = 5
    if args.fp8 and 1 < 2:
        cfg.model.num_layers = 6
    for _ in range(2):
        if args.offload_layers:
            cfg.model.num_layers = 7
    return cfg
'''


def test_the_flags_an_if_chain_tests_are_those_of_its_leaves_read_each_time(monkeypatch):
    original = Statements._input_flags
    seen = []

    def checked(self, node, frame):
        got = original(self, node, frame)
        assert got == _input_flags_reference(self, node, frame), ast.unparse(node.test)
        seen.append(got)
        return got

    monkeypatch.setattr(Statements, "_input_flags", checked)
    project, reader = _reader({"r.py": FLAGS}, "r.py")
    with project.tracking():
        reader.units()
        reader._function_unit("main", reader.functions.quietly("main"))  # the loop's `if` asked again: its memo
    assert ("-ol/--offload_layers",) in seen and ("--fp8", "-ol/--offload_layers") in seen and () in seen
    assert len(seen) >= 16


DEFINITIONS = {
    "pkg/__init__.py": "from pkg.defs import Settings, build as build_alias\n",
    "pkg/defs.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass Settings:\n    a: int = 1\n\n\n"
                   "def build():\n    return 1\n\n\nVALUE = 3\n",
    "r.py": "import pkg\nimport pkg.defs as defs\nfrom nowhere import ghost\nfrom pkg import Settings, build_alias\n"
            "from pkg.defs import VALUE, build\n\n\ndef build_alias():\n    return 2\n\n\n@dataclass\nclass Local:\n"
            "    b: int = 2\n",
}


def _named(found):
    return None if found is None else (found[0].path, found[1].name)


@pytest.mark.parametrize("name", ["Settings", "build_alias", "build", "VALUE", "defs", "defs.build",
                                  "pkg.defs.build", "ghost", "missing", "pkg", "Local", "pkg.Settings"])
def test_one_look_up_of_a_called_name_finds_what_the_two_found(name):
    project, reader = _reader(DEFINITIONS, "r.py")
    with project.tracking() as used:
        dataclass, function = reader._called_definition(name)
    project, reader = _reader(DEFINITIONS, "r.py")
    with project.tracking() as expected_used:
        expected_dataclass = reader._find_dataclass(name)
        expected_function = reader._find_function(name, quiet=True) if expected_dataclass is None else None
    assert (_named(dataclass), _named(function)) == (_named(expected_dataclass), _named(expected_function))
    assert used == expected_used


DEFAULTS = '''\
from pkg.defs import VALUE
from nowhere import ghost

LOCAL = 7


def f(a=1, b=b"x", c=LOCAL, d=VALUE, e=ghost, g=missing, h=LOCAL + 1, i=[LOCAL, VALUE], j=None):
    return a
'''


def test_a_default_reads_as_it_does_in_a_frame_of_the_constants():
    texts = {**DEFINITIONS, "d.py": DEFAULTS}
    project, reader = _reader(texts, "d.py")
    args = reader.functions.quietly("f").args
    for node in args.defaults:
        with project.tracking() as used:
            got = reader._eval_default(node)
        with project.tracking() as expected_used:
            expected = reader._eval(node, Frame(names=dict(reader.constants)))
        assert type(got) is type(expected) and got == expected, ast.unparse(node)
        assert used == expected_used


def _copy_reference(obj: ConfigObj) -> ConfigObj:
    other = ConfigObj(obj.kind, obj.base, obj.section)
    other.values = dict(obj.values)
    other.children = {k: _copy_reference(v) for k, v in obj.children.items()}
    other.env = dict(obj.env) if obj.env is not None else None
    other.env_unknown = obj.env_unknown
    other.env_location = obj.env_location
    other.top = dict(obj.top)
    other.origin = obj.origin
    return other


def _state(obj: ConfigObj) -> dict:
    return {k: ({n: _state(c) for n, c in v.items()} if k == "children" else v)
            for k, v in vars(obj).items() if k != "serial"}


@pytest.mark.parametrize("env", [None, "set"])
def test_a_config_objects_copy_is_the_one_its_constructor_made(env):
    where = Location("r.py", 3, 5)
    obj = ConfigObj("container", Unknown("base"))
    obj.origin, obj.env_unknown, obj.env_location = "bridge", "why", where
    obj.child("model").values["num_layers"] = Assignment("model.num_layers", 2, where, Source.PYTHON, "2")
    obj.child("optimizer").base = "default"
    obj.top["peft"] = Assignment("peft", None, where, Source.PYTHON, "None")
    if env:
        obj.env = {"A": Assignment("env.A", "1", where, Source.ENV, "'1'")}
    expected = _copy_reference(obj)
    copy = obj.copy()
    assert list(vars(copy)) == list(vars(expected))  # the same attributes, in the same order
    assert _state(copy) == _state(expected)
    # new dicts and section objects, the same assignments; serials newer than the original's, the copy's first
    assert copy.values is not obj.values and copy.top is not obj.top and copy.children["model"] is not \
        obj.children["model"] and copy.children["model"].values["num_layers"] is obj.children["model"].values[
            "num_layers"]
    assert (copy.env is None) == (env is None) and (env is None or copy.env is not obj.env)
    assert obj.serial < copy.serial < copy.children["model"].serial < copy.children["optimizer"].serial


BODIES = '''\
def f(cfg, other, fast):
    if fast:
        cfg.model.num_layers = 2
    else:
        other.x = 1
        [y for y in [0, 1]]
        [[z for z in y] for y in [[1]]]
'''


def test_a_branch_bodys_writes_are_its_own_for_each_name():
    project, reader = _reader({"r.py": BODIES}, "r.py")
    branch = reader.functions.quietly("f").body[0]
    for _ in range(2):  # asked again: the memo's answers
        for body in (branch.body, branch.orelse, []):
            for root in ("cfg", "other", "fast", "y"):
                assert reader._writes_through(body, root) == _writes_through(body, root)


def test_a_comprehensions_nesting_is_its_own():
    project, reader = _reader({"r.py": BODIES}, "r.py")
    flat, nested = (stmt.value for stmt in reader.functions.quietly("f").body[0].orelse[1:])
    for _ in range(2):
        assert reader._eval(flat, Frame()) == [0, 1]
        assert isinstance(reader._eval(nested, Frame()), Unknown)


@pytest.mark.parametrize("text", ["x = (1, 2)\ny = 3\n", "é = 'ü'; x = 1\ny = 2\n", "s = 'a'  # ü\nt = 1\n"])
def test_a_location_column_counts_characters_whatever_the_text(text):
    project, reader = _reader({"r.py": text}, "r.py")
    for node in ast.walk(reader.module):
        if isinstance(node, (ast.expr, ast.stmt)):
            assert reader._loc(node) == Location("r.py", node.lineno, reader._column(node.lineno, node.col_offset))
            line = text.splitlines()[node.lineno - 1]
            assert reader._loc(node).col == len(line.encode()[:node.col_offset].decode()) + 1


def test_an_attribute_chain_is_the_names_it_reads():
    for source, expected in [("a", ["a"]), ("a.b.c", ["a", "b", "c"]), ("f().b", None), ("a[0].b", None),
                             ("'s'.upper", None)]:
        chain = _attr_chain(ast.parse(source, mode="eval").body)
        assert chain == expected, source


BLOCKS = '''\
import os
if a:
    x = 1
elif b:
    for i in y:
        while c:
            pass
        else:
            z = 2
else:
    with open(p) as f:
        try:
            import sys
        except ValueError:
            w = 3
        else:
            v = 4
        finally:
            u = 5
match m:
    case 1:
        async def g():
            async for j in k:
                async with l:
                    t = 6
    case _:
        class C:
            s = 7
try:
    r = 8
except* OSError:
    q = 9
'''


def _statements_reference(body):
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from _statements_reference(inner)


def test_the_statements_of_a_block_are_those_every_block_field_holds():
    body = ast.parse(BLOCKS).body
    for _ in range(2):  # the second time with each class's fields known
        assert list(_statements(body)) == list(_statements_reference(body))
    assert len(list(_statements(body))) == 28

"""bridge_schedule's memos (sources/bridge_schedule.py): a class's own verdict is one walk that gives what the two walks
it replaces gave (kept here as the reference), and both memos (a class's verdict, a function's own nodes) are kept per
node for the project's life, so trees with the same texts in two places are judged each on its own. Fixtures of our
own."""

from __future__ import annotations

import ast

import pytest

from offlint.sources import bridge_schedule
from offlint.sources.bridge_schedule import ProviderClasses
from offlint.sources.python_project import PythonProject
from offlint.types import Unknown


def _reference(cls: ast.ClassDef):
    """The two walks of model_verdict before its memo (the class's own part, bases aside)."""
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "build_schedule_plan":
            return ""
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "build_schedule_plan"
                                                for t in node.targets):
            return ""
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__getattr__", "module"):
            return f"{cls.name} defines {node.name}"
        if isinstance(node, ast.Attribute) and node.attr == "module" and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"{cls.name} sets self.module"
        if isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "module"
                                              for a in node.args[:2]):
            return f"{cls.name} may register a submodule named module"
    return None


CLASSES = [
    "class M:\n    def forward(self, x):\n        return x\n",
    "class M:\n    def __getattr__(self, name):\n        pass\n    def build_schedule_plan(self):\n        pass\n",
    "class M:\n    def __init__(self):\n        self.module = None\n    build_schedule_plan = make_plan\n",
    "class M:\n    def __init__(self):\n        self.add_module('module', m)\n        self.module = m\n",
    "class M:\n    def __init__(self):\n        self.module = m\n        setattr(self, 'module', m)\n",
    "class M:\n    def module(self):\n        pass\n    def __getattr__(self, n):\n        pass\n",
    "class M:\n    class Inner:\n        def __getattr__(self, n):\n            pass\n    async def module(self):\n"
    "        pass\n",
    "class M:\n    def f(self):\n        x = self.module\n        g(1, 'module')\n",
    "class M:\n    def f(self):\n        async def build_schedule_plan():\n            pass\n        self.module = 1\n",
]


@pytest.mark.parametrize("text", CLASSES)
def test_a_class_verdict_is_what_the_two_walks_gave(text):
    cls = ast.parse(text).body[0]
    classes = ProviderClasses(PythonProject([], {}.get))
    assert classes._class_verdict(cls) == _reference(cls)
    assert classes._class_verdict(cls) == _reference(cls)  # from the memo


MODEL_WITHOUT = "from megatron.core.transformer.module import MegatronModule\n\n\nclass M(MegatronModule):\n    pass\n"
MODEL_WITH = MODEL_WITHOUT.replace("    pass\n", "    def build_schedule_plan(self):\n        pass\n")
MODEL_UNKNOWN = MODEL_WITHOUT.replace("    pass\n", "    def __getattr__(self, name):\n        pass\n")
PROVIDER = "from .model import M\n\n\nclass P:\n    def provide(self):\n        model = M(self)\n        return model\n"


def test_the_memos_are_per_node_same_texts_elsewhere_are_judged_on_their_own():
    # a/, b/ and c/ hold the same provider text; their model classes share a name and a base, and differ in what
    # they define (b's the plan, c's __getattr__, a's neither)
    texts = {"a/prov.py": PROVIDER, "a/model.py": MODEL_WITHOUT, "b/prov.py": PROVIDER, "b/model.py": MODEL_WITH,
             "c/prov.py": PROVIDER, "c/model.py": MODEL_UNKNOWN}
    project = PythonProject(sorted(texts), texts.get)
    with project.tracking():
        first = {path: bridge_schedule.provider_model(project, path, "P") for path in ("a/prov.py", "b/prov.py")}
    assert first["b/prov.py"] == ""
    assert first["a/prov.py"].startswith("P.provide (a/prov.py:5) builds M (a/model.py:4, a subclass of")
    kept = dict(project.node_memo)
    assert {key[0] for key in kept} == {"own", "class", "top-names"}  # top-names: a module's classes and imports
    # the memo is the project's: c/ adds its own function and class (and its two modules' top-level names), a/'s and
    # b/'s entries are reused as they are
    with project.tracking():
        third = bridge_schedule.provider_model(project, "c/prov.py", "P")
    assert third == Unknown("M defines __getattr__")
    assert len(project.node_memo) == len(kept) + 4 and all(project.node_memo[k] is v for k, v in kept.items())
    # a fresh ProviderClasses of the same project answers from the memo: a/'s class as before
    classes = ProviderClasses(project)
    cls = project.parsed("a/model.py").body[1]
    assert classes._class_verdict(cls) is None
    assert classes.model_verdict(("tree", "a/model.py", cls)) == first["a/prov.py"].split(" builds ", 1)[1]
    assert classes.model_verdict(("tree", "b/model.py", project.parsed("b/model.py").body[1])) == ""


def test_find_by_the_modules_index_finds_what_two_scans_in_order_found():
    """`find` looks a name up in an index of the module's top-level classes and `from` imports, made once per module;
    a scan of the statements in order, classes first, is the reference: the first class of the name wins over any
    import, and the first import over later ones, `if`/`try` bodies included."""
    from offlint.sources.python_syntax import top_level_statements

    text = ("from .a import A, B as Bee\n"
            "try:\n    from .c import C\nexcept ImportError:\n    class C:\n        pass\n"
            "if HAVE_X:\n    from .x import D\nelse:\n    from .y import D\n"
            "class A:\n    pass\n"
            "class A:\n    x = 1\n"
            "from .z import E, A\n")
    module = ast.parse(text)
    classes = ProviderClasses(PythonProject(["m.py"], {"m.py": text}.get))
    found_classes, found_imports = classes._top_names(module)
    for name in ("A", "Bee", "B", "C", "D", "E", "F"):
        reference = next((n for n in top_level_statements(module.body)
                          if isinstance(n, ast.ClassDef) and n.name == name), None)
        if reference is None:
            reference = next(((n, a) for n in top_level_statements(module.body) if isinstance(n, ast.ImportFrom)
                              for a in n.names if (a.asname or a.name) == name), None)
            assert found_imports.get(name) == reference and name not in found_classes
        else:
            assert found_classes[name] is reference
    assert found_classes["A"].lineno == 11 and found_imports["D"][0].module == "x"
    assert classes._top_names(module) is classes._top_names(module)  # kept for the module

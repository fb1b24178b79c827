"""Whether the model a Megatron Bridge provider builds can give megatron-core a schedule plan, read from the linted
tree's own classes (never imported or run).

With `overlap_moe_expert_parallel_comm`, megatron-core's training schedules send every forward through the combined
1F1B path (Megatron-LM 2a75ac12, Bridge 067f987's pin: `schedules.py:760` without a pipeline, `:1467` interleaved,
its warm-up forwards included, `:1604`; a pipeline without virtual stages is refused, `transformer_config.py:
2766-2770`). That path asks the model for `build_schedule_plan` (`combined_1f1b.py:381-383`) through
`get_attr_wrapped_model`, which walks the wrappers' `.module` (DDP, Float16Module, Megatron-FSDP: none defines the
method or forwards attributes) and raises "_get_attr_wrapped_model couldn't find attribute build_schedule_plan"
(`utils.py:698-700`) when no level has it. In megatron-core only GPTModel defines it (`gpt_model.py:804`; 0.19.2
`:798`, Megatron-LM d98e8a6 `:843`).

What is read: the provider class's `provide` (its own, else the first in-tree base's), the classes it returns
(`return Cls(...)`, or a name bound to `Cls(...)`, `model_class = self.ATTR or Cls` with the class attribute read
from the provider), and for each such class whether it or a base defines `build_schedule_plan`. Classes outside
the tree are judged only by the short list below; anything else (a `__getattr__`, a `.module` of its own, a base
or a returned value offlint cannot name) leaves the verdict unknown.
"""

from __future__ import annotations

import ast

from offlint.scope import nearest
from offlint.sources.python_syntax import top_level_statements
from offlint.sources.bridge_models import ParsedModules
from offlint.types import Unknown

KEY = "model.built_model_class"  # not a field: what the reader notes about the provider (rule OFL219)
# megatron-core classes, by name (0.19.2, Megatron-LM 2a75ac12 and d98e8a6 alike): the one that defines
# build_schedule_plan (models/gpt/gpt_model.py), and bases that define neither it, `module` nor `__getattr__`
# (transformer/module.py, models/common/language_module, models/hybrid, models/mamba, models/multimodal/llava_model.py,
# models/mimo/model/base.py, models/vision, models/T5, models/bert).
MCORE_WITH_PLAN = frozenset({"GPTModel"})
MCORE_WITHOUT_PLAN = frozenset({"MegatronModule", "GraphableMegatronModule", "LanguageModule", "HybridModel",
                                "MambaModel", "LLaVAModel", "MimoModel", "VisionModule", "T5Model", "BertModel"})
_MAX_DEPTH = 8


def provider_model(project, path: str, name: str) -> str | Unknown:
    """For the provider class `name` as the file `path` names it: "" when the model its `provide` builds defines
    build_schedule_plan, a description of that model class when it does not, else an Unknown."""
    if project is None:
        return Unknown("the provider's source is not read")
    return project.call_result(("bridge-schedule-provider", path, name),
                               lambda: ProviderClasses(project).provider_verdict(path, name))


def bridge_provider_model(project, architecture: str, importer: str) -> str | Unknown:
    """The same for the provider that the tree's bridge registered for a Hugging Face architecture builds
    (AutoBridge...to_megatron_provider())."""
    bridge = registered_bridge(project, architecture, importer)
    if isinstance(bridge, Unknown):
        return bridge
    return project.call_result(("bridge-schedule-bridge", *bridge),
                               lambda: ProviderClasses(project).bridge_verdict(*bridge))


def bridge_config_model(project, architecture: str, importer: str) -> str | Unknown:
    """The same for the model the builder of the model config that the tree's bridge for a Hugging Face architecture
    converts to builds (AutoBridge...get_model_config(): a ModelConfig whose `builder` names the class whose
    build_model makes the model)."""
    bridge = registered_bridge(project, architecture, importer)
    if isinstance(bridge, Unknown):
        return bridge
    return project.call_result(("bridge-schedule-config", *bridge),
                               lambda: ProviderClasses(project).config_verdict(*bridge))


def registered_bridge(project, architecture: str, importer: str) -> tuple[str, str] | Unknown:
    """(path, class name) of the model bridge the tree registers for a Hugging Face architecture, the registration
    nearest `importer`; an Unknown when there is none or more than one."""
    if project is None or not architecture:
        return Unknown("no model bridge is read")
    from offlint.sources.bridge_models import _registrations

    found = project.call_result(("bridge-registrations", architecture), lambda: _registrations(project, architecture))
    paths = nearest(sorted({p for p, _ in found}), importer)
    classes = [c for p, c in found if paths and p == paths[0]]
    if len(paths) != 1 or len(classes) != 1:
        return Unknown(f"no single model bridge for {architecture} in the tree")
    return paths[0], classes[0]


class ProviderClasses(ParsedModules):
    """A provider's or bridge's model class and whether it can build a schedule plan, read class by class; the
    provider class a bridge builds (bridge_finalize reads its finalize())."""

    def __init__(self, project):
        super().__init__(project)
        # What this module worked out from one syntax node alone (a function's own nodes, a class's own verdict),
        # kept for the project's life (a ProviderClasses is made per provider and bridge asked about, and many share a
        # provide() or a model class): key -> (node, value), the node kept so that its id stays its own.
        memo = getattr(project, "node_memo", None)
        self.memo: dict = memo if isinstance(memo, dict) else {}

    def _own(self, function: ast.FunctionDef, kind: type) -> list:
        """The nodes of class `kind` (ast.Return, ast.Assign, ast.ImportFrom: classes without subclasses) among
        `_own_nodes(function)`, in its order, grouped once per function (Bridge 067f987: 292 walks of 50
        functions' 80,000 nodes in a cold check)."""
        held = self.memo.get(("own", id(function)))
        if held is None or held[0] is not function:
            groups: dict[type, list] = {}
            for node in _own_nodes(function):
                groups.setdefault(type(node), []).append(node)
            held = self.memo[("own", id(function))] = (function, groups)
        return held[1].get(kind, [])

    # ---- names -> classes -------------------------------------------------------------------------------------

    def find(self, path: str, name: str, depth: int = 0):
        """("tree", path, ClassDef) or ("external", module, name) for the class `name` as `path` sees it
        (through imports and re-exports); None when offlint cannot name it."""
        module = self.module(path)
        if module is None or depth > 12:
            return None
        classes, imports = self._top_names(module)
        if name in classes:
            return "tree", path, classes[name]
        if name in imports:
            node, alias = imports[name]
            dotted = self._absolute(path, node)
            target = self.project.path_of(dotted, path)
            if target is None:
                return "external", dotted, alias.name
            return self.find(target, alias.name, depth + 1)
        return None

    def _top_names(self, module: ast.Module) -> tuple[dict, dict]:
        """({name: the first top-level ClassDef of that name}, {name: (the first top-level ImportFrom binding it, its
        alias)}), `if`/`try` bodies included, indexed once per module (`find` is asked thousands of times a cold
        check, for the bases of every provider and bridge class)."""
        held = self.memo.get(("top-names", id(module)))
        if held is None or held[0] is not module:
            classes: dict[str, ast.ClassDef] = {}
            imports: dict[str, tuple[ast.ImportFrom, ast.alias]] = {}
            for node in top_level_statements(module.body):
                if isinstance(node, ast.ClassDef):
                    classes.setdefault(node.name, node)
                elif isinstance(node, ast.ImportFrom):
                    for alias in node.names:
                        imports.setdefault(alias.asname or alias.name, (node, alias))
            held = self.memo[("top-names", id(module))] = (module, (classes, imports))
        return held[1]

    def find_in(self, path: str, function: ast.FunctionDef | None, name: str):
        """`find`, with the imports inside `function` first (`from ...gpt_provider import GPTModelProvider`)."""
        for node in self._own(function, ast.ImportFrom) if function is not None else ():
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    dotted = self._absolute(path, node)
                    target = self.project.path_of(dotted, path)
                    return ("external", dotted, alias.name) if target is None else self.find(target, alias.name)
        return self.find(path, name)

    def _absolute(self, path: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.project.module_name(path).split(".")
        package = parts if self.project.is_package(path) else parts[:-1]
        package = package[:len(package) - (node.level - 1)] if node.level > 1 else package
        return ".".join([*package, *([node.module] if node.module else [])])

    def expression(self, path: str, node: ast.expr):
        if isinstance(node, ast.Subscript):  # Generic[T], ModelProviderMixin[GPTModel]
            node = node.value
        if isinstance(node, ast.Name):
            return self.find(path, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # nn.Module, torch.nn.Module
            return "external", node.value.id, node.attr
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            return "external", ast.unparse(node.value), node.attr
        return None

    # ---- model classes ----------------------------------------------------------------------------------------

    def model_verdict(self, found, depth: int = 0) -> str | Unknown:
        """"" when the class (or a base) defines build_schedule_plan; its description when it does not."""
        if found is None or depth > _MAX_DEPTH:
            return Unknown("a model class offlint cannot name")
        if found[0] == "external":
            _, module, name = found
            if module.startswith("megatron.core") and name in MCORE_WITH_PLAN:
                return ""
            if (module.startswith("megatron.core") and name in MCORE_WITHOUT_PLAN) or \
                    (module in ("torch.nn", "nn", "torch") and name == "Module"):
                return f"megatron-core's {name}" if module.startswith("megatron.core") else "torch.nn.Module"
            return Unknown(f"{module}.{name} is not in the tree")
        _, path, cls = found
        own = self._class_verdict(cls)
        if own is not None:
            return own if own == "" else Unknown(own)
        bases = [b for b in cls.bases if not (isinstance(b, ast.Name) and b.id == "object")]
        verdicts = [self.model_verdict(self.expression(path, base), depth + 1) for base in bases]
        if any(v == "" for v in verdicts):
            return ""
        unknown = next((v for v in verdicts if isinstance(v, Unknown)), None)
        if unknown is not None:
            return unknown
        kinds = ", ".join(ast.unparse(b) for b in bases) or "object"
        return f"{cls.name} ({path}:{cls.lineno}, a subclass of {kinds})"

    def _class_verdict(self, cls: ast.ClassDef) -> str | None:
        """What the class's own nodes say, bases aside: "" when it defines build_schedule_plan (anywhere in it), else
        why its verdict is unknown (its first node in `ast.walk` order that defines `__getattr__` or `module`, sets
        self.module or may register a submodule named module), else None. One walk, once per class: the same as a
        walk for the method, then another for the first such node (Bridge 067f987: 26 verdicts of 19 classes, 96,000
        nodes walked, in a cold check)."""
        held = self.memo.get(("class", id(cls)))
        if held is not None and held[0] is cls:
            return held[1]
        verdict = None
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.name == "build_schedule_plan":
                    verdict = ""
                    break
                if verdict is None and node.name in ("__getattr__", "module"):
                    verdict = f"{cls.name} defines {node.name}"
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == "build_schedule_plan" for t in node.targets):
                    verdict = ""
                    break
            elif verdict is None:
                if isinstance(node, ast.Attribute) and node.attr == "module" and isinstance(node.ctx, ast.Store) and \
                        isinstance(node.value, ast.Name) and node.value.id == "self":
                    verdict = f"{cls.name} sets self.module"
                elif isinstance(node, ast.Call) and any(isinstance(a, ast.Constant) and a.value == "module"
                                                        for a in node.args[:2]):  # add_module("module", m), setattr
                    verdict = f"{cls.name} may register a submodule named module"
        self.memo[("class", id(cls))] = (cls, verdict)
        return verdict

    # ---- providers --------------------------------------------------------------------------------------------

    def provider_verdict(self, path: str, name: str) -> str | Unknown:
        found = self.find(path, name)
        if found is None or found[0] != "tree":
            return Unknown(f"the source of {name} is not in the tree")
        return self._built_by(found, "provide")

    def _built_by(self, found, method_name: str) -> str | Unknown:
        """The verdict on the model the class `found`'s method `method_name` returns (its body's instances; where
        the body returns what offlint cannot follow, such as `super().build_model(...)`, the class its return
        annotation names)."""
        name = found[2].name
        method = self._method(found, method_name, 0)
        if method is None:
            return Unknown(f"{name} defines no {method_name}() offlint can read")
        owner, (_, mpath, _), function = method
        classes = self._returned_classes(found, mpath, function)
        if isinstance(classes, Unknown) and function.returns is not None:
            annotated = self.expression(mpath, function.returns)
            classes = [annotated] if annotated is not None else classes
        if isinstance(classes, Unknown):
            return classes
        verdicts = {self.model_verdict(c) if not isinstance(c, Unknown) else c for c in classes}
        if len(verdicts) != 1:
            return Unknown(f"{name}.{method_name} returns models of different kinds")
        verdict = verdicts.pop()
        if isinstance(verdict, Unknown) or verdict == "":
            return verdict
        return f"{owner}.{method_name} ({mpath}:{function.lineno}) builds {verdict}"

    def config_verdict(self, path: str, name: str) -> str | Unknown:
        """For the bridge `name`: the model its model config's builder builds. The config is what its
        `model_config_bridge` returns where the bridge overrides it (a method of another class than the one that
        converts Hugging Face configs), else what `hf_config_to_model_config` returns: `self.MODEL_CONFIG_CLASS(...)`
        in Bridge; the builder is the class the config's `builder` names (a dotted path); the model, what that
        builder's build_model returns."""
        found = self.find(path, name)
        if found is None or found[0] != "tree":
            return Unknown(f"the bridge {name} is not in the tree")
        override = self._method(found, "model_config_bridge", 0)
        convert = self._method(found, "hf_config_to_model_config", 0)
        method = override if override is not None and (convert is None or override[0] != convert[0]) else convert
        if method is None:
            return Unknown(f"{name} converts to no model config offlint can read")
        _, (_, mpath, _), function = method
        classes = self._returned_classes(found, mpath, function)
        if isinstance(classes, Unknown):
            return classes
        if len(classes) != 1 or classes[0] is None or classes[0][0] != "tree":
            return Unknown(f"the model config {name} converts to")
        held = self._class_attribute(classes[0], "builder")
        if held is None or not (isinstance(held[1], ast.Constant) and isinstance(held[1].value, str)):
            return Unknown(f"the builder of {classes[0][2].name}")
        module, _, builder = held[1].value.rpartition(".")
        target = self.project.path_of(module, held[0]) if module else None
        found_builder = self.find(target, builder) if target else None
        if found_builder is None or found_builder[0] != "tree":
            return Unknown(f"the builder {held[1].value} is not in the tree")
        return self._built_by(found_builder, "build_model")

    def _method(self, found, method: str, depth: int):
        """(class name, the class found, FunctionDef) of `method` on the class or its first in-tree base."""
        if found is None or found[0] != "tree" or depth > _MAX_DEPTH:
            return None
        _, path, cls = found
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == method:
                return cls.name, found, node
        for base in cls.bases:
            got = self._method(self.expression(path, base), method, depth + 1)
            if got is not None:
                return got
        return None

    def _class_attribute(self, found, attr: str, depth: int = 0):
        """The node a class (or an in-tree base) assigns to a class attribute, or None when none does."""
        if found is None or found[0] != "tree" or depth > _MAX_DEPTH:
            return None
        _, path, cls = found
        for node in cls.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) and node.value is not None else []
            if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                return path, node.value
        for base in cls.bases:
            got = self._class_attribute(self.expression(path, base), attr, depth + 1)
            if got is not None:
                return got
        return None

    def _returned_classes(self, provider, path: str, function: ast.FunctionDef):
        """The classes `function` returns instances of, or an Unknown."""
        returns = self._own(function, ast.Return)
        if not returns:
            return Unknown(f"{function.name} returns nothing offlint can read")
        out = []
        for node in returns:
            calls = [node.value] if isinstance(node.value, ast.Call) else self._bound_calls(function, node.value)
            if calls is None:
                return Unknown(f"what {function.name} returns at {path}:{node.lineno}")
            for call in calls:
                got = self._callee(provider, path, function, call.func)
                if isinstance(got, Unknown):
                    return got
                out.append(got)
        return out

    def _bound_calls(self, function: ast.FunctionDef, value) -> list[ast.Call] | None:
        if not isinstance(value, ast.Name):
            return None
        bound = [n.value for n in self._own(function, ast.Assign)
                 if any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        return bound if bound and all(isinstance(b, ast.Call) for b in bound) else None

    def _callee(self, provider, path: str, function: ast.FunctionDef, func: ast.expr):
        """The class a call in `provide` instantiates: `Cls(...)`, or a local bound to `self.ATTR or Cls`."""
        if isinstance(func, ast.Name):
            bound = [n.value for n in self._own(function, ast.Assign)
                     if any(isinstance(t, ast.Name) and t.id == func.id for t in n.targets)]
            if len(bound) > 1:
                return Unknown(f"{func.id} is bound more than once in {function.name}")
            if bound:
                return self._class_value(provider, path, bound[0], function)
            found = self.find_in(path, function, func.id)
            return found if found is not None else Unknown(f"{func.id} is not a class offlint can name")
        return self._class_value(provider, path, func, function)

    def _class_value(self, provider, path: str, node: ast.expr, function=None):
        if isinstance(node, ast.Name):
            found = self.find_in(path, function, node.id)
            return found if found is not None else Unknown(f"{node.id} is not a class offlint can name")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            held = self._class_attribute(provider, node.attr)
            if held is None:
                return Unknown(f"self.{node.attr} is not a class attribute offlint can read")
            if isinstance(held[1], ast.Constant) and held[1].value is None:
                return None
            return self._class_value(provider, held[0], held[1])
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # self.MODEL_CLASS or Qwen3VLModel
            for value in node.values:
                got = self._class_value(provider, path, value, function)
                if got is not None:
                    return got
            return Unknown("every alternative is None")
        return Unknown(f"`{ast.unparse(node)}` is not a class offlint can name")

    # ---- model bridges ----------------------------------------------------------------------------------------

    def bridge_verdict(self, path: str, name: str) -> str | Unknown:
        """The provider the bridge's provider_bridge builds (its own, else an in-tree base's, following
        `super().provider_bridge(...)`): a class it names, or `self.PROVIDER_CLASS`, which
        `register_bridge(provider=...)` sets (model_bridge.py create_bridge_decorator), else the class attribute."""
        provider = self.bridge_provider_class(path, name)
        return provider if isinstance(provider, Unknown) else self.provider_verdict(provider[1], provider[2].name)

    def bridge_provider_class(self, path: str, name: str):
        """("tree", path, ClassDef) of the provider class the bridge `name` builds, else an Unknown."""
        found = self.find(path, name)
        if found is None or found[0] != "tree":
            return Unknown(f"the bridge {name} is not in the tree")
        provider = self._bridge_provider(found, found, 0)
        if provider is None or isinstance(provider, Unknown):
            return provider if isinstance(provider, Unknown) else Unknown(f"the provider {name} builds")
        if provider[0] != "tree":
            return Unknown(f"the provider {provider[2]} is not in the tree")
        return provider

    def _registered(self, bridge):
        """What `self.PROVIDER_CLASS` is on the bridge: register_bridge's provider=, else the class attribute."""
        for decorator in bridge[2].decorator_list:
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if keyword.arg == "provider" and not (isinstance(keyword.value, ast.Constant) and
                                                          keyword.value.value is None):  # None: not set
                        return self._class_value(bridge, bridge[1], keyword.value)
        return self._class_value(bridge, bridge[1], ast.Attribute(ast.Name("self"), "PROVIDER_CLASS"))

    def _bridge_provider(self, bridge, start, depth: int):
        method = self._method(start, "provider_bridge", 0)
        if method is None or depth > _MAX_DEPTH:
            return Unknown(f"{bridge[2].name}.provider_bridge")
        _, owner, function = method
        returns = self._own(function, ast.Return)
        calls = [returns[0].value] if len(returns) == 1 and isinstance(returns[0].value, ast.Call) else \
            self._bound_calls(function, returns[0].value) if len(returns) == 1 else None
        if not calls or len(calls) != 1:
            return Unknown(f"what {owner[2].name}.provider_bridge returns")
        func = calls[0].func
        if isinstance(func, ast.Attribute) and func.attr == "provider_bridge" and isinstance(func.value, ast.Call) \
                and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            for base in owner[2].bases:
                got = self._bridge_provider(bridge, self.expression(owner[1], base), depth + 1)
                if not isinstance(got, Unknown):
                    return got
            return Unknown(f"the base of {owner[2].name}.provider_bridge")
        if isinstance(func, ast.Name):
            bound = [n.value for n in self._own(function, ast.Assign)
                     if any(isinstance(t, ast.Name) and t.id == func.id for t in n.targets)]
            if len(bound) > 1:
                return Unknown(f"{func.id} is bound more than once in provider_bridge")
            func = bound[0] if bound else func
        return self._provider_value(bridge, owner[1], func, function)

    def _provider_value(self, bridge, path: str, node: ast.expr, function=None):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and \
                node.attr == "PROVIDER_CLASS":
            return self._registered(bridge)
        if isinstance(node, ast.IfExp):  # self.PROVIDER_CLASS if self.PROVIDER_CLASS is not None else GPTModelProvider
            test = node.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) and \
                    isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
                held = self._provider_value(bridge, path, test.left, function)
                if isinstance(held, Unknown):
                    return held
                return self._provider_value(bridge, path, node.body if held is not None else node.orelse, function)
            return Unknown(f"`{ast.unparse(node)}`")
        if isinstance(node, ast.Name):
            found = self.find_in(path, function, node.id)
            return found if found is not None else Unknown(f"{node.id} is not a class offlint can name")
        return Unknown(f"`{ast.unparse(node)}` is not a provider class offlint can name")


def _own_nodes(function: ast.FunctionDef):
    """The nodes of a function's body, without those of functions or classes defined inside it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)

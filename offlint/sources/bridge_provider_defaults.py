"""The defaults of the provider class a Megatron Bridge model bridge builds (`AutoBridge.from_hf_pretrained(id)
.to_megatron_provider()`), read from the linted tree's own classes (never imported or run).

The bridge's `provider_bridge` calls the provider class (`Qwen3MoEModelProvider(...)`, or `self.PROVIDER_CLASS(**kw)`
with what it maps from the Hugging Face config), so every field it does not pass or set afterwards keeps the
class's dataclass default: Qwen3MoEModelProvider's `moe_token_dispatcher_type = "alltoall"`, not megatron-core's
"allgather" (Bridge f5506771c; offlint assumed megatron-core's and reported OFL224's dispatcher assert on six
performance units there). A recipe that builds the provider class itself gets the same defaults
(python_constructors._provider_defaults).

What is read: the provider class bridge_schedule finds the bridge builds, and its in-tree @dataclass bases up to
megatron-core's own classes (a 3rdparty/Megatron-LM checkout's TransformerConfig gives the release's defaults,
offlint's data already), the nearest class's declaration of a field winning, as in Python; only literal defaults
other than None (None is how Bridge's providers leave a field unset, which rules such as OFL213 ask about). A field any
module of the bridge's class chain spells (a name, attribute, keyword or string: what a mapping list, a keyword
argument or an assignment would need) may be set by the bridge from the Hugging Face config: it keeps what offlint
assumed before (the size table's value, the bridge's literal setting, or megatron-core's default), and so does a
field whose nearest declaration is not a literal.
"""

from __future__ import annotations

import ast

from offlint.sources.bridge_schedule import ProviderClasses, registered_bridge
from offlint.types import Unknown

_MAX_DEPTH = 8


def bridge_provider_defaults(project, architecture: str, importer: str) -> dict[str, tuple[object, str]]:
    """field -> (the provider class's literal default, where it is declared) for the provider the tree's bridge for
    a Hugging Face architecture builds, of the fields the bridge's code never names; {} when offlint cannot name
    the bridge or its provider."""
    bridge = registered_bridge(project, architecture, importer)
    if isinstance(bridge, Unknown):
        return {}
    return project.call_result(("bridge-provider-defaults", *bridge),
                               lambda: _ProviderDefaults(project).of_bridge(*bridge))


class _ProviderDefaults(ProviderClasses):
    def of_bridge(self, path: str, name: str) -> dict[str, tuple[object, str]]:
        provider = self.bridge_provider_class(path, name)
        bridge = self.find(path, name)
        if isinstance(provider, Unknown) or bridge is None:
            return {}
        spelled = self._spelled(bridge)
        out: dict[str, tuple[object, str]] = {}
        declared: set[str] = set()
        found, depth = provider, 0
        while found is not None and found[0] == "tree" and depth < _MAX_DEPTH and not is_megatron_core(found[1]):
            _, class_path, cls = found
            for node in cls.body:
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                field = node.target.id
                if field in declared:
                    continue  # a nearer class declares it
                declared.add(field)
                if field not in spelled and _literal(node.value) and node.value.value is not None:
                    out[field] = (node.value.value, f"the default of {cls.name}.{field} at {class_path}:{node.lineno}")
            found = next((f for f in (self.expression(class_path, base) for base in cls.bases)
                          if f is not None and f[0] == "tree"), None)
            depth += 1
        return out

    def _spelled(self, bridge) -> set[str]:
        """Every name the modules of the bridge's class and its in-tree bases spell."""
        words: set[str] = set()
        seen: set[str] = set()
        pending, depth = [bridge], 0
        while pending and depth < _MAX_DEPTH:
            _, path, cls = pending.pop()
            depth += 1
            if path not in seen:
                seen.add(path)
                module = self.module(path)
                words |= self._module_words(module) if module is not None else set()
            pending += [f for f in (self.expression(path, base) for base in cls.bases) if f is not None and
                        f[0] == "tree"]
        return words

    def _module_words(self, module: ast.Module) -> frozenset[str]:
        """`_words` of a module, once per project (bridges share their bases' modules: Bridge's model_bridge.py,
        118 KB, was walked again for each of the 72 bridges a cold check asked about)."""
        held = self.memo.get(("words", id(module)))
        if held is None or held[0] is not module:
            held = self.memo[("words", id(module))] = (module, _words(module))
        return held[1]


def is_megatron_core(path: str) -> bool:
    """A module of megatron-core itself (a checkout the tree holds, as Bridge's 3rdparty/Megatron-LM): its classes'
    defaults are the release's, which offlint's version data gives (and a unit's unset keys take)."""
    return "/megatron/core/" in "/" + path


def _words(module: ast.Module) -> frozenset[str]:
    """The names, attributes, keywords and string constants a module spells (a walk of its own: `ast.walk`'s
    generators took three times as long)."""
    out: set[str] = set()
    pending: list = [module]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.Name:
            out.add(node.id)
        elif kind is ast.Attribute:
            out.add(node.attr)
        elif kind is ast.keyword and node.arg:
            out.add(node.arg)
        elif kind is ast.Constant and type(node.value) is str:
            out.add(node.value)
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                pending.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                pending.append(value)
    return frozenset(out)


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str)))

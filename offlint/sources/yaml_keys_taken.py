"""The keys of a YAML override file that the entry script loading it takes out before Megatron Bridge reads it.

A launch passes `--config-file conf/x.yaml` to a script of the tree, which may load the file itself
(`yaml.safe_load`), pop keys of its own (`ckpt.pop("enabled", True)`, acting on them), and hand Bridge a stripped
copy: those keys are the script's, not misspelt Bridge fields (a Bridge fork's tutorial launcher; OFL003 had said
Bridge ignores them). Read with `ast` from the script's own module: the names bound to the loaded mapping and to
its sections, also as arguments of the module's functions, and the literal keys popped or deleted from them. Which
file the script loads is not traced: a script that loads YAML and pops a key is taken to strip its override file.
"""

from __future__ import annotations

import ast

from offlint.sources.python_syntax import _nodes

_LOADERS = frozenset({"safe_load", "load", "full_load", "unsafe_load"})  # yaml.<name>(stream)
_SECTION_METHODS = frozenset({"get", "setdefault", "pop"})  # mapping.<name>("key", ...) gives that key's section
_MAX_DEPTH = 4  # calls followed from the function that loads the file

Functions = dict[str, ast.FunctionDef | ast.AsyncFunctionDef]


def taken_keys(functions: Functions, top_level: list[ast.stmt]) -> frozenset[str]:
    """The dotted keys (`checkpoint.enabled`; a section taken whole is its name) the module's code pops or deletes
    from a mapping it loaded from YAML; `functions`: the module's functions by name, `top_level`: its other
    statements."""
    taken: set[str] = set()
    yaml_names = _yaml_module_names(top_level, functions)
    if not yaml_names:
        return frozenset()
    done: set[tuple[str, str, tuple[str, ...]]] = set()

    def run(body: list[ast.stmt], bound: dict[str, tuple[str, ...]], depth: int) -> None:
        nodes = list(_nodes(body))
        for _ in range(3):  # bindings in source order, and those made in a loop's later statements
            before = dict(bound)
            for node in nodes:
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    path = _section(node.value, bound, yaml_names)
                    for target in targets:
                        if isinstance(target, ast.Name) and path is not None:
                            bound.setdefault(target.id, path)
            if bound == before:
                break
        for node in nodes:
            # (`m.pop("k")` and `del m["k"]`: the section _section gives them is the key taken)
            if isinstance(node, ast.Call):
                func = node.func
                path = _section(node, bound, yaml_names) if isinstance(func, ast.Attribute) and func.attr == "pop" \
                    else None
                if path:
                    taken.add(".".join(path))
                if isinstance(func, ast.Name) and func.id in functions and depth < _MAX_DEPTH:
                    _follow(functions[func.id], node, bound, depth)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    path = _section(target, bound, yaml_names) if isinstance(target, ast.Subscript) else None
                    if path:
                        taken.add(".".join(path))

    def _follow(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, bound: dict, depth: int) -> None:
        params = [*fn.args.posonlyargs, *fn.args.args]
        given: dict[str, tuple[str, ...]] = {}
        for param, arg in zip(params, call.args):
            path = _section(arg, bound, yaml_names)
            if path is not None:
                given[param.arg] = path
        names = {p.arg for p in (*params, *fn.args.kwonlyargs)}
        for keyword in call.keywords:
            path = _section(keyword.value, bound, yaml_names) if keyword.arg in names else None
            if path is not None:
                given[keyword.arg] = path
        for name, path in given.items():
            if (fn.name, name, path) not in done:
                done.add((fn.name, name, path))
                run(fn.body, {name: path}, depth + 1)

    run(top_level, {}, 0)
    for fn in functions.values():
        run(fn.body, {}, 0)
    return frozenset(taken)


def loads_yaml(functions: Functions, top_level: list[ast.stmt]) -> bool:
    """Whether the module's code calls a PyYAML loader (`yaml.safe_load(f)`, ...): a script that does may read its
    override file itself and hand Bridge a copy PyYAML wrote, which keeps only the last of a key repeated in one
    mapping (OmegaConf.load, Bridge's reader, refuses such a file). Which file it loads is not traced."""
    yaml_names = _yaml_module_names(top_level, functions)
    return bool(yaml_names) and any(
        isinstance(node, ast.Call) and _section(node, {}, yaml_names) == ()
        for body in (top_level, *(fn.body for fn in functions.values())) for node in _nodes(body))


def _yaml_module_names(top_level: list[ast.stmt], functions: Functions) -> set[str]:
    """The names the module imports PyYAML as (`import yaml`, `import yaml as y`), at its top or in a function."""
    names: set[str] = set()
    for body in (top_level, *(fn.body for fn in functions.values())):
        for node in _nodes(body):
            if isinstance(node, ast.Import):
                names.update(alias.asname or alias.name for alias in node.names if alias.name == "yaml")
    return names


def _section(node: ast.expr, bound: dict[str, tuple[str, ...]], yaml_names: set[str]) -> tuple[str, ...] | None:
    """The path of the loaded mapping's section `node` gives: () for the loaded mapping itself, None for anything
    else."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _LOADERS and isinstance(func.value, ast.Name) \
                and func.value.id in yaml_names:
            return ()
        if isinstance(func, ast.Attribute) and func.attr in _SECTION_METHODS and node.args:
            holder = _section(func.value, bound, yaml_names)
            key = _literal_key(node.args[0])
            return None if holder is None or key is None else (*holder, key)
        return None
    if isinstance(node, ast.Subscript):
        holder = _section(node.value, bound, yaml_names)
        key = _literal_key(node.slice)
        return None if holder is None or key is None else (*holder, key)
    return None


def _literal_key(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

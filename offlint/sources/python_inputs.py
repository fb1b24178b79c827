"""Values a user gives when starting a run: an argparse namespace and what is read from it, and the environment.

A script that parses its arguments (`args = parser.parse_args()`) and configures a run from them
(`if args.activation_offload_layers > 0: cfg.model.cpu_offloading = True`) has paths that only a user's own
flags choose. The reader marks such values as `UserInput` (an Unknown that names the flags), so that a branch
whose test reads nothing else is known to be the user's choice: a finding that holds only on such a path is
about a flag combination, not about the code (engine: at most a warning, naming the flags). A recipe that reads
an environment variable (`os.environ.get("OV2_MIDTRAIN_MUON", "0")`) is read once for all its launches, whose
environments differ: the variable is the user's choice as a flag is, named `$NAME`. A test that combines such
values with known ones (`stage == "midtrain" and os.getenv("X") != "1"`) is one too (`combined`).

A flag is named by its option strings as the script's parser declares them (`add_argument("-ol",
"--activation_offload_layers", ...)`), searched where the arguments are parsed: that module and the modules it
imports names from; `--name` when no declaration is found.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

from offlint.sources.python_syntax import _call_name
from offlint.types import Unknown, UserInput

PARSE_METHODS = ("parse_args", "parse_known_args", "parse_intermixed_args")
ENVIRONMENT_READS = ("os.environ.get", "os.getenv", "environ.get", "getenv")  # (a literal name, a default or not)
NAMESPACE_TYPES = ("Namespace", "argparse.Namespace")


def namespace(what: str, declared: dict[str, tuple[str, ...]]) -> UserInput:
    """The namespace a parser returns (`declared`: the options the script's parser declares)."""
    return UserInput(f"{what}: command-line arguments", (), tuple(sorted(declared.items())))


def is_parse_call(node: ast.Call) -> bool:
    """`parser.parse_args(...)` and its siblings (a method of whatever parser object)."""
    return isinstance(node.func, ast.Attribute) and node.func.attr in PARSE_METHODS


def is_namespace_annotation(annotation) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Name):  # (ast.unparse gives a name as it is, without building the text)
        return annotation.id in NAMESPACE_TYPES
    if isinstance(annotation, (ast.Subscript, ast.Constant)):  # `Optional[...]` is bracketed, a constant quoted or
        return False  # a number or None: neither is one of the dotted names
    return ast.unparse(annotation) in NAMESPACE_TYPES


def environment_variable(node: ast.AST) -> str | None:
    """The variable `os.environ.get("NAME", ...)`, `os.getenv("NAME", ...)` or `os.environ["NAME"]` reads (a
    literal name); None for anything else."""
    if isinstance(node, ast.Call):
        if not node.args or _call_name(node.func) not in ENVIRONMENT_READS:
            return None
        name = node.args[0]
    elif isinstance(node, ast.Subscript) and _call_name(node.value) in ("os.environ", "environ"):
        name = node.slice
    else:
        return None
    return name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value else None


def readable_operand(leaf: ast.AST) -> bool:
    """Whether the user's choice can be read from this operand of a test (python_syntax.test_leaves) without running
    code: a name, an attribute, an item, a literal tuple, list or set, or an environment read. A test of other
    operands (a call, say) is not run to know it, as a branch's test is not run to decide it. One answer for a
    branch's test (python_statements._input_flags) and a test assigned as a value (`use_muon = os.getenv(...) ==
    "1"`): the two had kept separate lists, and `if os.getenv("OPT") in ("muon", "dist_muon")` was an error where
    the same test assigned first was the user's choice."""
    if isinstance(leaf, (ast.Name, ast.Attribute, ast.Subscript)):
        return True
    if isinstance(leaf, (ast.Tuple, ast.List, ast.Set)):
        return all(isinstance(item, ast.Constant) for item in leaf.elts)
    return environment_variable(leaf) is not None


def environment(variable: str, text: str) -> UserInput:
    """What a recipe reads of the environment its launch gives it."""
    return UserInput(f"`{text}` is the environment variable {variable} of the launch", (f"${variable}",))


def combined(values: list, text: str) -> UserInput | None:
    """A test's value when every value it reads that offlint does not know is the user's (`values`: what its
    operands gave): the user's choice of all of them; None when one is anything else unknown."""
    flags: list[str] = []
    for value in values:
        if isinstance(value, UserInput) and value.flags:
            flags.extend(value.flags)
        elif isinstance(value, Unknown) or not _plain(value):
            return None
    return UserInput(f"`{text}` depends on the user's choice of {', '.join(dict.fromkeys(flags))}",
                     tuple(dict.fromkeys(flags))) if flags else None


def _plain(value: object) -> bool:
    """A literal a test compares with: a scalar, or a list of scalars (`x in ("a", "b")`)."""
    scalars = (str, int, float, bool, type(None))
    return isinstance(value, scalars) or (type(value) in (list, tuple) and all(isinstance(v, scalars) for v in value))


def attribute(namespace: UserInput, dest: str, text: str) -> UserInput:
    """`args.dest`: the value of the flag that sets `dest`."""
    flag = "/".join(dict(namespace.declared).get(dest) or (f"--{dest}",))
    return UserInput(f"`{text}` is the command-line flag {flag}", (flag,))


def declared_options(module: ast.Module, lines: list[bytes] | None = None) -> dict[str, tuple[str, ...]]:
    """dest -> option strings, for every `*.add_argument("-x", "--long", ...)` in a module. `lines`: the module's
    lines, when given only the statements whose lines say `add_argument` are walked (the same calls, found in the
    same order: a skipped statement holds none)."""
    out: dict[str, tuple[str, ...]] = {}
    for node in _walk(module, lines):
        declared = _declaration(node)
        if declared is not None:
            out.setdefault(declared[1], declared[0])
    return out


def _declaration(node: ast.AST) -> tuple[tuple[str, ...], str] | None:
    """(option strings, dest) of an `*.add_argument("-x", "--long", ...)` call; None for another node or a
    positional argument."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
        return None
    options = tuple(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    if not options or not all(o.startswith("-") for o in options):
        return None
    dest = next((k.value.value for k in node.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)
                 and isinstance(k.value.value, str)), None)
    if dest is None:
        long = next((o for o in options if o.startswith("--")), options[0])
        dest = long.lstrip("-").replace("-", "_")
    return options, dest


@dataclass(frozen=True)
class ParserOption:
    """One `add_argument` of a script's own parser, as argparse reads the command line with it."""

    dest: str
    action: str  # "store", "store_true", "store_false"; another action offlint does not read
    type: str  # "int", "float", "str", or "" for another (a function of the script's: not evaluated)
    default: object  # the literal default, or NOT_LITERAL


NOT_LITERAL = Unknown("a default offlint does not evaluate")


def parser_options(module: ast.Module) -> dict[str, ParserOption]:
    """option string -> ParserOption, for every `*.add_argument("--x", ...)` in a module. A dest declared twice
    (`--freeze-x` and `--no-freeze-x`) takes its default from the first (argparse sets each dest once)."""
    out: dict[str, ParserOption] = {}
    first_default: dict[str, object] = {}
    for node in ast.walk(module):
        declared = _declaration(node)
        if declared is None:
            continue
        options, dest = declared
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = _literal(keywords.get("action", ast.Constant("store")))
        action = action if action in ("store", "store_true", "store_false") else "other"
        kind = keywords.get("type")
        type_ = kind.id if isinstance(kind, ast.Name) and kind.id in ("int", "float", "str") else \
            "str" if kind is None else ""
        if "default" in keywords:
            default = _literal(keywords["default"])
        else:
            default = {"store_true": False, "store_false": True}.get(action)
        default = first_default.setdefault(dest, default)
        for option in options:
            out.setdefault(option, ParserOption(dest, action, type_, default))
    return out


def _literal(node: ast.expr | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def _walk(module: ast.Module, lines: list[bytes] | None):
    """ast.walk's nodes in its order (breadth first), without the statements none of whose lines has the word
    add_argument (nor anything inside them)."""
    if lines is None:
        yield from ast.walk(module)
        return
    # Numbered as the parser numbers lines (\n, \r\n or \r ends one; str.splitlines also splits at \f and others).
    text = b"".join(lines).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    marked = [number for number, line in enumerate(text.split(b"\n"), 1) if line.find(b"add_argument") != -1]
    todo = deque([module])
    while todo:
        node = todo.popleft()
        if isinstance(node, ast.stmt):
            at = bisect_left(marked, node.lineno)  # the first marked line at or after the statement's first
            if at == len(marked) or marked[at] > (node.end_lineno or node.lineno):
                continue
        todo.extend(ast.iter_child_nodes(node))
        yield node

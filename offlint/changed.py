"""Changed-files mode: which files of the tree a change to some files affects.

Given file names (as pre-commit passes them), offlint re-checks exactly the units those files affect: the
units in the files themselves, every recipe whose reading goes through them (a base builder's change
re-checks every recipe that inherits from it, however deep), the launch commands that run a recipe defined
in them, and the recipes and YAML files the changed commands name. Candidates are found with a byte-level
search for the names the changed files define (cheap, no parse); the reader's own dependency tracking then
decides which candidates really depend on them, so the search may over-approximate but never decides alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from offlint.discover import SourceFile, discover
from offlint.reading import OnFirstUse

_TOP_LEVEL_NAME = re.compile(rb"^(?:def|class)\s+([A-Za-z_]\w*)|^([A-Z_][A-Z0-9_]{3,})\s*[:=]", re.M)
# `x as name` and `import a.b as name`. `,?\s*` spelled out as its three cases, each started only where an
# earlier start could not have matched the same way (not inside a name, not inside a run of whitespace): the
# same matches, without re-scanning every name from each of its letters (1.9x faster on Bridge's Python files).
_ALIAS = re.compile(rb"\bimport\s+[\w.]+\s+as\s+([A-Za-z_]\w*)"
                    rb"|(?:,\s*|(?<!\s)\s+|(?<![A-Za-z_]))[A-Za-z_]\w*\s+as\s+([A-Za-z_]\w*)")
_RECIPE_FLAG = re.compile(r"--recipe[=\s]+[\"']?([A-Za-z_]\w*)")
# A recipe named through shell variables: `--recipe "$RECIPE"`, `--recipe ${MODEL_NAME}_peft_config`
_RECIPE_EXPANDED = re.compile(r"--recipe[=\s]+[\"']?((?:\$\{?[A-Za-z_]\w*(?::?[-=][\w.]*)?\}?|[A-Za-z0-9_])*\$[^\s\"';|&)]*)")
_EXPANSION = re.compile(r"\$\{?([A-Za-z_]\w*)(?::?[-=][\w.]*)?\}?")
_CONFIG_FILE = re.compile(r"--config[-_]file[=\s]+[\"']?([\w./-]+\.ya?ml)")
MAX_ROUNDS = 6  # base builders of base builders: deeper chains than this are not seen in Bridge


def expand(targets: list[SourceFile], tree: Path, read_text, known_deps: dict[str, dict[str, str]] | None = None,
           tree_files: list[SourceFile] | None = None) -> tuple[list[SourceFile], list[SourceFile]]:
    """(every file of the tree, the files to read): the targets plus the candidates they may affect.

    `known_deps` (file -> the files its reading depended on, from the cache) replaces the text search.
    """
    if tree_files is None:
        tree_files, _ = discover([str(tree)])
    known = {f.path: f.kind for f in tree_files}
    tree_files += [t for t in targets if t.path not in known]
    data = OnFirstUse(lambda path: (read_text(path) or "").encode("utf-8", "replace"))
    chosen: dict[str, SourceFile] = {t.path: t for t in targets}
    words: dict[str, set[bytes]] = {}

    if known_deps:
        # The last run recorded which files each file's reading went through: exact, and no text search. Their
        # dependents too: a module re-exporting a recipe (`from .x import a_config as b_config`) depends on the
        # recipe's module alone, not on what that read.
        dependents: dict[str, list[str]] = {}
        for path, deps in known_deps.items():
            if path in known:
                for dep in deps:
                    dependents.setdefault(dep, []).append(path)
        frontier = list(chosen)
        while frontier:
            for path in dependents.get(frontier.pop(), ()):
                if path not in chosen:
                    chosen[path] = SourceFile(path, known[path], False)  # a launch's reading may use Python files
                    frontier.append(path)
    else:
        # Python files that may import what the targets (and, transitively, those files) define.
        frontier = [t.path for t in targets if t.kind == "python"]
    for _ in range(MAX_ROUNDS):
        names = set()
        for path in frontier:
            names |= _defined_names(path, data[path])
        if not names:
            break
        frontier = []
        for file in tree_files:
            if file.path not in chosen and file.kind == "python" and names & _words(file.path, data, words):
                chosen[file.path] = SourceFile(file.path, file.kind, False)
                frontier.append(file.path)

    # Launch commands that run a recipe defined in any chosen Python file. The names the launches run are
    # few (Bridge: 91): each is looked for among the `def`s of the chosen files first, and the slower search
    # for `as` re-exports (_defined_names) is made only in the chosen files that have an ` as ` and mention, as
    # a word, a name still not found (a name a file defines is a whole word of its text), not in all 131 files
    # importing a base builder. The same names are found as by _defined_names of every chosen file.
    flagged: dict[str, tuple[SourceFile, list[str]]] = {}
    for file in tree_files:
        if file.path in chosen or file.kind == "python":
            continue
        names = _RECIPE_FLAG.findall(data[file.path].decode("utf-8", "replace"))
        if names:
            flagged[file.path] = file, names
    pending = {name.encode() for _, names in flagged.values() for name in names}
    chosen_python = [p for p, f in chosen.items() if f.kind == "python"] if pending else []
    found: set[bytes] = set()
    for path in chosen_python:
        found.update(m.group(1) for m in _TOP_LEVEL_NAME.finditer(data[path]) if m.group(1) in pending)
    pending -= found
    short = any(len(name) < 3 or not name.isascii() for name in pending)  # not one of _WORD's words
    for path in chosen_python:
        if not pending:
            break
        if _SPACED_AS.search(data[path]) and (short or pending & _words(path, data, words)):
            defined = pending & _defined_names(path, data[path], functions_only=True)
            found |= defined
            pending -= defined
    recipe_names = {name.decode() for name in found}
    for path, (file, names) in flagged.items():
        if any(name in recipe_names for name in names):
            chosen[path] = SourceFile(file.path, file.kind, False)

    # What the changed launch commands name: the recipe's definition (through `x as name` re-exports, x's too).
    # Every chosen launch (changed, or running a chosen recipe) also needs the YAML files it layers.
    launches = [f for f in chosen.values() if f.kind != "python"]
    texts = {f.path: data.get(f.path, b"").decode("utf-8", "replace") for f in launches}
    wanted = {re.escape(name) for t in targets if t.kind != "python"
              for name in _RECIPE_FLAG.findall(texts.get(t.path, ""))}
    # A changed launch naming its recipe through shell variables: the names their literal values make (a variable
    # set otherwise is left out, as before: finding the recipe of every name would read the whole tree)
    wanted |= {shape for t in targets if t.kind != "python" for shape in _expanded_recipes(texts.get(t.path, ""))}
    seen = set(wanted)
    python_files = [f for f in tree_files if f.kind == "python"]
    while wanted:
        names = "|".join(sorted(wanted))
        definition = re.compile(rf"^\s*def (?:{names})\s*\(|^(?:{names})\s*=|\bas\s+(?:{names})\b".encode(), re.M)
        original = re.compile(rf"\b([A-Za-z_]\w*)\s+as\s+(?:{names})\b".encode())
        wanted = set()
        for file in python_files:
            if definition.search(data[file.path]):
                chosen.setdefault(file.path, SourceFile(file.path, "python", False))
                wanted |= {re.escape(m.decode()) for m in original.findall(data[file.path])} - seen
        seen |= wanted
    for launch in launches:
        for name in set(_CONFIG_FILE.findall(texts[launch.path])):
            for file in tree_files:
                if file.kind == "yaml" and file.path not in chosen and file.path.endswith(name.lstrip("./")):
                    chosen[file.path] = SourceFile(file.path, "yaml", False)
    return tree_files, [chosen[f.path] for f in tree_files if f.path in chosen]


def _expanded_recipes(text: str) -> set[str]:
    """Patterns of the names `--recipe` arguments built from shell variables may be, where each variable's values are
    literal words in the file (`X=name`, `X="name"`, `${X:-name}`, `for X in a b`): `${MODEL}_sft_config` with
    `MODEL=llama` is `llama_sft_config`. An argument with a variable set otherwise is left out."""
    shapes = set()
    for argument in set(_RECIPE_EXPANDED.findall(text)):
        parts, end = [], 0
        for match in _EXPANSION.finditer(argument):
            values = _literal_values(text, match.group(1))
            if values is None:
                break
            parts += [re.escape(argument[end:match.start()]), "(?:" + "|".join(sorted(map(re.escape, values))) + ")"]
            end = match.end()
        else:
            shapes.add("".join(parts) + re.escape(argument[end:]))
    return shapes


def _literal_values(text: str, variable: str) -> set[str] | None:
    """The words `variable` is set to in a shell text, when every way the text sets it is a literal word (a default
    `${X:-word}` counts); None when one is not (another variable, a command's output) or none is there."""
    name = re.escape(variable)
    values = set(re.findall(rf"\$\{{{name}:?[-=]([\w.]+)\}}", text))
    for value in re.findall(rf"(?:^|[\s;(])(?:export\s+|local\s+|readonly\s+)?{name}=(\S*)", text, re.M):
        value = value.strip("\"'")
        if re.fullmatch(r"[\w.]+", value):
            values.add(value)
        elif not re.fullmatch(rf"\$\{{{name}:?[-=][\w.]+\}}", value):
            return None
    for words in re.findall(rf"\bfor\s+{name}\s+in\s+([^;\n]*)", text):
        for word in words.split():
            word = word.strip("\"'")
            if not re.fullmatch(r"[\w.]+", word):
                return None
            values.add(word)
    if re.search(rf"\bread\s+(?:-\w+\s+)*{name}\b|\bdeclare\s+.*\b{name}=", text):
        return None
    return values or None


_WORD = re.compile(rb"[A-Za-z_]\w{2,}")
_SPACED_AS = re.compile(rb"\sas\s")  # in every match of _ALIAS: a file without it re-exports nothing


def _words(path: str, data: dict[str, bytes], cache: dict[str, set[bytes]]) -> set[bytes]:
    """The identifiers a file mentions (computed once): a set test beats a regex of thousands of names."""
    if path not in cache:
        cache[path] = set(_WORD.findall(data[path]))
    return cache[path]


def _defined_names(path: str, data: bytes, functions_only: bool = False) -> set[bytes]:
    """The functions, classes and CONSTANTS a module defines at top level: what another module can use. With
    `functions_only` (the names a launch may run), also the names it binds with `as` (a re-exported recipe:
    `from .llama import llama3_8b_config as llama3_8b_pretrain_config`)."""
    names = set()
    for match in _TOP_LEVEL_NAME.finditer(data):
        if match.group(1):
            names.add(match.group(1))
        elif not functions_only:
            names.add(match.group(2))
    if functions_only:
        names |= {match.group(1) or match.group(2) for match in _ALIAS.finditer(data)}
    return names

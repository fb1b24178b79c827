"""Changed-files mode: which files of the tree a change to some files affects.

Given file names (as pre-commit passes them), offlint re-checks exactly the units those files affect: the
units in the files themselves, every recipe whose reading goes through them (a base builder's change
re-checks every recipe that inherits from it, however deep), the launch commands that run a recipe defined
in them, and the recipes and YAML files the changed commands name. Candidates are found with a byte-level
search for the names the changed files define (cheap, no parse); the reader's own dependency tracking then
decides which candidates really depend on them, so the search may over-approximate but never decides alone.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from pathlib import Path

from offlint.discover import SourceFile, discover
from offlint.reading import OnFirstUse
from offlint.sources.module_index import (FUNCTION_LOOKUP, PACKAGE_LOOKUP, WRITER_LOOKUP, lookups_of,
                                          package_lookup_matches)

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
# A launch's `--config-file` word, a file's name or an expansion (`"$CONFIG_FILE"`: chosen when it runs)
_CONFIG_FILE_WORD = re.compile(rb"--config[-_]file[=\s]+[\"']?([^\s\"';|&)]+)")
_SCRIPT_WORD = re.compile(rb"[\w./${}-]*\.py\b")  # a launch's script word (`experiments/pretrain_x.py`, `$DIR/x.py`)
MAX_ROUNDS = 6  # base builders of base builders: deeper chains than this are not seen in Bridge
MAX_BUILT_NAMES = 64  # recipe names one `--recipe` argument builds from its variables' values (_recipe_names)


def expand(targets: list[SourceFile], tree: Path, read_text, known_deps: dict[str, dict[str, str]] | None = None,
           tree_files: list[SourceFile] | None = None,
           known_recipes: Callable[[set[str]], list[str]] | None = None) -> tuple[list[SourceFile], list[SourceFile]]:
    """(every file of the tree, the files to read): the targets plus the candidates they may affect.

    `known_deps` (file -> the files its reading depended on, from the cache) replaces the text search, and
    `known_recipes` (recipe names -> the files that defined one of them, from the same cache) the search for the
    other definitions of the recipes the chosen launches run.
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
        frontier = list(chosen) + _lookups_changed(targets, known_deps, dependents, data)
        while frontier:
            for path in dependents.get(frontier.pop(), ()):
                if path not in chosen:
                    chosen[path] = SourceFile(path, known[path], False)  # a launch's reading may use Python files
                    frontier.append(path)
        # The scripts a changed script's reading went through (`bash worker.sh`): their own readings say where a
        # launch it runs is written (api._at_the_launch), as in a check of the whole tree
        for target in targets:
            for path in known_deps.get(target.path, ()) if target.kind == "shell" else ():
                if known.get(path) == "shell" and path not in chosen:
                    chosen[path] = SourceFile(path, "shell", False)
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
        text = data[file.path]
        names = _recipe_names(text.decode("utf-8", "replace")) if b"--recipe" in text else None  # (both patterns)
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
        # A name bound by `as` follows an ` as ` (every match of _ALIAS ends so): the full search only where one of
        # the names still pending does (1 of Bridge's 5 such files for a llama recipe, 3 ms of _ALIAS each)
        if _SPACED_AS.search(data[path]) and pending & set(_AS_NAME.findall(data[path])) \
                and (short or pending & _words(path, data, words)):
            defined = pending & _defined_names(path, data[path], functions_only=True)
            found |= defined
            pending -= defined
    recipe_names = {name.decode() for name in found}
    for path, (file, names) in flagged.items():
        if any(name in recipe_names for name in names):
            chosen[path] = SourceFile(file.path, file.kind, False)
    if known_deps:
        # A launch links to the definition of its recipe nearest it (linking.link_commands). Chosen for one a chosen
        # file defines, it needs every other definition of that name read too, or it would link to the chosen one
        # alone: a neighbouring tree's launch, checked on top of a target's recipe it never runs, reported a false
        # finding. (The text search above chooses them: each mentions a name a chosen file defines; a changed
        # launch's definitions are searched for below.)
        changed_paths = {t.path for t in targets}
        ran = {name for path, (_, names) in flagged.items() if path in chosen for name in names}
        ran |= {name for f in chosen.values() if f.kind != "python" and f.path not in flagged
                and f.path not in changed_paths for name in _recipe_names(data[f.path].decode("utf-8", "replace"))}
        for path in known_recipes(ran) if ran and known_recipes is not None else ():
            if path in known and path not in chosen:
                chosen[path] = SourceFile(path, known[path], False)

    # Launches running a chosen script of the tree that parses its own flags (`torchrun experiments/pretrain_x.py
    # --tensor-model-parallel-size 1`): the launch runs the script's recipe with its flags (script_flags), so an edit
    # of the script, or of a recipe it calls, changes the launch; and a changed launch needs the scripts it names.
    scripts = {posixpath.basename(path).encode() for path, f in chosen.items()
               if f.kind == "python" and b"parse_args" in data[path]}
    if scripts:
        running = re.compile(rb"(?<![\w.-])(?:" + b"|".join(re.escape(name) for name in sorted(scripts)) + rb")\b")
        for file in tree_files:
            if file.kind != "python" and file.path not in chosen and running.search(data[file.path]):
                chosen[file.path] = SourceFile(file.path, file.kind, False)
    named = {posixpath.basename(word) for t in targets if t.kind != "python"
             for word in _SCRIPT_WORD.findall(data[t.path])}
    for file in tree_files if named else ():
        if file.kind == "python" and file.path not in chosen and posixpath.basename(file.path).encode() in named \
                and b"parse_args" in data[file.path]:
            chosen[file.path] = SourceFile(file.path, file.kind, False)

    # What the changed launch commands name: the recipe's definition (through `x as name` re-exports, x's too).
    # Every chosen launch (changed, or running a chosen recipe) also needs the YAML files it layers.
    launches = [f for f in chosen.values() if f.kind != "python"]
    texts = {f.path: data.get(f.path, b"").decode("utf-8", "replace") for f in launches}
    wanted = {name for t in targets if t.kind != "python" for name in _recipe_names(texts.get(t.path, ""))}
    seen = set(wanted)
    python_files = [f for f in tree_files if f.kind == "python"]
    while wanted:
        names = "|".join(sorted(re.escape(n) for n in wanted))
        definition = re.compile(rf"^\s*def (?:{names})\s*\(|^(?:{names})\s*=|\bas\s+(?:{names})\b".encode(), re.M)
        original = re.compile(rf"\b([A-Za-z_]\w*)\s+as\s+(?:{names})\b".encode())
        spelled = [name.encode() for name in wanted]  # each branch of `definition` spells the name out
        wanted = set()
        for file in python_files:
            if any(name in data[file.path] for name in spelled) and definition.search(data[file.path]):
                chosen.setdefault(file.path, SourceFile(file.path, "python", False))
                wanted |= {m.decode() for m in original.findall(data[file.path])} - seen
        seen |= wanted
    for launch in launches:
        for name in set(_CONFIG_FILE.findall(texts[launch.path])):
            for file in tree_files:
                if file.kind == "yaml" and file.path not in chosen and file.path.endswith(name.lstrip("./")):
                    chosen[file.path] = SourceFile(file.path, "yaml", False)
    yaml_targets = [t.path for t in targets if t.kind == "yaml"]
    if yaml_targets:  # the launches that may run a changed YAML file: it is checked with their environment
        for file in tree_files:
            if file.kind != "python" and file.path not in chosen and b"config" in data[file.path]:
                for word in _CONFIG_FILE_WORD.findall(data[file.path]):
                    name = word.decode("utf-8", "replace").lstrip("./")
                    if word.startswith(b"$") or any(path.endswith(name) for path in yaml_targets if name):
                        chosen[file.path] = SourceFile(file.path, file.kind, False)
                        break
    return tree_files, [chosen[f.path] for f in tree_files if f.path in chosen]


def _lookups_changed(targets: list[SourceFile], known_deps: dict, dependents: dict[str, list[str]],
                     data: OnFirstUse) -> list[str]:
    """The lookups of the set of files (module_index) whose answers the targets may have changed, for the files that
    noted them to be chosen: every lookup a Python target new since the cache's last reading of the tree takes part
    in, and, of one read before, the functions it defines now (a `def` added where a launch looks its recipe up) and
    the tables it writes into now (module_index.outside_writes)."""
    found: list[str] = []
    for target in targets:
        if target.kind != "python":
            continue
        text = data[target.path].decode("utf-8", "replace")
        if target.path in known_deps:
            found += [key for key in lookups_of(target.path, text) if key.startswith((FUNCTION_LOOKUP, WRITER_LOOKUP))]
        else:
            found += lookups_of(target.path, text)
            found += [key for key in dependents if key.startswith(PACKAGE_LOOKUP)
                      and package_lookup_matches(key, target.path)]
    return [key for key in dict.fromkeys(found) if key in dependents]


def _recipe_names(text: str) -> list[str]:
    """The recipes a launch text's `--recipe` flags name: literal names, and those built from shell variables that the
    text sets to literal words only (`X=name`, `X="name"`, `${X:-name}`, `for X in a b`): `--recipe
    ${MODEL}_sft_config` with `MODEL=llama` names `llama_sft_config`. A variable set otherwise (from the command
    line, another variable, a command's output) names nothing here: the reader resolves what it can."""
    names = _RECIPE_FLAG.findall(text)
    arguments = set(_RECIPE_EXPANDED.findall(text)) if "$" in text else set()
    if not arguments:
        return names
    defaults: dict[str, set[str]] = {}
    for name, word in _DEFAULT.findall(text):
        defaults.setdefault(name, set()).add(word)
    for argument in sorted(arguments):
        names += [name for name in _built(text, argument, defaults) or () if _NAME.fullmatch(name)]
    return names


def _built(text: str, word: str, defaults: dict[str, set[str]], depth: int = 0) -> list[str] | None:
    """The words a shell word makes from the variables it expands, each set to literal words in the text
    (_literal_values); None when one is not, or when they make more than MAX_BUILT_NAMES."""
    built, end = [""], 0
    for match in _EXPANSION.finditer(word):
        words = _literal_values(text, match.group(1), defaults.get(match.group(1), set()), defaults, depth)
        if not words or len(built) * len(words) > MAX_BUILT_NAMES:
            return None
        built = [name + word[end:match.start()] + value for name in built for value in sorted(words)]
        end = match.end()
    return [name + word[end:] for name in built]


_NAME = re.compile(r"[A-Za-z_]\w*")
_LITERAL = re.compile(r"[\w.]+")
_DEFAULT = re.compile(r"\$\{([A-Za-z_]\w*):?[-=]([\w.]+)\}")  # ${X:-word}, ${X=word}
_OWN_DEFAULT = re.compile(r"\$\{([A-Za-z_]\w*):?[-=](.+)\}")  # ${X:-anything}: a default built from variables
_VALUE = re.compile(r"[^\s;]*")  # an assignment's value: up to a blank or `;`
_VALUE_LIST = re.compile(r"[^;\n]*")  # the words of a `for` or a `read`: up to `;` or the line's end
_SETTERS = ("read ", "declare ", "typeset ", "mapfile ", "readarray ", "getopts ")


def _literal_values(text: str, variable: str, defaults: set[str], all_defaults: dict[str, set[str]] | None = None,
                   depth: int = 0) -> set[str] | None:
    """The literal words a shell text sets `variable` to (`X=word`, `export X="word"`, `for X in a b`, and its
    `defaults`, `${X:-word}`), when every way the text sets it is one; None when one is not (another variable, a
    command's output, `read X`). A value or default built from other such variables (`X="${X:-${MODEL}_sft}"`) gives
    the words they make, two levels deep. Searched as plain text, not parsed: a way it misses only leaves a launch
    unchosen or chosen for nothing, the reader decides what it runs."""
    values = set(defaults)
    start = 0
    while (at := text.find(variable + "=", start)) >= 0:
        start = at + len(variable) + 1
        if at and (text[at - 1].isalnum() or text[at - 1] in "_${.-"):
            continue  # a longer name, an expansion, a flag's value
        value = _VALUE.match(text, start).group().strip("\"'")
        default = _DEFAULT.fullmatch(value)
        if default is not None and default.group(1) == variable:
            continue  # X=${X:-word}: its default, counted
        own = _OWN_DEFAULT.fullmatch(value)
        if own is not None and own.group(1) == variable:
            value = own.group(2)  # X=${X:-${MODEL}_word}: its default, built below
        if _LITERAL.fullmatch(value):
            values.add(value)
            continue
        built = _built(text, value, all_defaults or {}, depth + 1) if depth < 2 and "$" in value else None
        if not built or not all(_LITERAL.fullmatch(word) for word in built):
            return None
        values.update(built)
    loop = f"for {variable} in "
    start = 0
    while (at := text.find(loop, start)) >= 0:
        start = at + len(loop)
        for word in _VALUE_LIST.match(text, start).group().split():
            word = word.strip("\"'")
            if not _LITERAL.fullmatch(word):
                return None
            values.add(word)
    for setter in _SETTERS:
        start = 0
        while (at := text.find(setter, start)) >= 0:
            start = at + len(setter)
            if variable in _NAME.findall(_VALUE_LIST.match(text, start).group()):
                return None
    return values or None


_WORD = re.compile(rb"[A-Za-z_]\w{2,}")
_SPACED_AS = re.compile(rb"\sas\s")  # in every match of _ALIAS: a file without it re-exports nothing
# What every match of _ALIAS ends with, ` as NAME`: each such name (matched as a lookahead, so that no match hides
# the next, as in `a as as NAME`)
_AS_NAME = re.compile(rb"\sas(?=\s+([A-Za-z_]\w*))")


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


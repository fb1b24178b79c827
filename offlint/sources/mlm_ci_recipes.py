"""The entry script Megatron-LM's CI runs a functional test case with, read from the CI recipes in the linted tree.

A test case (`tests/functional_tests/test_cases/MODEL/CASE/model_config.yaml`, sources/mlm_test_cases.py) holds
only the flags. The script comes from the CI recipe that lists the case (`tests/test_utils/recipes/**/*.yaml`):
its `spec.model`, the `test_case` lists of its `products` (nested), and in `spec.script` the harness's arguments
`"TRAINING_SCRIPT_PATH=pretrain_gpt.py"` and
`"TRAINING_PARAMS_PATH=./tests/functional_tests/test_cases/{model}/{test_case}/model_config.yaml"`, run from the
checkout's root (`cd /opt/megatron-lm`). Megatron-LM d98e8a6: 333 case folders, 256 listed by a recipe, none by
two recipes with different scripts.

Only what is certain is given: a case that no recipe lists (its recipe entry commented out, or a case CI does not
run yet), that recipes list with different scripts, or whose script is written with a template or a variable
(`{nemo_model}`, `$X`) gets None, and then no flag of it is judged. Read with PyYAML's bounded safe composer
(sources/yaml_file.py); nothing is run.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Callable

CASES = "tests/functional_tests/test_cases"
RECIPES = "tests/test_utils/recipes"
_MAX_RECIPE_FILES = 1000  # a real checkout has about 40
_MAX_DEPTH = 4  # folders below RECIPES (Megatron-LM: h100/, gb200/)

# The harness's arguments as a recipe's script writes them: quoted in a bash array, or bare.
_ARGUMENT = r'"?{name}=("[^"\n]*"|[^"\s]*)"?'
_SCRIPT = re.compile(_ARGUMENT.format(name="TRAINING_SCRIPT_PATH"))
_PARAMS = re.compile(_ARGUMENT.format(name="TRAINING_PARAMS_PATH"))
# Where the params file of a listed case lies, relative to the checkout the script `cd`s into.
_CASE_FILE = re.compile(r"(?:\./|/opt/megatron-lm/)?" + re.escape(CASES) + r"/\{model\}/\{test_case\}/([\w.-]+)")
_PLAIN_PATH = re.compile(r"[\w./-]+\.py")

TreeText = Callable[[str, str], "str | None"]


def entry_script(case_path: str, tree_text: TreeText, memo: dict) -> str | None:
    """The tree's path of the script the CI recipes run the test case at `case_path` with, or None when they do not
    say it for certain. `tree_text(path, near)`: a file's text (None when absent or outside the project); `memo`:
    kept across the calls of one run (every case of a checkout shares its recipes)."""
    found = case_parts(case_path)
    if found is None:
        return None
    root, model, case, name = found
    key = ("mlm-ci-recipes", root)
    if key not in memo:
        memo[key] = _recipe_scripts(root, case_path, tree_text)
    scripts = memo[key].get((model, case, name), set())
    if len(scripts) != 1:
        return None
    script = posixpath.normpath(posixpath.join(root, next(iter(scripts))))
    return script if tree_text(script, case_path) is not None else None


def case_parts(path: str) -> tuple[str, str, str, str] | None:
    """(checkout root, model, test case, file name) of a file at ROOT/tests/functional_tests/test_cases/MODEL/CASE/FILE
    (ROOT "" for the working directory); None for a file elsewhere."""
    parts = posixpath.normpath(path).split("/")
    cases = CASES.split("/")
    at = len(parts) - len(cases) - 3
    if at < 0 or parts[at:at + len(cases)] != cases:
        return None
    model, case, name = parts[at + len(cases):]
    return "/".join(parts[:at]), model, case, name


def _recipe_scripts(root: str, near: str, tree_text: TreeText) -> dict[tuple[str, str, str], set[str]]:
    """(model, test case, params file name) -> the scripts the checkout's CI recipes run it with."""
    from offlint.sources import yaml_file  # (PyYAML: imported by a run that reads a test case, not by every run)

    found: dict[tuple[str, str, str], set[str]] = {}
    for path in _recipe_files(posixpath.join(root, RECIPES) if root else RECIPES):
        text = tree_text(path, near)
        if not text:
            continue
        try:
            recipe = [yaml_file.construct(node) for node in yaml_file.compose(text)]
        except (yaml_file.YamlError, RecursionError):
            continue  # not a recipe offlint can read: it names no script
        for document in recipe:
            spec = document.get("spec") if isinstance(document, dict) else None
            model = spec.get("model") if isinstance(spec, dict) else None
            script_text = spec.get("script") if isinstance(spec, dict) else None
            if not (isinstance(model, str) and isinstance(script_text, str)):
                continue
            scripts = {_unquoted(m) for m in _SCRIPT.findall(script_text)}
            params = {_unquoted(m) for m in _PARAMS.findall(script_text)}
            files = {match.group(1) for match in map(_CASE_FILE.fullmatch, params) if match}
            if len(scripts) != 1 or len(files) != 1 or len(params) != 1:
                continue  # a recipe whose script or case file offlint cannot name for certain
            script = next(iter(scripts))
            script = script if _PLAIN_PATH.fullmatch(script) else ""  # `{nemo_model}`, `$X`, a command: unknown
            for case in _test_cases(document.get("products")):
                found.setdefault((model, case, next(iter(files))), set()).add(script)
    return {key: scripts for key, scripts in found.items() if "" not in scripts}


def _recipe_files(folder: str) -> list[str]:
    """The YAML files under `folder`, in order (regular files only; a symlink is not followed)."""
    out: list[str] = []
    pending = [(folder, 0)]
    while pending and len(out) < _MAX_RECIPE_FILES:
        current, depth = pending.pop()
        try:
            entries = sorted(os.scandir(current or "."), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir() and depth < _MAX_DEPTH:
                pending.append((posixpath.join(current, entry.name), depth + 1))
            elif entry.is_file() and entry.name.endswith((".yaml", ".yml")):
                out.append(posixpath.join(current, entry.name))
    return sorted(out[:_MAX_RECIPE_FILES])


def _test_cases(products) -> list[str]:
    """The test case names a recipe's `products` list, at any depth (`- test_case: [a, b]`, nested `products:`)."""
    names: list[str] = []
    pending = [products]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            cases = item.get("test_case")
            names += [c for c in (cases if isinstance(cases, list) else [cases]) if isinstance(c, str)]
            pending.append(item.get("products"))
    return names


def _unquoted(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text

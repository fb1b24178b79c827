"""Sources: one reader per input kind. Each turns a file's text into units of assignments with positions.

Where each input is handled (the two large readers carry a finer map in their docstrings):

- Python recipes: python (entry, `PythonReader`) with python_statements (statements, assignments),
  python_expressions (values), python_call_effects (calls: their kind, mutators, writes), python_constructors
  (config classes, records), python_following (followed functions), python_names (imports), python_configs
  (config classes and sections), python_branches (paths of an `if`), python_values, python_project (the tree's
  modules), python_calls (calls known without following), python_inputs (argparse values), python_roles (what
  runs on its own), python_syntax.
- Shell scripts: shell (commands to units) and shell_parse (entry) with shell_values (data types),
  shell_walker (statements), shell_commands (commands, builtins), shell_assignments, shell_children (sourced
  files, called scripts, payloads), shell_launchers, shell_documents (here-documents), shell_words (word expansion),
  shell_conditions (tests and arithmetic), shell_tests, shell_paths, shell_mask (tree-sitter-bash's gaps).
- YAML: yaml_file (override files and command strings), mlm_test_cases (Megatron-LM's functional test cases);
  Hydra overrides: hydra; Megatron-LM flags: mlm_flags.
- Launch commands: launch (one argv, one unit), launch_words (its words: Arg, EnvArg), launch_env (the environment
  its launcher gives: `env`, `mpirun -x`, `srun --export`, containers, Ray, DeepSpeed), launch_torch (which PyTorch
  it runs: interpreter, image, the requirements.txt or Dockerfile beside it), entry_scripts (what linking asks of
  a launch's entry script: whether it trains, what it sets, where it runs) with entry_modules (the modules its
  code reaches), entry_training (whether it trains) and entry_writes (what its code sets), mlm_arguments (the
  options its Megatron-LM parser has), mlm_ci_recipes (the script a functional test case runs), perf_scripts /
  perf_flags / perf_env (Bridge's performance scripts, read from the tree, with built-in fallbacks),
  bridge_mutators (Bridge's mutators, fallback), hf_models (Hugging Face model sizes), bridge_precision (Bridge's
  named precision recipes, read from the tree), bridge_schedule (whether a provider's model builds a schedule plan),
  python_records (records of followed calls, for the cache).
"""

from __future__ import annotations

import re
import sys

from offlint.types import InputError, Unit

# Recipes and launch commands one file may hold. Megatron Bridge's largest file has 32, its whole tree about
# 1,200; each unit costs about half a millisecond of rules, so a generated 2 MiB file of 28,000 launch commands
# took 40 s. More than this is an error (one line, the other files still checked), found before the rules run.
MAX_UNITS = 10_000


def read_source(path: str, kind: str, text: str, explicit: bool = True, project=None) -> list[Unit]:
    """Units of one file. Raises ValueError (one-line message) when the file cannot be parsed.

    `project` (a PythonProject) lets Python recipes follow imports into the other files of the tree.
    """
    if not text.strip():
        return []
    if kind == "python":
        units = _python(path, text, explicit, project)
    elif kind == "yaml":
        units = _yaml(path, text, explicit, project)
    elif kind == "shell":
        if _other_interpreter(text):
            return []  # (an expect or Python script named `.sh`: bash never runs it)
        from offlint.sources.shell import ShellError, read_shell

        try:
            units = read_shell(path, text, project=project)
        except ShellError:
            if _MARKDOWN_FENCE.search(text):
                return []  # (a Markdown document named `.slurm`: a README nobody runs)
            raise
    else:
        raise InputError("not a Python, YAML or shell file")
    if len(units) > MAX_UNITS:
        raise _too_many()
    if kind != "python":  # a Python recipe's unit reads them as it is built (PythonReader._unit)
        from offlint.sources.bridge_precision import attach

        for unit in units:
            attach(unit, project, path)  # the precision recipes it names, as the tree builds them
    return units


# Interpreters a `#!` line may name that are not shells (a `python3.10` too): a `.sh` file that names one is no shell
# script (a repository's create_train_job_2n.sh is an expect script that ssh-es into its workers)
_OTHER_INTERPRETER = re.compile(r"expect|python[\d.]*|perl|ruby|node|tclsh|wish|Rscript|php|lua")


def _other_interpreter(text: str) -> bool:
    """Whether a script's `#!` line names an interpreter that is not a shell (itself, or the program `env` runs)."""
    if not text.startswith("#!"):
        return False
    words = text[2:].partition("\n")[0].split()
    program = words[0].rpartition("/")[2] if words else ""
    if program == "env":
        given = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        program = given[0].rpartition("/")[2] if given else ""
    return _OTHER_INTERPRETER.fullmatch(program) is not None


# A line opening a Markdown code fence: in bash, an empty command substitution and an unclosed one after it. A file
# tree-sitter-bash cannot read that has one is a document (TensorFlow's README.slurm, vendored in MLPerf's training
# results: bash -n accepts it, never parsing inside the backticks), not a script; a script writing a fence into a
# here-document parses, and is read.
_MARKDOWN_FENCE = re.compile(r"^[ \t]*```", re.M)


def _too_many() -> InputError:
    return InputError(f"more than {MAX_UNITS:,} recipes and launch commands in one file (generated?); offlint "
                      f"checks at most {MAX_UNITS:,} per file; exclude it or split it")


# `from module import x as y` (also in parentheses): a file that may re-export a function under another name
_IMPORTED_AS = re.compile(rb"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*?|[^\n]*?)\sas\s", re.M)


def _python(path: str, text: str, explicit: bool, project) -> list[Unit]:
    from offlint.sources.python import may_give_units, read_python
    from offlint.sources.python_roles import is_test_code, is_test_module

    # A file found by walking a directory is parsed only when it can give units: not test code (python_roles),
    # and not a file without any name the rules read nor a function returning a ConfigContainer (a test module's
    # syntax errors are its test runner's to report: parsing Megatron Bridge's 394 that passed the name filter took a
    # tenth of a cold check).
    if not explicit and is_test_code(path) and is_test_module(path, text.encode("utf-8", "replace")):
        return []
    if not explicit and not may_give_units(data := text.encode("utf-8", "replace")):
        if project is not None and _IMPORTED_AS.search(data):
            from offlint.sources.python import note_reexports

            note_reexports(path, text, project)  # it may re-export a recipe under another name
        return []
    try:
        return read_python(path, text, project)
    except SyntaxError as exc:
        raise InputError(f"Python syntax error at line {exc.lineno}, column {exc.offset or 1}: {exc.msg}"
                         f"{_newer_syntax(exc)}") from None


def _newer_syntax(exc: SyntaxError) -> str:
    """What to do when the error may be syntax a newer Python accepts: offlint parses with the Python it runs on,
    and Python 3.12 (PEP 701) allows a backslash, a comment or the same quotes inside an f-string's braces, which
    3.11 rejects with an "f-string..." message (a Megatron Bridge example script, b54cc3625, failed a whole check)."""
    if sys.version_info < (3, 12) and ((exc.msg or "").startswith("f-string") or _backslash_in_f_string(exc)):
        return (f" (valid from Python 3.12 on; offlint parses with the Python it runs on, "
                f"{sys.version_info[0]}.{sys.version_info[1]}: run it with Python 3.12 or later, or exclude the file)")
    return ""


# An f-string's opening (a prefix holding f, then a quote) before the place of an error
_F_STRING_OPENING = re.compile(r"(?<![\w'\"])[rRbB]?[fF][rR]?['\"]")


def _backslash_in_f_string(exc: SyntaxError) -> bool:
    """Python 3.11's error for a backslash inside an f-string's braces where the same quotes are nested too
    (`f"{t.replace("\\n", " ")}"`): "unexpected character after line continuation character", no "f-string" message
    (Megatron-LM forks' gpt_dynamic_inference.py); taken as PEP 701's where an f-string opens before it on its line."""
    line, at = exc.text or "", exc.offset or 0
    return exc.msg == "unexpected character after line continuation character" and \
        _F_STRING_OPENING.search(line, 0, max(at - 1, 0)) is not None


def _yaml(path: str, text: str, explicit: bool, project=None) -> list[Unit]:
    from offlint.sources import mlm_test_cases, yaml_file

    # A file found by walking a directory is parsed only when its text may give a unit (yaml_file.may_give_units):
    # a Helm chart or a Kubernetes template beside the recipes is no YAML offlint reads, and its template syntax
    # (`{{ if ... }}`) is not YAML at all (NeMo RL's infra/helm/helmfile.yaml failed a whole check).
    if not explicit and not yaml_file.may_give_units(text):
        return []
    try:
        roots = yaml_file.compose(text)
    except yaml_file.YamlError:
        if not explicit and yaml_file.is_template(text):  # (a chart's template naming a launch: not a config)
            return []
        raise
    units: list[Unit] = []
    if yaml_file.is_override_file(roots):
        unit = yaml_file.override_unit(path, roots)
        if yaml_file.is_bridges(roots, unit):
            units.append(unit)
    elif mlm_test_cases.is_test_case(roots):
        units.append(mlm_test_cases.test_case_unit(path, roots, project))
    lines = text.splitlines()
    for shell_text, first_line, gpu, environment in yaml_file.command_strings(roots, lines):
        from offlint.sources.shell import read_shell

        found = read_shell(path, shell_text, line_offset=first_line - 1, env_known=True, needs_arguments=True,
                           complete=False, project=project)
        for unit in found:
            unit.card_gpu = gpu
            yaml_file.give_environment(unit, path, environment)
        units.extend(found)
        if len(units) > MAX_UNITS:  # each string is a parse of its own: stop at the bound
            raise _too_many()
    return units

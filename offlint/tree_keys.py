"""OFL003 (unknown key) against the linted tree's own config classes.

A model, optimizer or ddp key that no megatron-core release has may still be a field of a provider or config
dataclass the tree defines (Megatron Bridge's FluxProvider has `in_channels`, one letter from `kv_channels`). Such
a key is left alone, and so is one that a field of the tree's classes is as close to as the suggestion is: the
tree's provider may be the class the key was meant for, and offlint does not know which provider a YAML file is
merged into. Which fields the tree defines is a fact of the whole tree, not of the file the key is in, so this is
applied to a run's findings however they were made (cache or rules), and the tree is read only when an OFL003
finding asks.

The container's other sections (`train`, `checkpoint`, `dist`, ...) hold one class each, which no provider widens:
where the tree defines ConfigContainer and every field of such a section's class (sources/tree_config_fields.py),
a Hydra override of a key that section lacks is reported whatever it is close to (tree_section_findings):
Hydra refuses `dist.tensor_model_parallel_size=2` at launch (a Bridge fork's launcher set TP and PP there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple

if TYPE_CHECKING:
    from offlint.rules import Rule
    from offlint.source_files import FileRead
    from offlint.types import Assignment, Finding, Unit

CODE = "OFL003"


# The words of OFL003's check of a Python write (its message), which this module tells from the others by them
PYTHON_WRITE = "Python gives the config object a new attribute"


def tree_fields(text: Callable[[str], str | None], python_paths: list[str]) -> TreeFields:
    """What the two checks below read of the tree's config classes, worked out ahead: by a worker of the pool, idle
    once the files are read, while the parent links the launches (workers.Aside; 0.13 s on Megatron Bridge)."""
    from offlint.sources.tree_config_fields import container_sections, fields_by_section

    return TreeFields(fields_by_section((path, text(path)) for path in python_paths),
                      container_sections((path, text(path)) for path in python_paths))


class TreeFields(NamedTuple):
    by_section: dict[str, frozenset[str]]  # tree_config_fields.fields_by_section
    sections: dict  # tree_config_fields.container_sections


def without_tree_fields(findings: list[Finding], python_paths: Iterable[str], text: Callable[[str], str | None],
                        known: TreeFields | None = None) -> list[Finding]:
    """`findings` less the OFL003 findings whose key the tree's own config dataclasses define or may mean, and those
    of a Python write of an attribute the tree's own code reads (_tree_reads). `known`: tree_fields', when a worker
    worked them out."""
    asked = [f for f in findings if f.code == CODE and f.written]
    if not asked:
        return findings  # (and nothing below imported: a run without OFL003 findings pays nothing)
    python_paths = list(python_paths)
    if known is not None:
        tree = known.by_section
    else:
        from offlint.sources.tree_config_fields import fields_by_section

        tree = fields_by_section((path, text(path)) for path in python_paths)
    written = {f.written[0][0].partition(".")[2] for f in asked if PYTHON_WRITE in f.message}
    read = _tree_reads(written, python_paths, text) if written else set()
    dropped = {id(f) for f in asked if _tree_may_mean(f.written[0][0], tree)
               or PYTHON_WRITE in f.message and f.written[0][0].partition(".")[2] in read}
    return [f for f in findings if id(f) not in dropped] if dropped else findings


def _tree_reads(names: set[str], python_paths: list[str], text: Callable[[str], str | None]) -> set[str]:
    """Those of the attribute `names` that some Python file of the tree reads: `x.name` anywhere but as the target
    of a plain `=` (`x.name += 1` reads it), or the name as a string (`getattr(config, "name", None)`). A config
    attribute the tree's code reads is one it added for itself (Megatron Bridge's Step-3.7 bridge sets
    `provider.rotary_percents`, which its provider reads with getattr; Pai-Megatron-Patch's vision configs set
    `config.in_channels` for their vision model), not a misspelt field."""
    import re

    found: set[str] = set()
    patterns = {name: re.compile(rf"\.{name}\b(?!\s*=(?!=))|[\"']{name}[\"']") for name in names}
    for path in python_paths:
        body = text(path) or ""
        for name, pattern in patterns.items():
            if name not in found and name in body and pattern.search(body):
                found.add(name)
        if len(found) == len(names):
            break
    return found


def _tree_may_mean(key: str, tree: dict[str, frozenset[str]]) -> bool:
    import difflib

    from offlint import keys

    section, _, name = key.lstrip("+~").partition(".")
    own = tree.get(section, frozenset()) - keys.release_fields(section)
    if name in own:
        return True
    known = difflib.get_close_matches(name, keys.release_fields(section), n=1, cutoff=0.8)
    best = difflib.SequenceMatcher(None, name, known[0]).ratio() if known else 0.8
    return bool(difflib.get_close_matches(name, own, n=1, cutoff=best))


def tree_section_findings(reads: list[FileRead], python_paths: Iterable[str], text: Callable[[str], str | None],
                          rule: Rule, known: TreeFields | None = None) -> list[Finding]:
    """OFL003 for the Hydra overrides and YAML override files' keys of the units in `reads` that set a field the
    tree's ConfigContainer section lacks (a section tree_config_fields.container_sections can list every field of).
    The rule's checks give each its severity: an override Hydra refuses at launch (an error), or one a `+`/`++`
    prefix adds, or a YAML file's key, which Bridge then skips with a log line (a warning). The tree is read only
    when some unit sets a key of a section OFL003's own checks do not judge: a pre-commit run passes the reads of
    its target files only (the launches its edit links to are decoded too, and would otherwise make a recipe's edit
    read every file of the tree). `known`: tree_fields', when a worker worked them out."""
    from offlint.types import Source

    asked = [(unit, a) for read in reads for unit in read.units for layer in unit.layers if not layer.inherited
             for a in layer.assignments if a.source in (Source.HYDRA, Source.YAML) and a.op != "delete"
             and _other_section(a.key)]
    if not asked:
        return []
    if known is not None:
        sections = known.sections
    else:
        from offlint.sources.tree_config_fields import container_sections

        sections = container_sections((path, text(path)) for path in python_paths)
    out: list[Finding] = []
    for unit, a in asked:
        section, _, name = a.key.lstrip("+~").partition(".")
        held = sections.get(section)
        if held is None or name in held.fields or _built_from_target(unit, section):
            continue
        out.append(_section_finding(rule, unit, a, section, name, held, sections))
    return out


def _built_from_target(unit: Unit, section: str) -> bool:
    """Whether the unit's YAML or Hydra layers give `section` a `_target_`: Megatron Bridge's _apply_overrides then
    instantiates the section's mapping, whose other keys are the target class's constructor arguments (a class
    offlint may not read) and whose `_target_`, `_recursive_`, ... are Hydra's, not fields; OFL003 leaves such a
    section's keys unjudged, as conditions.settings.is_known_key does model's, optimizer's and ddp's."""
    return any(a.key.lstrip("+~") == f"{section}._target_" for layer in unit.layers for a in layer.assignments
               if a.op != "delete")


def _other_section(key: str) -> bool:
    from offlint import keys

    section, _, name = key.lstrip("+~").partition(".")
    return bool(name) and "." not in name and section in keys.OTHER_BRIDGE_SECTIONS


def _section_finding(rule: Rule, unit: Unit, a: Assignment, section: str, name: str, held, sections) -> Finding:
    from offlint.types import Finding, Source

    key = f"{section}.{name}"
    where = f"{section} ({held.cls}, {held.path}:{held.line})"
    meant = _meant(section, name, held, sections)
    hint = f"; did you mean {meant}?" if meant else ""
    if a.source == Source.YAML:
        check = rule.checks[1]
        why = "Megatron Bridge skips unknown YAML keys with only a log line, so this setting has no effect"
    elif a.op == "set":
        check = rule.checks[0]
        why = f"Hydra refuses the override at launch (\"Could not override '{key}'\")"
    else:
        check = rule.checks[2]
        why = ("with a + or ++ prefix Hydra adds the key and Megatron Bridge then skips it with only a log line, so "
               "this setting has no effect")
    return Finding(code=rule.code, slug=rule.slug, severity=check.severity,
                   message=f"{key} is not a field of {where}: {why}{hint}", location=a.location, unit=unit.name,
                   fix=check.fix or rule.fix, url=rule.url, stage=check.stage, unit_path=unit.location.path,
                   written=((a.key, a.location),))


def _meant(section: str, name: str, held, sections) -> str:
    """The key `section.name` was likely meant to be: a field of the section close to it, else the field of that
    name in another section (`dist.tensor_model_parallel_size` -> `model.tensor_model_parallel_size`); "" if none."""
    import difflib

    from offlint import keys

    close = difflib.get_close_matches(name, sorted(held.fields), n=1, cutoff=0.8)
    if close:
        return f"{section}.{close[0]}"
    for other in keys.FIELD_SECTIONS:
        if name in keys.known_fields(other):
            return f"{other}.{name}"
    return next((f"{other}.{name}" for other, found in sections.items() if other != section and name in found.fields),
                "")

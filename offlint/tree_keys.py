"""OFL003 (unknown key) against the linted tree's own config classes.

A model, optimizer or ddp key that no megatron-core release has may still be a field of a provider or config
dataclass the tree defines (Megatron Bridge's FluxProvider has `in_channels`, one letter from `kv_channels`). Such
a key is left alone, and so is one that a field of the tree's classes is as close to as the suggestion is: the
tree's provider may be the class the key was meant for, and offlint does not know which provider a YAML file is
merged into. Which fields the tree defines is a fact of the whole tree, not of the file the key is in, so this is
applied to a run's findings however they were made (cache or rules), and the tree is read only when an OFL003
finding asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from offlint.types import Finding

CODE = "OFL003"


def without_tree_fields(findings: list[Finding], python_paths: Iterable[str],
                        text: Callable[[str], str | None]) -> list[Finding]:
    """`findings` less the OFL003 findings whose key the tree's own config dataclasses define or may mean."""
    asked = [f for f in findings if f.code == CODE and f.written]
    if not asked:
        return findings  # (and nothing below imported: a run without OFL003 findings pays nothing)
    from offlint.sources.tree_config_fields import fields_by_section

    tree = fields_by_section((path, text(path)) for path in python_paths)
    dropped = {id(f) for f in asked if _tree_may_mean(f.written[0][0], tree)}
    return [f for f in findings if id(f) not in dropped] if dropped else findings


def _tree_may_mean(key: str, tree: dict[str, frozenset[str]]) -> bool:
    import difflib

    from offlint import keys

    section, _, name = key.lstrip("+~").partition(".")
    own = tree.get(section, frozenset()) - keys.known_fields(section)
    if name in own:
        return True
    known = difflib.get_close_matches(name, keys.known_fields(section), n=1, cutoff=0.8)
    best = difflib.SequenceMatcher(None, name, known[0]).ratio() if known else 0.8
    return bool(difflib.get_close_matches(name, own, n=1, cutoff=best))

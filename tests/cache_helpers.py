"""The state of a test tree as the cache compares it: each file's digest, and each lookup of the set of its Python
files (module_index) answered now."""

from __future__ import annotations

from pathlib import Path

from offlint.job import Digests, Texts
from offlint.reading import text_or_error
from offlint.sources.module_index import ModuleIndex


def digests_now(tree: Path) -> Digests:
    """path (relative to `tree`) -> what Cache.lookup compares with an entry's dependencies, computed on first use."""
    python = sorted(path.relative_to(tree).as_posix() for path in tree.rglob("*.py"))
    texts = Texts(lambda path: text_or_error(str(tree / path)))
    index = ModuleIndex(python, texts.get)
    return Digests(texts, lambda: index)

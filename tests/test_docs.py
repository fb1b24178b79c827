"""Docs that hold: every relative link in the README and docs/ resolves (anchors included), no page names a
Markdown file the repository does not have, every megatron-core check id a rule cites is defined in
docs/megatron-core-checks.md and linked where the docs name it, and the README's rules table is the one
generated from rules/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from offlint import citations
from offlint.rules import load_rules

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
MD_NAME = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?[\w./-]*\w\.md)\b")


def prose(text: str) -> str:
    """The text outside fenced code blocks and code spans (a link or name in code is an example, not a link)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    found: set[str] = set()
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def relative_links(page: Path) -> list[str]:
    return [target for _, target in LINK.findall(prose(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no heading with anchor #{anchor})")
    assert broken == [], f"{page.name}: broken links: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_page_names_a_markdown_file_the_repository_lacks(page):
    names = {m for m in MD_NAME.findall(prose(page.read_text()))}
    missing = sorted(n for n in names if not any((base / n).exists() for base in (page.parent, ROOT, ROOT / "docs")))
    assert missing == [], f"{page.name} names {missing}, which are not in the repository"


def test_every_id_a_rule_cites_is_defined_in_the_checks_page():
    defined = anchors(ROOT / citations.CHECKS_DOC)
    cited = {(code, cited) for code, rule in load_rules().items() for cited in citations.cited_ids(rule)}
    assert cited, "no rule cites a megatron-core check: the id pattern is wrong"
    undefined = sorted(f"{code}: {c}" for code, c in cited if citations.anchor(c) not in defined)
    assert undefined == [], f"cited by rules, not defined in {citations.CHECKS_DOC}: {undefined}"


def test_every_id_the_docs_name_is_a_link_to_its_definition():
    """An id in a page's prose is written as a link ([AO-2](megatron-core-checks.md#ao-2)), except in the
    headings that define them."""
    checks = ROOT / citations.CHECKS_DOC
    unlinked = []
    for page in PAGES:
        text = prose(page.read_text())
        text = LINK.sub("", text)
        if page == checks:
            text = re.sub(r"^#{1,6} .*$", "", text, flags=re.M)
        unlinked += [f"{page.name}: {found}" for found in citations.CITED_ID.findall(text)]
    assert unlinked == []


def test_the_rule_command_links_each_cited_id():
    done = subprocess.run([sys.executable, "-m", "offlint", "rule", "OFL207"], capture_output=True, text=True,
                          check=True)
    assert f"  F-9: {citations.CHECKS_URL}#f-9\n" in done.stdout
    assert f"  CLI-1: {citations.CHECKS_URL}#cli-1\n" in done.stdout


def test_the_readme_rules_table_is_generated_from_rules():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_rules_table.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    readme = (ROOT / "README.md").read_text()
    for code in load_rules():
        assert f"| [{code}](rules/" in readme, code  # OFL303/OFL304 included


def test_the_readme_pre_commit_snippet_is_true():
    """No release tag exists, so the snippet pins a commit (as tests/test_pre_commit.py does with the real
    pre-commit) and names a hook this repository defines."""
    import yaml

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Pre-commit hook"):]
    block = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    (repo,) = block["repos"]
    hooks = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert {hook["id"] for hook in repo["hooks"]} <= hooks
    tags = subprocess.run(["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert repo["rev"] in tags or repo["rev"] == "COMMIT_SHA", repo["rev"]
    assert "no release tag yet" in section and "rev: {rev}" in (ROOT / "tests" / "test_pre_commit.py").read_text()

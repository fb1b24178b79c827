"""The commits a bisect searches: first-parent commits between the good and the bad end (GitPython).

Like git, a good end that is not an ancestor of the bad end is replaced by their merge base. First-parent
by default, so each candidate is a state the main branch really was in (a merged PR counts as one commit);
`full_history` lists every commit in topological order instead.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import git


class HistoryError(ValueError):
    """A user error about the repository or a revision (one line, exit code 2)."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str  # ISO 8601, the author date

    @property
    def short(self) -> str:
        return self.sha[:10]


@dataclass(frozen=True)
class Range:
    good: Commit  # the verified-good end (the merge base when the given good end is not an ancestor of bad)
    bad: Commit
    candidates: list[Commit]  # oldest first; the last one is `bad`
    given_good: str  # the good end's SHA as given, before any merge-base substitution

    @property
    def used_merge_base(self) -> bool:
        return self.good.sha != self.given_good


def open_repo(path: str | Path) -> git.Repo:
    if shutil.which(os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git") is None:
        raise HistoryError("bisect runs git, and there is no `git` program on PATH; install git or put it on PATH")
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise HistoryError(f"{path}: not a git repository; pass one with --repo PATH") from None


def commit(repo: git.Repo, rev: str) -> Commit:
    try:
        c = repo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError):
        raise HistoryError(f"{repo.working_dir}: unknown revision {rev!r}; give a commit, tag or branch that "
                           f"exists in this repository") from None
    return Commit(c.hexsha, c.summary if isinstance(c.summary, str) else c.summary.decode(), c.author.name or "",
                  c.authored_datetime.isoformat())


def bisect_range(repo: git.Repo, good: str, bad: str, full_history: bool = False) -> Range:
    good_commit, bad_commit = commit(repo, good), commit(repo, bad)
    if good_commit.sha == bad_commit.sha:
        raise HistoryError(f"--good and --bad are the same commit ({good_commit.short}); give two different ones")
    base = good_commit
    if not repo.is_ancestor(good_commit.sha, bad_commit.sha):
        bases = repo.merge_base(good_commit.sha, bad_commit.sha)
        if not bases:
            raise HistoryError(f"{good} and {bad} have no common history; give a good end on the bad end's branch")
        base = commit(repo, bases[0].hexsha)
        if base.sha == bad_commit.sha:
            raise HistoryError(f"--bad {bad} is an ancestor of --good {good}; did you swap them?")
    args = ["--reverse", "--topo-order"] + ([] if full_history else ["--first-parent"])
    shas = repo.git.rev_list(*args, f"{base.sha}..{bad_commit.sha}").split()
    if not shas or shas[-1] != bad_commit.sha:
        raise HistoryError(f"no commits between {good} and {bad}")
    return Range(base, bad_commit, [commit(repo, s) for s in shas], good_commit.sha)


def submodule_shas(repo: git.Repo, sha: str) -> dict[str, str]:
    """The gitlinks (submodule path -> pinned SHA) recorded in a commit's tree."""
    try:
        listing = repo.git.ls_tree("-r", "-d", sha)  # -d: trees and gitlinks only, no blobs (cheap on big trees)
    except git.GitCommandError:
        return {}
    pins = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        mode, kind, object_sha = meta.split()
        if kind == "commit":
            pins[path] = object_sha
    return pins

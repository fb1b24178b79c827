"""The static pre-screen: offlint's rules on every candidate commit, read with `git archive`, no checkout.

Only the files offlint reads (.py, .yaml, .yml, .sh) are extracted, into a temporary directory per distinct
set of those files: commits that changed none of them share the previous verdict, so linting "every"
commit costs one lint per change to a configuration file. The prediction (the first predicted-bad commit
after the last predicted-good one) is tested first by the search; with `--probe lint` the pre-screen is the
probe itself, and a configuration error that the rules predict is found without any checkout or run.
Submodule contents are not extracted: the megatron-core version is the installed one (or `--mcore-version`).
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Callable

import git

from offlint.bisect.child import lint_verdict
from offlint.bisect.classify import Classified, from_result_file
from offlint.bisect.history import Commit
from offlint.bisect.probes import Probe, Terms
from offlint.outcomes import Outcome

READ_SUFFIXES = (".py", ".yaml", ".yml", ".sh")


class Prescreen:
    def __init__(self, repo: git.Repo, commits: list[Commit], probe: Probe):
        if probe.config_in_repo is None:
            raise ValueError("--prescreen needs a --config inside the repository (it is read at each commit)")
        self.repo, self.commits, self.probe = repo, commits, probe
        self.verdicts: dict[int, Classified] = {}
        self.lints = 0  # distinct file sets linted

    def fingerprint(self, sha: str) -> str:
        """A digest of the blobs offlint would read at `sha` (same digest, same lint verdict)."""
        listing = self.repo.git.ls_tree("-r", sha)
        relevant = [line for line in listing.splitlines() if line.split("\t", 1)[-1].endswith(READ_SUFFIXES)]
        return hashlib.sha256("\n".join(relevant).encode()).hexdigest()

    def run(self, progress: Callable[[str], None] = lambda line: None) -> dict[int, Classified]:
        by_fingerprint: dict[str, Classified] = {}
        for position, commit in enumerate(self.commits):
            key = self.fingerprint(commit.sha)
            if key not in by_fingerprint:
                by_fingerprint[key] = self.lint_at(commit.sha)
                self.lints += 1
                verdict = by_fingerprint[key]
                progress(f"[{commit.short}] pre-screen: {verdict.outcome.value}"
                         + (f" {verdict.signature}" if verdict.signature else "") + f"  {commit.subject[:60]}")
            self.verdicts[position] = by_fingerprint[key]
        return self.verdicts

    def lint_at(self, sha: str) -> Classified:
        with tempfile.TemporaryDirectory(prefix="offlint-prescreen-") as directory:
            root = Path(directory)
            extract(self.repo, sha, root)
            config = root / self.probe.config_in_repo
            result = lint_verdict(str(config), self.probe.recipe, self.probe.overrides, self.probe.select, root,
                                  self.probe.mcore_version)
        verdict = from_result_file(result) or Classified(Outcome.BUILD_FAILURE)
        verdict.detail = f"static (git archive, no checkout): {verdict.detail}".replace(str(root) + "/", "")
        return verdict

    def prediction(self, terms: Terms) -> int | None:
        """The predicted first bad position: the first predicted-bad one after the last predicted-good one."""
        searching_fix = Outcome.PASS in terms.bad
        bad = Outcome.PASS if searching_fix else Outcome.CRASH
        good = Outcome.CRASH if searching_fix else Outcome.PASS
        states = [self.verdicts[p].outcome for p in range(len(self.commits))]
        goods = [p for p, o in enumerate(states) if o is good]
        if not goods or states[-1] is not bad:
            return None
        after = [p for p in range(goods[-1] + 1, len(states)) if states[p] is bad]
        return after[0] if after else None


def extract(repo: git.Repo, sha: str, destination: Path) -> None:
    """The files offlint reads at `sha`, streamed out of `git archive` (no worktree, no index)."""
    process = subprocess.Popen(["git", "archive", "--format=tar", sha], cwd=repo.working_dir,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
            for member in archive:
                if member.isfile() and member.name.endswith(READ_SUFFIXES):
                    archive.extract(member, destination, filter="data")
    finally:
        process.stdout.close()
        process.wait()

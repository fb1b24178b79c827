"""offlint bisect: find the commit where a configuration started (or stopped) failing.

history -> worktree -> probe (a Step run by a StepRunner) -> classify -> search -> journal -> report.
"""

import os

# GitPython checks for a git program when it is first imported and raises ImportError where there is none, which
# `offlint --help` (it lists this command) had shown as an internal error. Quiet, the import succeeds; bisect itself
# says in one line that it needs git (history.open_repo).
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")

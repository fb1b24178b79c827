"""offlint bisect: find the commit where a configuration started (or stopped) failing.

history -> worktree -> probe (a Step run by a StepRunner) -> classify -> search -> journal -> report.
"""

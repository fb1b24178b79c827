"""`offlint check --fix / --unsafe-fixes / --diff / --show-fixes`: ruff's fix workflow for offlint's findings.

spec.py is the fix as data (read with the rules, imports nothing heavy); plan.py turns findings into edits at
the places their provenance names; python_edit.py (libcst), yaml_edit.py and shell_edit.py carry edits out on
one file's text; apply.py writes files atomically and refuses files that changed, are read-only or do not parse;
run.py drives check -> plan -> edit -> write until nothing more is fixable. Only run.py is imported by the CLI,
and only when a fix or a diff is asked for, so a plain `check` never imports libcst.
"""

from offlint.cli import run

run()

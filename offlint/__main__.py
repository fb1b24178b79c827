"""`python -m offlint` and the `offlint` console script. The command line's imports (0.2-0.5 s) are made inside
the guard: a Ctrl-C while they load is the same one line and exit code 130 as later, not a Python traceback."""

import sys


def main() -> None:
    try:
        from offlint.cli import run
    except KeyboardInterrupt:
        sys.stderr.write("offlint: interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()

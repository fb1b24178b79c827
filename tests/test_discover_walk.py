"""A walk asks each .gitignore about the paths it reaches (GitIgnore.match_walked), which tries a one-segment pattern
at a path's last name alone: the files found must be those that asking `match` of every path finds."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from offlint import discover
from offlint.discover import Exclusion
from offlint.gitignore import GitIgnore

NAMES = ["a", "b", "build", "x.py", "y.yaml", "run.sh", "logs1", "data", "a.pyc", "keep.py", "d.egg-info", "ab"]
LINES = ["*.py", "build/", "/a", "a/", "b/x.py", "**/data", "data/*.py", "!keep.py", "!b/", "*.pyc", "logs*",
         "a/**/y.yaml", "*.sh", "x.py", "!*.sh", "[ab]", "?b", "d*/", "**/a/*.py", "b", "*/x.py", "# c", ""]


@st.composite
def trees(draw):
    """Paths of files (folders are the paths' prefixes) and .gitignore files' lines by folder ("" the root)."""
    files = draw(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join), min_size=1,
                          max_size=14))
    folders = sorted({"/".join(path.split("/")[:depth]) for path in files for depth in range(len(path.split("/")))})
    ignores = {folder: draw(st.lists(st.sampled_from(LINES), max_size=6))
               for folder in draw(st.lists(st.sampled_from(folders), max_size=3, unique=True))}
    return files, ignores


def _walk(root: Path) -> list[tuple[str, str, str]]:
    return list(discover._walk_now(str(root), Exclusion(names=())))


@settings(max_examples=300, deadline=None)
@given(trees())
def test_a_walk_finds_what_asking_match_of_every_path_finds(tree):
    files, ignores = tree
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for path in files:
            target = root / path
            if any(parent.is_file() for parent in target.parents) or target.is_dir():
                continue  # a name that is a file in one path and a folder in another: the first one stands
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x = 1\n")
        for below, lines in ignores.items():
            if (root / below).is_dir():
                (root / below / ".gitignore").write_text("\n".join(lines) + "\n")
        walked = _walk(root)
        plain = GitIgnore.match_walked
        try:
            GitIgnore.match_walked = GitIgnore.match
            expected = _walk(root)
        finally:
            GitIgnore.match_walked = plain
    assert walked == expected, (files, ignores)


def test_a_one_segment_pattern_is_tried_at_the_last_name_alone():
    ignore = GitIgnore(["*.pyc", "build/", "docs/_build", "**/x/*.py"])
    name, rest = ignore._walked
    assert "pyc" in name.pattern and "build" in name.pattern and "_build" not in name.pattern  # one segment each
    assert "docs/_build" in rest.pattern and "x/" in rest.pattern and "pyc" not in rest.pattern
    for path in ("a.pyc", "a/b.pyc", "a/build/", "docs/_build", "docs/_build/", "q/x/y.py", "a/b.py", "build"):
        walked = ignore.match_walked(path)
        assert ignore._compiled_joined is None  # a walk does not compile the joined regex
        assert walked == ignore.match(path), path
        ignore._compiled_joined = None
    assert ignore._regex.groups == 1  # compiled when `match` needs it: one group, the one run's
    assert GitIgnore(["*.pyc", "!keep.pyc"])._walked is None  # a `!` pattern: every path asks `match`


def test_a_walk_tells_kinds_by_os_path_splitext_s_extension(tmp_path):
    """The walk takes a name's extension itself (no os.path.splitext call per entry): the same one, names of
    leading dots and upper-case extensions included."""
    import os

    names = [".sh", "..sh", "...py", ".a.sh", "a.", "a..py", "x.PY", "y.Yml", ".bashrc", "b.tar.sh", "c.SLURM",
             "noext", "..", "d.txt", ".hidden.yaml", "e.py.bak"]
    for name in names:
        if name != "..":
            (tmp_path / name).write_text("#!/bin/bash\necho\n")
    found = {below: kind for below, kind, _ in _walk(tmp_path)}
    for name in names:
        if name == "..":
            continue
        extension = os.path.splitext(name)[1]
        expected = discover.EXTENSIONS.get(extension.lower()) or (None if extension else "shell")
        assert found.get(name) == expected, name


def test_slurm_jobs_are_shell_scripts_by_any_of_their_usual_extensions(tmp_path):
    """The Kempner Institute's NeMo workflows name all their Slurm jobs `*.slrm` (a helper's sweep: 20 launch
    scripts, none read)."""
    for name in ("a.sbatch", "b.slurm", "c.slrm"):
        (tmp_path / name).write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun python train.py\n")
    assert {below: kind for below, kind, _ in _walk(tmp_path)} == {"a.sbatch": "shell", "b.slurm": "shell",
                                                                   "c.slrm": "shell"}


def test_a_job_file_is_a_shell_script_when_its_first_line_says_so(tmp_path):
    """SURF's Snellius launches are `*.job` files (a helper's sweep: five Megatron-LM launches, none read, and
    `offlint check x.job` refused the file as no shell script). `.job` names other schedulers' files too (an
    HTCondor submit description), so, as for a file with no extension, its #! line decides."""
    (tmp_path / "train.job").write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun python pretrain_gpt.py\n")
    (tmp_path / "condor.job").write_text("executable = train.sh\nqueue\n")
    assert {below: kind for below, kind, _ in _walk(tmp_path)} == {"train.job": "shell"}
    assert discover.kind_of(tmp_path / "train.job") == "shell" and discover.kind_of(tmp_path / "condor.job") is None
    # named (pre-commit's pattern names every .job): the script is read, the submit description passed over
    files, problems = discover.discover([str(tmp_path / "train.job"), str(tmp_path / "condor.job")], root=tmp_path)
    assert [(Path(f.path).name, f.kind) for f in files] == [("train.job", "shell")] and problems == []


def test_a_makefile_with_a_shell_first_line_is_no_shell_script(tmp_path):
    """OpenManus-RL vendors a planner whose `makefile` starts with `#!/bin/sh` (a helper's sweep): make reads the line
    as a comment, and offlint read the file as a shell script and stopped on its rules ("cannot parse shell script",
    exit 2 for the whole tree). A script with no extension is still read by its #! line."""
    for name in ("makefile", "Makefile", "GNUmakefile"):
        (tmp_path / name).write_text("#!/bin/sh\nall: main.o\n.c.o:; $(CC) -c $(CFLAGS) $<\n")
    (tmp_path / "launch").write_text("#!/bin/bash\nsrun python pretrain_gpt.py\n")
    assert {below: kind for below, kind, _ in _walk(tmp_path)} == {"launch": "shell"}
    assert discover.kind_of(tmp_path / "makefile") is None
    files, problems = discover.discover([str(tmp_path / "Makefile")], root=tmp_path)
    assert files == [] and problems == []

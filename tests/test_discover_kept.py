"""A walk's listing is kept in the warm start (discover._kept_walk) and taken again only while nothing it read has
changed: every folder it listed and every file it opened (.gitignore files, the heads of extension-less files).
Whatever changes, discovery finds what a walk finds."""

import os
import time

import pytest

from offlint import discover
from offlint.discover import discover as find
from offlint.warm_start import WarmStart, remembered


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.yaml").write_text("a: 1\n")
    (tmp_path / "pkg" / "notes.txt").write_text("not ours\n")
    (tmp_path / "run").write_text("echo no shebang\n")
    (tmp_path / ".gitignore").write_text("build_out/\n*.tmp.py\n")
    (tmp_path / "x.tmp.py").write_text("y = 2\n")
    return tmp_path


@pytest.fixture
def walks(monkeypatch):
    """The walks done from now on (a kept listing taken is none)."""
    done = []
    original = discover._walk_now

    def counting(*args, **kwargs):
        done.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(discover, "_walk_now", counting)
    return done


def _found(warm: WarmStart | None):
    with remembered(warm):
        return find(["."])


def _later():
    """Past the file system's clock tick: a change from now on gives other times than those noted."""
    time.sleep(0.05)


CHANGES = {
    "file added": lambda root: (root / "pkg" / "sub" / "c.py").write_text("z = 3\n"),
    "file removed": lambda root: (root / "pkg" / "a.py").unlink(),
    "folder renamed": lambda root: (root / "pkg" / "sub").rename(root / "pkg" / "moved"),
    "gitignore edited in place": lambda root: (root / ".gitignore").write_text("pkg/sub/\n"),
    "gitignore added below": lambda root: (root / "pkg" / ".gitignore").write_text("a.py\n"),
    "shebang added in place": lambda root: (root / "run").write_text("#!/bin/bash\necho now a script\n"),
    "file becomes a link": lambda root: ((root / "pkg" / "a.py").unlink(),
                                         (root / "pkg" / "a.py").symlink_to(root / "x.tmp.py")),
    "folder mode changed": lambda root: os.chmod(root / "pkg" / "sub", 0o700),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_kept_listing_is_taken_only_while_nothing_it_read_changed(tree, walks, monkeypatch, change):
    monkeypatch.setattr(discover, "RACY_NS", -10**12)  # the tree was made just now: kept anyway
    warm = WarmStart(None)
    first = _found(warm)
    assert first == find(["."]) and len(walks) == 2
    assert _found(warm) == first and len(walks) == 2  # taken as kept: no walk
    _later()
    CHANGES[change](tree)
    after = _found(warm)
    assert len(walks) == 3  # walked again
    assert after == find(["."])
    if change != "folder mode changed":
        assert after != first


def test_a_listing_of_a_tree_changed_just_before_the_walk_is_not_kept(tree, walks):
    warm = WarmStart(None)
    _found(warm)
    _found(warm)
    assert len(walks) == 2  # the tree was made less than RACY_NS ago: walked each time


def test_a_listing_is_kept_per_root_and_exclusions(tree, walks, monkeypatch):
    monkeypatch.setattr(discover, "RACY_NS", -10**12)
    warm = WarmStart(None)
    with remembered(warm):
        everything = find(["."])[0]
        fewer = find(["."], exclusion=discover.Exclusion.of([("sub", str(tree))]))[0]
        below = find(["pkg"])[0]
    assert len(walks) == 3
    assert fewer != everything and "pkg/sub/b.yaml" not in {f.path for f in fewer}
    assert {f.path for f in below} == {"pkg/a.py", "pkg/sub/b.yaml"}


def test_a_listing_that_met_a_problem_is_not_kept(tree, walks, monkeypatch):
    monkeypatch.setattr(discover, "RACY_NS", -10**12)
    (tree / "pkg" / "bad").mkdir()
    monkeypatch.setattr(discover.os, "scandir", _failing_on("bad", discover.os.scandir))
    warm = WarmStart(None)
    first = _found(warm)
    assert first[1] and first[1][0][0] == "pkg/bad"  # reported
    assert _found(warm) == first and len(walks) == 2  # and walked again, so reported again


def _failing_on(name, scandir):
    def failing(path):
        if os.path.basename(str(path).rstrip("/")) == name:
            raise PermissionError(13, "Permission denied")
        return scandir(path)
    return failing


def test_a_kept_listing_survives_the_warm_start_file(tree, walks, monkeypatch):
    monkeypatch.setattr(discover, "RACY_NS", -10**12)
    cache = tree.parent / f"{tree.name}-cache"
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(cache))
    cache.mkdir(mode=0o700)
    (cache / tree.name).mkdir(mode=0o700)
    warm = WarmStart.load(tree)
    warm.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    first = _found(warm)
    warm.save()
    again = WarmStart.load(tree)
    assert _found(again) == first and len(walks) == 1


def test_a_check_sees_a_file_added_after_its_listing_was_kept(tmp_path, monkeypatch):
    from offlint.api import CheckOptions, check

    monkeypatch.setattr(discover, "RACY_NS", -10**12)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINT_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tree'\n")
    (tmp_path / "launch").mkdir()
    (tmp_path / "launch" / "quiet.sh").write_text("#!/bin/bash\necho nothing to check\n")
    options = CheckOptions(root=tmp_path, mcore_version="0.20.0", cache=True, workers=1)
    first = check(["."], options)
    walked = []
    original = discover._walk_now
    monkeypatch.setattr(discover, "_walk_now", lambda *args: walked.append(1) or original(*args))
    assert check(["."], options).files_checked == first.files_checked == 1 and walked == []  # the kept listing
    _later()
    (tmp_path / "launch" / "offload.sh").write_text(
        "#!/bin/bash\npython pretrain_gpt.py --cpu-offloading --cpu-offloading-num-layers 2 "
        "--pipeline-model-parallel-size 4 --num-layers 8\n")
    after = check(["."], options)
    assert walked and after.files_checked == 2
    uncached = check(["."], CheckOptions(root=tmp_path, mcore_version="0.20.0", cache=False, workers=1))
    assert sorted(map(repr, after.findings)) == sorted(map(repr, uncached.findings)) and after.findings

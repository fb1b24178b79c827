"""The entry-script reader's memos (entry_scripts._Reach: import lookups, a script's walk) and its shortcut of the
parser-patch search give what the plain computation gives. The import lookups are kept with the parsed modules by
the paths on sys.path: a module found only through a folder one script adds to sys.path is not found for a script
that adds none, and a lookup answered from the memo adds to sys.path what the lookup itself added. Fixtures of our
own, in the shape of Pai-Megatron-Patch's convertors (a top-level `sys.path.append` of a folder beside the file)."""

from __future__ import annotations

import pytest

from offlint.sources import entry_scripts

ADDS_EXTRA = ("import os\nimport sys\n\n"
              "sys.path.append(os.path.join(os.path.dirname(os.path.realpath(__file__)), 'extra'))\n")
TEXTS = {
    "a/script.py": ADDS_EXTRA + "import only_here\nfrom pkg import tools\n",
    "a/extra/only_here.py": ("import os\nimport sys\n\nimport megatron.training.arguments\n\n"
                             "sys.path.append(os.path.join(os.path.dirname(os.path.realpath(__file__)), 'more'))\n"
                             "megatron.training.arguments.parse_args = lambda: None\n"),
    "a/extra/more/deeper.py": "VALUE = 1\n",
    "b/user.py": "import only_here\nimport deeper\nfrom pkg import tools\n",
    "pkg/__init__.py": "",
    "pkg/tools.py": "def run():\n    pass\n",
}


def _reach(memo: dict | None, search_paths: list[str]) -> entry_scripts._Reach:
    reach = entry_scripts._Reach("launch.sh", lambda path, near: TEXTS.get(path), memo)
    reach.search_paths = list(search_paths)
    return reach


def _plain_imported(search_paths: list[str], path: str) -> list[str]:
    reach = _reach(None, search_paths)
    module = reach._module(path)
    reach.search_paths = list(search_paths)  # (as the memo's caller had them)
    return reach._imported_files_of(module, module.top_level, True)


@pytest.mark.parametrize("order", [("none", "extra"), ("extra", "none")])
def test_imported_files_are_kept_by_the_paths_on_sys_path(order):
    memo: dict = {}
    paths = {"none": [], "extra": ["a/extra", "a/extra/more"]}
    for name in order:
        reach = _reach(memo, paths[name])
        module = reach._module("b/user.py")
        reach.search_paths = list(paths[name])
        found = reach._imported_files(module, module.top_level, every=True)
        assert found == _plain_imported(paths[name], "b/user.py")
    assert _plain_imported([], "b/user.py") == ["pkg/__init__.py", "pkg/tools.py"]
    assert "a/extra/only_here.py" in _plain_imported(paths["extra"], "b/user.py")


def test_a_resolved_import_from_the_memo_adds_to_sys_path_what_the_lookup_added():
    memo: dict = {}
    first = _reach(memo, ["a/extra"])
    resolved = first._resolve("b/user.py", "only_here", "run")
    assert resolved is not None and resolved[0].path == "a/extra/only_here.py"
    assert first.search_paths == ["a/extra", "a/extra/more"]  # (only_here's own sys.path entry, as Python adds it)
    again = _reach(memo, ["a/extra"])
    assert ("module of", "b/user.py", "only_here", ("a/extra",)) in memo  # (answered from the memo)
    assert again._resolve("b/user.py", "only_here", "run")[0] is resolved[0]
    assert again.search_paths == first.search_paths
    # without the folder on sys.path the same import is not the tree's, whatever the memo holds
    assert _reach(memo, [])._resolve("b/user.py", "only_here", "run") is None
    # a name the module lacks is its submodule's file where one exists
    assert _reach(memo, [])._resolve("b/user.py", "pkg", "tools")[0].path == "pkg/tools.py"
    assert _reach(memo, [])._resolve("b/user.py", "pkg", "run") == (memo["pkg/__init__.py"], "run")


def test_the_plain_and_kept_answers_of_a_script_agree():
    """module_patches_parser walks the imports a script reaches (only_here.py, found through the folder the script
    adds to sys.path, replaces parse_args): the same with a shared memo asked twice as with none."""
    shared: dict = {}
    for _ in range(2):
        assert entry_scripts._Reach.module_patches_parser(_reach(shared, []), "a/script.py") is True
        assert entry_scripts._Reach.module_patches_parser(_reach(None, []), "a/script.py") is True
    reach = _reach(shared, [])
    module = reach._module("a/script.py")
    assert reach._imports_reached(module, module.top_level)[:2] == ["a/extra/only_here.py", "pkg/__init__.py"]


@pytest.mark.parametrize("text", [
    'megatron.training.arguments.parse_args = my_parse_args\n',
    'patch("megatron.training.arguments.parse_args", wrapper)\n',
    'setattr(arguments, "parse_args", parse)\n',
    'args = parser.parse_args()\n',  # a call, not a replacement
    'import megatron\n',
    '',
])
def test_the_parser_patch_test_agrees_with_the_pattern(text):
    assert entry_scripts._patches_parser(text) == (entry_scripts._PARSER_PATCH.search(text) is not None)


WALKED = {
    "run.py": ("import os\nfrom helpers import setup\n\n\ndef main(args):\n    setup(args)\n"
               "    os.environ['NCCL_ALGO'] = 'Ring'\n    args.use_distributed_optimizer = True\n\n\n"
               "if __name__ == '__main__':\n    main(None)\n"),
    "helpers.py": "import os\n\n\ndef setup(args):\n    os.environ.setdefault('CUDA_DEVICE_MAX_CONNECTIONS', '1')\n"
                  "    args.bf16 = True\n",
}


def test_a_scripts_walk_is_shared_by_its_answers():
    """module_writes and module_run_facts walk the same reach: asked of one memo, each in either order, they give
    what each gives alone."""
    def reach(memo):
        return entry_scripts._Reach("launch.sh", lambda path, near: WALKED.get(path), memo)

    alone = (entry_scripts._Reach.module_writes(reach(None), "run.py"),
             entry_scripts._Reach.module_run_facts(reach(None), "run.py"))
    assert sorted(w.attribute for w in alone[0]) == ["bf16", "use_distributed_optimizer"]
    assert {w.name for w in alone[1][1]} == {"NCCL_ALGO", "CUDA_DEVICE_MAX_CONNECTIONS"}
    for first_writes in (True, False):
        memo: dict = {}
        if first_writes:
            writes = entry_scripts._Reach.module_writes(reach(memo), "run.py")
            facts = entry_scripts._Reach.module_run_facts(reach(memo), "run.py")
        else:
            facts = entry_scripts._Reach.module_run_facts(reach(memo), "run.py")
            writes = entry_scripts._Reach.module_writes(reach(memo), "run.py")
        assert (writes, facts) == alone
        assert ("reached", "run.py") in memo

"""Hostile inputs (issue 20), one generator each: shared by tests/test_hostile_input.py (does each give the right
answer?) and benchmarks/hostile_inputs.py (how long, how much memory?).

A case writes files into an empty project folder (which already holds `pyproject.toml` and `ok.py`, a recipe with
one OFL102 finding at line 4) and names the offlint command to run there. `expect` says what must come out:
checked normally (exit 0 or 1, no error line), or, with `errors`, exit 2 and one line per hostile file
(`offlint: error: PATH: ...`, each holding the text given, which starts with the path where it is relative). Where `ok.py` is among the checked files, its finding must still be there.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

LIMIT = 2 * 1024 * 1024
NEAR_LIMIT = LIMIT - 100 * 1024  # "1.9 MiB": just under offlint's size limit

# A recipe that checks normally and has one finding (OFL102: offloading with PP=2); other tests use it too.
PP_OFFLOAD_RECIPE = """\
def recipe():
    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), optimizer=OptimizerConfig(),
                          ddp=DistributedDataParallelConfig())
    cfg.model.cpu_offloading = True
    cfg.model.pipeline_model_parallel_size = 2
    cfg.model.cpu_offloading_num_layers = 2
    return cfg
"""
OK_FINDING = b"ok.py:4:5: OFL102"
LAUNCH = "python run_recipe.py --recipe recipe model.cpu_offloading=True model.pipeline_model_parallel_size=2"


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path], None]
    args: tuple[str, ...]  # after `offlint`, run in the project folder
    errors: tuple[str, ...] = ()  # one error line holding each of these (in sorted order); () = checked
    checks_ok: bool = True  # ok.py is among the checked files: its finding must be reported
    slow: bool = False  # takes seconds even when right (marked slow in the tests)
    needs_git: bool = False
    unprivileged: bool = False  # run without root's power to read any file (drop_root_file_access)


def drop_root_file_access() -> None:
    """`preexec_fn`: the child loses what lets root ignore file permissions (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH, dropped from the bounding set, so the interpreter it executes never has them). It keeps
    uid 0, so it can still run an interpreter installed under /root, which `nobody` could not."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "ok.py").write_text(PP_OFFLOAD_RECIPE)
    return root


def _fill(line_of: Callable[[int], str], size: int = NEAR_LIMIT, head: str = "", tail: str = "") -> str:
    """`head`, then lines line_of(0), line_of(1), ... while the text stays under `size` bytes, then `tail`."""
    parts, total, index = [head], len(head.encode()) + len(tail.encode()), 0
    while True:
        line = line_of(index)
        if total + len(line.encode()) > size:
            break
        parts.append(line)
        total += len(line.encode())
        index += 1
    parts.append(tail)
    return "".join(parts)


def _write(name: str, text: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        (root / name).write_text(text)
    return build


# ---------------------------------------------------------------------------------------------- YAML

def alias_bomb(levels: int, width: int = 10, leaf: str = '"python run_recipe.py --recipe x"',
               under_model: bool = False) -> str:
    """Anchors each listing the previous one `width` times: `width ** levels` leaves once expanded."""
    lines = [f"a0: &a0 {leaf}"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    if under_model:
        lines.append(f"model:\n  cpu_offloading_num_layers: *a{levels}")
    return "\n".join(lines) + "\n"


MODEST_ALIASES = """\
base: &base {cpu_offloading: true, cpu_offloading_num_layers: 2}
layers: &layers [1, 2, 3, 4]
model:
  <<: *base
  pipeline_model_parallel_size: 2
optimizer: {lr_warmup_iters: 10}
cards: [*layers, *layers, *layers, *layers]
"""


_SIZES = "model:\n  num_layers: 2\n  hidden_size: 64\n  num_attention_heads: 4\n  vocab_size: 1000\n  seq_length: 128\n"


def _yaml_keys(root: Path) -> None:
    """A `model:` section of five config fields and 1.9 MiB of keys no config has: another program's
    configuration (yaml_file.is_bridges), refused in one line."""
    (root / "big.yaml").write_text(_fill(lambda i: f"  key_{i}: {i}\n", head=_SIZES))


def _yaml_env_keys(root: Path) -> None:
    """A Bridge override file whose env_vars hold 1.9 MiB of variables: every one read, resolved and checked."""
    (root / "big.yaml").write_text(_fill(lambda i: f"  KEY_{i}: '{i}'\n", head=_SIZES + "env_vars:\n"))


def _yaml_commands_10k(root: Path) -> None:
    (root / "cards.yaml").write_text("cards:\n" + "".join(
        f"  - python run_recipe.py --recipe r{i} model.cpu_offloading=true\n" for i in range(10_000)))


def _yaml_commands(root: Path) -> None:
    (root / "cards.yaml").write_text(_fill(
        lambda i: f"  - python run_recipe.py --recipe r{i} model.cpu_offloading=true\n", head="cards:\n"))


# ---------------------------------------------------------------------------------------------- file system

def _links_to_devices(root: Path) -> None:
    (root / "zero.py").symlink_to("/dev/zero")
    (root / "random.yaml").symlink_to("/dev/urandom")
    (root / "launch").symlink_to("/dev/zero")  # extension-less: a walk would sniff its #! line
    (root / "sub").mkdir()
    (root / "sub" / "zero.sh").symlink_to("/dev/zero")


def _links_out_and_loops(root: Path) -> None:
    (root / "passwd.py").symlink_to("/etc/passwd")
    (root / "loop1.py").symlink_to("loop2.py")
    (root / "loop2.py").symlink_to("loop1.py")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to("..")  # a directory loop
    (root / "etc").symlink_to("/etc")  # a directory outside the project


def _linked_settings(root: Path) -> None:
    (root / ".gitignore").symlink_to("/dev/zero")


def _linked_pyproject(root: Path) -> None:
    (root / "pyproject.toml").unlink()
    (root / "pyproject.toml").symlink_to("/dev/zero")


def _perf_argv(root: Path) -> None:
    (root / "perf.sh").write_text(
        "#!/bin/bash\npython scripts/performance/setup_experiment.py --model_family_name llama --model_recipe_name "
        "llama3_8b --gpu h100 " + " ".join(f"--tp {i % 4 + 1} -cg {i}" for i in range(50_000)) + "\n")


def _unreadable(root: Path) -> None:
    (root / "secret.py").write_text(PP_OFFLOAD_RECIPE)
    (root / "secret.py").chmod(0)
    (root / "closed").mkdir()
    (root / "closed" / "x.py").write_text(PP_OFFLOAD_RECIPE)
    (root / "closed").chmod(0)


def _gitignore_stars(root: Path) -> None:
    (root / ".gitignore").write_text("*a" * 25 + "b\n")  # every split of a long name among 25 stars
    for index in range(20):
        (root / ("a" * 200 + f"{index}.py")).write_text(PP_OFFLOAD_RECIPE)


def _fifos(root: Path) -> None:
    os.mkfifo(root / "pipe.py")
    os.mkfifo(root / "launch")


def _odd_names(root: Path) -> None:
    for name in ("with space.py", "new\nline.py", os.fsdecode(b"latin\xe9.py"), "tab\t.yaml"):
        (root / name).write_text(PP_OFFLOAD_RECIPE if name.endswith(".py") else "model:\n  cpu_offloading: true\n")


# ---------------------------------------------------------------------------------------------- shell

def _shell_commands(root: Path, count: int = 10_000) -> None:
    (root / "many.sh").write_text("#!/bin/bash\n" + "".join(
        f"python run_recipe.py --recipe r{i} model.cpu_offloading=true model.num_layers={i % 7 + 1}\n"
        for i in range(count)))


def _shell_continuations(root: Path) -> None:
    (root / "long.sh").write_text("#!/bin/bash\npython run_recipe.py --recipe r \\\n" + "".join(
        f"    model.key_{i}={i} \\\n" for i in range(10_000)) + "    model.cpu_offloading=true\n")


def _shell_overrides(root: Path) -> None:
    (root / "wide.sh").write_text("#!/bin/bash\npython run_recipe.py --recipe r model.num_layers=2 model.hidden_size=64 "
                                  "model.num_attention_heads=4 model.seq_length=128 "
                                  + " ".join(f"model.k{i}={i}" for i in range(100_000)) + "\n")


def _shell_argv(root: Path) -> None:
    (root / "argv.sh").write_text("#!/bin/bash\ntorchrun pretrain_gpt.py --cpu-offloading "
                                  + " ".join(f"--flag-{i} {i}" for i in range(100_000)) + "\n")


def _shell_heredoc(root: Path) -> None:
    (root / "heredoc.sh").write_text(_fill(lambda i: f"line {i} with $HOME and `quotes' \"\n",
                                           head="#!/bin/bash\ncat > notes.txt <<EOF\n",
                                           tail="EOF\n" + LAUNCH + "\n"))


def _shell_quotes(root: Path) -> None:
    (root / "quotes.sh").write_text(_fill(lambda i: f"echo line {i}\n", head='#!/bin/bash\necho "unterminated\n'))


def _shell_nesting(root: Path) -> None:
    (root / "subshells.sh").write_text("#!/bin/bash\nx=" + "$(echo " * 5000 + "1" + ")" * 5000 + "\n" + LAUNCH + "\n")


def _shell_loop(root: Path) -> None:
    words = " ".join(str(k) for k in range(32))  # (the most passes a loop is read in: shell_walker.MAX_PASSES)
    (root / "loop.sh").write_text(_fill(lambda i: f"  echo line {i} $tp\n", head=f"#!/bin/bash\nfor tp in {words}; do\n",
                                        tail="done\n" + LAUNCH + "\n"))


def _shell_loop_calls(root: Path) -> None:
    words = " ".join(str(k) for k in range(32))
    (root / "calls.sh").write_text(_fill(lambda i: f"  echo line {i} $1\n", head="#!/bin/bash\nbig() {\n",
                                         tail=f"}}\nfor tp in {words}; do big $tp; done\n{LAUNCH}\n"))


def _shell_big(root: Path) -> None:
    (root / "big.sh").write_text(_fill(lambda i: f"# comment line {i}\n", head="#!/bin/bash\n", tail=LAUNCH + "\n"))


# ---------------------------------------------------------------------------------------------- Python

def _python_recipes(root: Path) -> None:
    (root / "recipes.py").write_text("".join(
        f"def recipe_{i}():\n    cfg = ConfigContainer(model=GPTModelProvider(num_layers={i % 9 + 1}, hidden_size=1024, "
        f"num_attention_heads=8, vocab_size=32000, seq_length=2048))\n"
        f"    cfg.model.cpu_offloading = True\n    return cfg\n\n\n" for i in range(5_000)))


def _python_assignments(root: Path) -> None:
    (root / "big.py").write_text(_fill(lambda i: f"    cfg.model.key_{i} = {i}\n",
                                       head="def big_recipe():\n    cfg = ConfigContainer(model=GPTModelProvider())\n",
                                       tail="    return cfg\n"))


def _python_huge_model(root: Path) -> None:
    """A complete model of 99,999,999,999 layers: the memory model sizes each pipeline stage layer by layer, and
    before it refused more than 10,000 layers a check of this one file did not end."""
    (root / "huge.py").write_text(
        "def huge_recipe():\n    cfg = ConfigContainer(model=GPTModelProvider(num_layers=99999999999, hidden_size=4096, "
        "num_attention_heads=32, ffn_hidden_size=14336, vocab_size=128256, seq_length=4096),\n"
        "                          optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        "    cfg.train.micro_batch_size = 1\n    cfg.train.global_batch_size = 8\n    return cfg\n")


def _python_nested_loops(root: Path) -> None:
    """Twelve loops over sixteen literals, one inside another, each writing the config: run pass by pass all the way,
    16 ** 12 passes (loops run so stop two deep)."""
    items = "[" + ", ".join(str(k) for k in range(16)) + "]"
    body = "".join(f"{'    ' * (depth + 1)}for v{depth} in {items}:\n" for depth in range(12))
    (root / "loops.py").write_text(
        "def looped_recipe():\n    cfg = ConfigContainer(model=GPTModelProvider(num_layers=8), "
        "optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig())\n"
        + body + "    " * 13 + "cfg.model.num_layers = v11\n    return cfg\n")


def _python_argv(root: Path) -> None:
    (root / "argv.py").write_text(
        "import subprocess\n\n\ndef launch():\n    cmd = ['python', 'run_recipe.py', '--recipe', 'r', "
        + ", ".join(f"'m.k{i}=1'" for i in range(100_000)) + "]\n    subprocess.run(cmd)\n")


def _python_nesting(root: Path) -> None:
    (root / "parens.py").write_text("def recipe():\n    x = " + "(" * 180 + "1" + ")" * 180 + "\n    return x\n")
    (root / "chain.py").write_text("def recipe():\n    x = " + " + ".join(["1"] * 200_000) + "\n    return x\n")
    (root / "attrs.py").write_text("def recipe():\n    x = cfg" + ".a" * 300_000 + "\n    return x\n")
    (root / "signs.py").write_text("def recipe():\n    x = " + "-" * 1_000_000 + "1\n    return x\n")
    (root / "blocks.py").write_text("def recipe():\n" + "".join("    " * (i + 1) + "if x:\n" for i in range(98))
                                    + "    " * 99 + "cfg.model.cpu_offloading = True\n")


def _python_cycle(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "a.py").write_text(
        "from pkg.b import b_config\n\n\ndef a_config():\n    cfg = b_config()\n    cfg.model.cpu_offloading = True\n"
        "    return cfg\n")
    (root / "pkg" / "b.py").write_text(
        "from pkg.a import a_config\n\n\ndef b_config():\n    cfg = a_config()\n"
        "    cfg.model.pipeline_model_parallel_size = 2\n    return cfg\n")
    (root / "pkg" / "c.py").write_text(  # a recipe calling itself, and three modules in a ring
        "from pkg.d import d_config\n\n\ndef c_config():\n    cfg = c_config() if d_config() else c_config()\n"
        "    return cfg\n")
    (root / "pkg" / "d.py").write_text("from pkg.e import e_config\n\n\ndef d_config():\n    return e_config()\n")
    (root / "pkg" / "e.py").write_text("from pkg.c import c_config\n\n\ndef e_config():\n    return c_config()\n")


# ---------------------------------------------------------------------------------------------- bisect

def _git_history(root: Path, config: str, text: str) -> None:
    """A repository whose first commit has a plain override file and whose second replaces it with `text`."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@t"})
    git("init", "-q", "-b", "main")
    (root / config).write_text("model:\n  cpu_offloading: false\n")
    git("add", "-A")
    git("commit", "-q", "-m", "good")
    (root / config).write_text(text)
    git("add", "-A")
    git("commit", "-q", "-m", "bad")


def _bisect_bomb(root: Path) -> None:
    _git_history(root, "conf.yaml", alias_bomb(11))


ALIAS_ERROR = "bomb.yaml: YAML aliases expand to more than"

CASES: list[Case] = [
    Case("yaml alias bomb 7 levels x10", _write("bomb.yaml", alias_bomb(7)), ("check", "bomb.yaml", "ok.py"),
         (ALIAS_ERROR,)),
    Case("yaml alias bomb 11 levels x10", _write("bomb.yaml", alias_bomb(11)), ("check", "bomb.yaml", "ok.py"),
         (ALIAS_ERROR,)),
    Case("yaml alias bomb in a model key", _write("bomb.yaml", alias_bomb(9, leaf="1", under_model=True)),
         ("check", "bomb.yaml", "ok.py"), (ALIAS_ERROR,)),
    Case("yaml alias bomb, whole tree", _write("bomb.yaml", alias_bomb(11)), ("check",), (ALIAS_ERROR,)),
    Case("yaml modest aliases", _write("modest.yaml", MODEST_ALIASES), ("check", "modest.yaml", "ok.py")),
    Case("yaml module lists of lists", _write("nested.yaml", "model:\n  fine_grained_activation_offloading: true\n"
                                                            "  offload_modules: [[attn_norm], {a: 1}]\n"
                                                            "  recompute_granularity: selective\n"
                                                            "  recompute_modules: [[core_attn]]\n"
                                                            "  cuda_graph_modules: [[attn]]\n"),
         ("check", "nested.yaml", "ok.py")),
    Case("shell ray runtime env JSON 5,000 deep", _write("ray.sh", "ray job submit --runtime-env-json='" + "[" * 5000
                                                          + "]" * 5000 + "' -- python3 train.py --num-layers 4\n"),
         ("check", "ray.sh", "ok.py")),
    Case("yaml nested 100k deep", _write("deep.yaml", "model:\n  x: " + "[" * 100_000 + "]" * 100_000 + "\n"),
         ("check", "deep.yaml", "ok.py"), ("deep.yaml: YAML nested more than 100 levels deep",)),
    Case("yaml 1.9 MiB of keys", _yaml_keys, ("check", "big.yaml", "ok.py"), slow=True),
    Case("yaml 1.9 MiB of environment variables", _yaml_env_keys, ("check", "big.yaml", "ok.py"), slow=True),
    Case("yaml 1.9 MiB of commands", _yaml_commands, ("check", "cards.yaml", "ok.py"),
         ("cards.yaml: more than 10,000 recipes and launch commands in one file",), slow=True),
    Case("yaml 10,000 commands", _yaml_commands_10k, ("check", "cards.yaml", "ok.py"), slow=True),
    Case("shell 10,001 launch commands", lambda root: _shell_commands(root, 10_001), ("check", "many.sh", "ok.py"),
         ("many.sh: more than 10,000 recipes and launch commands in one file",), slow=True),
    Case("links to /dev/zero, /dev/urandom, tree", _links_to_devices, ("check",)),
    Case("links to /dev/zero, changed file", _links_to_devices, ("check", "ok.py")),
    Case("links out of the tree and loops, tree", _links_out_and_loops, ("check",)),
    Case("fifos in the tree, changed file", _fifos, ("check", "ok.py")),
    Case("unreadable file and folder, tree", _unreadable, ("check",),
         ("closed: cannot read directory: Permission denied", "secret.py: cannot read: Permission denied"),
         unprivileged=True),
    Case(".gitignore of 25 stars, long names", _gitignore_stars, ("check",)),
    Case(".gitignore a link to /dev/zero", _linked_settings, ("check",),
         (".gitignore: a symbolic link; offlint does not follow links inside the linted tree",)),
    Case("pyproject.toml a link to /dev/zero", _linked_pyproject, ("check", "ok.py"),
         ("pyproject.toml: cannot read pyproject.toml: not a regular file (a character device)",), checks_ok=False),
    Case("names with spaces, newlines, bytes", _odd_names, ("check",)),
    Case("shell 10,000 launch commands", _shell_commands, ("check", "many.sh", "ok.py"), slow=True),
    Case("shell 10,000 continuation lines", _shell_continuations, ("check", "long.sh", "ok.py"), slow=True),
    Case("shell 100,000 hydra overrides", _shell_overrides, ("check", "wide.sh", "ok.py"), slow=True),
    Case("shell 100,000 argv words", _shell_argv, ("check", "argv.sh", "ok.py"), slow=True),
    Case("shell perf launch, 100,000 argv words", _perf_argv, ("check", "perf.sh", "ok.py"), slow=True),
    Case("shell 1.9 MiB heredoc", _shell_heredoc, ("check", "heredoc.sh", "ok.py"), slow=True),
    Case("shell 1.9 MiB, unbalanced quote", _shell_quotes, ("check", "quotes.sh", "ok.py"),
         ("quotes.sh: cannot parse shell script",), slow=True),
    Case("shell 5,000 nested $(...)", _shell_nesting, ("check", "subshells.sh", "ok.py"),
         ("subshells.sh: cannot parse shell script",)),
    Case("shell 1.9 MiB of comments", _shell_big, ("check", "big.sh", "ok.py"), slow=True),
    Case("shell 1.9 MiB body of a 32-word for loop", _shell_loop, ("check", "loop.sh", "ok.py"), slow=True),
    Case("shell 32-word for loop calling a 1.9 MiB function", _shell_loop_calls, ("check", "calls.sh", "ok.py"),
         slow=True),
    Case("python 5,000 recipes", _python_recipes, ("check", "recipes.py", "ok.py"), slow=True),
    Case("python 1.9 MiB recipe", _python_assignments, ("check", "big.py", "ok.py"), slow=True),
    Case("python argv list of 100,000", _python_argv, ("check", "argv.py", "ok.py"), slow=True),
    Case("python twelve nested loops over literals", _python_nested_loops, ("check", "loops.py", "ok.py")),
    Case("python deep nesting", _python_nesting,
         ("check", "parens.py", "chain.py", "attrs.py", "signs.py", "blocks.py", "ok.py"),
         ("attrs.py: too deeply nested", "chain.py: too deeply nested", "signs.py: Python source nested too deeply")),
    Case("python recipes in a cycle across files", _python_cycle, ("check", "pkg/a.py", "pkg/b.py", "pkg/c.py", "ok.py")),
    Case("python recipes in a cycle, tree", _python_cycle, ("check",)),
    Case("estimate: yaml alias bomb", _write("bomb.yaml", alias_bomb(11)), ("estimate", "bomb.yaml"),
         (ALIAS_ERROR,), checks_ok=False),
    Case("python a model of 99,999,999,999 layers", _python_huge_model, ("check", "huge.py", "ok.py")),
    Case("estimate: a model of 99,999,999,999 layers", _python_huge_model, ("estimate", "huge.py"),
         ("huge.py: huge_recipe: no verdict: it uses 99,999,999,999 layers (it sizes at most 10,000)",),
         checks_ok=False),
    Case("estimate: 5,000 recipes", _python_recipes, ("estimate", "recipes.py", "--recipe", "recipe_4999"),
         checks_ok=False, slow=True),
    Case("estimate: 1.9 MiB of yaml keys", _yaml_keys, ("estimate", "big.yaml"),
         ("big.yaml: no recipe, override file or launch command found in it",), checks_ok=False, slow=True),
    Case("estimate: 1.9 MiB of yaml environment variables", _yaml_env_keys, ("estimate", "big.yaml"),
         ("big.yaml: big.yaml: no verdict: cannot estimate without",), checks_ok=False, slow=True),  # its normal answer
    Case("estimate: 10,000 launch commands", _shell_commands, ("estimate", "many.sh"),
         ("many.sh: ",), checks_ok=False, slow=True),
    Case("estimate: a link to /dev/zero", _links_to_devices, ("estimate", "zero.py"),
         ("zero.py: a symbolic link to /dev/zero, outside the project",), checks_ok=False),
    Case("estimate: a link to /etc/passwd", _links_out_and_loops, ("estimate", "passwd.py"),
         ("passwd.py: a symbolic link to /etc/passwd, outside the project",), checks_ok=False),
    Case("replay --dry-run: a fifo", _fifos, ("replay", "pipe.py", "--dry-run"),
         ("pipe.py: not a regular file (a named pipe (FIFO))",), checks_ok=False),
    Case("replay --dry-run: yaml alias bomb", _write("bomb.yaml", alias_bomb(11)),
         ("replay", "bomb.yaml", "--dry-run"), (ALIAS_ERROR,), checks_ok=False),
    Case("replay --dry-run: 1.9 MiB of yaml keys", _yaml_keys, ("replay", "big.yaml", "--dry-run"),
         ("big.yaml: no recipe, override file or launch command found in it",), checks_ok=False, slow=True),
    Case("replay --dry-run: 1.9 MiB of yaml environment variables", _yaml_env_keys,
         ("replay", "big.yaml", "--dry-run"), checks_ok=False, slow=True),
    Case("replay --dry-run: 100,000 overrides", _shell_overrides, ("replay", "wide.sh", "--dry-run"),
         checks_ok=False, slow=True),
    Case("bisect pre-screen: yaml alias bomb", _bisect_bomb,
         ("bisect", "--good", "HEAD~1", "--bad", "HEAD", "--probe", "lint", "--config", "conf.yaml", "--prescreen"),
         checks_ok=False, needs_git=True),
]

"""The data types every stage shares: where things are, what was assigned, what a unit resolved to, and findings.

Data flows one way: sources produce `Assignment`s grouped in `Unit`s, the resolver turns a unit into a
`ResolvedUnit` of three-valued `Value`s, rules turn resolved units into `Finding`s, reporters print findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class InputError(ValueError):
    """What is wrong is the file's own content (a syntax error, an unclosed quote, a template placeholder): reported
    to its author in one line. Any other exception while reading is offlint's own bug, reported as such."""


@dataclass(frozen=True, order=True)
class Location:
    """A place in a file; line and column are 1-based, as editors and ruff print them."""

    path: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Unknown:
    """A value offlint cannot resolve statically; `reason` says why, for messages and --strict."""

    reason: str

    def __repr__(self) -> str:
        return f"<unknown: {self.reason}>"


class _KeyDefault:
    """In a OneOf: the key keeps the default of its section on this path (resolved per megatron-core version)."""

    def __repr__(self) -> str:
        return "<default>"

    def __reduce__(self):
        return "KEY_DEFAULT"


KEY_DEFAULT = _KeyDefault()


class _Below:
    """In a OneOf of a launch's override: on this path the launch leaves the key to the layers below it (the linked
    recipe's value, else the key's own when unset); resolve.resolve puts that value in its place."""

    def __repr__(self) -> str:
        return "<below>"

    def __reduce__(self):
        return "BELOW"


BELOW = _Below()


@dataclass(frozen=True)
class OneOf(Unknown):
    """A value that depends on which path of a branch ran: one value per path, each with the path's condition.

    It is an Unknown (with the same reason as before, "A, B or unset depending on `if x` (line 4)"), so code that
    does not look inside treats it as unknown; the rule engine evaluates a rule once per consistent combination
    of paths instead, so that a rule holding on every path is reported plainly and one holding on some paths is
    reported with their condition. A path's value is a literal, KEY_DEFAULT, or an Unknown (that path is not
    readable). Its steps say which branch it took at each split: (split id, branch index, condition); two
    values set by the same `if` share the split id, so only matching branches combine.
    """

    # (value on that path, its steps, where that path set it (None: before the split), as written (None: the
    # path leaves the key unset)). A step may carry a fourth item: the command-line flags its condition reads,
    # when it reads nothing else (the path is one a user's own flags choose); and a fifth, True, where it is a
    # launch script's branch that leaves the flag out (launch._on_alternatives: a rule holding only there is
    # possible, engine._by_path).
    paths: tuple[tuple[object, tuple[tuple, ...], Location | None, str | None], ...] = ()


# A OneOf split whose id starts so is one whose conditions offlint does not read (the entry script's code that sets
# a parsed argument on some of its runs): a rule that holds on some of its branches only is possible (--strict),
# where one holding on a branch of a recipe's own `if` is reported with that branch's condition (engine._by_path).
UNREAD_SPLIT = "unread split: "


@dataclass(frozen=True)
class UserInput(Unknown):
    """A value a user gives on the command line (an argparse namespace, or one of its attributes): unknown to a
    static check, and chosen by whoever runs the script, not by the code. `flags` names the options that set it
    ("-ol/--activation_offload_layers"); empty for the namespace itself, which carries the options its parser
    declares instead (`declared`: (dest, option strings) pairs)."""

    flags: tuple[str, ...] = ()
    declared: tuple[tuple[str, tuple[str, ...]], ...] = ()


# A pass of an unrolled shell `for` loop: (the loop as shown, its variable, its word in this pass, all its words)
LoopPass = tuple[str, str, str, tuple[str, ...]]


@dataclass(frozen=True)
class AnyField(Unknown):
    """A value a write whose field name offlint cannot read may have replaced (`setattr(obj, name, value)` in a
    loop over a user's overrides, as Bridge's apply_overrides walks a YAML file): any field may have been set, this
    one no more than the others. `before` is what the code had set it to (a literal, KEY_DEFAULT, an Unknown or a
    OneOf), `at` and `text` where and how. Unknown to the rules; --strict asks what the unit's own code makes of
    a rule, with every key as it was before such writes (resolve.ResolvedUnit.before_catch_all)."""

    before: object = None
    at: Location | None = None
    text: str | None = None


class Source(str, Enum):
    """How a value was written. Rules about spelling (OFL0xx) depend on it."""

    PYTHON = "python"
    YAML = "yaml"
    HYDRA = "hydra"  # a Hydra override token on a command line
    MLM = "mlm"  # a Megatron-LM argparse flag
    PERF = "perf"  # a scripts/performance convenience flag
    ENV = "env"  # a shell export / VAR=value prefix / cfg.env_vars entry
    DEFAULT = "default"


@dataclass(frozen=True)
class Assignment:
    """One key set to one value at one place.

    `value` is what the consumer (megatron-core, Hydra, OmegaConf, argparse) will see, or `Unknown`.
    `text` is the value as written, for messages. `via` is the provenance chain, outermost first
    (for example ("via _pretrain_common() at r.py:12",)); a value copied from a workload record's field ends it
    with the records that passed the field on (`from replace(...) at w.py:9`, python_values.Record.made).
    """

    key: str
    value: object
    location: Location
    source: Source
    text: str = ""
    via: tuple[str, ...] = ()
    # "set", "add" (+key; in Python, an attribute the object's class lacks: python_statements._write_op), "force"
    # (++key), "delete" (~key)
    op: str = "set"


@dataclass(frozen=True)
class ByVersion:
    """A value that depends on the megatron-core version the unit is checked against.

    Bridge's library mutators write different fields on different megatron-core versions (for example
    `set_cuda_graph_modules` sets `cuda_graph_modules` from 0.18 and `cuda_graph_scope` before); the resolver
    picks the choice whose range holds, and ABSENT means "this version leaves the key alone".
    """

    choices: tuple[tuple[str, object], ...]  # (version range as in versions.in_range, value)

    def pick(self, version) -> object:
        from offlint.versions import in_range

        for spec, value in self.choices:
            if in_range(version, spec):
                return value
        return ABSENT


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"

    def __reduce__(self):  # one object in every process: a worker's units are pickled to the parent (`is ABSENT`)
        return "ABSENT"


ABSENT = _Absent()


# An override file's layer (sources/yaml_file): Bridge reads the file with OmegaConf.load; or, where a launch's entry
# script loads YAML with PyYAML itself and may hand Bridge the copy it writes, maybe PyYAML first (linking marks it;
# OFL004's verdict, engine._duplicates)
YAML_LAYER = "yaml"
YAML_LAYER_MAYBE_PYYAML = "yaml (a launch's script may load it with PyYAML first)"


@dataclass
class Layer:
    """A group of assignments that apply together; later layers beat earlier ones within a unit."""

    name: str  # "recipe", "yaml", "command line", "environment", ...
    assignments: list[Assignment] = field(default_factory=list)
    # What unset keys of a section mean in this layer's base: "default" (the section was constructed here,
    # dataclass or argparse defaults apply) or an Unknown (inherited from something offlint did not follow).
    base: dict[str, object] = field(default_factory=dict)
    # A layer a launch command takes over from the recipe or YAML file it names: its assignments were already
    # checked as written in that unit, so spelling rules do not check them again.
    inherited: bool = False


class UnitKind(str, Enum):
    RECIPE = "recipe"  # a Python function (or module body) that builds configs
    YAML = "yaml"  # a YAML override file
    COMMAND = "command"  # a launch command (shell script, card, Hydra overrides or Megatron-LM flags)


class Defaults(str, Enum):
    """Which defaults apply to keys a unit leaves unset."""

    MCORE = "mcore"  # megatron-core / Bridge dataclass defaults
    MLM_CLI = "mlm-cli"  # Megatron-LM argparse defaults (pretrain_gpt.py flags)


@dataclass
class Unit:
    """Something that launches or builds one configuration: a recipe, a YAML file, a command."""

    name: str
    kind: UnitKind
    location: Location
    layers: list[Layer] = field(default_factory=list)
    defaults: Defaults = Defaults.MCORE
    # Sections whose unset keys take defaults; any other section's unset keys are unknown.
    default_sections: frozenset[str] = frozenset()
    # Why the remaining sections are unknown (for messages): section -> reason.
    unknown_sections: dict[str, str] = field(default_factory=dict)
    # Those of them unknown only because a write by a field name offlint cannot read may have set any of their keys
    # (AnyField: a user's overrides): --strict reads their defaults (resolve.ResolvedUnit.before_catch_all).
    overridden_sections: frozenset[str] = frozenset()
    launches_training: bool = False  # OFL301 applies to units that start training
    # A Megatron-LM style launch whose entry script's code builds no optimizer (False: a checkpoint converter passed
    # a training job's flags), True where it does, None where its code does not say (sources/entry_scripts.py
    # builds_optimizer, applied when commands are linked); the optimizer's rules stand aside where it builds none.
    builds_optimizer: bool | None = None
    # A launch whose every path bypasses the training loop (`--skip-train`, `--train-iters 0`,
    # validation.skip_train=true): it evaluates only (linking._evaluates_only), and training's advice (OFL301) is not
    # for it.
    evaluates_only: bool = False
    env_known: bool = False  # the unit defines its launch environment (exports, cfg.env_vars literal)
    # Why a launch command's environment may hold variables offlint cannot see ("" when none): a file its script
    # sourced that offlint could not read (shell_values.Command.env_open). It stays unknown once linked too.
    env_open: str = ""
    recipe: str = ""  # a launch command's `--recipe NAME`, linked to a recipe unit of the linted tree
    config_files: list[tuple[str, Location]] = field(default_factory=list)  # `--config-file X.yaml`
    # A launch's `--config-file` word whose value is chosen when it runs (`"$CONFIG_FILE"`, the caller's `$1`), as
    # written: it may run any YAML override of the tree (linking gives those files the environment it sets).
    config_file_at_run_time: str = ""
    env_location: Location | None = None  # where the unit defines its environment (`cfg.env_vars = {...}`)
    # A performance-launcher command's script as written, then its arguments (None: unresolvable), for the
    # environment that launcher builds from them (sources/perf_env.py, applied when commands are linked).
    launch_args: tuple[str | None, ...] = ()
    # A command's entry script as written (Megatron-LM style, or a script of the tree taking `key=value` overrides):
    # where it is in the tree, its code decides launches_training and whether training runs in Ray's workers
    # (sources/entry_scripts.py, applied when commands are linked).
    entry_script: str = ""
    # The script a Bridge launch runs that loads its recipe by name (`run_recipe.py` as written): where the tree
    # defines the name twice, a library and a benchmark recipe, its recipe_metadata.py says which it loads
    # (sources/bridge_recipe_lookup.py, applied when commands are linked).
    recipe_loader: str = ""
    # A Megatron-LM functional test case (sources/mlm_test_cases.py): its entry script is the one the tree's CI
    # recipes run it with (sources/mlm_ci_recipes.py, found when commands are linked, for OFL007).
    ci_test_case: bool = False
    # A Megatron-LM style command's flags that offlint does not map to a key: the keys they set are unknown
    # rather than argparse defaults (resolve, by each flag's dest in the real parser's data).
    unread_flags: tuple[str, ...] = ()
    # A Megatron-LM style command's words offlint cannot read that are no flag's value (`${EXTRA_ARGS}` unset in the
    # script, a variable its branches set differently), as "`text` at line N": they may hold any flags, so a key
    # the command does not set is unknown rather than argparse's default (resolve).
    opaque_words: tuple[str, ...] = ()
    # The flags such words may give where offlint knows which (a variable the script's branches set to different
    # texts, `--use-distributed-optimizer` on one path): the keys they set are unknown rather than defaults.
    path_flags: tuple[str, ...] = ()
    # A Megatron-LM style command's option words as written (`--lr`, `--bf16`; `--x=1` as `--x`), each where it is
    # and the path it is given on ("" for every path: launch._given_on).
    launch_flags: tuple[tuple[str, Location, str], ...] = ()
    # A Megatron-LM style command's words after its script: (value or None, where, the flags an unreadable word may
    # give or None for any). Where the script is the tree's own and parses them itself, they are its flags
    # (sources/script_flags.py, applied when commands are linked).
    script_args: tuple[tuple[str | None, Location, tuple[str, ...] | None], ...] = ()
    # Where the launch script's variable assignments lie, ((line, col), (line, col)) in its file: a flag given twice
    # from two of them (a model's defaults array, the run's overrides) is layered on purpose, not a slip (OFL004).
    assignment_spans: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = ()
    # Where a launch's words that an unquoted expansion of a string splits into stand (`$MODEL_ARGS`: each of its
    # words is at that expansion): the words of one expansion were written together, in its variable's assignment
    expanded_at: tuple[Location, ...] = ()
    # A YAML override file's top-level sections given twice (`model:`, then `model:` again): (name, the first, the
    # repeat). Their keys flatten to different assignments, so only this shows the repeat OmegaConf.load refuses
    # (OFL004)
    repeated_sections: tuple[tuple[str, Location, Location], ...] = ()
    # Those its entry script's parser in the linked tree does not have (sources/mlm_arguments.py, applied when
    # commands are linked): (flag, where, the option it is closest to or "", the path it is given on or ""). Rule
    # OFL007.
    unknown_flags: tuple[tuple[str, Location, str, str], ...] = ()
    # Beside those, the options that parser requires and the command gives on no path, as argparse names them
    # (`--input-image-path`, `-o/--output`): argparse stops on them first, and OFL007 quotes that.
    missing_required: tuple[str, ...] = ()
    # The words argparse then names in "unrecognized arguments: ..." (`--attn-attention unfused`), in order; "" where
    # offlint cannot tell them all (OFL007 quotes the flag alone there).
    unrecognized: str = ""
    # Those the base parser of the checkout holding its entry script defines (megatron/training/arguments.py, no
    # extra_args_provider's; applied when commands are linked): a fork's own options among them (conditions/layout).
    checkout_flags: tuple[str, ...] = ()
    # That checkout (the folder holding megatron/training/arguments.py, or an old one's megatron/arguments.py; applied
    # when commands are linked), where it is not the working directory: a vendored copy of Megatron-LM is judged as its
    # own megatron-core (api._launch_version)
    checkout: str = ""
    # A bash launch's words that expand an array without braces, `$ARGS[@]` (shell.read_shell): (the expansion as
    # written, where, the word the command gets, "" where offlint cannot read it). Rule OFL008.
    unbraced: tuple[tuple[str, Location, str], ...] = ()
    # The first line of a launch's script file that ends in a carriage return (CRLF line endings; 0: none). bash keeps
    # the `\r`, so a `\` ending such a line does not continue the command (shell.read_shell). Rule OFL009.
    crlf_line: int = 0
    # The GPU a model card's hardware section names for a launch command in it (`GB200: {command: ...}`): where
    # the command's name names none, the unit is sized against it (gpus.unit_gpu).
    card_gpu: str = ""
    # The GPUs a launch command's job runs on, as its launcher computes them (a Bridge performance launch's `-ng`,
    # sources/perf_scripts._world_size); 0 when the command does not say. The memory estimate's world size.
    launch_gpus: int = 0
    # A recipe that built its ConfigContainer and never set env_vars: a launch of it runs with the shell's
    # environment only (the recipe alone does not define one).
    env_unset: bool = False
    # A launch script's branches that offlint decided from variables' defaults, i.e. assuming the environment does
    # not set them (shell_parse Command.assumes): every finding of the unit holds on that path and says so.
    path_condition: str = ""
    # The passes of unrolled `for` loops the launch runs in (shell_values.Command.passes): its findings carry them
    loop_passes: tuple[LoopPass, ...] = ()
    # Where its command is written when the launch script calls the script holding it (`bash worker.sh`): the
    # unit is located at the call (shell_values.Command.written_at); None otherwise
    written_at: Location | None = None
    # The PyTorch container image the launch runs in, as written (`srun --container-image IMAGE`, `docker run ...
    # IMAGE`; sources/launch_torch.container_image): "" where none is named
    container_image: str = ""
    # Where the tree pins a PyTorch before 2.1 for the launch's environment, where it names no image: the pin, as
    # "requirements.txt pins torch==2.0.0", or the Dockerfile nearest the launch (applied when commands are linked;
    # sources/launch_torch.requirements_torch, dockerfile_torch)
    pinned_torch: str = ""
    # Where the tree pins a PyTorch of 2.1 or later for the launch's environment (it names no image): the pin, as
    # "requirements.txt pins torch==2.3" (sources/launch_torch.requirements_new_torch)
    newer_torch: str = ""
    # Where the launch runs only on a PyTorch before 2.0, why: an import of torch._six its start runs ("its code
    # imports torch._six (megatron/optimizer/clip_grads.py:19 ...)", applied when commands are linked; entry_scripts)
    # or an interpreter before Python 3.8 (launch_torch.old_interpreter)
    old_torch: str = ""
    # An option the Megatron-LM style launch passes on every path that only a Megatron-LM from before 2023-09 runs
    # with (mlm_flags.BEFORE_2023_FLAGS), where the checkout holding its entry script in the tree does not define it
    # (a Megatron-DeepSpeed fork still does in 2024; applied when commands are linked)
    before_2023_flag: str = ""
    # Not something that runs on its own (a private function, a helper changing a config it is given): why.
    # Unit rules are not evaluated on it; the units that call it follow it and report what it sets.
    checked_through_callers: str = ""
    # Whose semantics the configuration follows: "bridge" (a ConfigContainer, Bridge syncs paired fields such as
    # the distributed optimizer's), or "megatron-core" (a plain megatron-core program: each consumer reads its
    # own config, get_megatron_optimizer only the OptimizerConfig).
    framework: str = "bridge"
    # The accelerator other than a CUDA GPU a launch's entry script runs on, where its code imports that backend's
    # PyTorch package (sources/entry_scripts.accelerator, applied when commands are linked): "" where it does not
    # say, an Unknown where it imports it only where installed (a `try`). CUDA-only advice (OFL301) stands aside
    # (conditions/settings.py other_accelerator).
    accelerator: str | Unknown = ""
    # Megatron Bridge's named precision recipes the unit gives `mixed_precision` (a name Bridge resolves only when
    # the run starts), as the tree's own get_mixed_precision_config builds them (sources/bridge_precision.py):
    # name -> its MixedPrecisionConfig record, or an Unknown. `precision_file` is that module of the tree; ""
    # when the tree has none (a project that pip-installs Bridge: offlint's table of the recipes applies).
    precision_recipes: dict[str, object] = field(default_factory=dict)
    precision_file: str = ""

    def all_assignments(self) -> list[Assignment]:
        return [a for layer in self.layers for a in layer.assignments]


@dataclass(frozen=True)
class Value:
    """A key's effective value in a unit: known, default, or unknown (rules.md: values are three-valued)."""

    key: str
    state: str  # "known" | "default" | "unknown"
    value: object = None  # the value when known or default; an Unknown when unknown
    assignment: Assignment | None = None  # where it was set (None for defaults)

    @property
    def is_unknown(self) -> bool:
        return self.state == "unknown"


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class Related:
    """Another value that took part in a finding, with the chain it came through."""

    location: Location
    note: str


@dataclass(frozen=True)
class Finding:
    code: str
    slug: str
    severity: Severity
    # Its first line is the short message the concise format shows; the lines after it are the detail (the path
    # it holds on, the unknown values it depends on, provenance) that full and json show too.
    message: str
    location: Location
    unit: str = ""
    related: tuple[Related, ...] = ()
    fix: str = ""
    possible: bool = False  # --strict: the verdict depends on unknown values
    url: str = ""
    stage: str = ""  # where the real stack acts on it (rules.Check.stage); empty for builtin findings
    # The keys the finding read that its unit writes, each with where it is written (its own assignment first
    # for an assignment-scope rule): the places `check --fix` edits (offlint/fix/plan.py).
    written: tuple[tuple[str, Location], ...] = ()
    # Those of `written`'s keys set on a command line (a Hydra override, a Megatron-LM flag): the last layer, which
    # nothing after it changes (a recipe's or YAML file's value may be a launch's preset: fix/plan.is_safe).
    on_command_line: tuple[str, ...] = ()
    unit_path: str = ""  # the file that defines `unit`: a finding elsewhere (a shared helper) names its unit
    # The other units that share this finding at this place (a base builder's line, for example), sorted.
    shared_with: tuple[str, ...] = ()
    # The passes of unrolled shell `for` loops its unit's command runs in (Unit.loop_passes), until api._dedupe
    # merges the findings of all passes and says which words, where not all, they hold for
    passes: tuple[LoopPass, ...] = ()
    # Where the launch command is written, for a finding at the call of the script holding it (Unit.written_at):
    # api._dedupe reports it with that script's own finding there, when they say the same
    command_at: Location | None = None

    @property
    def units(self) -> int:
        """How many units share this finding at this place."""
        return 1 + len(self.shared_with)

    def sort_key(self) -> tuple:
        return (self.location.path, self.location.line, self.location.col, self.code, self.message)


@dataclass(frozen=True)
class FileError:
    """A file offlint could not read or parse; reported as one line, exit code 2."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

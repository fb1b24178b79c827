"""YAML: nested override files (`model: {cpu_offloading: true}`) and cards whose strings hold launch commands.

Values are built with PyYAML's safe constructor, the YAML 1.1 reading OmegaConf uses (`yes` is True, `None`
is the string 'None', `~`/`null` are None). Every key keeps its line and column; a key repeated in one
mapping is kept twice so OFL004 can see it (OmegaConf.load, which Bridge reads override files with, refuses the
file; PyYAML keeps the last one silently).

A file is hostile input: an alias shares its node, so ten anchors each listing the previous one ten times ("a
billion laughs") are a kilobyte of text and ten billion nodes to anyone who walks them as a tree; an alias inside
its own anchor is a loop; nesting is recursion (PyYAML's, and libyaml's, which overflows the C stack). So the event
stream is checked first, in one pass without recursion: how deep the nodes nest and how many nodes the aliases
stand for. Only a file within both bounds is composed, by libyaml where it is installed (five times faster on a
2 MiB file; the nodes, lines and columns are the same), by PyYAML otherwise, and by PyYAML again for the message
when libyaml rejects a file.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import yaml

from offlint import keys
from offlint.gpus import NAMED_GPUS

from offlint.sources.hydra import canonical_key
from offlint.sources.launch import env_string
from offlint.sources.launch_env import opened, opened_because
from offlint.types import YAML_LAYER, Assignment, InputError, Layer, Location, Source, Unit, UnitKind, Unknown

OVERRIDE_SECTIONS = ("model", "optimizer", "ddp", "comm_overlap", "env_vars")
TOP_LEVEL_KEYS = ("mixed_precision",)
# ConfigContainer's other sections (train:, dataset:, dist:, ...): their keys are read too, one level deep (a field
# and its value), since Bridge applies them as it does the modelled ones (the memory model reads
# train.micro_batch_size, OFL003 judges their names against the tree's classes: tree_keys)
_OTHER_SECTIONS = frozenset(keys.OTHER_BRIDGE_SECTIONS) - {*OVERRIDE_SECTIONS, *TOP_LEVEL_KEYS}
# (or Megatron-LM's flags: a SkyPilot task's `ray job submit -- python3 train.py --num-layers 8 ...`)
_COMMAND_HINT = re.compile(r"run_recipe\.py|train\.sh|pretrain_\w+\.py|torchrun|setup_experiment\.py|"
                           r"run_script\.py|torch\.distributed\.run|--(?:tensor|pipeline)-model-parallel-size\b|"
                           r"--num-layers\b|--(?:micro|global)-batch-size\b")
# What a YAML file that gives a unit holds somewhere in its text: a section key of an override file (override_unit),
# a Megatron-LM test case's MODEL_ARGS (mlm_test_cases) or a launch command (command_strings). Searched before
# parsing, and an over-approximation: a key at any depth, quoted or not.
_UNIT_HINT = re.compile(r"^[ \t-]*[\"']?(?:model|optimizer|ddp)[\"']?[ \t]*:|MODEL_ARGS|" + _COMMAND_HINT.pattern, re.M)


def may_give_units(text: str) -> bool:
    """Whether a YAML text may give a unit; False only where none of what gives one is there (see _UNIT_HINT)."""
    return _UNIT_HINT.search(text) is not None


# A Go template's actions (Helm: `{{ $config := .Values.x }}`, `{{- if ... }}`, `{{ end }}`, `{{- define "n" -}}`)
# and a Kubernetes manifest's header: a file with them that is no YAML is a chart's template, not a config
_TEMPLATE_ACTION = re.compile(r"\{\{-?\s*(?:\$\w+\s*:?=|if\b|else\b|end\b|range\b|with\b|define\b|template\b|"
                              r"include\b|block\b)")
_MANIFEST = re.compile(r"^apiVersion:[^\n]*\n(?:[^\n]*\n)*?kind:", re.M)


def is_template(text: str) -> bool:
    """Whether a YAML file that does not parse is a template rendered into YAML elsewhere (a Helm chart's Go
    template, a Kubernetes manifest with template values) rather than a broken config: a discovered one is left
    alone (NeMo Framework Launcher's k8s_templates: PyTorchJobs running torchrun)."""
    return _TEMPLATE_ACTION.search(text) is not None or _MANIFEST.search(text) is not None


MAX_DEPTH = 100  # collections inside each other, aliases expanded (a real override file nests a few levels)
MAX_ALIAS_NODES = 1_000_000  # nodes the aliases of one file stand for, all together
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


class YamlError(InputError):
    pass


class _RedefiningLoader(yaml.SafeLoader):
    """The safe loader, an anchor defined again allowed: YAML gives an alias the closest anchor of its name before
    it, and GitLab CI files redefine one (`script: &launcher` in two jobs); PyYAML and libyaml refuse the second
    ("found duplicate anchor"), which made a valid file an error (exit 2)."""

    def compose_node(self, parent, index):
        if not self.check_event(yaml.AliasEvent):
            self.anchors.pop(self.peek_event().anchor, None)
        return super().compose_node(parent, index)


def compose(text: str):
    """All documents' root nodes (line marks kept); raises YamlError with a one-line message."""
    try:
        roots = _bounded_compose(text, _FAST_LOADER or _RedefiningLoader)
    except yaml.YAMLError as exc:
        if _FAST_LOADER is None:
            raise _invalid(exc) from None
        try:  # libyaml's messages are terse ("found undefined alias"): PyYAML's name what it expected
            roots = _bounded_compose(text, _RedefiningLoader)
        except yaml.YAMLError as exc:
            raise _invalid(exc) from None
    _plain_data_only(roots)
    return roots


def _invalid(exc: yaml.YAMLError) -> YamlError:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return YamlError(f"invalid YAML: {where}{problem}")


def _bounded_compose(text: str, loader) -> list:
    _check_bounds(text, loader)
    return [node for node in yaml.compose_all(text, Loader=loader) if node is not None]


def _check_bounds(text: str, loader) -> None:
    """YamlError when the nodes nest deeper than MAX_DEPTH or the aliases stand for more than MAX_ALIAS_NODES
    nodes, or an alias lies inside its own anchor: from the events, each looked at once. Per anchor, the size and
    height of its node once complete; per open collection, [anchor, nodes so far, tallest child so far]."""
    anchors: dict[str, tuple[int, int]] = {}
    open_: list[list] = []
    expanded = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_) >= MAX_DEPTH:
                raise _too_deep(event)
            open_.append([event.anchor, 1, 0])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes, tallest = open_.pop()
            height = tallest + 1
            if anchor is not None:
                anchors[anchor] = (nodes, height)
        elif isinstance(event, yaml.ScalarEvent):
            nodes, height = 1, 1
            if event.anchor is not None:
                anchors[event.anchor] = (nodes, height)
        elif isinstance(event, yaml.AliasEvent):
            if any(collection[0] == event.anchor for collection in open_):
                mark = event.start_mark
                raise YamlError(f"invalid YAML: line {mark.line + 1}, column {mark.column + 1}: the alias "
                                f"*{event.anchor} lies inside its own anchor (a loop); offlint reads only tree-shaped "
                                f"data")
            if event.anchor not in anchors:
                continue  # undefined: composing says so
            nodes, height = anchors[event.anchor]
            expanded += nodes
            if expanded > MAX_ALIAS_NODES:
                raise YamlError(f"YAML aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?); "
                                f"offlint expands at most that many per file")
            if len(open_) + height > MAX_DEPTH:
                raise _too_deep(event)
        elif isinstance(event, yaml.DocumentEndEvent):
            anchors.clear()  # an anchor names a node of its own document only
            continue
        else:
            continue
        if open_:
            open_[-1][1] += nodes
            open_[-1][2] = max(open_[-1][2], height)


def _too_deep(event) -> YamlError:
    mark = event.start_mark
    return YamlError(f"YAML nested more than {MAX_DEPTH} levels deep at line {mark.line + 1}, column {mark.column + 1} "
                     f"(counting what aliases stand for); offlint reads at most {MAX_DEPTH} levels")


# What the safe loader builds, and the merge key (`<<: *base`), which it resolves while building the map.
_PLAIN_TAGS = {tag for tag in yaml.SafeLoader.yaml_constructors if tag is not None} | {"tag:yaml.org,2002:merge"}


def _plain_data_only(roots) -> None:
    """Every node, key or value, read or not, must carry a tag the safe loader builds (str, int, map, ...): a
    `!!python/object/new:` tag on a key or a section is as wrong as on a value, and no reader may meet it later.
    Each node is visited once (aliases share nodes), with a loop rather than recursion."""
    seen: set[int] = set()
    pending = list(roots)
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.tag not in _PLAIN_TAGS:
            mark = node.start_mark
            raise YamlError(f"invalid YAML: line {mark.line + 1}, column {mark.column + 1}: tag {node.tag!r} is not "
                            f"plain data; offlint reads YAML with the safe loader (strings, numbers, lists, maps) "
                            f"and never builds Python objects")
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                pending += [value, key]
        elif isinstance(node, yaml.SequenceNode):
            pending += reversed(node.value)


def construct(node) -> object:
    """The plain value of a node, built by the safe constructor alone (a whole loader per value, with its reader
    and scanner, cost twice as much for a file of 100,000 keys)."""
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def is_override_file(roots) -> bool:
    return any(
        isinstance(root, yaml.MappingNode) and any(
            isinstance(k, yaml.ScalarNode) and k.value in ("model", "optimizer", "ddp")
            and isinstance(v, yaml.MappingNode) for k, v in root.value)
        for root in roots)


def override_unit(path: str, roots) -> Unit:
    """A YAML override file: one unit whose unset keys come from the recipe it is merged into (unknown)."""
    layer = Layer(YAML_LAYER)
    for root in roots:
        if isinstance(root, yaml.MappingNode):
            _walk(root, "", path, layer)
    first = layer.assignments[0].location if layer.assignments else Location(path, 1, 1)
    reason = "set by the recipe this YAML file overrides"
    return Unit(name=path, kind=UnitKind.YAML, location=Location(path, 1, 1) if not layer.assignments else first,
                layers=[layer],
                unknown_sections={s: reason for s in ("model", "optimizer", "ddp", "comm_overlap", "env")},
                repeated_sections=_repeated_sections(path, roots))


def _repeated_sections(path: str, roots) -> tuple[tuple[str, Location, Location], ...]:
    """The top-level keys given twice (Unit.repeated_sections): sections, walked into their keys, and keys the walk
    skips (`dataset:`). A top-level key `_walk` keeps as one value (`mixed_precision: bf16_mixed`) given twice is two
    assignments of one key, which OFL004 sees as such."""
    repeated = []
    for root in roots:
        if not isinstance(root, yaml.MappingNode):
            continue
        first: dict[str, Location] = {}
        for key_node, value_node in root.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            name = str(key_node.value)
            if name in TOP_LEVEL_KEYS:
                continue
            at = Location(path, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if name in first:
                repeated.append((name, first[name], at))
            else:
                first[name] = at
    return tuple(repeated)


def is_bridges(roots, unit: Unit) -> bool:
    """Whether an override file (is_override_file; `unit`, its override_unit) is Megatron Bridge's rather than
    another program's configuration with a `model:` section of its own, by the shape of its keys
    (keys.bridge_shaped).

    Others' files had given false findings: verl's sft_trainer.yaml (top level `data`, `model`, `optim`, `trainer`;
    `model: {partial_pretrain, fsdp_config, lora_rank, ...}`: OFL003 took lora_rank for a typo of q_lora_rank),
    NeMo 1's megatron_*_config.yaml (`name`, `trainer`, `exp_manager`; 54 OFL003 on `activation`,
    `rotary_percentage`, ...), NeMo-Aligner's and Automodel's configs; Bridge's verification cards (`title`,
    `items`, ...) gave empty units. Measured on Megatron Bridge 067f987, geodesic-megatron and LLaVA-OneVision-2:
    none of their 59 override files has a top-level key outside ConfigContainer's, and 57% of their section keys
    or more are fields; on NeMo, verl, Automodel and NeMo-Aligner, 757 of 761 files have more top-level keys of
    their own."""
    names = [[k.value for k, _ in root.value if isinstance(k, yaml.ScalarNode)]
             for root in roots if isinstance(root, yaml.MappingNode)]
    return keys.bridge_shaped(names, [assignment.key for assignment in unit.all_assignments()])


def _walk(node: yaml.MappingNode, prefix: str, path: str, layer: Layer) -> None:
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
        if isinstance(value_node, yaml.MappingNode) and not prefix and (key_node.value in OVERRIDE_SECTIONS
                                                                          or key_node.value in _OTHER_SECTIONS):
            _walk(value_node, key, path, layer)
            continue
        if not prefix and key_node.value not in TOP_LEVEL_KEYS:
            continue  # top-level keys outside the modelled sections (train:, dataset:, ...)
        location = Location(path, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        try:
            value = construct(value_node)
        except yaml.YAMLError as exc:
            raise YamlError(f"invalid YAML value at line {location.line}: {exc}") from None
        text = value_node.value if isinstance(value_node, yaml.ScalarNode) else _flow_text(value_node)
        value = _object_reference(value)
        if isinstance(value, str) and "${" in value:  # `${sum:${.num_layers},-1}` (NeMo's megatron_gpt_config.yaml)
            value = Unknown(f"`{value}` is an OmegaConf interpolation, resolved when the file is loaded")
        key = canonical_key(key)
        layer.assignments.append(Assignment(key, env_string(key, value), location, Source.YAML, str(text)))


def _object_reference(value: object) -> object:
    """`{_target_: torch.float32, _call_: false}` is the object the target names, not called: how Megatron Bridge
    writes a config's torch dtypes and functions to YAML (ConfigContainer.to_yaml; megatron.training's instantiate
    returns the target itself when `_call_` is false). Read as the dotted name, as offlint spells a dtype
    ("torch.float32"). Anything else is left as it is."""
    if type(value) is dict and value.get("_call_") is False and set(value) == {"_target_", "_call_"} and \
            isinstance(value["_target_"], str):
        return value["_target_"]
    return value


def _flow_text(node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "[" + ", ".join(_flow_text(n) for n in node.value) + "]"
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return "{...}"


class YamlEnvironment(NamedTuple):
    """The variables a YAML file's structure gives the commands beneath an entry (YAML_ENV_KEYS): name -> (value,
    or Unknown; where it is written), and why others may be set too ("" where none may)."""

    variables: tuple[tuple[str, object, int, int], ...] = ()
    open: str = ""


# Keys whose mapping or list gives the variables of the commands beneath the mapping holding them: a Kubernetes
# container's `env` (a list of {name, value}), SkyPilot's `envs`, Docker Compose's `environment` (a mapping, or
# NAME=VALUE strings), GitHub Actions' `env`, Ray's and NeMo-Run's `env_vars`. Each was seen setting
# PYTORCH_CUDA_ALLOC_CONF beside a `torchrun` command that OFL301 said ran without it.
YAML_ENV_KEYS = frozenset({"env", "envs", "environment", "env_vars"})
# Keys that may set any variable from elsewhere: a file, a Kubernetes config map or secret.
_ENV_ELSEWHERE = frozenset({"envFrom", "env_file", "env_files"})


# A Markdown code fence: a string holding one is a page of documentation (NVIDIA's DGX Spark playbooks keep their
# pages in `content: |` values), whose fenced examples run nowhere; the same page as README.md is not read either
_MARKDOWN_FENCE = re.compile(r"(?m)^[ \t]*```")


def command_strings(roots, source_lines: list[str]):
    """Yield (shell_text, first_line, gpu, environment) for every string scalar that holds a launch command; `gpu`
    is the GPU the nearest enclosing key names (a model card's `GB200:` section), else ""; `environment` the
    YamlEnvironment its enclosing entries give it (the nearest wins).

    The shell text keeps the scalar's original lines and columns; a folded or plain scalar's line breaks
    become backslash continuations so the whole scalar reads as one command, as YAML folds it.
    """
    stack = [(root, "", YamlEnvironment()) for root in roots]
    seen: set[int] = set()  # an aliased node is one string at one place: read once
    while stack:
        node, gpu, environment = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            environment = _environment_of(node, environment)
            stack.extend((v, _gpu_key(k) or gpu, environment) for k, v in reversed(node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, gpu, environment) for v in reversed(node.value))
        elif isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str") and _COMMAND_HINT.search(node.value) \
                and not _MARKDOWN_FENCE.search(node.value):
            yield (*_shell_text(node, source_lines), gpu, environment)


def _environment_of(mapping: yaml.MappingNode, outer: YamlEnvironment) -> YamlEnvironment:
    """`outer` with the variables this mapping's environment entries set (YAML_ENV_KEYS), which win."""
    variables: dict[str, tuple[str, object, int, int]] = {}
    why = ""
    for key, value in mapping.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name in _ENV_ELSEWHERE:
            why = why or f"`{name}` at line {key.start_mark.line + 1} may set any variable"
        if name not in YAML_ENV_KEYS:
            continue
        if isinstance(value, yaml.MappingNode):  # NAME: value
            for var, given in value.value:
                if isinstance(var, yaml.ScalarNode):
                    variables[str(var.value)] = (str(var.value), _env_value(given), *_mark(var))
        elif isinstance(value, yaml.SequenceNode):
            for item in value.value:
                if isinstance(item, yaml.ScalarNode) and "=" in str(item.value):  # NAME=VALUE
                    var, _, given = str(item.value).partition("=")
                    variables[var] = (var, given, *_mark(item))
                elif isinstance(item, yaml.MappingNode):  # {name: NAME, value: VALUE} or valueFrom
                    fields = {k.value: v for k, v in item.value if isinstance(k, yaml.ScalarNode)}
                    var = fields.get("name")
                    if isinstance(var, yaml.ScalarNode):
                        given = _env_value(fields["value"]) if "value" in fields else Unknown(
                            f"{var.value} comes from its `valueFrom` (line {var.start_mark.line + 1})")
                        variables[str(var.value)] = (str(var.value), given, *_mark(var))
                elif not isinstance(item, yaml.ScalarNode):
                    why = why or f"`{name}` at line {key.start_mark.line + 1} lists what offlint cannot read"
        elif not isinstance(value, yaml.ScalarNode) or value.value not in ("", None, "null", "~"):
            why = why or f"`{name}` at line {key.start_mark.line + 1} is not a mapping or a list offlint reads"
    if not variables and not why:
        return outer
    merged = {entry[0]: entry for entry in outer.variables}
    merged.update(variables)
    return YamlEnvironment(tuple(merged.values()), why or outer.open)


def _env_value(node) -> object:
    if isinstance(node, yaml.ScalarNode):
        return "" if node.tag.endswith(":null") else str(node.value)
    return Unknown(f"an environment value at line {node.start_mark.line + 1} that is not text")


def _mark(node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def give_environment(unit: Unit, path: str, environment: YamlEnvironment) -> None:
    """A command's unit gets the variables its YAML entries set, below what the command itself sets."""
    if environment.variables:
        unit.layers.insert(0, Layer("YAML environment", [
            Assignment(f"env.{name}", value, Location(path, line, col), Source.ENV,
                       value if isinstance(value, str) else "")
            for name, value, line, col in environment.variables]))
    if environment.open:
        opened(unit, opened_because(environment.open))


def _gpu_key(key) -> str:
    name = str(key.value).lower() if isinstance(key, yaml.ScalarNode) else ""
    return name if name in NAMED_GPUS else ""


def _shell_text(node: yaml.ScalarNode, lines: list[str]) -> tuple[str, int]:
    start, end = node.start_mark, node.end_mark
    if node.style in (">", "|"):
        first = start.line + 1  # the content starts on the line after the indicator
        body = lines[first:end.line + (1 if end.column else 0)]
        if node.style == ">":
            body = [line + " \\" if line.strip() else line for line in body]
        return "\n".join(body), first + 1
    if start.line == end.line:
        raw = lines[start.line][start.column:end.column]
        if node.style in ('"', "'"):
            raw = " " + raw[1:-1] + " "
        return " " * start.column + raw, start.line + 1
    body = [" " * start.column + lines[start.line][start.column:]] + lines[start.line + 1:end.line + 1]
    body = [line.replace('"', " ") if node.style == '"' else line for line in body]
    return "\n".join(line + " \\" for line in body), start.line + 1

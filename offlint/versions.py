"""megatron-core versions: parsing `0.16.1`/`0.16`/`0.20.0rc1`, range checks, and detection (rules.md order)."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from offlint.reading import ReadError, read_text
from offlint.sources.mcore_source import (CHECKS, GRAPH_NAMES, LACKED, OVERSIZED, REFUSAL_TEXTS, allowed_names,
                                         argument_checks_made, checks_made, graph_names, refusals_lacked)

NEWEST_KNOWN = "0.20.0"
OLDEST_KNOWN = "0.16.1"  # the releases offlint's rules and field data were written against: 0.16 to 0.20

_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.\-+]?(?:rc|a|b|dev|post)\S*)?\s*$")


class VersionError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int = 0
    # The module lists a megatron-core source tree in the checkout allows, read from its own code
    # (sources/mcore_source.py): ((list name, names), ...). Not part of what the version is (equality, order).
    source_names: tuple[tuple[str, frozenset[str]], ...] = field(default=(), compare=False, repr=False)
    # Why the module lists are not known at all (a fork of Megatron-LM the tree pins but has not checked out: it may
    # allow names no release does); "" where they are the release's or the checkout's.
    lists_unknown: str = field(default="", compare=False, repr=False)
    # Why the version is only a guess (the tree's megatron-core pin is not checked out): a module name a newer release
    # allows is not called invalid, since the tree may run that one; "" where the version is known.
    guessed: str = field(default="", compare=False, repr=False)
    # Where the tree is older than megatron-core and its own validate_args clamps a layout larger than the world
    # (mcore_source.OVERSIZED): the file that does ("megatron/arguments.py"); "" otherwise
    own_clamp: str = field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def names_from_source(self, name: str) -> frozenset[str] | None:
        """The list `name` as the checkout's own megatron-core source allows it; None when not read from one."""
        return dict(self.source_names).get(name)


def parse_version(text: str) -> Version:
    match = _VERSION.match(str(text))
    if not match:
        raise VersionError(f"not a megatron-core version: {text!r} (expected something like 0.16.1 or 0.20)")
    major, minor, patch = (int(g) if g else 0 for g in match.groups())
    return Version(major, minor, patch)


@lru_cache(maxsize=4096)
def in_range(version: Version, spec: str) -> bool:
    """`spec` is "all", or comma-separated comparisons such as ">=0.16" or ">=0.16,<0.19"."""
    spec = (spec or "all").strip()
    if spec in ("all", "*", ""):
        return True
    for part in spec.split(","):
        part = part.strip()
        op = re.match(r"^(>=|<=|==|>|<)", part)
        if not op:
            raise VersionError(f"bad version range {spec!r}")
        bound = parse_version(part[op.end():])
        ok = {
            ">=": version >= bound, "<=": version <= bound, "==": version == bound,
            ">": version > bound, "<": version < bound,
        }[op.group(1)]
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class DetectedVersion:
    version: Version  # the version whose rules are applied
    origin: str  # where it came from, for the output ("--mcore-version", "pyproject.toml", ...)
    note: str = ""  # when the version found is not one offlint knows: which one's rules are used instead
    requested: Version | None = None  # that version (None when it is `version`)


def known_range() -> str:
    oldest, newest = parse_version(OLDEST_KNOWN), parse_version(NEWEST_KNOWN)
    return f"{oldest.major}.{oldest.minor} to {newest.major}.{newest.minor}"


def checked_as(version: Version, origin: str, explicit: bool) -> DetectedVersion:
    """The version offlint checks against when `version` was asked for. A release newer than any offlint knows is
    checked with the newest one's rules (said in `note`: its own rules cannot be known yet); an older one named
    explicitly is refused (offlint has no rules for it), one found in the environment is checked with the
    oldest one's rules, said in `note`."""
    oldest, newest = parse_version(OLDEST_KNOWN), parse_version(NEWEST_KNOWN)
    if (version.major, version.minor) > (newest.major, newest.minor):
        return DetectedVersion(newest, origin, f"megatron-core {version} (from {origin}) is newer than any version "
                                               f"offlint knows ({known_range()}): checking with the rules of {newest}",
                               version)
    if (version.major, version.minor) < (oldest.major, oldest.minor):
        if explicit:
            raise VersionError(f"{origin}: megatron-core {version} is older than any version offlint knows "
                               f"({known_range()}); offlint has no rules for it (name {oldest.major}.{oldest.minor} "
                               f"to check with the oldest rules it has)")
        return DetectedVersion(oldest, origin, f"megatron-core {version} (from {origin}) is older than any version "
                                               f"offlint knows ({known_range()}): checking with the rules of {oldest}",
                               version)
    return DetectedVersion(version, origin)


def version_from_package_info(path: Path) -> Version | None:
    """Read MAJOR/MINOR/PATCH from a megatron/core/package_info.py without importing it."""
    try:
        tree = ast.parse(read_text(path, follow_links=True))
    except (ReadError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    values: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
                values[node.targets[0].id] = node.value.value
    if "MAJOR" in values and "MINOR" in values:
        return Version(values["MAJOR"], values["MINOR"], values.get("PATCH", 0))
    return None


def detect_version(cli: str | None, configured: str | None, root: Path | None) -> DetectedVersion:
    """rules.md order: --mcore-version, [tool.offlint], the repo's 3rdparty pin, its uv.lock's release, the
    installed package, newest.

    A Megatron-LM checkout is its own megatron-core (`megatron/core/package_info.py` at its root): that is the
    code its scripts run, so it comes right after a pin."""
    detected = _detect(cli, configured, root)
    if root is not None and _before_megatron_core(root):
        return _with_own_clamp(detected, root / "megatron")
    return detected


def _detect(cli: str | None, configured: str | None, root: Path | None) -> DetectedVersion:
    """detect_version's answer, before what a tree older than megatron-core does in its own code."""
    checkout = _checkout_version(root) if root is not None else None
    pin = _pin_not_checked_out(root) if root is not None else None
    if pin is not None and pin.fork:
        return _fork_not_checked_out(pin, cli, configured)
    if cli or configured:
        detected = _named(cli, configured)
        if checkout is not None and checkout[0] == detected.version:
            # the checkout's own module lists where it is the version named (a pin between releases may allow names
            # no release table has: Bridge PR 5449's Qwen3.5 pin and `gdn_in_proj_conv`)
            return _with_source_names(detected, checkout[1])
        if checkout is not None:
            over = _named_over(detected, checkout, root)
            return replace(detected, note="; ".join(part for part in (detected.note, over) if part))
        return detected
    if checkout is not None:
        found, config, info = checkout
        return _with_source_names(checked_as(found, str(info), explicit=False), config)
    locked = _locked_version(root) if root is not None else None
    if locked is not None:
        return checked_as(locked, "uv.lock", explicit=False)
    detected = _installed_or_newest()
    if pin is not None and not detected.note:
        # (a Bridge fork's DeepSeek-V4 recipes name 'mhc', which only the megatron-core they pin allows:
        # LLaVA-OneVision-2 and kaiko-ai's Bridge had false OFL222 errors from the guess)
        detected = replace(detected, version=replace(detected.version, guessed=f"{pin.path} is not checked out"),
                           note=f"{pin.unread} not checked out: checking with "
                                f"the rules of {detected.version} ({detected.origin}), which may not be the "
                                f"version the tree runs, and calling no module name invalid that a newer release "
                                f"allows; `git submodule update --init {pin.path}` or --mcore-version names it")
    elif root is not None and not detected.note and _before_megatron_core(root):
        detected = replace(detected, note=f"the tree's megatron/ package has no megatron/core (a Megatron-LM from "
                                          f"before megatron-core, or Megatron-DeepSpeed): its scripts run its own "
                                          f"code, which the rules of megatron-core {detected.version} "
                                          f"({detected.origin}) may not describe; --mcore-version names another")
    return detected


def _named_over(detected: DetectedVersion, checkout: tuple[Version, Path, Path], root: Path) -> str:
    """What a named version that is not the tree's own checkout's means: the rules of the version named, not what the
    checkout's code does (two Megatron-LM-FL forks of 0.16.0rc0, checked with --mcore-version 0.20.0, were told of
    0.20's deprecated CUDA-graph scope, which their own code does not have)."""
    version, _, info = checkout
    return (f"{detected.origin} names megatron-core {detected.version}, but the tree's own {info.relative_to(root)} "
            f"is {version}, "
            f"the code its scripts run: checking with the rules of {detected.version}, not with what that "
            f"checkout's code does (without {detected.origin} offlint checks with the checkout)")


def _with_own_clamp(detected: DetectedVersion, megatron: Path) -> DetectedVersion:
    """A tree older than megatron-core whose validate_args clamps a layout larger than the world (megatron/arguments.py:
    mcore_source.OVERSIZED): its scripts import its own `megatron` package, which shadows an installed megatron-core's,
    so that is what they do whatever version the run is checked with (Megatron-DeepSpeed forks of 2021-2022)."""
    if OVERSIZED not in refusals_lacked({"arguments.py": _read_or_none(megatron / "arguments.py")}):
        return detected
    return replace(detected, version=replace(detected.version, own_clamp="megatron/arguments.py"))


def _named(cli: str | None, configured: str | None) -> DetectedVersion:
    """The version --mcore-version or [tool.offlint] names."""
    return checked_as(parse_version(cli or configured), "--mcore-version" if cli else
                      "[tool.offlint] megatron-core-version", explicit=True)


def _installed_or_newest() -> DetectedVersion:
    """The installed megatron-core's version, else the newest offlint knows."""
    installed = _installed_version()
    return checked_as(installed, "installed megatron-core", explicit=False) if installed else \
        DetectedVersion(parse_version(NEWEST_KNOWN), "newest version offlint knows")


def _before_megatron_core(root: Path) -> bool:
    """Whether the tree is a Megatron-LM older than megatron-core (its own megatron/arguments.py and training.py, no
    megatron/core): bigscience-workshop/Megatron-DeepSpeed had been checked as the installed 0.16.1 without a word."""
    megatron = root / "megatron"
    return (megatron / "arguments.py").is_file() and (megatron / "training.py").is_file() \
        and not (megatron / "core").is_dir()


_LOCKED = re.compile(r'^\[\[package\]\]\r?\nname = "megatron-core"\r?\nversion = "([^"\n]+)"', re.M)


def _locked_version(root: Path) -> Version | None:
    """The megatron-core release the tree's uv.lock pins (Megatron Bridge before its submodule became the source:
    0.14.0rc6 in August 2025, while the installed package may be any other); None where it pins none (an editable
    checkout has no version line) or the lock cannot be read."""
    try:
        found = _LOCKED.search(read_text(root / "uv.lock"))
        return parse_version(found.group(1)) if found else None
    except (ReadError, VersionError):
        return None


@dataclass(frozen=True)
class _Pin:
    """The tree's megatron-core submodule (.gitmodules): where it goes, where it comes from, the branch it follows."""
    path: str
    url: str
    branch: str
    others: int = 0  # how many more Megatron-LM submodules it pins, none checked out

    @property
    def unread(self) -> str:
        """What a note says is not checked out."""
        if self.others:
            return f"{self.path} and {self.others} more Megatron-LM submodules (the tree's megatron-core) are"
        return f"{self.path} (the tree's megatron-core) is"

    @property
    def fork(self) -> bool:
        """Whether it is someone's own Megatron-LM, not NVIDIA's (github.com/NVIDIA/Megatron-LM, NVIDIA's mirrors)."""
        return bool(self.url) and "nvidia" not in self.url.lower()


_SECTION = re.compile(r"^\s*\[submodule\b[^\n]*\]\s*$", re.M)
_SETTING = re.compile(r"^\s*(path|url|branch)\s*=\s*(\S+)\s*$", re.M)
_BASE_RELEASE = re.compile(r"core_[rv]?(\d+\.\d+(?:\.\d+)?)")  # NVIDIA's `core_r0.16.0`, a fork's `core_v0.19.0_x`


def _pin_not_checked_out(root: Path) -> _Pin | None:
    """The tree's megatron-core submodule, when .gitmodules names one and its files are not there."""
    try:
        modules = read_text(root / ".gitmodules")
    except ReadError:
        return None
    pins = []
    for section in _SECTION.split(modules)[1:]:
        settings = dict(_SETTING.findall(section))
        path = settings.get("path", "")
        # (a folder naming its date is one too: Pai-Megatron-Patch pins seven, `backends/megatron/Megatron-LM-250624`)
        if re.fullmatch(r"(?:\S*/)?[^/\s]*Megatron-LM[^/\s]*", path):
            if (root / path / "megatron" / "core" / "package_info.py").is_file():
                return None
            pins.append(_Pin(path, settings.get("url", ""), settings.get("branch", "")))
    return replace(pins[0], others=len(pins) - 1) if pins else None


def _fork_not_checked_out(pin: _Pin, cli: str | None, configured: str | None) -> DetectedVersion:
    """The tree pins its own fork of Megatron-LM and has not checked it out. A fork may allow module names no
    release does (BochunZhang/Megatron-Bridge-Scale-Down pins one whose TransformerConfig adds `mlp_act` to the
    offloadable modules: OFL107 had called its recipes' setting an error), so the module lists are not known and no
    name is called invalid. The version is the one named (--mcore-version, [tool.offlint]), else the release its
    branch says it is based on (`core_v0.19.0_scale_down`), else the installed package's."""
    base = _BASE_RELEASE.search(pin.branch)
    if cli or configured:
        detected = _named(cli, configured)
    elif base is not None:
        detected = checked_as(parse_version(base.group(1)), f"the branch {pin.branch} {pin.path} follows",
                              explicit=False)
    else:
        detected = _installed_or_newest()
    why = f"{pin.path} pins a fork of Megatron-LM ({pin.url}) that is not checked out"
    note = (f"{why}: checking with the rules of {detected.version} ({detected.origin}); the module names its "
            f"TransformerConfig allows are not known, so none is called invalid (`git submodule update --init "
            f"{pin.path}` reads them)")
    return replace(detected, version=replace(detected.version, lists_unknown=why),
                   note="; ".join(part for part in (detected.note, note) if part))


def nested_checkout_version(folder: str, root: Path | None, cli: str | None, configured: str | None) -> Version | None:
    """The megatron-core a launch runs whose entry script lies in a Megatron-LM checkout nested in the tree (a
    vendored copy: MLPerf's training results bundle submitters' 0.9 and 0.12 checkouts side by side), judged as
    detect_version judges a tree's root; None where `folder` is the root's own checkout or its pin, or holds no
    megatron/core/package_info.py (the run's version stands)."""
    here = Path(os.path.realpath(folder))
    if root is not None and here in {Path(os.path.realpath(top)) for top in (root, root / "3rdparty" / "Megatron-LM")}:
        return None
    if not (here / "megatron" / "core" / "package_info.py").is_file():
        return None
    try:
        return detect_version(cli, configured, here).version
    except VersionError:
        return None


def _checkout_version(root: Path) -> tuple[Version, Path, Path] | None:
    """(version, its transformer_config.py, its package_info.py) of the megatron-core checkout in the tree: the
    repository's 3rdparty pin, else (a Megatron-LM checkout) its own; None when there is none."""
    for info in (root / "3rdparty" / "Megatron-LM" / "megatron" / "core" / "package_info.py",
                 root / "megatron" / "core" / "package_info.py"):
        found = version_from_package_info(info)
        if found:
            return found, info.parent / "transformer" / "transformer_config.py", info
    return None


def _with_source_names(detected: DetectedVersion, config: Path) -> DetectedVersion:
    """The version found in a checkout's megatron-core, with the module lists its own TransformerConfig allows and
    the CUDA-graph module names its enum has (the code its jobs run; a version between releases may allow names no
    release table has)."""
    source = _read_or_none(config)
    names = allowed_names(source)
    megatron = config.parent.parent.parent  # (the checkout's megatron/: core/transformer/transformer_config.py)
    # (each file under megatron/ read once: the arguments file, either layout, is one of the refusals' too)
    wanted = {p for paths, _ in REFUSAL_TEXTS.values() for p in paths} | {_ARGUMENTS, _OLD_ARGUMENTS}
    files = {path: _read_or_none(megatron / path) for path in wanted}
    checks = checks_made(source) | argument_checks_made(files[_ARGUMENTS] or files[_OLD_ARGUMENTS])
    if checks:
        names[CHECKS] = checks
    lacked = refusals_lacked(files)
    if lacked:
        names[LACKED] = lacked
    graphs = graph_names(_read_or_none(config.parent / "enums.py"),
                         _read_or_none(config.parent / "cuda_graph_config.py"))
    if graphs is not None:
        names[GRAPH_NAMES] = graphs
    if not names:
        return detected
    return replace(detected, version=replace(detected.version, source_names=tuple(sorted(names.items()))))


_ARGUMENTS, _OLD_ARGUMENTS = "training/arguments.py", "arguments.py"  # (validate_args' file, before 2024 the second)


def _read_or_none(path: Path) -> str | None:
    try:
        return read_text(path, follow_links=True)
    except ReadError:
        return None


def _installed_version() -> Version | None:
    # Read the distribution metadata only: importing megatron.core would be slow and run its code.
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return parse_version(version("megatron-core"))
    except (PackageNotFoundError, VersionError):
        return None

"""Outside code a scenario names: a `module:attr` reference, or a Python entry point of an installed package.

    algorithms: [{name: "mylab.algos:FEDFOO", lr: 0.1}]       # a reference: imported where it is used
    model: {name: "torchvision.models:resnet18"}                # any callable that builds an nn.Module

or, from a package that declares an entry point (pyproject.toml)

    [project.entry-points."edgesync.algorithms"]
    fedfoo = "mylab.algos:FEDFOO"

a plain `name: fedfoo`. Each kind has its group (ENTRY_POINT_GROUPS). An algorithm extension declares the
`edgesync.api` version it was written for (`AlgorithmSpec.api_version`); one written for another major version
is refused with one line. `describe` gives what a run folder records and what a coordinator compares with its
clients': the reference, the distribution and its version, and a hash of the extension's code.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata as metadata
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# The version of the extension contract `edgesync.api` exports. The major number changes when an extension
# written for the old one could break; the minor when the contract only grew.
API_VERSION = "1.0"

ENTRY_POINT_GROUPS = {"algorithm": "edgesync.algorithms", "model": "edgesync.models",
                      "dataset": "edgesync.datasets", "profile": "edgesync.profiles"}

_REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class ExtensionError(ValueError):
    """Outside code that cannot be used: the message is one line naming the reference and the reason."""


def is_reference(name: str) -> bool:
    """Whether `name` is a `package.module:attr` reference (not a registered name)."""
    return bool(_REFERENCE.match(name))


def import_reference(reference: str, kind: str) -> Any:
    """The object `module:attr` names (`attr` may be dotted); ExtensionError naming what is missing."""
    if not is_reference(reference):
        raise ExtensionError(f"{kind} {reference!r}: expected a reference 'package.module:attribute'")
    module_name, attr = reference.split(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ExtensionError(f"{kind} {reference!r}: cannot import {module_name!r} ({exc}); is its package "
                             "installed in this environment (pip install -e …)?") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ExtensionError(f"{kind} {reference!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def entry_points(kind: str) -> dict[str, metadata.EntryPoint]:
    """The installed entry points of `kind` by name (the first of two with one name wins, as pip's order)."""
    found: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUPS[kind]):
        found.setdefault(ep.name, ep)
    return found


def load_entry_point(ep: metadata.EntryPoint, kind: str) -> Any:
    try:
        return ep.load()
    except Exception as exc:  # noqa: BLE001 - any failure of outside code is reported as one line
        raise ExtensionError(f"{kind} {ep.name!r} (entry point {ep.value!r} of {_dist_name(ep)}): cannot load "
                             f"it: {type(exc).__name__}: {exc}") from None


def module_of(name: str, kind: str) -> str:
    """The module an outside `name` of `kind` lives in: a reference's, or its installed entry point's."""
    return name.split(":")[0] if is_reference(name) else entry_points(kind)[name].module


def find_outside(name: str, kind: str, what: str | None = None) -> tuple[Any, str] | None:
    """What an outside `name` of `kind` ("algorithm", "model", "dataset", "profile") stands for, imported or loaded,
    and its module; None when it is neither a reference nor an installed entry point. ExtensionError (naming it as
    `what`, by default the kind) when it is one of them but cannot be loaded."""
    what = what or kind
    if is_reference(name):
        return import_reference(name, what), module_of(name, kind)
    if name in (eps := entry_points(kind)):
        return load_entry_point(eps[name], what), eps[name].module
    return None


def check_api(declared: str | None, what: str, on: str = "its spec") -> None:
    """Refuse an extension written for another major version of the contract than this edgesync's; `on` says
    where the extension declares it."""
    if declared is None:
        raise ExtensionError(f"{what}: declares no edgesync API version (set api_version=\"{API_VERSION}\" "
                             f"on {on}: the version of edgesync.api it was written for)")
    if str(declared).split(".")[0] != API_VERSION.split(".")[0]:
        raise ExtensionError(f"{what}: written for edgesync API {declared}, this edgesync provides API "
                             f"{API_VERSION}; install a version of the extension built for {_major(API_VERSION)}.x")


def _major(version: str) -> str:
    return version.split(".")[0]


@dataclass(frozen=True)
class ExtensionInfo:
    """What identifies one extension's code: recorded in run folders, compared between coordinator and client."""

    name: str                  # the name the scenario uses (a reference or an entry-point name)
    module: str                # the module its object lives in
    distribution: str | None   # the installed package that holds it, if any
    version: str | None        # that package's version
    code_hash: str             # sha256 of its package's source files, first 16 hex digits

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """'mylab 0.3.1 (code 1a2b…)'."""
        who = self.distribution or self.module
        return f"{who} {self.version or '(no version)'} (code {self.code_hash})"


def describe(name: str, module_name: str) -> ExtensionInfo:
    """The `ExtensionInfo` of what `name` resolved to, an object of `module_name` (the reference's module, or
    the entry point's)."""
    top = module_name.split(".")[0]
    dist = _distribution_of(top)
    version = None
    if dist is not None:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = None
    return ExtensionInfo(name, module_name, dist, version, code_hash(module_name))


def _distribution_of(top_level: str) -> str | None:
    names = metadata.packages_distributions().get(top_level) or []
    return names[0] if names else None


def _dist_name(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an installed package"


@functools.lru_cache(maxsize=None)
def code_hash(module_name: str) -> str:
    """A hash of the source the extension runs: every .py file of its top-level package (or its one module),
    in path order. Two machines with the same code get the same hash whatever their install paths."""
    top = sys.modules.get(module_name.split(".")[0]) or importlib.import_module(module_name.split(".")[0])
    paths = getattr(top, "__path__", None)
    if paths:
        files = sorted(p for root in paths for p in Path(root).rglob("*.py") if "__pycache__" not in p.parts)
        base = Path(next(iter(paths)))
    elif getattr(top, "__file__", None):
        files, base = [Path(top.__file__)], Path(top.__file__).parent
    else:  # a built-in or namespace module without files: its name is all there is
        return hashlib.sha256(module_name.encode()).hexdigest()[:16]
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(base) if path.is_relative_to(base) else path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]

"""What outside code a scenario runs (edgesync/extensions.py): each algorithm, model, dataset and device-profile kind
it names from outside the package, with the package, version and code hash behind it — what a run folder records
(extensions.json), and what a live coordinator compares with each client's at HELLO (bookkeeping/membership.py):

    outside_names(scenario)     {name: kind}: what the coordinator asks a client to describe
    resolve_outside(kind, name) the ExtensionInfo of that name's code here, resolved as a run resolves it
    describe_here(requested)    a client's answer: {name: ExtensionInfo.as_dict() or {"error": one line}}
    differences(here, there)    one phrase per name whose code differs (distribution, version, code hash)
    refusal_line(...)           the one line a coordinator refuses such a client with
"""
from __future__ import annotations

import logging
from typing import Any

from edgesync import algorithms
from edgesync.algorithms import outside
from edgesync.config.scenario import Scenario
from edgesync.extensions import ENTRY_POINT_GROUPS, ExtensionError, ExtensionInfo, describe, module_of
from edgesync.data.datasets import DATASET_NAMES, outside_loader
from edgesync.emulation.profiles import KINDS, outside_info, outside_kind
from edgesync.models import MODEL_NAMES, outside_builder

log = logging.getLogger("edgesync.extensions")

# kind → (its loader: the object, None for a name that is no outside code; where the loader keeps its ExtensionInfo)
_LOADERS = {"algorithm": (outside.resolve, outside.info), "model": (outside_builder, None),
            "dataset": (outside_loader, None), "profile": (outside_kind, outside_info)}
_COMPARED = ("distribution", "version", "code_hash")  # what must be equal: the package, its version, its code
_MAX_ERROR_CHARS = 240  # a client's reason, as the coordinator's line quotes it


def outside_names(scenario: Scenario) -> dict[str, str]:
    """{name: kind} of every outside algorithm, model, dataset and profile kind the scenario names, in the
    scenario's order; empty for a scenario of built-in names only."""
    names: dict[str, str] = {}
    for entry in scenario.algorithms:
        if entry.name not in algorithms.names():
            names.setdefault(entry.name, "algorithm")
    for kind, name, built_in in (("model", scenario.model.name, MODEL_NAMES),
                                 ("dataset", scenario.dataset.name, DATASET_NAMES)):
        if name not in built_in:
            names.setdefault(name, kind)
    for client in scenario.clients:
        if (kind := client.profile.kind) not in KINDS:
            names.setdefault(kind, "profile")
    return names


def outside_code(scenario: Scenario) -> list[dict[str, Any]]:
    """One record per outside algorithm, model, dataset or profile kind the scenario names: {kind, name, module,
    distribution, version, code_hash}; empty for a scenario of built-in names only."""
    return [{"kind": kind, **resolve_outside(kind, name).as_dict()} for name, kind in outside_names(scenario).items()]


def resolve_outside(kind: str, name: str) -> ExtensionInfo:
    """What identifies the code `name` stands for here, loaded as a run loads it (an algorithm's spec checked, a
    model's builder, a dataset's loader or a profile kind's class imported); ExtensionError (one line) when it
    cannot be used."""
    if kind not in _LOADERS:
        raise ExtensionError(f"{kind} {name!r}: this EdgeSync cannot load outside code of that kind")
    load, info = _LOADERS[kind]
    if load(name) is None:
        raise ExtensionError(f"{kind} {name!r}: neither a 'package.module:attribute' reference nor an installed entry "
                             f"point of {ENTRY_POINT_GROUPS[kind]} here (pip install the package that provides it)")
    if info is not None:  # kept by the loader, which checked the object
        return info(name)
    return describe(name, module_of(name, kind))


def describe_request(meta: dict[str, Any]) -> dict[str, str] | None:
    """The {name: kind} a coordinator's message asks a client to describe (its `describe`), or None."""
    asked = meta.get("describe")
    if isinstance(asked, dict) and asked and all(isinstance(k, str) and isinstance(v, str) for k, v in asked.items()):
        return asked
    return None


def describe_here(requested: dict[str, str]) -> dict[str, dict[str, Any]]:
    """A client's description of the outside code a coordinator asks about ({name: kind}): each name's
    ExtensionInfo as a dict, or {"error": the one line saying why it cannot be used here}."""
    out: dict[str, dict[str, Any]] = {}
    for name, kind in requested.items():
        try:
            info = resolve_outside(kind, name)
        except Exception as exc:  # noqa: BLE001 - any failure of outside code is what the coordinator is told
            text = str(exc) if isinstance(exc, ExtensionError) else f"{kind} {name!r}: {type(exc).__name__}: {exc}"
            out[name] = {"error": " ".join(text.split())[:_MAX_ERROR_CHARS]}
            log.warning("the run's %s", out[name]["error"])
        else:
            out[name] = info.as_dict()
            log.info("the run's %s %s is %s here", kind, name, info.describe())
    return out


def differences(here: dict[str, ExtensionInfo], there: dict[str, Any]) -> list[str]:
    """One phrase per outside name whose code differs between here (the coordinator) and there (a client's
    HELLO `extensions`): 'NAME is ext 0.3.1 (code …) there, ext 0.3.2 (code …) here'. Empty when all agree."""
    found = []
    for name, ours in here.items():
        theirs = there.get(name)
        if isinstance(theirs, dict) and "error" not in theirs and all(
                theirs.get(key) == getattr(ours, key) for key in _COMPARED):
            continue
        found.append(f"{name} is {_theirs(theirs)} there, {ours.describe()} here")
    return found


def _theirs(theirs: Any) -> str:
    if not isinstance(theirs, dict):
        return "not described"
    if "error" in theirs:
        return f"not usable ({theirs['error']})"
    return ExtensionInfo(**{key: theirs.get(key) for key in ExtensionInfo.__dataclass_fields__}).describe()


def refusal_line(rank: int | None, host: str | None, found: list[str], fix: str = "the coordinator's version") -> str:
    """The one line refusing a client whose outside code differs: who, where, both versions, what to install."""
    where = host or "an unnamed host"
    who = f"client {rank}" if rank is not None else "a client"
    return f"{who} on {where} refused: {'; '.join(found)}: install {fix} on {where}"

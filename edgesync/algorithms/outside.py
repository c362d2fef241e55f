"""Algorithms from outside the package (edgesync/extensions.py): a scenario's `name: mylab.algos:FEDFOO`, or
the name of an entry point in the group `edgesync.algorithms`.

Either resolves to the extension's `AlgorithmSpec`, checked (its `api_version`, its halves' types) and known
under the name the scenario used from then on, in this process; every process that runs the entry (a
simulator worker, a live client) resolves the same name the same way, so the configs that travel keep it. A
reference's config accepts the reference as its `name`, and results label the entry with the spec's own
name unless the entry sets `label`.
"""
from __future__ import annotations

import dataclasses
from typing import Literal

from edgesync.algorithms.machinery.base import AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, ServerAlgorithm
from edgesync.extensions import ExtensionError, ExtensionInfo, check_api, describe, entry_points, find_outside

_RESOLVED: dict[str, tuple[AlgorithmSpec, ExtensionInfo]] = {}


def resolve(name: str) -> AlgorithmSpec | None:
    """The outside spec `name` stands for (a reference, or an installed entry point), loaded once; None when
    it is neither. ExtensionError when it is one of them but cannot be used."""
    if name in _RESOLVED:
        return _RESOLVED[name][0]
    if (found := find_outside(name, "algorithm")) is None:
        return None
    obj, module = found
    spec = _checked(name, obj)
    _RESOLVED[name] = (spec, describe(name, module))
    return spec


def installed_names() -> list[str]:
    """The names of the installed entry points (not loaded)."""
    return sorted(entry_points("algorithm"))


def info(name: str) -> ExtensionInfo | None:
    """What identifies the code behind an outside algorithm already resolved in this process."""
    return _RESOLVED[name][1] if name in _RESOLVED else None


def resolved() -> dict[str, ExtensionInfo]:
    """Every outside algorithm this process has resolved, by the name it was used by."""
    return {name: found[1] for name, found in _RESOLVED.items()}


def _checked(name: str, obj: object) -> AlgorithmSpec:
    what = f"algorithm {name!r}"
    if not isinstance(obj, AlgorithmSpec):
        raise ExtensionError(f"{what}: names a {type(obj).__name__}, not an AlgorithmSpec (edgesync.api)")
    check_api(obj.api_version, what)
    for part, base in (("config", AlgorithmConfig), ("server", ServerAlgorithm), ("client", ClientAlgorithm)):
        cls = getattr(obj, part)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise ExtensionError(f"{what}: its spec's {part} is {cls!r}, not a subclass of {base.__name__}")
    if obj.family not in ("synchronous", "asynchronous"):
        raise ExtensionError(f"{what}: family {obj.family!r}, expected 'synchronous' or 'asynchronous'")
    return obj if obj.name == name else _renamed(obj, name)


_CONFIG_OF = "ConfigOf_"  # + the reference in hex: the renamed config's class name in this module


def _renamed(spec: AlgorithmSpec, name: str) -> AlgorithmSpec:
    """`spec` known as `name`: its config subclassed to take `name` as its `name`, its results labelled with
    the spec's own name unless an entry sets `label`. The subclass lives in this module under a name that
    spells the reference, so that a config pickled to another process (a Ray task) finds it there
    (`__getattr__` below resolves the reference on the way)."""
    short, class_name = spec.name, _CONFIG_OF + name.encode().hex()
    namespace = {"__annotations__": {"name": Literal[name]}, "name": name, "__module__": __name__,
                 "__qualname__": class_name, "__doc__": spec.config.__doc__,
                 "key": property(lambda self: self.label or short)}
    config = type(class_name, (spec.config,), namespace)
    return dataclasses.replace(spec, name=name, config=config)


def __getattr__(attr: str):
    """A renamed config class by its name (pickle's lookup in a process that has not resolved it yet)."""
    if attr.startswith(_CONFIG_OF):
        spec = resolve(bytes.fromhex(attr[len(_CONFIG_OF):]).decode())
        if spec is not None:
            return spec.config
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")

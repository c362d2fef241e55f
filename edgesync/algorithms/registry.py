"""Algorithms by registered name (ALGORITHMS.md, "Registered names"). Unknown names fail loudly."""
from __future__ import annotations

from edgesync.algorithms.base import AlgorithmSpec

_REGISTRY: dict[str, AlgorithmSpec] = {}


class UnknownAlgorithmError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; say it plainly
        return self.args[0]


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"algorithm {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def get(name: str) -> AlgorithmSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownAlgorithmError(f"unknown algorithm {name!r}; registered: {known}") from None


def names() -> list[str]:
    return list(_REGISTRY)


def specs() -> list[AlgorithmSpec]:
    return list(_REGISTRY.values())

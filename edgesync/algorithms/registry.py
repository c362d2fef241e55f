"""Algorithms by registered name (ALGORITHMS.md, "Registered names"). Unknown names fail loudly."""
from __future__ import annotations

from edgesync.algorithms.base import AlgorithmConfig, AlgorithmSpec

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


def without_queries(config: AlgorithmConfig, **settings) -> AlgorithmConfig:
    """`config` for a runtime whose clients cannot be asked anything mid-instruction: itself if its client
    half never queries, else the config of the registered stand-in its spec names (the keys both share
    carried over, `settings` on top); ValueError if it has none."""
    spec = get(config.name)
    if not spec.client.uses_queries:
        return config
    if spec.without_queries is None:
        raise ValueError(f"{config.name}: its client half queries the server mid-instruction and it names no "
                         "algorithm to stand in where clients cannot (AlgorithmSpec.without_queries)")
    stand_in = get(spec.without_queries).config
    shared = {k: v for k, v in config.model_dump().items() if k in stand_in.model_fields and k != "name"}
    shared["label"] = config.key  # results keep the scenario's name for the entry
    return stand_in.model_validate({**shared, **settings})

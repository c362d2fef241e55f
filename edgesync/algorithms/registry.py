"""Algorithms by name, from one explicit list: SPECS (docs/algorithms.md, "Registered names"). Unknown names
fail loudly.

An algorithm is known because it is listed here, not because some module happened to import it: a spec left
out of SPECS is caught by tests/algorithms/test_registry.py, not by a user's run.
"""
from __future__ import annotations

from edgesync.algorithms import (
    asgd, dana, dgc_async, dgs, easgd, esync, esync_budget, fed_adaptive, fedasync, fedavgm, fedbuff, fedprox, gd_async,
    local_sgd, momentum_asgd, shat, ssgd, ssp,
)
from edgesync.algorithms import fednova, scaffold
from edgesync.algorithms import outside
from edgesync.algorithms.machinery.base import AlgorithmConfig, AlgorithmSpec

# Every algorithm, in the order listings show them (`names()`: errors that list the known names; the scenario
# schema's union of configs). It is the order the old import-side-effect registration produced, kept so that
# no listing and no schema changes.
SPECS: tuple[AlgorithmSpec, ...] = (
    asgd.SPEC, local_sgd.SPEC, esync.SPEC, esync_budget.SPEC, ssgd.SPEC, ssp.SPEC,
    momentum_asgd.NAG_SPEC, momentum_asgd.MULTI_SPEC, momentum_asgd.DC_SPEC,
    dana.ZERO_SPEC, dana.SLIM_SPEC, dana.DC_SPEC,
    shat.SHAT_SPEC, shat.ROOT_SPEC, shat.ENSEMBLE_SPEC,
    easgd.SPEC, dgs.SPEC, gd_async.SPEC, dgc_async.SPEC, fedasync.SPEC, fedbuff.SPEC,
    fedprox.SPEC, fedavgm.SPEC, fed_adaptive.ADAM_SPEC, fed_adaptive.YOGI_SPEC, fed_adaptive.ADAGRAD_SPEC,
    scaffold.SPEC, fednova.SPEC,
)


class UnknownAlgorithmError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; say it plainly
        return self.args[0]


def by_name(specs: tuple[AlgorithmSpec, ...]) -> dict[str, AlgorithmSpec]:
    """The specs by name, in their order; ValueError if two share a name."""
    out: dict[str, AlgorithmSpec] = {}
    for spec in specs:
        if spec.name in out:
            raise ValueError(f"algorithm {spec.name!r} is registered twice")
        out[spec.name] = spec
    return out


_BY_NAME = by_name(SPECS)


def get(name: str) -> AlgorithmSpec:
    """The spec registered as `name`, or the outside one it names (a `module:attr` reference, or an installed
    entry point: outside.py); UnknownAlgorithmError listing the known names, ExtensionError for outside code
    that cannot be used."""
    if name in _BY_NAME:
        return _BY_NAME[name]
    found = outside.resolve(name)
    if found is None:
        known = ", ".join(sorted({*_BY_NAME, *outside.installed_names()}))
        raise UnknownAlgorithmError(f"unknown algorithm {name!r}; registered: {known} (or a 'package.module:SPEC' "
                                    "reference to an extension's AlgorithmSpec)")
    return found


def names() -> list[str]:
    """The built-in names, in listing order."""
    return list(_BY_NAME)


def specs() -> list[AlgorithmSpec]:
    return list(_BY_NAME.values())


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

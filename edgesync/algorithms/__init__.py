"""Algorithms, each a server half + client half on the contract in `base`, registered by name."""
from edgesync.algorithms import asgd, esync, esync_budget, local_sgd, ssgd  # noqa: F401  (importing registers them)
from edgesync.algorithms import ssp, momentum_asgd, dana, shat, easgd  # noqa: F401  (ALGORITHMS.md's order)
from edgesync.algorithms import dgs, gd_async, dgc_async  # noqa: F401
from edgesync.algorithms import fedasync, fedbuff  # noqa: F401  (the federated asynchronous baselines)
from edgesync.algorithms.base import (  # noqa: F401
    AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, Instruction, ModelState, Send, ServerAlgorithm, Update,
)
from edgesync.algorithms.registry import UnknownAlgorithmError, get, names, specs, without_queries  # noqa: F401

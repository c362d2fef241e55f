"""Algorithms, each a server half + client half on the contract in `base`, known by name from the one list in
`registry` (SPECS)."""
from edgesync.algorithms.machinery.base import (  # noqa: F401
    AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, Instruction, ModelState, Send, ServerAlgorithm, Update,
)
from edgesync.algorithms.registry import UnknownAlgorithmError, get, names, specs, without_queries  # noqa: F401

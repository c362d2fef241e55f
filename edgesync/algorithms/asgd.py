"""ASGD / ASP: the asynchronous parameter server, Hogwild-style (docs/algorithms.md, `asgd`).

The master applies each gradient the moment it arrives, θ ← θ − η·g, and replies to that client
alone with the new θ. Nobody waits for anybody; gradients are computed on stale models. The master
keeps the BatchNorm statistics of the latest update. Each reply carries the model version, so every
applied update logs its lag τ and DANA's gap G. This is `async_server.AsyncServer` with no hook
overridden; the rest of the asynchronous family builds on the same master.
"""
from __future__ import annotations

from typing import Literal

from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmConfig, AlgorithmSpec
from edgesync.algorithms.machinery.gradient_client import GradientClient


class ASGDConfig(AlgorithmConfig):
    name: Literal["asgd"] = "asgd"


class ASGDServer(AsyncServer):
    config: ASGDConfig


SPEC = AlgorithmSpec(
    name="asgd", config=ASGDConfig, server=ASGDServer, client=GradientClient,
    family="asynchronous", paper="Asynchronous parameter-server SGD (survey §3.3.2)",
)

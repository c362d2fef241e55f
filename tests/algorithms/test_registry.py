"""The algorithm registry, and a smoke run of every registered algorithm through its real halves.

The smoke run passes every message through the wire format (`Message.to_frames` / `from_frames`,
bytes in between), so each half sees what it would see under the live runtime: fresh tensors that
are views of received buffers.
"""
import importlib
import pkgutil
import time
from collections import deque
from pathlib import Path

import pytest
import torch

from edgesync import algorithms
from edgesync.algorithms import registry
from edgesync.algorithms.machinery.base import AlgorithmSpec, Instruction, ModelState, Update
from edgesync.transport.protocol import Message

ROUNDS = 12  # on_update calls per smoke run


def test_unknown_name_raises_and_lists_registered_names():
    # Execute
    with pytest.raises(algorithms.UnknownAlgorithmError) as info:
        algorithms.get("nope")
    # Assert
    text = str(info.value)
    assert "'nope'" in text
    for name in algorithms.names():
        assert name in text
    assert isinstance(info.value, KeyError)  # callers that catch KeyError still work
    assert not text.startswith('"')          # said plainly, not KeyError's quoted repr


def test_builtin_names_are_registered():
    # Execute
    names = algorithms.names()
    # Assert
    assert {"ssgd", "asgd"} <= set(names)
    assert [s.name for s in algorithms.specs()] == names
    assert algorithms.get("ssgd").family == "synchronous"
    assert algorithms.get("asgd").family == "asynchronous"


def test_listing_a_name_twice_is_refused():
    # Prepare
    spec = algorithms.get("ssgd")
    clone = AlgorithmSpec(name="ssgd", config=spec.config, server=spec.server, client=spec.client,
                          family=spec.family)
    # Execute / Assert
    with pytest.raises(ValueError, match="'ssgd' is registered twice"):
        registry.by_name((spec, clone))
    assert registry.get("ssgd") is spec


def test_every_spec_an_algorithm_module_defines_is_in_the_list():
    # Prepare: every module of edgesync/algorithms, imported, and the specs each defines at its top level
    defined = []
    for info in pkgutil.iter_modules([str(Path(algorithms.__file__).parent)]):
        module = importlib.import_module(f"edgesync.algorithms.{info.name}")
        defined += [(f"{info.name}.{attr}", value) for attr, value in vars(module).items()
                    if isinstance(value, AlgorithmSpec)]
    # Execute
    missing = [where for where, spec in defined if not any(spec is listed for listed in registry.SPECS)]
    # Assert: forgetting one in SPECS fails here, not as "unknown algorithm" in a user's run
    assert not missing, f"AlgorithmSpecs not in edgesync/algorithms/registry.py's SPECS: {missing}"
    assert len({id(spec) for _, spec in defined}) == len(registry.SPECS)


def test_registration_is_the_list_not_an_import_side_effect():
    # Assert: no algorithm module registers itself; the names come from SPECS, in its order
    for path in sorted(Path(algorithms.__file__).parent.glob("*.py")):
        assert "register(" not in path.read_text(encoding="utf-8"), f"{path.name} registers by import"
    assert algorithms.names() == [spec.name for spec in registry.SPECS]


def test_every_config_names_itself():
    # Assert: a config built with defaults carries its registered name (the scenario discriminator)
    for spec in algorithms.specs():
        assert spec.config(lr=0.1).name == spec.name


def _wire(kind: str, tensors: dict, meta: dict) -> Message:
    frames = [bytes(f) for f in Message(kind, meta, tensors).to_frames()]
    return Message.from_frames(frames)


# Clients here run one after another, never at once: ESync's State Server would keep the first
# client training until the cap (it cannot know the second one's capability yet), so cap it low.
SMOKE_SETTINGS = {"esync": {"max_local_steps": 5}}


class InProcessContext:
    """A ClientContext whose queries go straight to the server half (ESync's State Server)."""

    def __init__(self, server, rank: int):
        self.server, self.rank, self._replies = server, rank, []

    def now(self) -> float:
        return time.perf_counter()

    def query(self, meta: dict) -> dict:
        return self.server.on_query(self.rank, meta)

    def send_query(self, meta: dict) -> None:
        reply = self.server.on_query(self.rank, meta)
        if reply is not None:
            self._replies.append(reply)

    def replies(self) -> list[dict]:
        out, self._replies = self._replies, []
        return out


@pytest.mark.parametrize("name", algorithms.names())
def test_smoke_every_algorithm_trains(name, tiny_trainer):
    # Prepare: two clients on different data, one server, the same initial model everywhere
    spec = algorithms.get(name)
    config = spec.config(lr=0.1, batch_size=4, **SMOKE_SETTINGS.get(name, {}))
    trainers = {rank: tiny_trainer(seed=rank) for rank in (0, 1)}
    initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
    theta0 = initial.params.clone()
    server = spec.server(config, initial, list(trainers))
    clients = {rank: spec.client(config, trainer) for rank, trainer in trainers.items()}
    for rank, client in clients.items():
        client.ctx = InProcessContext(server, rank)
    # Execute: deliver instructions in order; each client's update goes straight back to the server
    queue = deque(server.start())
    applied = 0
    while queue and applied < ROUNDS:
        send = queue.popleft()
        ins = _wire("TRAIN", send.instruction.tensors, send.instruction.meta)
        update = clients[send.client].on_instruction(Instruction(ins.tensors, ins.meta))
        up = _wire("UPDATE", update.tensors, update.meta)
        queue.extend(server.on_update(send.client, Update(up.tensors, up.meta)))
        applied += 1
    # Assert
    assert applied == ROUNDS, "the exchange stopped: the server sent nothing to continue with"
    params = server.global_params()
    assert params.shape == theta0.shape
    assert not torch.equal(params, theta0)
    assert torch.isfinite(params).all()
    assert torch.isfinite(server.global_buffers()).all()
    assert server.updates > 0

"""Flower (flwr, simulation engine on Ray) as a peer (issue 38): synchronous FedAvg of a workload (W1, W2).

    benchmarks/peers/.venvs/flower/bin/python benchmarks/peers/run_flower.py --spec SPEC.json --out RESULT.json

Written against flwr 1.42.0 (what the index resolves; ray 2.55.1), driven as a Flower user drives it with the
current Message API (`flwr.serverapp.strategy`, ArrayRecord/MetricRecord; the legacy `flwr.server.strategy` +
NumPyClient API now lives on in `flwr.compat`). `run_simulation` logs a deprecation warning (Flower now prefers
`flwr run` of an app project) but is the documented Python entry point of the simulation engine:
  * a `flwr.clientapp.ClientApp` whose `@app.train()` function loads the round's `ArrayRecord` into our SmallCNN,
    runs exactly `local_steps` mini-batch SGD steps on the shard of `context.node_config["partition-id"]` and
    replies with its `ArrayRecord` and a `MetricRecord` holding `num-examples` = the shard's size;
  * a `flwr.serverapp.ServerApp` whose main runs `flwr.serverapp.strategy.FedAvg` (fraction_train =
    per_round / clients, min_train_nodes = per_round, min_available_nodes = clients, fraction_evaluate = 0: no
    federated evaluation) through `strategy.start(grid=..., initial_arrays=..., num_rounds=..., evaluate_fn=...)`;
    the centralized `evaluate_fn` tests the global model on the whole test set (common.evaluate) at
    common.eval_rounds(spec) only (it returns None at the other rounds, so they cost nothing);
  * `flwr.simulation.run_simulation(..., num_supernodes=clients, backend_config={"client_resources":
    {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": RAY_CPUS, "object_store_memory": 128 MiB}})`.

Ray gets 1 logical CPU by default (one ClientApp actor: the clients train one after another on one core, the
budget run_bare.py has); FLOWER_RAY_CPUS=N gives N actors. OMP/MKL threads are 1 in the environment the Ray
workers inherit, and the ClientApp calls torch.set_num_threads(1). Each actor process loads the data once
(module cache); the driver loads only the test set. The model runs channels-last, as in run_bare.py.

Deviations from the rules (also in the result's "notes"):
  * sampling is Flower's own: `random.sample` over the connected node ids. We seed Python's `random`, but the
    simulation engine draws the node ids from `secrets`, so which partitions a round gets differs from run to
    run (uniform without replacement all the same);
  * a client's place in its shuffled shard lives in its Flower `Context.state` (pass number and cursor); the
    permutation of pass p is drawn from numpy's default_rng((seed, partition, p)), not run_bare.py's one stream;
  * each training message gets a fresh SGD optimizer (no state carried between clients; momentum is 0 anyway);
  * Flower's FedAvg averages in float32 (numpy), run_bare.py in torch float32: the same rule.
A ClientApp failure comes back as an error reply, which Flower's FedAvg would skip; this runner stops instead.
Set FLWR_TELEMETRY_ENABLED=0 (this file sets it before importing flwr).

W3/W4 (spec["mode"] == "async") are refused with exit status 1: Flower has no FedBuff/FedAsync strategy, no
virtual clock (the simulation engine runs ClientApps in wall time) and no availability model (simulated nodes
are always connected); all three would be our own code in a hand-written ServerApp loop over
grid.push_messages/pull_messages, i.e. not a measurement of Flower.
Memory: Ray runs the actor, raylet, gcs_server and agents as descendants of this process; measure the whole
process tree (a rusage max-RSS sees only the largest one).
"""
from __future__ import annotations

import os

os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

import flwr  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

# --------------------------------------------------------------------------------------------------------------
# ClientApp (runs in the Ray actors; this module is imported there by name, so _WORKER is a per-process cache)
# --------------------------------------------------------------------------------------------------------------

_WORKER: dict[str, dict] = {}


def _worker(spec_path: str) -> dict:
    """The actor's data and model, loaded on its first message."""
    if spec_path not in _WORKER:
        torch.set_num_threads(1)
        spec = common.load_spec(spec_path)
        torch.set_num_threads(1)
        d = common.data(spec)
        _WORKER[spec_path] = {
            "spec": spec,
            "x": d["x_train"].contiguous(memory_format=torch.channels_last),
            "y": d["y_train"],
            "parts": d["parts"],
            "net": common.model(spec).to(memory_format=torch.channels_last),
        }
    return _WORKER[spec_path]


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    cfg = msg.content["config"]
    w = _worker(str(cfg["spec"]))
    spec, net = w["spec"], w["net"]
    pid = int(context.node_config["partition-id"])
    part = w["parts"][pid]
    bs = int(spec["batch_size"])
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=spec["lr"], momentum=spec["momentum"])
    lossf = nn.CrossEntropyLoss()
    # the client's place in its shuffled shard, kept in its own Flower Context between rounds
    sampler = context.state.config_records.get("sampler") or ConfigRecord({"pass": 0, "cursor": 0})
    p, cursor = int(sampler["pass"]), int(sampler["cursor"])
    order = np.random.default_rng((int(spec["seed"]), pid, p)).permutation(part)
    total = 0.0
    for _ in range(int(cfg["local-steps"])):
        if cursor + bs > len(order):  # a new pass over the shard
            p, cursor = p + 1, 0
            order = np.random.default_rng((int(spec["seed"]), pid, p)).permutation(part)
        idx = torch.from_numpy(order[cursor:cursor + bs])
        cursor += bs
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(w["x"][idx]), w["y"][idx])
        loss.backward()
        opt.step()
        total += loss.item()
    context.state.config_records["sampler"] = ConfigRecord({"pass": p, "cursor": cursor})
    content = RecordDict({
        "arrays": ArrayRecord(net.state_dict()),
        "metrics": MetricRecord({"train_loss": total / int(cfg["local-steps"]), "num-examples": len(part)}),
    })
    return Message(content=content, reply_to=msg)


# --------------------------------------------------------------------------------------------------------------
# ServerApp (runs in a thread of this process)
# --------------------------------------------------------------------------------------------------------------

_RUN: dict = {}  # spec path, spec, test set, curve, error: set by main() before the simulation starts


class CheckedFedAvg(FedAvg):
    """Flower's FedAvg, but a round with a failed or missing ClientApp reply stops the run (FedAvg would log it
    and average the rest)."""

    def __init__(self, expected: int, **kw) -> None:
        super().__init__(**kw)
        self.expected = expected

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        errors = [m.error.reason for m in replies if m.has_error()]
        if errors or len(replies) != self.expected:
            raise RuntimeError(f"round {server_round}: {len(replies)} replies of {self.expected}, "
                               f"{len(errors)} errors: {errors[:3]}")
        return super().aggregate_train(server_round, replies)


server_app = ServerApp()


@server_app.main()
def server_main(grid: Grid, context: Context) -> None:
    spec = _RUN["spec"]
    random.seed(int(spec["seed"]))  # FedAvg samples with Python's random.sample
    net = common.model(spec).to(memory_format=torch.channels_last)
    rounds_to_test = common.eval_rounds(spec)
    t0 = time.perf_counter()

    def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if server_round not in rounds_to_test:
            return None
        net.load_state_dict(arrays.to_torch_state_dict())
        acc, loss = common.evaluate(net, _RUN["x_test"], _RUN["y_test"])
        _RUN["curve"].append({"round": server_round, "acc": acc, "loss": loss})
        print(f"round {server_round}: acc {acc:.4f} loss {loss:.4f} ({time.perf_counter() - t0:.1f} s)",
              flush=True)
        return MetricRecord({"accuracy": acc, "loss": loss})

    strategy = CheckedFedAvg(
        expected=int(spec["per_round"]),
        fraction_train=spec["per_round"] / spec["clients"],
        min_train_nodes=int(spec["per_round"]),
        fraction_evaluate=0.0,
        min_evaluate_nodes=0,
        min_available_nodes=int(spec["clients"]),
        weighted_by_key="num-examples",
    )
    strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(net.state_dict()),
        num_rounds=int(spec["rounds"]),
        train_config=ConfigRecord({"spec": _RUN["spec_path"], "local-steps": int(spec["local_steps"])}),
        evaluate_fn=evaluate_fn,
    )


NOTES = ("Flower simulation engine (Ray backend, run_simulation), Message API: ClientApp @train + ServerApp with "
         "flwr.serverapp.strategy.FedAvg (fraction_train=per_round/clients, weighted by num-examples = shard size), "
         "centralized evaluate_fn at the eval rounds only; Ray given {ray_cpus} CPU(s) -> {ray_cpus} ClientApp "
         "actor(s), 1 torch thread each. Sampling is Flower's random.sample over node ids drawn from `secrets`, so "
         "the clients per round differ from run to run (uniform without replacement all the same); each client's "
         "shard order is numpy default_rng((seed, partition, pass)) with its cursor kept in the Flower Context; a "
         "fresh SGD optimizer per training message.")


def main() -> None:
    a = common.args()
    spec = common.load_spec(a.spec)
    if spec["mode"] != "sync":
        raise SystemExit(f"run_flower.py: {spec['workload']} is {spec['mode']}: Flower's strategies are synchronous "
                         "rounds (no FedBuff/FedAsync, no virtual clock); not run")
    timer = common.Timer()
    ray_cpus = int(os.environ.get("FLOWER_RAY_CPUS", "1"))
    arrays = np.load(spec["data"])
    _RUN.update(spec_path=str(Path(a.spec).resolve()), spec=spec, curve=[],
                x_test=common.images(arrays["x_test"][: spec["test_size"]]).contiguous(
                    memory_format=torch.channels_last),
                y_test=torch.from_numpy(arrays["y_test"][: spec["test_size"]]).long())
    print(f"flwr {flwr.__version__}: {spec['workload']} seed {spec['seed']}, {spec['clients']} supernodes, "
          f"{spec['per_round']} per round, {spec['rounds']} rounds, Ray CPUs {ray_cpus}", flush=True)
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=int(spec["clients"]),
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": ray_cpus, "num_gpus": 0, "object_store_memory": 128 * 1024 ** 2},
            },
        )
    except BaseException as ex:  # noqa: BLE001 - any failure of the simulation is the runner's failure
        raise SystemExit(f"run_flower.py: the Flower simulation failed: {type(ex).__name__}: {ex}") from ex
    curve = _RUN["curve"]
    want = sorted(common.eval_rounds(spec))
    if [p["round"] for p in curve] != want:
        raise SystemExit(f"run_flower.py: the simulation ended with tests at rounds {[p['round'] for p in curve]}, "
                         f"expected {want}")
    common.write(a.out, common.result("flower", f"flwr {flwr.__version__}", curve, spec,
                                      notes=NOTES.format(ray_cpus=ray_cpus), ray_cpus=ray_cpus,
                                      work_s=timer.seconds()))
    print(f"final acc {curve[-1]['acc']:.4f}, work {timer.seconds():.1f} s -> {a.out}", flush=True)


if __name__ == "__main__":
    # Run as the module `run_flower` (not `__main__`), so that Ray pickles the ClientApp's functions by reference
    # and each actor keeps its data in this module's cache between messages.
    import run_flower

    run_flower.main()

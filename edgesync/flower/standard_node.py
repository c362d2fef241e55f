"""EdgeSync's ClientApp under a stock Flower strategy: Flower's standard Message API on an emulated device.

A strategy of `flwr.serverapp.strategy` (FedAvg, FedProx, FedAdam, FedAdagrad, FedYogi, FedAvgM, …) sends
`train` and `evaluate` messages holding {"arrays": ArrayRecord, "config": ConfigRecord} and expects
{"arrays": ArrayRecord, "metrics": MetricRecord} back from `train`, {"metrics": MetricRecord} from
`evaluate`, averaged by "num-examples". `FlowerNode` (node.py) hands such messages here: they carry no
"edgesync" header. The node trains local SGD on its partition with EdgeSync's trainer, every step paced
by its device profile (a ×10 node's steps last 10× its ×1 step), and waits out its emulated link for
the arrays in and out.

Arrays: keyed like the model's `state_dict()` (what `ArrayRecord(model.state_dict())` makes), or a list
in `state_dict()` order (`ArrayRecord([ndarray, …])`); the reply uses the same keys.

Node config (`--node-config`): `partition-id`, `num-partitions` (default 2), `partition` (iid |
dirichlet), `dataset`, `model`, `seed`, `batch-size`, `device`, `data-root`, `profile` (x1, x10, gamma…),
`headroom` (0.7: a ×1 step lasts the undisturbed step, measured once, / headroom) or `base-s` (the ×1
step in seconds, the same on every node: exact ratios whatever each node measures), `rate-mbps` and
`latency-ms` (the node's link, both ways), `test-size` (evaluate on the first N test samples; default all).
Train config: `lr` (DEFAULT_LR, an algorithm entry's default), `local-steps` (10) or `local-epochs` (passes
over the partition), `momentum` (0), `weight-decay` (0), `proximal-mu` (FedProx's term, 0).
Train metrics: num-examples, train_loss, steps, compute_s (the steps, emulated slowdown included),
comm_s (the emulated link), wait_s (the rest: process start-up, loading), factor (the mean drawn
slowdown), base_s (the ×1 step). Evaluate metrics: num-examples, eval_loss, eval_acc, on the test set.
"""
from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np
import psutil
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict
from flwr.app import Message as FlowerMessage

from edgesync.algorithms.machinery.base import DEFAULT_LR, Instruction
from edgesync.algorithms.local_sgd import LocalRound, LocalSGDClient, LocalSGDConfig
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import FactorSampler, parse_profile
from edgesync.emulation.throttle import Throttle
from edgesync.flower.numpy_client import EdgeNumPyClient
from edgesync.runtime.bookkeeping.evaluator import evaluate
from edgesync.runtime.bookkeeping.step_time import measure_step_s, warm_up

# The ×1 step is paced at the undisturbed step / headroom (emulation.headroom's default): other processes
# on the cores then slow no step past its target, and a ×10 node stays ×10 of a ×1 one.
DEFAULT_HEADROOM = 0.7
CALIBRATED = "edgesync.standard"  # context.state: this node's undisturbed step, measured once
DEFAULT_TRAIN = {"lr": DEFAULT_LR, "local-steps": 10, "momentum": 0.0, "weight-decay": 0.0, "proximal-mu": 0.0}


class StandardNode:
    def __init__(self, context: Context):
        self.context = context
        cfg = context.node_config
        self.profile = parse_profile(str(cfg.get("profile", "x1")))
        self.rank = int(cfg.get("partition-id", 0))
        self.local = EdgeNumPyClient(self.rank, int(cfg.get("num-partitions", 2)),
                                     kind=str(cfg.get("partition", "iid")),
                                     dataset_name=str(cfg.get("dataset", "fashion_mnist")),
                                     model=str(cfg.get("model", "cnn")), seed=int(cfg.get("seed", 0)),
                                     batch_size=int(cfg.get("batch-size", 32)), device=str(cfg.get("device", "cpu")),
                                     data_root=cfg.get("data-root"))
        self.trainer = self.local.trainer
        if int(cfg.get("test-size", 0)) > 0:  # evaluate on the first N test samples (a quicker federated eval)
            n = int(cfg["test-size"])
            self.local.test_x, self.local.test_y = self.local.test_x[:n], self.local.test_y[:n]
        rate = cfg.get("rate-mbps")
        self.link = Link(rate_mbps=None if rate is None else float(rate),
                         latency_s=float(cfg.get("latency-ms", 0.0)) / 1e3)
        self.seed = int(cfg.get("seed", 0))
        self.headroom = float(cfg.get("headroom", DEFAULT_HEADROOM))
        self.base_s = float(cfg.get("base-s", 0.0))  # one ×1 step for every node of a lab (0: measured here)
        if self.base_s < 0:
            raise ValueError(f"node config base-s {self.base_s:g}: expected seconds ≥ 0 (0: measure this node)")
        if not 0 < self.headroom <= 1:
            raise ValueError(f"node config headroom {self.headroom:g}: expected a fraction in (0, 1]")

    def handle(self, message: FlowerMessage) -> FlowerMessage:
        kind = message.metadata.message_type
        arrays_key, arrays = _the(message.content, ArrayRecord, "an ArrayRecord of the model's weights")
        config = dict(_the(message.content, ConfigRecord, None)[1] or {})
        comm_s = self._wait_link(arrays.count_bytes())
        self._load(arrays)
        if kind == "train":
            metrics = self._train(config)
            trained = self._arrays_like(arrays)
            comm_s += self._wait_link(trained.count_bytes())
            metrics["comm_s"] = round(comm_s, 4)
            metrics["wait_s"] = round(max(0.0, time.time() - _process_start() - metrics["compute_s"] - comm_s), 4)
            reply = RecordDict({arrays_key: trained, "metrics": MetricRecord(metrics)})
        elif kind == "evaluate":
            acc, loss = evaluate(self.trainer.model, self.local.test_x, self.local.test_y, batch_size=1000)
            reply = RecordDict({"metrics": MetricRecord({"num-examples": len(self.local.test_y),
                                                          "eval_loss": float(loss), "eval_acc": float(acc)})})
        else:
            raise ValueError(f"Flower message type {kind!r}: the standard API has train and evaluate")
        return FlowerMessage(reply, reply_to=message)

    # -- training ------------------------------------------------------------------------------------
    def _train(self, config: dict[str, Any]) -> dict[str, float | int]:
        cfg = {**DEFAULT_TRAIN, **config}
        steps = int(cfg["local-steps"])
        if "local-epochs" in config:
            steps = int(float(cfg["local-epochs"]) * math.ceil(self.trainer.num_samples / self.trainer.batch_samples))
        if steps < 1:
            raise ValueError(f"config local-steps/local-epochs gives {steps} steps: at least 1 is needed")
        half = LocalSGDClient(LocalSGDConfig(lr=float(cfg["lr"]), momentum=float(cfg["momentum"]),
                                             weight_decay=float(cfg["weight-decay"]), local_steps=steps,
                                             batch_size=self.trainer.batch_size), self.trainer)
        base_s = self.base_s or self._reference_s() / self.headroom
        warm_up(self.trainer, steps=1)  # this fresh process's first step is slower (benchmarks/cold_step.py)
        throttle = Throttle(FactorSampler(self.profile, seed=self.seed, rank=self.rank), base_s)
        self.trainer.hook = throttle
        theta0, buffers = self.trainer.get_params(), self._buffers()
        tensors = {"params": theta0} if buffers is None else {"params": theta0, "buffers": buffers}
        local = LocalRound(half, Instruction(tensors=tensors, meta={"lr": half.config.lr}),  # the server's η
                           proximal_mu=float(cfg["proximal-mu"]))
        stats = self.trainer.stats
        compute0 = stats.compute_s
        for _ in range(steps):
            local.step()
        update = local.finish()
        self.trainer.set_params(theta0 + update.tensors["delta"])
        if "buffers" in update.tensors:
            self.trainer.set_buffers(update.tensors["buffers"])
        factors = throttle.factors
        return {"num-examples": self.trainer.num_samples, "train_loss": float(update.meta["loss"]),
                      "steps": steps, "compute_s": round(stats.compute_s - compute0, 4),
                      "factor": float(np.mean(factors.values)) if factors.values else 1.0, "base_s": round(base_s, 5)}

    def _reference_s(self) -> float:
        """The undisturbed step, measured on this node's first train message and kept in its state."""
        saved = self.context.state.get(CALIBRATED)
        if isinstance(saved, ConfigRecord) and "reference_s" in saved:
            return float(saved["reference_s"])
        reference = measure_step_s(self.trainer)
        self.context.state[CALIBRATED] = ConfigRecord({"reference_s": reference})
        return reference

    def _wait_link(self, nbytes: int) -> float:
        seconds = self.link.transfer_s(nbytes)
        if seconds > 0:
            time.sleep(seconds)
        return seconds

    # -- arrays ↔ model ------------------------------------------------------------------------------
    def _buffers(self) -> torch.Tensor | None:
        return self.trainer.get_buffers() if self.local.buffer_shapes else None

    def _load(self, arrays: ArrayRecord) -> None:
        model = self.trainer.model
        own = model.state_dict()
        keys = list(arrays.keys())
        if set(keys) == set(own):
            state = arrays.to_torch_state_dict()
        elif len(keys) == len(own):  # a list of arrays, in state_dict order
            state = dict(zip(own, (torch.from_numpy(np.asarray(a)) for a in arrays.to_numpy_ndarrays())))
        else:
            missing = sorted(set(own) - set(keys))[:3]
            raise ValueError(f"the ArrayRecord has {len(keys)} arrays ({', '.join(keys[:3])}, …); this node's "
                             f"{type(model).__name__} has {len(own)} ({', '.join(list(own)[:3])}, …; missing "
                             f"{', '.join(missing)}): send the weights of the same model (node config `model`)")
        for name, value in state.items():
            if tuple(value.shape) != tuple(own[name].shape):
                raise ValueError(f"array {name!r} has shape {tuple(value.shape)}, the model's is {tuple(own[name].shape)}")
        model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()})

    def _arrays_like(self, received: ArrayRecord) -> ArrayRecord:
        state = {k: v.detach().cpu() for k, v in self.trainer.model.state_dict().items()}
        if set(received.keys()) == set(state):
            return ArrayRecord(state)
        return ArrayRecord([v.numpy() for v in state.values()])


def _the(content: RecordDict, kind: type, what: str | None) -> tuple[str | None, Any]:
    """The one record of `kind` in a message (the key strategies use, e.g. "arrays"), or a clear error."""
    found = [(k, r) for k, r in content.items() if isinstance(r, kind)]
    if len(found) == 1:
        return found[0]
    if not found and what is None:
        return None, None
    raise ValueError(f"expected exactly one {kind.__name__} ({what or kind.__name__}), found "
                     f"{len(found)}: {', '.join(k for k, _ in found) or 'none'}")


def _process_start() -> float:
    return psutil.Process(os.getpid()).create_time()

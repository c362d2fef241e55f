"""A legacy Flower `NumPyClient` for older Flower servers: local SGD on this node's share of the data.

A server that speaks Flower's strategy API (`flwr.server.strategy.FedAvg` and kin, or a pre-1.13
`start_server`) drives it; nothing of EdgeSync's coordinator is needed. It trains with the same
trainer and local-SGD client half as `edgesync client` (one code path), so its steps, sampling and
update equal ours. Parameters travel as Flower expects them: one NumPy array per model parameter
(then one per floating-point buffer, e.g. BatchNorm statistics), in `model.parameters()` order.

    app = ClientApp(client_fn=edgesync.flower.numpy_client.client_fn)   # clients/numpy_client.py

Node config (`--node-config`): `partition-id`, `num-partitions`, and optionally `partition`
("iid" or "dirichlet"), `dataset`, `model`, `seed`, `device`, `data-root`. Fit config sent by the
strategy (`on_fit_config_fn`): `local-steps` (default 10), `lr` (DEFAULT_LR, an algorithm entry's default),
`momentum` (0).
"""
from __future__ import annotations

import numpy as np
import torch
from flwr.app import Context
from flwr.client import Client, NumPyClient

from edgesync.algorithms.machinery.base import DEFAULT_LR, Instruction
from edgesync.algorithms.local_sgd import LocalSGDClient, LocalSGDConfig
from edgesync.data.datasets import to_tensor
from edgesync.data.partition import partition
from edgesync.runtime.bookkeeping.evaluator import evaluate
from edgesync.runtime.bookkeeping.workload import dataset, make_trainer, resolve_device
from edgesync.trainer import NoHook

DEFAULT_FIT = {"local-steps": 10, "lr": DEFAULT_LR, "momentum": 0.0}


class EdgeNumPyClient(NumPyClient):
    def __init__(self, partition_id: int, num_partitions: int, kind: str = "iid", dataset_name: str = "fashion_mnist",
                 model: str = "cnn", seed: int = 0, batch_size: int = 32, device: str = "cpu",
                 data_root: str | None = None):
        if not 0 <= partition_id < num_partitions:
            raise ValueError(f"partition-id {partition_id} is outside 0..{num_partitions - 1} (num-partitions)")
        torch.set_num_threads(1)
        data = dataset(dataset_name, data_root, None)
        part = partition(data.train_y, num_partitions, kind, seed=seed)[partition_id]
        self.trainer = make_trainer(data, model, np.sort(part).astype(np.int64), batch_size,
                                    seed=seed * 1000 + partition_id, device=resolve_device(device), hook=NoHook())
        self.test_x = to_tensor(data.test_x, data.mean, data.std)
        self.test_y = torch.as_tensor(data.test_y)
        model_ = self.trainer.model
        self.shapes = [tuple(p.shape) for p in model_.parameters()]
        self.buffer_shapes = [tuple(b.shape) for b in model_.buffers() if b.dtype.is_floating_point]

    # -- the list of arrays Flower carries ↔ our flat vectors ----------------------------------------
    def get_parameters(self, config) -> list[np.ndarray]:
        return _split(self.trainer.get_params(), self.shapes) + _split(self.trainer.get_buffers(), self.buffer_shapes)

    def _load(self, arrays: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor | None]:
        expected = len(self.shapes) + len(self.buffer_shapes)
        if len(arrays) != expected:
            raise ValueError(f"the server sent {len(arrays)} arrays; this model has {expected} "
                             f"({len(self.shapes)} parameters, {len(self.buffer_shapes)} buffers)")
        for i, (a, shape) in enumerate(zip(arrays, self.shapes + self.buffer_shapes)):
            if tuple(np.shape(a)) != shape:
                raise ValueError(f"array {i} has shape {tuple(np.shape(a))}, the model's is {shape}")
        params = _join(arrays[:len(self.shapes)])
        buffers = _join(arrays[len(self.shapes):]) if self.buffer_shapes else None
        return params, buffers

    # -- NumPyClient ---------------------------------------------------------------------------------
    def fit(self, parameters, config):
        fit = {**DEFAULT_FIT, **dict(config)}
        params, buffers = self._load(parameters)
        half = LocalSGDClient(LocalSGDConfig(lr=float(fit["lr"]), momentum=float(fit["momentum"]),
                                             local_steps=int(fit["local-steps"]),
                                             batch_size=self.trainer.batch_size), self.trainer)
        tensors = {"params": params} if buffers is None else {"params": params, "buffers": buffers}
        update = half.on_instruction(Instruction(tensors=tensors, meta={}))
        self.trainer.set_params(params + update.tensors["delta"])
        if "buffers" in update.tensors:
            self.trainer.set_buffers(update.tensors["buffers"])
        metrics = {"train_loss": float(update.meta["loss"]), "steps": int(update.meta["steps"])}
        return self.get_parameters({}), self.trainer.num_samples, metrics

    def evaluate(self, parameters, config):
        """On the test set: every node reports the same split, as FedAvg's federated evaluation expects."""
        params, buffers = self._load(parameters)
        self.trainer.set_params(params)
        if buffers is not None:
            self.trainer.set_buffers(buffers)
        acc, loss = evaluate(self.trainer.model, self.test_x, self.test_y, batch_size=1000)
        return float(loss), len(self.test_y), {"accuracy": float(acc)}


def client_fn(context: Context) -> Client:
    """The legacy ClientApp's factory: `ClientApp(client_fn=client_fn)`."""
    cfg = context.node_config
    if "partition-id" not in cfg or "num-partitions" not in cfg:
        raise ValueError("the legacy NumPyClient needs --node-config 'partition-id=I num-partitions=N'")
    client = EdgeNumPyClient(int(cfg["partition-id"]), int(cfg["num-partitions"]), kind=str(cfg.get("partition", "iid")),
                             dataset_name=str(cfg.get("dataset", "fashion_mnist")), model=str(cfg.get("model", "cnn")),
                             seed=int(cfg.get("seed", 0)), device=str(cfg.get("device", "cpu")),
                             data_root=cfg.get("data-root"))
    return client.to_client()


def _split(flat: torch.Tensor, shapes: list[tuple]) -> list[np.ndarray]:
    out, at = [], 0
    flat = flat.detach().cpu()
    for shape in shapes:
        n = int(np.prod(shape))
        out.append(flat[at:at + n].reshape(shape).numpy().copy())
        at += n
    return out


def _join(arrays: list[np.ndarray]) -> torch.Tensor:
    return torch.cat([torch.as_tensor(np.asarray(a, dtype=np.float32)).reshape(-1) for a in arrays])

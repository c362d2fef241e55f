"""Plato (TL-System/plato, `plato-learn` on PyPI) on a peer workload (issue 38), driven as a Plato user drives it.

    benchmarks/peers/.venvs/plato/bin/python benchmarks/peers/run_plato.py --spec SPEC.json --out RESULT.json

How: the runner writes a Plato configuration file (YAML, into benchmarks/peers/.work/plato/) — clients.total_clients
and per_round, trainer.rounds / epochs / batch_size / optimizer SGD with lr and momentum, server.random_seed,
algorithm fedavg, trainer.max_concurrency 1 (one client process, one training process at a time) — hands it to
Plato as its `-c` argument, and starts a `fedavg.Server(model=..., datasource=..., trainer=...)` subclass with
`server.run(simple.Client(...))`: Plato's own socket.io server, its client process(es) and its FedAvg aggregation
(weighted by each client's `num_samples`). The custom hooks Plato offers carry our parts in:
  - model: EdgeSync's SmallCNN (common.model), made picklable for Plato's spawned processes;
  - datasource: the spec's Fashion-MNIST file (normalised as common.images), loaded lazily in each process;
  - sampler: a client's indices from the partition file (set in the client's `configure`), `num_samples` = shard size;
  - trainer: basic.Trainer with a loader of exactly `local_steps` mini-batches (one "epoch" of `local_steps`
    batches, reshuffling the shard when a pass runs out, as run_bare.py) and torch.set_num_threads(1) in its process;
  - server test: the global model on the whole test set by common.evaluate (accuracy and loss), only after
    common.eval_rounds; other rounds report the last accuracy without testing.
Deviations, recorded in the result's notes: Plato samples the clients of a round with Python's `random.sample`
(uniform, without replacement) seeded by server.random_seed, not run_bare's numpy stream, and the shards' shuffles
come from per-client generators seeded by (seed, client); the server test runs in the server's own process
(Plato's trainer.test would spawn a process per test under max_concurrency); and each client's training runs in
Plato's client process: under trainer.max_concurrency (the setting that keeps Plato to one client process) Plato's
trainer spawns a fresh process for every client update (its design, to release GPU memory) and reads the model
back from a file, and that fresh process re-imports Plato (transformers, timm, lightly, ...: ~13 s here), ~20 s an
update, so W1 would take ~3 hours; PLATO_SPAWN=1 keeps that behaviour. Model exchange goes through files
(clients.comm_simulation, Plato's default) and the server checkpoints every round — both part of what is measured.
W3 (spec mode "async"): FedBuff on Plato's asynchronous mode with its simulated wall clock (server.synchronous
false, simulate_wall_time true, minimum_clients_aggregated 1): see FedBuffServer; the virtual training time of an
update is set in the client's report (customize_report). W4 (churn) is refused: Plato has no availability model.
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import shutil
import socket
import sys
import threading
import time
import types
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import common  # noqa: E402

PEER = "plato"
SPEC_ENV = "EDGESYNC_PEER_SPEC"  # the spec's path, for Plato's spawned processes (they re-import this file)


def _plato_config(spec: dict, work: Path, port: int) -> Path:
    """The Plato configuration file of this run (YAML is a superset of JSON, so JSON is written)."""
    work.mkdir(parents=True, exist_ok=True)
    cfg = {
        "general": {"base_path": str(work)},
        "clients": {"type": "simple", "total_clients": spec["clients"], "per_round": spec["per_round"],
                    "do_test": False},
        "server": {"address": "127.0.0.1", "port": port, "random_seed": spec["seed"], "synchronous": True},
        "data": {"datasource": "edgesync_fmnist", "sampler": "all_inclusive", "random_seed": spec["seed"]},
        "trainer": {"type": "basic", "rounds": spec["rounds"], "max_concurrency": 1, "epochs": 1,
                    "batch_size": spec["batch_size"], "optimizer": "SGD", "model_name": "smallcnn"},
        "algorithm": {"type": "fedavg"},
        "parameters": {"optimizer": {"lr": spec["lr"], "momentum": spec["momentum"], "weight_decay": 0.0}},
        "results": {"types": "round, accuracy, elapsed_time"},
    }
    if spec["mode"] == "async":  # FedBuff on Plato's simulated wall clock (FedBuffServer)
        for key in ("buffer", "concurrency", "slow_factor", "slow_every", "base_step_s"):
            if key not in spec:
                raise SystemExit(f"run_plato.py: async spec without {key!r}")
        cfg["clients"]["per_round"] = spec["concurrency"]
        cfg["server"].update({"synchronous": False, "simulate_wall_time": True, "minimum_clients_aggregated": 1,
                              "staleness_bound": 10**9, "request_update": False})
        cfg["trainer"]["rounds"] = spec["rounds"] * spec["buffer"]  # a Plato round takes one report
    path = work / "config.yml"
    path.write_text(json.dumps(cfg, indent=1))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The parent reads the arguments and writes the configuration; Plato reads its configuration at import
# (plato.config.Config parses sys.argv), so this comes before the first `import plato`. Plato's spawned
# processes (multiprocessing "spawn") re-import this file as __mp_main__ with the same sys.argv and environment.
if __name__ == "__main__":
    ARGS = common.args()
    SPEC = common.load_spec(ARGS.spec)
    if SPEC.get("churn"):
        raise SystemExit(f"run_plato.py: {SPEC['workload']} has availability churn, which Plato does not model "
                         "(its clients are always available; a client process that disconnects ends the run)")
    WORK = HERE / ".work" / "plato" / f"{SPEC['workload']}-s{SPEC['seed']}-{os.getpid()}"
    CONFIG = _plato_config(SPEC, WORK, _free_port())
    os.environ[SPEC_ENV] = str(Path(ARGS.spec).resolve())
    os.environ["config_file"] = str(CONFIG)
    sys.argv = [sys.argv[0], "-c", str(CONFIG), "--cpu", "-l", os.environ.get("PLATO_LOG", "warning")]
else:
    SPEC = common.load_spec(os.environ[SPEC_ENV])

from plato.clients import simple  # noqa: E402
from plato.config import Config  # noqa: E402
from plato.datasources import base as datasource_base  # noqa: E402
from plato.samplers import base as sampler_base  # noqa: E402
from plato.servers import fedavg  # noqa: E402
from plato.trainers import basic  # noqa: E402

EVAL = common.eval_rounds(SPEC)
SPAWN = os.environ.get("PLATO_SPAWN", "0") == "1"
ASYNC = SPEC["mode"] == "async"
_CACHE: dict = {}


def _arrays() -> dict:
    """The spec's data file and partition, once per process."""
    if not _CACHE:
        arrays = np.load(SPEC["data"])
        _CACHE.update({k: arrays[k] for k in ("x_train", "y_train", "x_test", "y_test")})
        _CACHE["parts"] = json.loads(Path(SPEC["partition"]).read_text())
        if len(_CACHE["parts"]) != SPEC["clients"]:
            raise SystemExit(f"{SPEC['partition']}: {len(_CACHE['parts'])} clients, the spec says {SPEC['clients']}")
    return _CACHE


# --- the model: common.model (EdgeSync's SmallCNN, seeded), under a module name pickle can find ----------------
_CNN = type(common.model(SPEC))
sys.modules["edgesync_cnn"] = types.ModuleType("edgesync_cnn")
sys.modules["edgesync_cnn"].SmallCNN = _CNN


def smallcnn() -> torch.nn.Module:
    """Plato's `model` hook: a fresh common.model(spec), as an instance of this process's registered class."""
    net = _CNN(num_classes=10)
    net.load_state_dict(common.model(SPEC).state_dict())
    return net


# --- the data source -----------------------------------------------------------------------------------------
class FmnistSplit(torch.utils.data.Dataset):
    """One split of the spec's data file, normalised per item exactly as common.images; pickles as its name only
    (Plato pickles the training set into each spawned training process)."""

    def __init__(self, split: str) -> None:
        self.split = split
        self.n = len(_arrays()[f"y_{split}"]) if split == "train" else SPEC["test_size"]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        a = _arrays()
        x = (torch.from_numpy(a[f"x_{self.split}"][i]).float() / 255.0 - common.MEAN) / common.STD
        return x.unsqueeze(0), int(a[f"y_{self.split}"][i])


class DataSource(datasource_base.DataSource):
    """Plato's `datasource` hook: the spec's Fashion-MNIST."""

    def __init__(self) -> None:
        super().__init__()
        self.trainset, self.testset = FmnistSplit("train"), FmnistSplit("test")

    def num_train_examples(self) -> int:
        return len(self.trainset)

    def num_test_examples(self) -> int:
        return len(self.testset)


# --- the sampler: our partition, `local_steps` batches per round --------------------------------------------
class ShardSampler(sampler_base.Sampler):
    """Client `client_id`'s indices from the partition file (Plato's clients are numbered from 1). `get()` gives
    the round's `local_steps` mini-batches, read on from where the client's last round stopped in its shuffled
    shard, reshuffled when a pass runs out — run_bare.py's cursor. Plato makes a new sampler each round, in its one
    client process, so the shuffles and cursors live in that process (`_SHARDS`), each client with its own
    generator seeded by (seed, client)."""

    def __init__(self, client_id: int) -> None:
        super().__init__()
        self.shard = np.asarray(_arrays()["parts"][client_id - 1], dtype=np.int64)
        if client_id not in _SHARDS:
            rng = np.random.default_rng([SPEC["seed"], client_id])
            _SHARDS[client_id] = [rng, rng.permutation(self.shard), 0]
        state, bs = _SHARDS[client_id], SPEC["batch_size"]
        rng, order, cursor = state
        self.batches = []
        for _ in range(SPEC["local_steps"]):
            if cursor + bs > len(order):  # a new pass over the shard
                order, cursor = rng.permutation(self.shard), 0
            self.batches.append(order[cursor:cursor + bs].tolist())
            cursor += bs
        state[1:] = [order, cursor]

    def get(self):
        return self.batches

    def num_samples(self) -> int:
        return len(self.shard)


_SHARDS: dict[int, list] = {}


# --- the trainer ---------------------------------------------------------------------------------------------
class Trainer(basic.Trainer):
    """Plato's basic trainer: one "epoch" that is exactly `local_steps` SGD steps; one torch thread in Plato's
    training process; the server's test is common.evaluate on the whole test set, after the eval rounds only."""

    last = (0.0, float("nan"))

    def train_model(self, config, trainset, sampler, **kwargs):
        torch.set_num_threads(int(SPEC["threads"]))
        return super().train_model(config, trainset, sampler, **kwargs)

    def train(self, trainset, sampler, **kwargs) -> float:
        """Plato's train() under max_concurrency spawns a fresh process per client training (to release GPU memory)
        and reads the model back from a file; that costs a full re-import of Plato (~13 s here) per update, so by
        default the training runs in the client process, as Plato does without max_concurrency. PLATO_SPAWN=1
        keeps Plato's own spawning."""
        if SPAWN:
            return super().train(trainset, sampler, **kwargs)
        config = Config().trainer._asdict()
        config["run_id"] = Config().params["run_id"]
        config.pop("max_concurrency", None)  # train_process: no model file to hand back
        self.training_start_time = time.time()
        tic = time.perf_counter()
        self.train_process(config, trainset, sampler, **kwargs)
        return time.perf_counter() - tic

    def get_train_loader(self, batch_size, trainset, sampler, **kwargs):
        return torch.utils.data.DataLoader(trainset, batch_sampler=sampler)

    def test(self, testset, sampler=None, **kwargs) -> float:
        if self.client_id != 0:
            return super().test(testset, sampler, **kwargs)
        if getattr(self, "eval_now", False):  # set by the server: a model update after which the rules test
            a = _arrays()
            x = common.images(a["x_test"][: SPEC["test_size"]])
            y = torch.from_numpy(a["y_test"][: SPEC["test_size"]]).long()
            self.last = common.evaluate(self.model, x, y)
        return self.last[0]


# --- the client and the server -------------------------------------------------------------------------------
class Client(simple.Client):
    """Plato's simple client, whose sampler is its shard of our partition; on an asynchronous workload its report
    carries the virtual training time Plato's wall-clock simulation reads: local_steps × base_step_s, ×slow_factor
    for the last client of every slow_every (partition index % slow_every == slow_every − 1: 9, 19, …)."""

    def configure(self) -> None:
        super().configure()
        if self.current_round > 0:  # Plato also configures the client process once before any selection
            self.sampler = ShardSampler(self.client_id)

    def customize_report(self, report):
        if ASYNC:
            index = self.client_id - 1
            slow = SPEC["slow_factor"] if index % SPEC["slow_every"] == SPEC["slow_every"] - 1 else 1
            report.training_time = SPEC["local_steps"] * SPEC["base_step_s"] * slow
        return report


class Server(fedavg.Server):
    """Plato's FedAvg server; records the curve and writes the result when Plato closes it."""

    def __init__(self, out: str, timer: common.Timer, **kwargs) -> None:
        super().__init__(**kwargs)
        self.out, self.timer, self.curve, self.started = out, timer, [], False
        self.version, self.flushed = 0, False  # global model updates: rounds (sync), buffer flushes (async)

    def weights_aggregated(self, updates) -> None:
        if not ASYNC:
            self.version, self.flushed = self.current_round, True
        self.trainer.eval_now = self.flushed and self.version in EVAL  # read by Trainer.test, next

    def clients_processed(self) -> None:
        if self.trainer.eval_now:
            acc, loss = self.trainer.last
            point = {"round": self.version, "acc": acc, "loss": loss}
            if ASYNC:
                point["sim_time_s"] = self.wall_time - self.initial_wall_time
            self.curve.append(point)
            clock = f", virtual {point['sim_time_s']:.2f} s" if ASYNC else ""
            print(f"round {self.version}: acc {acc:.4f} loss {loss:.4f} ({self.timer.seconds():.1f} s{clock})",
                  flush=True)

    async def periodic_task(self) -> None:
        """Fail fast if Plato's client process died (Plato would otherwise wait for it forever)."""
        alive = mp.active_children()
        self.started = self.started or bool(alive)
        if self.started and not alive:
            _fail("Plato's client process exited before the last round")

    def server_will_close(self) -> None:
        if self.version < SPEC["rounds"] or not self.curve or self.curve[-1]["round"] != SPEC["rounds"]:
            _fail(f"Plato closed the server after {self.version} of {SPEC['rounds']} model updates")
        common.write(self.out, common.result(PEER, version("plato-learn"), self.curve, SPEC, notes=notes(),
                                             work_s=self.timer.seconds(), client_updates=self.current_round))
        print(f"wrote {self.out}", flush=True)
        # Plato's exchanged models and checkpoints: a file per client and per round, ~0.7 MB each
        shutil.rmtree(Config().params["checkpoint_path"], ignore_errors=True)


class FedBuffServer(Server):
    """FedBuff (as EdgeSync's fedbuff) on Plato's asynchronous wall-clock simulation. Plato, with
    server.minimum_clients_aggregated 1, takes the reports in the order of their virtual finish times, one per Plato
    "round", and at once sends a replacement client (drawn among those not in flight) the current model: `concurrency`
    = clients.per_round clients always in flight. This server's `aggregate_weights` (Plato's hook for an aggregation
    rule on weights) buffers each Δ = x_client − x_pulled (the model the client was sent) weighted by
    1/√(1 + lag), lag = flushes since it was sent, and after `buffer` of them applies x ← x + buffer_sum / buffer:
    one model update (a "round" of the curve) per `buffer` Plato rounds."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pulled: dict[int, int] = {}  # client in flight -> the version of the model it was sent
        self.models: dict[int, dict] = {}  # version -> that global model's weights, while a client holds it
        self.buffer, self.contributions = None, 0

    def clients_selected(self, selected_clients) -> None:
        if self.version not in self.models:
            self.models[self.version] = {k: v.detach().clone() for k, v in self.algorithm.extract_weights().items()}
        for client in selected_clients:
            self.pulled.setdefault(client, self.version)

    async def aggregate_weights(self, updates, baseline_weights, weights_received):
        for update, weights in zip(updates, weights_received):
            sent = self.pulled.pop(update.client_id)
            weight = 1.0 / math.sqrt(1 + self.version - sent)
            pulled = self.models[sent]
            delta = {k: (weights[k] - pulled[k]) * weight for k in weights}
            self.buffer = delta if self.buffer is None else {k: self.buffer[k] + delta[k] for k in delta}
            self.contributions += 1
        self.flushed = self.contributions >= SPEC["buffer"]
        if not self.flushed:
            return baseline_weights
        new = {k: baseline_weights[k] + self.buffer[k] / SPEC["buffer"] for k in baseline_weights}
        self.version, self.buffer, self.contributions = self.version + 1, None, 0
        held = set(self.pulled.values())
        self.models = {v: m for v, m in self.models.items() if v in held}
        self.models[self.version] = {k: v.detach().clone() for k, v in new.items()}
        return new


def notes() -> str:
    """The result's notes: how Plato ran the workload, and where that differs from the rules."""
    common_part = ("Plato {v}: Server + simple.Client over socket.io on localhost, trainer.max_concurrency 1 (one client "
                   "process), models exchanged through files, a server checkpoint each Plato round; "
                   + ("each client's training in a freshly spawned process (Plato's max_concurrency default); "
                      if SPAWN else "each client's training in the client process (Plato's per-update spawn "
                      "overridden: it re-imports Plato, ~13-20 s an update here); ")
                   + "local work = one epoch of exactly local_steps batches (custom sampler/loader), a client's place "
                   "in its shuffled shard kept across rounds, as bare; clients drawn by Python random.sample seeded "
                   "by the seed (uniform, no replacement; another stream than bare); server test by common.evaluate "
                   "in the server process, eval rounds only").format(v=version("plato-learn"))
    if not ASYNC:
        return "FedAvg (fedavg.Server, weighted by num_samples = shard size). " + common_part
    return ("FedBuff on Plato's asynchronous mode with simulate_wall_time (server.synchronous false, "
            "minimum_clients_aggregated 1, staleness_bound off): clients.per_round = concurrency in flight, each "
            "report taken in virtual finish-time order and its slot refilled at once by a client drawn among those "
            "not in flight (the contributor included); the buffer is this runner's aggregate_weights hook "
            "(Δ against the pulled model, weight 1/sqrt(1+lag), x += sum/buffer; Plato's own FedAvg would take Δ "
            "against the current model, unweighted by staleness); trainer.rounds = rounds × buffer Plato rounds; "
            "virtual time = local_steps × base_step_s (×slow_factor for index % slow_every == slow_every-1) set as "
            "the report's training_time, plus Plato's measured processing time (microseconds); sim_time_s = "
            "Plato's simulated wall time since the start. " + common_part)


def _fail(why: str) -> None:
    print(f"run_plato.py: FAILED: {why}", file=sys.stderr, flush=True)
    for child in mp.active_children():
        child.terminate()
    os._exit(1)


def _watchdog(limit_s: float) -> None:
    time.sleep(limit_s)
    _fail(f"no result after {limit_s:.0f} s")


def main() -> None:
    timer = common.Timer()
    out = str(Path(ARGS.out).resolve())
    threading.Thread(target=_watchdog, args=(float(os.environ.get("PLATO_TIMEOUT_S", 4 * 3600)),),
                     daemon=True).start()
    print(f"plato {version('plato-learn')}: {SPEC['workload']} seed {SPEC['seed']}, {SPEC['clients']} clients, "
          f"{SPEC['per_round']} per round, {SPEC['rounds']} rounds; config {CONFIG}", flush=True)
    server = (FedBuffServer if ASYNC else Server)(out, timer, model=smallcnn, datasource=DataSource, trainer=Trainer)
    client = Client(model=smallcnn, datasource=DataSource, trainer=Trainer)
    try:
        server.run(client)  # Plato ends the process itself (os._exit) when it closes the server
    except BaseException as exc:  # noqa: BLE001
        _fail(f"{type(exc).__name__}: {exc}")
    _fail("Plato's server returned without closing")


if __name__ == "__main__":
    main()

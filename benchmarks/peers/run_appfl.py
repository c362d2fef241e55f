"""APPFL (Argonne's Advanced Privacy-Preserving Federated Learning framework, `appfl`) as a peer (issue 38).

    benchmarks/peers/.venvs/appfl/bin/python benchmarks/peers/run_appfl.py --spec SPEC.json --out RESULT.json

Driven as an APPFL user drives a single-machine simulation, in one process, with APPFL's agents and OmegaConf configs:

  * one `appfl.agent.ServerAgent` whose config names `FedAvgAggregator` (aggregator_kwargs.client_weights_mode =
    "sample_size") and `SyncScheduler` for the synchronous workloads (W1, W2), and whose client_configs carry the
    model and the trainer: our SmallCNN through APPFL's custom-model hook (`model_configs.model_path` =
    edgesync/models/cnn.py, `model_name` SmallCNN, `seed` = the spec's seed, so the initial global model is the
    very one common.model(spec) builds), `VanillaTrainer` with `mode: step`, `num_local_steps` = local_steps,
    `optim: SGD` (lr, momentum, weight_decay 0), `train_batch_size`, shuffled, `loss_fn: CrossEntropyLoss` and a
    small accuracy function given as `metric_source` (the trainer requires a metric);
  * one `appfl.agent.SimClientAgent` per client (APPFL's simulation client: a ClientAgent handed its dataset as an
    object), its shard of the spec's partition as a TensorDataset of the normalised images; each gets the
    server's client configs (`load_config`) and the initial model, and the server gets every client's sample
    size (`set_sample_size`), as in APPFL's examples/serial/run_serial.py;
  * rounds as in run_serial.py (`client.train()`, `client.get_parameters()`, `server.global_update(...)`,
    the Future's result), except for the sampling: run_serial.py trains every client every round, so this runner
    draws `per_round` clients per round uniformly without replacement (numpy default_rng(seed).choice, as
    run_bare.py draws them), loads the current global model into only those ClientAgents, and lowers the
    SyncScheduler's quorum to `per_round` with its public `set_num_clients()` (what APPFL's own SyncSimDriver
    does for its per-round cohort), so the FedAvgAggregator fires on the sampled clients' models, weighted by
    their sample sizes over the sampled clients' total;
  * the global model (the server agent's model, which the aggregator updates) is tested with common.evaluate after
    the rounds in common.eval_rounds(spec).

W3/W4 (spec mode "async"): APPFL 1.12's virtual-time simulator, `appfl.vsim.AsyncSimDriver` (events on a
min-heap, clients trained one after another in this process, durations from `ClientProfile`s), with the server's
`FedBuffAggregator` + `AsyncScheduler`: `max_in_flight` = concurrency, `base_step_time` = base_step_s (fixed
virtual compute time per local step), one profile per client with `compute_factor` = slow_factor for every
`slow_every`-th client (the last of every slow_every: client index % slow_every == slow_every − 1, ids 9, 19, … as every runner) and 1 otherwise, `bandwidth` 0 (no communication time:
virtual time is compute only). FedBuff is set to the paper's rule with server lr 1 and staleness weight
1/sqrt(1 + lag): APPFL's FedBuff adds alpha * s(lag) * w * (x_local - x_global) per contribution with
w = 1/num_clients (client_weights_mode "equal") and applies the sum after K = `buffer` contributions, so
alpha = clients / buffer makes the flush x + (1/K) * sum s(lag) * delta; staleness_fn "polynomial", a = 0.5.
APPFL counts every contribution as a "global epoch", so num_global_epochs = rounds * buffer (= `rounds` flushes);
the test runs after the flushes in common.eval_rounds(spec), each curve point with the driver's virtual time.
W4 (`churn`): a ClientProfile subclass whose next_available() gives each client online/offline phases
(online `online_s`, then offline `offline_s`, client i's phase shifted by i/clients of the period), which the
driver uses to defer a dispatch to an offline client; a driver subclass drops a client's update when the client
goes offline before its training ends (the slot is freed at the moment it drops).

Every level's `optimize_memory` is set False (APPFL's default True costs a full gc.collect() after each agent
call: 30x slower here, same accuracy; APPFL_OPTIMIZE_MEMORY=1 keeps the default). Deviations from the rules (a new
shuffled pass over the shard every local round with a partial last batch; torch's RNG for the data order; in W3/W4
the driver's choice of which idle client to dispatch) are written into the result's "notes" (NOTES_* below).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"
os.environ.setdefault("WANDB_MODE", "disabled")

import logging  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from importlib.metadata import version  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from torch.utils.data import TensorDataset  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=DeprecationWarning)

from appfl.agent import ServerAgent, SimClientAgent  # noqa: E402

# APPFL's `optimize_memory` (every agent, trainer, scheduler and aggregator; default True) calls gc.collect() after
# each train / get_parameters / load_parameters / global_update / aggregation: a full collection of a process that
# holds every client agent, 0.4 s each with 100 clients on this machine, 90% of the run. Off here (a config key
# at every level), as a user simulating many clients on one machine would set it; APPFL_OPTIMIZE_MEMORY=1 keeps
# APPFL's default to measure its cost.
OPTIMIZE_MEMORY = os.environ.get("APPFL_OPTIMIZE_MEMORY", "0") == "1"

# The trainer needs a metric function; APPFL takes it as a file or as source text (train_configs.metric_source).
METRIC_SOURCE = '''
import numpy as np

def accuracy(y_true, y_pred):
    """Share of argmax predictions equal to the labels (APPFL's metric signature: labels, logits)."""
    if len(y_pred.shape) == 1:
        y_pred = np.round(y_pred)
    else:
        y_pred = y_pred.argmax(axis=1)
    return 100 * np.sum(y_pred == y_true) / y_pred.shape[0]
'''

NOTES_SYNC = (
    "APPFL 1.12 serial simulation (examples/serial/run_serial.py pattern): ServerAgent (FedAvgAggregator with "
    "client_weights_mode=sample_size, SyncScheduler) + one SimClientAgent per client (our shard as a dataset object), "
    "VanillaTrainer mode=step, SGD, CrossEntropyLoss, our SmallCNN from its file (model_path/model_name, seed = spec "
    "seed: the same initial weights as common.model). run_serial.py trains every client every round; here the runner "
    "samples per_round clients per round (numpy default_rng(seed).choice without replacement, as run_bare.py), loads "
    "the global model into those ClientAgents only, and lowers the SyncScheduler's quorum to per_round with its "
    "set_num_clients() (as APPFL's own vsim SyncSimDriver does), so FedAvg averages the sampled clients' models "
    "weighted by their sample counts. Deviations: VanillaTrainer builds a fresh DataLoader iterator every train() "
    "call, so each round a client starts a new shuffled pass over its shard (run_bare.py continues its pass across "
    "rounds), and the pass's last batch is partial (drop_last=False, APPFL's default; drop_last=True would crash on "
    "shards smaller than a batch) where run_bare.py starts a new pass instead; the data order comes from torch's "
    "global RNG (DataLoader shuffle), not run_bare.py's numpy stream."
)
NOTES_COMMON = (
    " Config: optimize_memory=False at every level (APPFL's default True runs a full gc.collect() after every "
    "train/get_parameters/load_parameters/global_update/aggregation; with 100 client agents in the process that "
    "was 0.4 s per call, 90% of the run: W1 5 rounds took 347 s of work with it on vs 12 s off on the shared 2-core "
    "machine, identical accuracy; APPFL_OPTIMIZE_MEMORY=1 restores the default). All client agents live in the "
    "one process, as in APPFL's serial/vsim examples. Client/server console logs are silenced (level WARNING)."
)
NOTES_ASYNC = (
    "APPFL 1.12 virtual-time simulator (appfl.vsim.AsyncSimDriver, examples/vsim/run_vsim.py pattern): ServerAgent "
    "with FedBuffAggregator + AsyncScheduler, one SimClientAgent per client, VanillaTrainer mode=step; "
    "max_in_flight = concurrency, base_step_time = base_step_s, ClientProfile(compute_factor = slow_factor for client "
    "index % slow_every == slow_every − 1, else 1; bandwidth 0 = no communication time). FedBuff: K = buffer, alpha = "
    "clients/buffer with client_weights_mode=equal (APPFL weights each contribution 1/num_clients), staleness_fn "
    "polynomial a=0.5, so a flush is x + (1/K) sum (1+lag)^-0.5 delta (server lr 1); lag counted in flushes since "
    "the client's download. num_global_epochs = rounds*buffer because APPFL counts contributions; 'round' in the "
    "curve = flushes. Deviations: when a client finishes, the driver dispatches a random idle client (any client "
    "not in flight, the finished one included), not necessarily the same one; each dispatch starts a new shuffled "
    "pass over the shard (partial last batch); the client trains when dispatched, on the global model of that "
    "virtual instant."
)
NOTES_CHURN = (
    " Churn (W4): ClientProfile.next_available() (APPFL's availability hook) gives client i online [o + k*P, o + "
    "k*P + online_s), offline for offline_s after, P = online_s + offline_s, o = -i/clients * P (phases staggered "
    "by client); a dispatch to an offline client is deferred by the driver to its next online time (holding its "
    "in-flight slot, APPFL's rule); a client that goes offline before its training ends loses its update (a driver "
    "subclass moves its completion to the drop time and discards it there, freeing the slot). The client's "
    "compute is still spent on this machine."
)


def server_config(spec: dict, work: Path) -> OmegaConf:
    """The ServerAgent's config: client_configs (trainer, model) shared by all clients, and server_configs."""
    asyncm = spec["mode"] == "async"
    train = {
        "trainer": "VanillaTrainer",
        "mode": "step",
        "num_local_steps": spec["local_steps"],
        "optim": "SGD",
        "optim_args": {"lr": spec["lr"], "momentum": spec["momentum"], "weight_decay": 0.0},
        "loss_fn": "CrossEntropyLoss",
        "metric_source": METRIC_SOURCE,
        "metric_name": "accuracy",
        "train_batch_size": spec["batch_size"],
        "train_data_shuffle": True,
        "do_validation": False,
        "do_pre_validation": False,
        "device": "cpu",
        "send_gradient": False,
        "optimize_memory": OPTIMIZE_MEMORY,
    }
    model = {"model_path": str(common.ROOT / "edgesync" / "models" / "cnn.py"), "model_name": "SmallCNN",
             "model_kwargs": {"num_classes": 10}, "seed": int(spec["seed"])}
    if asyncm:
        aggregator, scheduler = "FedBuffAggregator", "AsyncScheduler"
        agg_kwargs = {"K": spec["buffer"], "alpha": spec["clients"] / spec["buffer"], "client_weights_mode": "equal",
                      "staleness_fn": "polynomial", "staleness_fn_kwargs": {"a": 0.5}}
        epochs = spec["rounds"] * spec["buffer"]
    else:
        aggregator, scheduler = "FedAvgAggregator", "SyncScheduler"
        agg_kwargs = {"client_weights_mode": "sample_size"}
        epochs = spec["rounds"]
    agg_kwargs["optimize_memory"] = OPTIMIZE_MEMORY
    return OmegaConf.create({
        "client_configs": {"train_configs": train, "model_configs": model},
        "server_configs": {
            "num_clients": spec["clients"],
            "num_global_epochs": epochs,
            "device": "cpu",
            "logging_output_dirname": str(work),
            "logging_output_filename": "",  # console only (silenced below); no log file
            "aggregator": aggregator,
            "aggregator_kwargs": agg_kwargs,
            "scheduler": scheduler,
            "scheduler_kwargs": {"same_init_model": True, "optimize_memory": OPTIMIZE_MEMORY},
            "optimize_memory": OPTIMIZE_MEMORY,
        },
    })


def quiet(agent) -> None:
    """APPFL's agents log a table row per local training to the console: keep warnings only."""
    agent.logger.logger.setLevel(logging.WARNING)


def build(spec: dict, work: Path):
    """The server agent, and one SimClientAgent per client with its shard, as APPFL's serial example sets them up."""
    d = common.data(spec)
    server = ServerAgent(server_agent_config=server_config(spec, work))
    quiet(server)
    from_server = server.get_client_configs()
    clients = []
    for i, idx in enumerate(d["parts"]):
        t = torch.from_numpy(idx)
        cfg = OmegaConf.create({"client_id": f"Client{i}", "optimize_memory": OPTIMIZE_MEMORY,
                                "train_configs": {"logging_output_dirname": str(work), "logging_output_filename": ""}})
        agent = SimClientAgent(client_agent_config=cfg, client_id=f"Client{i}",
                               client_dataset=(TensorDataset(d["x_train"][t], d["y_train"][t]), None))
        quiet(agent)
        agent.load_config(from_server)
        clients.append(agent)
        if (i + 1) % 200 == 0:
            print(f"  {i + 1} client agents", flush=True)
    for agent in clients:
        server.set_sample_size(client_id=agent.get_id(), sample_size=agent.get_sample_size())
    return server, clients, d


def check_initial(server, spec: dict) -> None:
    ref = common.model(spec).state_dict()
    got = server.get_parameters(serial_run=True)
    if not all(torch.equal(ref[k], got[k]) for k in ref):
        raise SystemExit("run_appfl.py: APPFL's initial global model differs from common.model(spec)")


def run_sync(spec: dict, work: Path) -> tuple[list[dict], dict]:
    server, clients, d = build(spec, work)
    check_initial(server, spec)
    init = server.get_parameters(serial_run=True)
    for agent in clients:
        agent.load_parameters(init)
    rng = np.random.default_rng(spec["seed"])
    server.scheduler.set_num_clients(spec["per_round"])  # the quorum: the sampled clients only
    evals = common.eval_rounds(spec)
    curve, rnd, steps = [], 0, 0
    while not server.training_finished():
        rnd += 1
        chosen = rng.choice(spec["clients"], size=spec["per_round"], replace=False)
        global_model = server.get_parameters(serial_run=True)
        future = None
        for c in chosen:
            agent = clients[c]
            agent.load_parameters(global_model)
            agent.train()
            local = agent.get_parameters()
            if isinstance(local, tuple):
                local, meta = local
                steps += int(meta.get("current_local_steps", 0))
            future = server.global_update(client_id=agent.get_id(), local_model=local, blocking=False)
        result = future.result() if hasattr(future, "result") else future
        if isinstance(result, tuple):
            result = result[0]
        if server.scheduler.get_num_global_epochs() != rnd:
            raise SystemExit(f"run_appfl.py: round {rnd} did not aggregate (scheduler at "
                             f"{server.scheduler.get_num_global_epochs()} epochs)")
        if rnd in evals:
            acc, loss = common.evaluate(server.model, d["x_test"], d["y_test"])
            curve.append({"round": rnd, "acc": acc, "loss": loss})
            print(f"round {rnd}: acc {acc:.4f} loss {loss:.4f}", flush=True)
    return curve, {"steps": steps}


def run_async(spec: dict, work: Path) -> tuple[list[dict], dict]:
    from appfl.vsim import AsyncSimDriver, ClientProfile, VsimLogger

    churn = spec.get("churn")

    class ChurnProfile(ClientProfile):
        """Online `online_s`, then offline `offline_s`, repeating; `offset` shifts the client's phase."""

        def __init__(self, online_s: float, offline_s: float, offset: float, **kw):
            super().__init__(**kw)
            self.online_s, self.period, self.offset = online_s, online_s + offline_s, offset

        def _phase(self, t: float) -> float:
            return (t - self.offset) % self.period

        def next_available(self, vtime: float) -> float:
            ph = self._phase(vtime)
            return vtime if ph < self.online_s else vtime + (self.period - ph)

        def offline_at(self, vtime: float) -> float:
            """When a client online at `vtime` next goes offline."""
            return vtime + (self.online_s - self._phase(vtime))

    class Driver(AsyncSimDriver):
        """AsyncSimDriver with the runner's test after the flushes in eval_rounds, and churn's dropped updates."""

        def __init__(self, *a, on_flush=None, **kw):
            super().__init__(*a, **kw)
            self.on_flush, self.dropped, self.drops = on_flush, set(), 0

        def _push(self, vtime, etype, cid):
            if etype == "train_complete" and churn and cid in self._pending:
                off = self.profiles[cid].offline_at(self._pending[cid]["dispatch_time"])
                if off < vtime:  # the client goes offline mid-training: its update is lost at that moment
                    self.dropped.add(cid)
                    vtime = off
            super()._push(vtime, etype, cid)

        def _handle_train_complete(self, cid, completion_time):
            if cid in self.dropped:
                self.dropped.discard(cid)
                self._pending.pop(cid)
                self.active.discard(cid)
                self.drops += 1
                self._dispatch_idle()
                return
            before = self.server.aggregator.global_step
            super()._handle_train_complete(cid, completion_time)
            if self.server.aggregator.global_step != before:
                self.on_flush(self.server.aggregator.global_step, completion_time)

    server, clients, d = build(spec, work)
    check_initial(server, spec)
    profiles = {}
    for i, agent in enumerate(clients):
        kw = {"compute_factor": float(spec["slow_factor"]) if i % spec["slow_every"] == spec["slow_every"] - 1 else 1.0, "bandwidth": 0.0}
        if churn:
            period = churn["online_s"] + churn["offline_s"]
            profiles[agent.get_id()] = ChurnProfile(churn["online_s"], churn["offline_s"],
                                                    -i / spec["clients"] * period, **kw)
        else:
            profiles[agent.get_id()] = ClientProfile(**kw)
    logger = VsimLogger(logging_id="vsim", file_dir=str(work), file_name="vsim")
    logger.logger.handlers = [h for h in logger.logger.handlers if isinstance(h, logging.FileHandler)]
    evals = common.eval_rounds(spec)
    curve = []

    def on_flush(flush: int, vtime: float) -> None:
        if flush in evals:
            acc, loss = common.evaluate(server.model, d["x_test"], d["y_test"])
            curve.append({"round": flush, "acc": acc, "loss": loss, "sim_time_s": round(vtime, 6)})
            print(f"round {flush} (virtual {vtime:.2f} s): acc {acc:.4f} loss {loss:.4f}", flush=True)

    driver = Driver(server_agent=server, client_agents=clients, profiles=profiles,
                    max_in_flight=spec["concurrency"], logger=logger, seed=spec["seed"],
                    base_step_time=spec["base_step_s"], eval_every=0, on_flush=on_flush)
    driver.run()
    if server.aggregator.global_step < spec["rounds"]:
        raise SystemExit(f"run_appfl.py: the simulation stopped after {server.aggregator.global_step} flushes, "
                         f"{spec['rounds']} wanted")
    checks = driver.verify(spec["rounds"] * spec["buffer"])
    stale = [r["staleness"] for r in driver.history]  # the driver's, counted in contributions (APPFL's "epochs")
    extra = {"contributions": len(driver.history), "steps": (len(driver.history) + driver.drops) * spec["local_steps"],
             "sim_time_end_s": round(driver.virtual_time, 6),
             "mean_staleness_contributions": float(np.mean(stale)) if stale else None,
             "vsim_checks": dict(checks), "vsim_log": logger.get_log_filepath()}
    if churn:
        extra["dropped_updates"] = driver.drops
    return curve, extra


def main() -> None:
    a = common.args()
    spec = common.load_spec(a.spec)
    torch.set_num_threads(1)
    timer = common.Timer()
    out = Path(a.out)
    work = out.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    ver = version("appfl")
    print(f"appfl {ver}: {spec['workload']} seed {spec['seed']} ({spec['mode']}, {spec['clients']} clients)",
          flush=True)
    if spec["mode"] == "sync":
        curve, extra = run_sync(spec, work)
        notes = NOTES_SYNC + NOTES_COMMON
    elif spec["mode"] == "async":
        curve, extra = run_async(spec, work)
        notes = NOTES_ASYNC + (NOTES_CHURN if spec.get("churn") else "") + NOTES_COMMON
    else:
        raise SystemExit(f"run_appfl.py: unknown mode {spec['mode']!r}")
    missing = sorted(common.eval_rounds(spec) - {p["round"] for p in curve})
    if missing:
        raise SystemExit(f"run_appfl.py: no test after rounds {missing}")
    extra["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    common.write(out, common.result("appfl", ver, curve, spec, notes=notes, work_s=timer.seconds(), **extra))
    print(f"final acc {curve[-1]['acc']:.4f}; {timer.seconds():.1f} s; wrote {out}", flush=True)


if __name__ == "__main__":
    main()

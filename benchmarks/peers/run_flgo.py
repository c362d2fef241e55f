"""FLGo (https://github.com/WwZzz/easyFL, `pip install flgo`) on a peer workload (issue 38), driven as an FLGo
user drives it:

  * the data come in FLGo's custom-dataset way: `flgo.gen_benchmark_from_file` makes a benchmark package from a
    config file whose `train_data`/`test_data` are our normalised Fashion-MNIST tensors and whose `get_model`
    is EdgeSync's SmallCNN (seeded as common.model); `flgo.gen_task` then writes the task folder with a custom
    partitioner that returns the spec's partition lists (flgo_task.py; all under benchmarks/peers/.work/flgo/);
  * `flgo.init(task, flgo.algorithm.fedavg, option)` and `runner.run()`: FLGo's own server/client loop and
    simulator (DefaultSimulator, every system mode 'IDL'), one process (num_parallels 1, no GPU, one torch thread);
    options num_rounds=rounds, proportion=per_round/clients, num_steps=local_steps, batch_size, learning_rate=lr,
    momentum, weight_decay 0, sample='uniform' (numpy choice without replacement), aggregate='other' (FLGo's
    Σ (p_k/Σp_k)·model_k with p_k ∝ the client's sample count: the sample-weighted mean), train_holdout 0 (a
    client trains on its whole shard), test_holdout 0 (the server tests on the whole test set);
  * the curve comes from a custom FLGo logger (flgo_task.curve_logger) whose log_once runs the server's own test
    (`server.test()`, FLGo's calculator) after the eval rounds.

Deviations from the rules (also in the result's notes): FLGo's client draws its batches from a torch DataLoader
(shuffle=True, drop_last=False) that it rebuilds at the start of every local training, so each round starts a
fresh shuffled pass over the shard and a pass that ends short gives one smaller batch (the bare loop keeps its
place in the shard across rounds and reshuffles instead of taking a short batch); sampling and shuffling use
FLGo's seeds (numpy's global generator, torch's), so the curve is not the bare loop's.

Two fixes a user of FLGo 0.4.4 with torch 2.14 needs, both in the generated benchmark package (flgo_task.py):
FLGo's client dataset (a torch Subset overriding only __getitem__) gets the __getitems__ that torch >= 2.9
demands, and the template's partition plot is switched off; FLGo builds a fresh model (get_model) for every model
sum, so get_model keeps torch's generator state instead of letting common.model reseed it each aggregation.

Asynchronous workloads (W3/W4, spec mode "async"): FLGo's FedBuff (flgo.algorithm.fedbuff, an AsyncServer) on
FLGo's virtual clock, with the devices and the churn as a custom FLGo simulator (flgo_task.async_simulator:
latency = local_steps × factor, one ×slow_factor client in every slow_every; availability phases; a client whose
online phase ends while it trains is marked dropped and its update lost); options proportion =
concurrency/clients, sample 'uniform_available', algo_para [buffer/clients, eta 1]. One clock tick is
base_step_s/10 and a server iteration; sim_time_s = ticks × base_step_s/10. FLGo's FedBuff differs from the
spec's in how it fills the buffer (see ASYNC_NOTES): a flush takes every update that has arrived once there are
>= buffer of them, and a contributor is not sampled again until the flush.

    benchmarks/peers/.venvs/flgo/bin/python benchmarks/peers/run_flgo.py --spec SPEC.json --out RESULT.json
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"

import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SYNC_NOTES = ("FLGo {version}: benchmark from flgo.gen_benchmark_from_file (our tensors, SmallCNN) + flgo.gen_task "
              "with a partitioner returning the spec's lists; flgo.algorithm.fedavg via flgo.init/run, "
              "DefaultSimulator (ideal), sample='uniform', aggregate='other' (sample-weighted mean), num_steps, "
              "train_holdout 0, one process/thread on CPU; test by the server's calculator on the whole test set "
              "from a custom logger; the generated benchmark's client dataset given the __getitems__ torch >= 2.9 "
              "requires (FLGo 0.4.4 fails on torch 2.14 without it). Differences: each local training starts a fresh shuffled DataLoader pass "
              "(drop_last=False, so a pass that ends short gives one smaller batch) instead of keeping the place "
              "in the shard across rounds; sampling/shuffling RNG is FLGo's (numpy/torch global, FLGo seeds).")


def options(spec: dict) -> dict:
    """FLGo's running-time options for the spec."""
    return {"num_rounds": spec["rounds"], "proportion": spec["per_round"] / spec["clients"],
            "num_steps": spec["local_steps"], "batch_size": spec["batch_size"], "learning_rate": spec["lr"],
            "momentum": spec["momentum"], "weight_decay": 0.0, "optimizer": "SGD", "clip_grad": 0.0,
            "lr_scheduler": "-1", "learning_rate_decay": 1.0,
            "sample": "uniform", "aggregate": "other" if spec["weighting"] == "samples" else "uniform",
            "eval_interval": spec["eval_every"], "train_holdout": 0.0, "test_holdout": 0.0,
            "seed": spec["seed"], "dataseed": spec["seed"], "gpu": [], "num_parallels": 1, "num_workers": 0,
            "torch_num_threads": int(spec.get("threads", 1)), "test_batch_size": 1000, "no_tqdm": True,
            "log_level": "WARNING", "early_stop": -1}


def check(runner, spec: dict, parts: list) -> None:
    """FLGo's settings as the spec wants them (its options are floats and ratios)."""
    c = runner.clients[0]
    want = {"clients": (runner.num_clients, spec["clients"]), "batch_size": (c.batch_size, spec["batch_size"]),
            "num_steps": (c.num_steps, spec["local_steps"]), "shard sizes": ([x.datavol for x in runner.clients], [len(p) for p in parts]),
            "test size": (len(runner.test_data), spec["test_size"])}
    if spec["mode"] == "sync":
        want["clients a round"] = (runner.clients_per_round, spec["per_round"])
    else:
        want["concurrency"] = (runner.clients_per_round, spec["concurrency"])
        want["buffer"] = (int(runner.buffer_ratio * runner.num_clients), spec["buffer"])
    bad = {k: v for k, v in want.items() if v[0] != v[1]}
    if bad:
        raise SystemExit(f"run_flgo.py: FLGo's settings differ from the spec (FLGo, spec): {bad}")


def main() -> None:
    a = common.args()
    spec_path = str(Path(a.spec).resolve())
    out = Path(a.out).resolve()
    spec = common.load_spec(spec_path)
    sys.argv = sys.argv[:1]  # flgo.init parses the command line for its default options
    timer = common.Timer()
    warnings.filterwarnings("ignore")
    try:
        import flgo
        import flgo_task
        from importlib.metadata import version

        flgo_version = version("flgo")
        bmk, task = flgo_task.build_task(spec_path)
        print(f"flgo {flgo_version}: task {flgo_task.WORK / task} ({spec['clients']} clients), "
              f"setup {timer.seconds():.1f}s", flush=True)
        opt = options(spec)
        if spec["mode"] == "sync":
            import flgo.algorithm.fedavg as algorithm

            logger = flgo_task.curve_logger(common.eval_rounds(spec), tick_s=None)
            simulator, notes = flgo.simulator.DefaultSimulator, SYNC_NOTES.format(version=flgo_version)
        else:
            algorithm, simulator, extra, notes = async_parts(spec, flgo_version)
            opt.update(extra)
            logger = flgo_task.curve_logger(common.eval_rounds(spec),
                                            tick_s=spec["base_step_s"] / flgo_task.TICKS_PER_STEP)
        runner = flgo.init(task, algorithm, option=opt, Logger=logger, Simulator=simulator)
        check(runner, spec, flgo_task.datasets_parts(spec_path))
        runner.run()
        curve = logger.points
        extra_out = {}
        if spec["mode"] == "async":
            sizes = type(runner).flush_sizes
            extra_out = {"flush_sizes": sizes, "sim_ticks": runner.gv.clock.current_time}
            notes = notes.format(dropped=runner.gv.simulator.dropped_updates, mean_flush=sum(sizes) / max(len(sizes), 1))
            extra_out["dropped_updates"] = runner.gv.simulator.dropped_updates
    except SystemExit:
        raise
    except Exception as e:  # a clear message and a non-zero exit
        import traceback

        traceback.print_exc()
        raise SystemExit(f"run_flgo.py: FLGo failed on {spec['workload']}: {type(e).__name__}: {e}")
    wanted = sorted(common.eval_rounds(spec))
    if [p["round"] for p in curve] != wanted:
        raise SystemExit(f"run_flgo.py: tests after rounds {[p['round'] for p in curve]}, expected {wanted}")
    common.write(out, common.result("flgo", flgo_version, curve, spec, notes=notes, work_s=timer.seconds(),
                                    task=str(flgo_task.WORK / task), **extra_out))
    print(f"wrote {out} (work {timer.seconds():.1f}s)", flush=True)


ASYNC_NOTES = ("FLGo {version}: flgo.algorithm.fedbuff (AsyncServer) via flgo.init/run on FLGo's virtual clock "
               "(one tick = base_step_s/10, one server iteration a tick; server time and transfers zero; a "
               "returning client is replaced one tick later, +2% on a x1 pull) with a custom flgo.simulator "
               "BasicSimulator: latency = local_steps x factor x 10 ticks, factor {slow} for clients c % {every} "
               "== {last}; buffer_ratio = buffer/clients, eta 1, staleness weight (1+t-tau)^-0.5, x += eta * "
               "sum(w*delta)/len(buffer) (FLGo flushes the whole buffer once it holds >= buffer updates, and "
               "several arrive in one tick: {{mean_flush:.1f}} updates a flush on average here); proportion = "
               "concurrency/clients: each tick the server samples uniformly (without replacement) from the idle "
               "clients not in the buffer until `concurrency` train at once (a contributor is not resampled "
               "before the flush). Test by the server's calculator on the whole test set after every eval_every "
               "flushes; sim_time_s = ticks x base_step_s/10.{churn} Local training as in W1 (fresh shuffled "
               "DataLoader pass per pull, drop_last=False).")
CHURN_NOTES = (" Churn: client c online while (t + c*period/clients) mod period < online_s (period = online_s + "
               "offline_s); only online idle clients are sampled; a client whose online phase ends before its "
               "latency is over is marked dropped when it is sent the model (FLGo's connectivity hook: its update "
               "is lost and FLGo does not run its training), and its slot is freed when it goes offline "
               "({dropped} updates lost).")


def async_parts(spec: dict, flgo_version: str):
    """(algorithm, simulator class, extra options, notes) of an asynchronous workload: FLGo's FedBuff."""
    import flgo_task

    for key in ("buffer", "concurrency", "slow_factor", "slow_every", "base_step_s"):
        if key not in spec:
            raise SystemExit(f"run_flgo.py: async spec without {key!r}")
    extra = {"proportion": spec["concurrency"] / spec["clients"], "sample": "uniform_available",
             "algo_para": [spec["buffer"] / spec["clients"], 1.0]}
    notes = ASYNC_NOTES.format(version=flgo_version, slow=spec["slow_factor"], every=spec["slow_every"],
                               last=spec["slow_every"] - 1, churn=CHURN_NOTES if spec.get("churn") else "")
    return flgo_task.counting_fedbuff(), flgo_task.async_simulator(spec), extra, notes


if __name__ == "__main__":
    main()

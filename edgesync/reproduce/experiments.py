"""The experiments `edgesync reproduce` runs: a scenario of scenarios/ each, with the `--set` overrides of the
quick and the full mode, and the seeds each mode runs."""
from __future__ import annotations

from dataclasses import dataclass

from edgesync.config.tune import DEFAULT_TUNING_SEED
from edgesync.reproduce import shootout_setup as shootout

SEEDS = {"quick": [0, 1, 2], "full": [0, 1, 2, 3, 4]}  # the issue asks ≥ 3 quick, ≥ 5 full
TUNING_SEED = DEFAULT_TUNING_SEED  # never an evaluation seed, so no seed both chooses and judges


def _tune(grid: str, metric: str, extend: int = 2, stop: str = "") -> str:
    """A `tune=` override: every entry of the experiment (baseline and method alike) on the same grid, chosen on
    2,000 validation samples on TUNING_SEED, the grid extended past an edge the entries chose up to `extend`
    times (runtime/tuning_edges.py)."""
    return (f"tune={{grid: {grid}, metric: {metric}, validation_size: 2000, seed: {TUNING_SEED}, extend: {extend}"
            + (f", stop: {stop}" if stop else "") + "}")


_ESYNC_ALGOS = "algorithms=[{name: ssgd, lr: 0.05}, {name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]"
# DANA's one learning rate for every algorithm and worker count, as the paper runs them: the rate tuned for one
# worker (dana.txt App. B.4), here on validation data by benchmarks/dana_lr.py (docs/results.md, block dana_lr;
# tests/test_dana_lr.py holds this value to that record and to scenarios/dana_scale.yaml)
DANA_LR = 0.01
_NAG = f"{{name: nag_asgd, lr: {DANA_LR}, momentum: 0.9, warmup_epochs: 0.5}}"
_DANA_DC = f"{{name: dana_dc, lr: {DANA_LR}, momentum: 0.9, warmup_epochs: 0.5}}"
# DANA's claims read both algorithms at N = 16 homogeneous, DANA-DC alone at N = 16 heterogeneous, and NAG-ASGD
# alone at one worker (the papers' single-worker baseline; with one worker both are the same momentum SGD): three
# experiments, so that no run is made that no claim reads (reproduce/claims.py `also`)
_DANA = {"dana": ("sweep={clients: [{count: 16, profile: gamma-homo}]}", f"algorithms=[{_NAG}, {_DANA_DC}]"),
         "dana_one": ("sweep={clients: [{count: 1, profile: x1}]}", f"algorithms=[{_NAG}]"),
         "dana_hetero": ("sweep={clients: [{count: 16, profile: gamma-hetero}]}", f"algorithms=[{_DANA_DC}]")}
_DGS_GRID = "{lr: [0.015, 0.03, 0.05], momentum: [0.5, 0.7, 0.9]}"
_LR_GRID = "{lr: [0.05, 0.1, 0.2]}"  # ESync's experiments: SSGD, ASGD and ESync
_SHAT_SCALE_GRID = "{lr: [0.0125, 0.025, 0.05]}"  # n = 16: ASP and SHAT; the scenario's 0.05 at the top
_SHAT_GRID = "{lr: [0.025, 0.05, 0.1]}"
_EQ3_SWEEP = "sweep={clients: [{count: 16, profile: gamma-homo}], sharding: [none, layer, memory]}"
# FedAvg and the seven FL baselines: the clients' lr and the server's (global_lr: FedAvg's ε = 1 and FedAdam's
# η = 0.01 on one log grid), FedProx's μ and FedAvgM's β, the same values for every entry that has the key
_FL_GRID = "{lr: [0.025, 0.05, 0.1], global_lr: [0.01, 0.1, 1.0], mu: [0.01, 0.1], server_momentum: [0.5, 0.9]}"
_FL_QUICK_GRID = "{lr: [0.05, 0.1]}"


@dataclass(frozen=True)
class Experiment:
    key: str
    scenario: str
    quick: tuple[str, ...]
    full: tuple[str, ...] = ()
    # False: `--quick` runs it only when `--only` names it (its quick runs alone would take most of the
    # suite's twenty minutes)
    in_quick: bool = True


EXPERIMENTS = (
    # Every experiment but DANA's tunes its entries on one grid (`tune`): the baseline gets exactly the tuning the
    # method gets, chosen on validation data on a seed that is not evaluated, and an optimum on the grid's edge
    # is followed past it (or reported). --quick tunes on shorter runs where the experiment's own are long, and
    # follows an edge fewer times.
    Experiment("esync_iid", "scenarios/esync_fmnist_iid.yaml",
               # 200 s: live, the ×1 device is the shared base step (≈ 2.9 × the undisturbed step on 2 cores),
               # and SSGD takes 60–80 s to 0.80 at lr 0.05; each entry stops at the target, so the budget costs nothing
               quick=(_ESYNC_ALGOS, "stop.stop_at_target=true", "stop.time_budget_s=200", "eval.test_size=1000",
                      _tune(_LR_GRID, "time_to_target")),
               full=(_ESYNC_ALGOS, _tune(_LR_GRID, "time_to_target"))),
    Experiment("esync_noniid", "scenarios/esync_fmnist_noniid.yaml",
               quick=("algorithms=[{name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]", "stop.time_budget_s=15",
                      "eval.test_size=1000", _tune(_LR_GRID, "final_acc", 1, "{time_budget_s: 5}")),
               full=("algorithms=[{name: asgd, lr: 0.05}, {name: esync, lr: 0.05}]", _tune(_LR_GRID, "final_acc"))),
    # n = 16 and the ×100 straggler set directly (a tuned experiment runs no sweep): entries `asp` and `shat`
    Experiment("shat_scale", "scenarios/shat_scale.yaml",
               quick=("sweep={}", "clients=16", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                      "{name: shat, lr: 0.025}]", "eval.every_s=1",
                      _tune(_SHAT_SCALE_GRID, "final_acc", 1, "{max_updates: 500}")),
               full=("sweep={}", "clients=16", "algorithms=[{name: asgd, lr: 0.025, label: asp}, "
                     "{name: shat, lr: 0.025}]", _tune(_SHAT_SCALE_GRID, "final_acc"))),
    Experiment("shat_hetero", "scenarios/shat_hetero.yaml",
               quick=("sweep={}", "clients.7.profile=x100", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                      "{name: shat, lr: 0.05}]", "eval.every_s=1", _tune(_SHAT_GRID, "final_acc", 1, "{max_updates: 500}")),
               full=("sweep={}", "clients.7.profile=x100", "algorithms=[{name: asgd, lr: 0.05, label: asp}, "
                     "{name: shat, lr: 0.05}]", _tune(_SHAT_GRID, "final_acc"))),
    Experiment("dgs", "scenarios/dgs_bandwidth.yaml",
               quick=("sweep={}", "clients=8", "algorithms=[{name: asgd, lr: 0.05}, {name: dgs, lr: 0.015, "
                      "momentum: 0.7, rate: 0.01, secondary_rate: 0.01}]", "stop.max_updates=2000",
                      "eval.every_s=4", "eval.test_size=1000", _tune(_DGS_GRID, "final_acc", 1, "{max_updates: 500}")),
               full=("sweep={}", "clients=8", _tune(_DGS_GRID, "final_acc", 1, "{max_updates: 1000}"))),
    # the paper's main setting is homogeneous (App. B.3)
    *(Experiment(key, "scenarios/dana_scale.yaml", quick=(*setting, "eval.every_s=2", "eval.test_size=1000"),
                 full=setting) for key, setting in _DANA.items()),
    # EQ3 on the VGG-like model: throughput depends on the links and the fixed step time, not on accuracy
    Experiment("shat_sharding", "scenarios/shat_sharding.yaml", quick=(_EQ3_SWEEP, "stop.max_updates=150"),
               full=(_EQ3_SWEEP,)),
    # no paper claim (none of our source papers reports these baselines): a comparison table beside FedAvg
    # (reproduce/baselines.py)
    Experiment("fl_baselines", "scenarios/fl_baselines_noniid.yaml",
               quick=("stop.time_budget_s=20", "stop.target_acc=0.7", "eval.test_size=1000",
                      _tune(_FL_QUICK_GRID, "final_acc", 1, "{time_budget_s: 10}")),
               full=(_tune(_FL_GRID, "final_acc", 1, "{time_budget_s: 20}"),), in_quick=False),
    # the straggler shoot-out (reproduce/shootout.py): one experiment per device mix × data split, no paper claim
    # of its own but the seed papers' methods read against the best practitioners' mitigation; `--only shootout`
    *(Experiment(shootout.key(mix, split), shootout.SCENARIO, quick=shootout.overrides(mix, split, "quick"),
                 full=shootout.overrides(mix, split, "full"), in_quick=False)
      for mix in shootout.MIXES for split in shootout.SPLITS),
)
# names `--only` takes for several experiments at once
GROUPS = {"shootout": shootout.KEYS}

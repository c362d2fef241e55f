"""The straggler shoot-out's experiments (results: shootout.py): the device mixes, the data splits, the entries in
their groups, and each experiment's `--set` overrides of scenarios/straggler_shootout.yaml."""
from __future__ import annotations

from edgesync.config.tune import DEFAULT_TUNING_SEED

SCENARIO = "scenarios/straggler_shootout.yaml"
_X1 = ["x1"] * 7
MIXES = {  # key → (how the docs name it, the clients override)
    "x10": ("one ×10 among eight", f"clients=[{', '.join(_X1 + ['x10'])}]"),
    "x100": ("one ×100 among eight", f"clients=[{', '.join(_X1 + ['x100'])}]"),
    "gamma": ("a gamma-heterogeneous fleet (DANA App. B.3)", "clients={count: 8, profile: gamma-hetero}"),
    "churn": ("eight ×1 devices with churn (on 4 s, off 2 s, exponential)",
              "clients={count: 8, profile: x1, availability: {kind: exponential, mean_on_s: 4, mean_off_s: 2}}"),
}
SPLITS = {"iid": ("i.i.d.", "partition={kind: iid}"),
          "dirichlet": ("Dirichlet(0.3)", "partition={kind: dirichlet, alpha: 0.3}")}
PRACTITIONERS = ("ssgd_backup", "fedavg_deadline", "fedavg_overselect", "fednova_partial", "fedprox", "fedbuff", "ssp")
PLAIN = ("ssgd", "asgd")
METHODS = ("esync", "shat", "dgs", "dana_dc")
ENTRIES = PRACTITIONERS + PLAIN + METHODS
# Each seed paper's own setting: ESync's one slow device among fast ones (×10), SHAT's HE2 (one ×100), DANA's
# heterogeneous gamma cluster; DGS's paper is about bandwidth, not devices: read on DANA's heterogeneous fleet.
OWN_MIX = {"esync": "x10", "shat": "x100", "dgs": "gamma", "dana_dc": "gamma"}
GROUP = {**{e: "practitioners" for e in PRACTITIONERS}, **{e: "plain" for e in PLAIN},
         **{e: "seed papers" for e in METHODS}}
FIRST_EVAL_S = 0.25  # the scenario's eval.every_s: the soonest a run can be seen at the target
BUDGET_S = 8  # virtual seconds per run: eight hundred steps of a ×1 device
_GRIDS = {"quick": ("{lr: [0.05, 0.1, 0.2]}", 1), "full": ("{lr: [0.025, 0.05, 0.1, 0.2]}", 2)}


def key(mix: str, split: str) -> str:
    return f"shootout_{mix}_{split}"


KEYS = tuple(key(m, s) for m in MIXES for s in SPLITS)


def overrides(mix: str, split: str, mode: str) -> tuple[str, ...]:
    """The experiment's `--set` overrides: its devices and data, a budget every entry runs to its end (final
    accuracy), and the tuning: every entry on one grid, by time to the target on 2,000 validation images."""
    grid, extend = _GRIDS[mode]
    tune = (f"tune={{grid: {grid}, metric: time_to_target, validation_size: 2000, seed: {DEFAULT_TUNING_SEED}, "
            f"extend: {extend}, stop: {{time_budget_s: {BUDGET_S}, stop_at_target: true}}}}")
    return (MIXES[mix][1], SPLITS[split][1], f"stop.time_budget_s={BUDGET_S}", "stop.stop_at_target=false", tune)

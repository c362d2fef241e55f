"""The straggler shoot-out (docs/stragglers.md): every mitigation practitioners use, plain SSGD and ASGD, and the
seed papers' methods, on the same device mixes and data splits, each entry tuned alike; ranked per mix and read
against the best of the practitioners' mitigations.

Experiments: one per device mix × data split (`shootout_MIX_SPLIT`), each `scenarios/straggler_shootout.yaml`
with its clients and partition set (a tuned experiment runs no sweep). `edgesync reproduce --only shootout`
runs them all (`--quick`: 3 seeds, a 3-point grid; else 5 seeds, a 4-point grid followed past an edge twice).

The best practitioner of an experiment is chosen before any evaluation run is read: the practitioners' entry
whose tuning run (on validation data, on the tuning seed) reached the target soonest (ties and unreached: by
validation accuracy, tuning.py's rule). Each entry is then read against it within each seed and over the seeds
by the one verdict rule (baselines.py `read`: its time to the target, censored where unreached; its final
accuracy). A seed paper's method is asked on its own mix (OWN_MIX) whether it beats that best mitigation.

`record` keeps, per experiment and seed, each entry's summary row and the share of its clients' steps that a
mitigation threw away (clients.jsonl), and what tuning chose; `render` draws the whole docs block from that
record alone, and `plot` the Pareto figure of each mix (time to target against final accuracy).
"""
from __future__ import annotations

import json
from pathlib import Path

from edgesync.metrics.seeds import interval
from edgesync.reproduce.baselines import (Comparison, _chosen, _mean, _points, _time, _tuning_line, accuracy_reading,
                                         read, read_experiment, seed_groups, time_reading)
from edgesync.reproduce.shootout_setup import (BUDGET_S, ENTRIES, FIRST_EVAL_S, GROUP, KEYS, MIXES, OWN_MIX,
                                               PRACTITIONERS, SPLITS, key)

# ----------------------------------------------------------------------------------------------- the record
def record(out: Path) -> dict | None:
    """What the block is drawn from, out of `out/shootout_*` (None before any has run): each experiment as
    baselines.read_experiment reads it, each row with the share of its clients' steps thrown away."""
    experiments = {}
    for k in KEYS:
        found = read_experiment(out / k, ENTRIES)
        if found is None:
            continue
        waste = _waste(out / k / "clients.jsonl")
        for seed, by_label in found["rows"].items():
            for label, row in by_label.items():
                row["wasted_share"] = waste.get((label, None if seed == "None" else int(seed)))
        experiments[k] = found
    return {"experiments": experiments} if experiments else None


def _waste(path: Path) -> dict[tuple[str, int | None], float]:
    """(entry, seed) → the share of its clients' steps that were discarded (0 for an entry without a mitigation)."""
    totals: dict[tuple[str, int | None], list[float]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line)
        label, _, seed = str(r.get("algorithm")).partition("@seed=")
        t = totals.setdefault((label, int(seed) if seed else None), [0.0, 0.0])
        t[0] += float(r.get("wasted_steps") or 0)
        t[1] += float(r.get("steps") or 0)
    return {k: (w / s if s else 0.0) for k, (w, s) in totals.items()}


def best_practitioner(experiment: dict) -> str:
    """The practitioners' entry whose tuning run reached the target soonest on validation data (the first one
    listed if no tuning was kept): chosen before any evaluation run is read."""
    entries = (experiment.get("tuning") or {}).get("entries", {})
    ranked = sorted(PRACTITIONERS, key=lambda e: (entries.get(e, {}).get("figure") is None,
                                                  entries.get(e, {}).get("figure") or 0.0, PRACTITIONERS.index(e)))
    return ranked[0]


# ----------------------------------------------------------------------------------------------- the block
def _groups(experiment: dict) -> dict:
    return seed_groups(experiment["rows"])


def _censored_times(runs: list[dict]) -> list[float]:
    """Each run's time to the target, an unreached run's counted at its run's end (the budget if unrecorded)."""
    return [r["time_to_target_s"] if r.get("time_to_target_s") is not None else r.get("duration_s") or BUDGET_S
            for r in runs]


def _censored_mean(runs: list[dict]) -> float:
    """The ranking's key: the mean of `_censored_times`."""
    times = _censored_times(runs)
    return sum(times) / len(times) if times else float("inf")


def _runs(groups: dict, label: str) -> list[dict]:
    return [rows[label] for rows in groups.values() if label in rows]


def mix_table(experiment: dict, title: str) -> list[str]:
    """One experiment's entries ranked by their mean time to the target (unreached counted at the budget), each
    read against the best practitioner."""
    groups, best = _groups(experiment), best_practitioner(experiment)
    c = Comparison(experiment["folder"], title, best, ENTRIES)
    target, tuning = experiment["target_acc"], experiment["tuning"]
    order = sorted((e for e in ENTRIES if _runs(groups, e)), key=lambda e: _censored_mean(_runs(groups, e)))
    lines = [f"**{title}** — best practitioner (by validation): `{best}`", "",
             *([_tuning_line(tuning), ""] if tuning else []),
             f"| rank | entry | group | tuned (validation time to {target}) | time to {target} (s) | final acc. (%) | "
             f"compute thrown away (%) | MB moved | {best}'s time ÷ its own | faster, slower or no difference | "
             f"final acc. − {best}'s (pt) | higher, lower or no difference |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rank, label in enumerate(order, 1):
        runs = _runs(groups, label)
        cells = [str(rank), f"`{label}`", GROUP[label], _chosen(tuning, label), _time(runs),
                 _mean([_points(r) for r in runs]),
                 _mean([100 * r["wasted_share"] if r.get("wasted_share") is not None else None for r in runs]),
                 _mean([(r["bytes_up"] + r["bytes_down"]) / 1e6 if r.get("bytes_up") is not None else None
                        for r in runs])]
        if label == best:
            cells += ["—"] * 4
        else:
            t_fig, t_word = read(time_reading(c, label), groups, experiment["folder"])
            a_fig, a_word = read(accuracy_reading(c, label), groups, experiment["folder"])
            cells += [t_fig, t_word, a_fig, a_word]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdicts(data: dict) -> list[dict]:
    """Per seed paper's method and split, on its own mix: its time against the best practitioner's."""
    out = []
    for method, mix in OWN_MIX.items():
        for split in SPLITS:
            experiment = data["experiments"].get(key(mix, split))
            if experiment is None or not _runs(_groups(experiment), method):
                continue
            best = best_practitioner(experiment)
            c = Comparison(experiment["folder"], "", best, ENTRIES)
            figure, word = read(time_reading(c, method), _groups(experiment), experiment["folder"])
            out.append({"method": method, "mix": mix, "split": split, "best": best, "figure": figure, "word": word})
    return out


def picks(data: dict) -> list[str]:
    """Per mix and split, the entry fastest to the target (mean, unreached counted at the budget) and those the
    verdict rule cannot tell from it."""
    lines = []
    for mix, (name, _) in MIXES.items():
        for split, (split_name, _) in SPLITS.items():
            experiment = data["experiments"].get(key(mix, split))
            if experiment is None:
                continue
            groups = _groups(experiment)
            ran = [e for e in ENTRIES if _runs(groups, e)]
            first = min(ran, key=lambda e: _censored_mean(_runs(groups, e)))
            c = Comparison(experiment["folder"], "", first, ENTRIES)
            close = [e for e in ran if e != first and not read(time_reading(c, e), groups,
                                                               experiment["folder"])[1].startswith("slower")]
            lines.append(f"- **{name}, {split_name}**: `{first}` ({GROUP[first]}) reached "
                         f"{experiment['target_acc']} first" + (f"; not told apart from it by the verdict rule: "
                                                                 f"{', '.join(f'`{e}`' for e in close)}" if close
                                                                 else "; every other entry slower"))
    return lines


def render(data: dict) -> str:
    """The docs block: the verdicts for the seed papers' methods, the picks, then each mix's ranking table."""
    lines = ["**Does each seed paper's method beat the best practitioners' mitigation on its own mix?** (the best "
             "practitioner's time to the target ÷ the method's, paired within each seed)", "",
             "| method | its mix | split | best practitioner (by validation) | best's time ÷ method's | verdict |",
             "|---|---|---|---|---|---|"]
    for v in verdicts(data):
        lines.append(f"| `{v['method']}` | {MIXES[v['mix']][0]} | {SPLITS[v['split']][0]} | `{v['best']}` | "
                     f"{v['figure']} | {v['word']} |")
    lines += ["", "**Which to pick**, as measured:", "", *picks(data), ""]
    for mix, (name, _) in MIXES.items():
        present = [(split_name, data["experiments"][key(mix, split)]) for split, (split_name, _) in SPLITS.items()
                   if key(mix, split) in data["experiments"]]
        for split_name, experiment in present:
            lines += mix_table(experiment, f"{name}, {split_name} data") + [""]
        if present:
            lines += [f"![{name}: time to target against final accuracy](img/{_plot_prefix(data)}-{mix}.png)", ""]
    lines += ["Mean [95% Student-t interval] over the seeds; a time to the target a run did not reach is counted "
              "at its run's end (censored) and against the entry. Each entry is compared with the best practitioner "
              "within each seed, then over the seeds by the one verdict rule: one side when the whole interval is "
              "on it, no difference when it lies within 1 ± 0.25 (times) or ±1 pt (accuracy), else inconclusive. "
              "Compute thrown away: the share of the clients' local steps in updates that arrived after their "
              "round had closed."]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- the figure
def plot(data: dict, folder: Path) -> list[Path]:
    """Per mix, docs/img/stragglers-MIX.png (full mode: stragglers-full-MIX.png): each entry's mean time to the target (unreached counted at the
    budget, drawn hollow) against its mean final accuracy, with their intervals (clipped to what a time and an
    accuracy can be), one panel per split; colour by group, a marker per entry, one legend."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from edgesync.metrics.plot_canvas import DPI, save_figure
    colours = {"practitioners": "tab:blue", "plain": "tab:gray", "seed papers": "tab:red"}
    shapes = "osD^vPX"
    marker = {label: shapes[[e for e in ENTRIES if GROUP[e] == GROUP[label]].index(label)] for label in ENTRIES}
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for mix, (name, _) in MIXES.items():
        present = [(s, data["experiments"][key(mix, s)]) for s in SPLITS if key(mix, s) in data["experiments"]]
        if not present:
            continue
        fig = Figure(figsize=(12.0, 4.8), dpi=DPI, layout="constrained")
        axes = fig.subplots(1, len(present), squeeze=False)[0]
        for ax, (split, experiment) in zip(axes, present):
            groups = _groups(experiment)
            for label in ENTRIES:
                runs = _runs(groups, label)
                accs = [p for p in (_points(r) for r in runs) if p is not None]
                t, a = interval(_censored_times(runs)), interval(accs)
                if t.mean is None or a.mean is None:
                    continue
                reached = all(r.get("time_to_target_s") is not None for r in runs)
                colour = colours[GROUP[label]]
                ax.errorbar(t.mean, a.mean, xerr=_clipped(t, FIRST_EVAL_S, BUDGET_S), yerr=_clipped(a, 0.0, 100.0),
                            fmt=marker[label], color=colour, mfc=colour if reached else "white", ms=7, capsize=2,
                            lw=0.8, alpha=0.9)
            ax.set_xscale("log")  # a ×100 device's synchronous rounds and an asynchronous entry's updates, on one axis
            ax.set_xlim(FIRST_EVAL_S * 0.8, BUDGET_S * 1.25)
            ax.set_title(f"{SPLITS[split][0]} data")
            ax.set_xlabel(f"time to {experiment['target_acc']} (virtual s, log; hollow: not reached in every seed)")
            ax.set_ylabel(f"final accuracy after {BUDGET_S} s (%)")
            ax.grid(True, alpha=0.35, linestyle=":")
        handles = [Line2D([], [], ls="", marker=marker[e], color=colours[GROUP[e]], ms=7) for e in ENTRIES]
        fig.legend(handles, [f"{e} ({GROUP[e]})" for e in ENTRIES], loc="outside right center", frameon=False,
                   fontsize=8)
        fig.suptitle(f"{name}: mean and 95% interval over the seeds")
        paths.append(save_figure(fig, folder / f"{_plot_prefix(data)}-{mix}.png"))
    return paths


def _plot_prefix(data: dict) -> str:
    """The Pareto plots' file names, per mode: the quick run's `stragglers-MIX.png` (its record predates the key),
    the full run's `stragglers-full-MIX.png`, so neither block's pictures are the other's."""
    return data.get("plot_prefix", "stragglers")


def _clipped(iv, low: float, high: float) -> list[list[float]]:
    """An interval's error bar as [[below], [above]] the mean, cut at what the figure can be."""
    if iv.low is None:
        return [[0.0], [0.0]]
    return [[iv.mean - max(low, iv.low)], [min(high, iv.high) - iv.mean]]

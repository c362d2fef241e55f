"""The report's "Data partition" section and its heatmap, from the run folder's partition.json (written by
runtime/bookkeeping/partition_record.py): how many samples each client holds, how many classes, how skewed, and
a clients × classes picture of each client's label shares. Federated results are read against their split."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np

from edgesync.metrics.plot_canvas import DPI, save_figure

PARTITION_FILE = "partition.json"
PARTITION_PLOT = "partition.png"
MAX_ROWS_DRAWN = 100  # beyond this many clients the heatmap draws the first ones (the section says so)
MAX_ROWS_LISTED = 20  # a per-client table up to this many clients; beyond it, the distribution only


def first_partition(partitions: dict[str, dict]) -> tuple[str, dict] | None:
    """The split the report shows: the run's (or its first variant's); None without a record."""
    for tag, record in partitions.items():
        if isinstance(record, dict) and record.get("clients"):
            return tag, record
    return None


def partition_section(partitions: dict[str, dict]) -> list[str]:
    """The section's lines: a sentence on the split, a table per client (or the distribution), the heatmap."""
    found = first_partition(partitions)
    if found is None:
        return []
    tag, record = found
    clients = record["clients"]
    samples = [c["samples"] for c in clients]
    held = [sum(1 for n in c["labels"] if n > 0) for c in clients]
    kinds = sorted({c["kind"] for c in clients})
    shown = f" (variant `{tag}`; the other {len(partitions) - 1} differ by their seed or sweep values)" \
        if len(partitions) > 1 else ""
    lines = ["## Data partition", "",
             f"`{record['dataset']}`, {record['train_samples']:,} training samples"
             + (f" ({record['validation_samples']:,} held out for validation)" if record.get("validation_samples") else "")
             + f", split `{'`, `'.join(kinds)}` among {len(clients)} clients{shown}. Samples per client: "
             f"min {min(samples):,}, median {statistics.median(samples):,.0f}, max {max(samples):,}; classes held: "
             f"min {min(held)}, median {statistics.median(held):g}, max {max(held)} of {record['num_classes']}.", ""]
    if len(clients) <= MAX_ROWS_LISTED:
        lines += ["| Client | Split | Samples | Classes held | Largest class share |", "| ---: | --- | ---: | ---: | ---: |"]
        for c, n_held in zip(clients, held):
            top = max(c["labels"]) / c["samples"] if c["samples"] else 0.0
            lines.append(f"| {c['client']} | `{c['kind']}` | {c['samples']:,} | {n_held} | {100 * top:.0f}% |")
        lines.append("")
    drawn = "" if len(clients) <= MAX_ROWS_DRAWN else f" (the first {MAX_ROWS_DRAWN} of {len(clients)} clients)"
    lines += [f"![Label share per client{drawn}: clients × classes](plots/{PARTITION_PLOT})", ""]
    return lines


def plot_partition(partitions: dict[str, dict], path: Path) -> Path | None:
    """A clients × classes heatmap of each client's label shares, its sample count beside each row."""
    from matplotlib.figure import Figure

    found = first_partition(partitions)
    if found is None:
        return None
    clients = found[1]["clients"][:MAX_ROWS_DRAWN]
    counts = np.array([c["labels"] for c in clients], dtype=float)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    n_clients, n_classes = shares.shape
    height = min(9.0, 1.6 + 0.22 * n_clients)
    fig = Figure(figsize=(7.0, height), dpi=DPI, layout="constrained")
    ax, side = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [4, 1]})
    # the scale ends at the largest share drawn: with many classes (Shakespeare's 80) a 0..1 scale hides the skew
    top = float(shares.max()) if shares.size and shares.max() > 0 else 1.0
    image = ax.imshow(shares, aspect="auto", cmap="viridis", vmin=0.0, vmax=top, interpolation="nearest")
    ax.set_xlabel("Class")
    ax.set_ylabel("Client")
    ax.set_title("Label share per client")
    if n_classes <= 20:
        ax.set_xticks(range(n_classes))
    if n_clients <= 40:
        ax.set_yticks(range(n_clients), [str(c["client"]) for c in clients])
    side.barh(range(n_clients), [c["samples"] for c in clients], color="0.55")
    side.set_xlabel("Samples")
    side.set_title("Size")
    side.tick_params(left=False)
    fig.colorbar(image, ax=[ax, side], location="right", label="share of the client's samples", shrink=0.8)
    return save_figure(fig, path)


def read_partitions(run_dir: Path) -> dict[str, dict]:
    """partition.json of a run folder; empty for a folder without one (a run from before it existed)."""
    path = Path(run_dir) / PARTITION_FILE
    if not path.exists():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}

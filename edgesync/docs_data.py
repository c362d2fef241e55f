"""docs/data/: the per-run figures behind a benchmark's block, so that the block can be recomputed from them.

A benchmark that writes a block with `write_block` keeps what its runs measured in `docs/data/NAME.json` (the
block's name with ':' as '-') and renders the block's table from that record alone, with a pure function
(`RENDERERS`: the block's key → "benchmarks/FILE.py:FUNCTION"). tests/test_docs_data.py renders every such
block again from its file and compares it with the page, so each figure there can be traced to the runs and
recomputed. `edgesync reproduce` keeps its own records (reproduce/audit.py), recomputed through its verdicts.

A block written before its benchmark kept data says "no per-run data kept" in its first line; a re-run with
`--write-docs` replaces it with a traced one.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable

from edgesync.docs_block import replace_block

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "docs" / "data"
UNTRACED = "no per-run data kept"

# A block's name, or its key (the name up to ':'), → the function that renders its body from the record's "data".
RENDERERS = {
    "cold_step": "benchmarks/cold_step.py:table",
    "quickstart": "benchmarks/quickstart_table.py:render",
    "throttle_fidelity": "benchmarks/throttle_fidelity.py:render",
    "trace_fidelity": "benchmarks/trace_fidelity.py:render",
    "warm_start": "benchmarks/warm_start.py:render",
    "flower_overhead": "benchmarks/flower_overhead.py:render",
    "sim_backends": "benchmarks/sim_scale.py:render_backends",
    "sim_at_scale": "benchmarks/sim_scale.py:render_at_scale",
    "sim_clients": "benchmarks/sim_scale.py:render_clients",
    "sim_round_trip": "benchmarks/sim_round_trip.py:render",
    "sim_overhead:table": "benchmarks/sim_overhead.py:render",
    "sim_overhead:profile": "benchmarks/sim_overhead.py:render_profile",
    "sim_100_clients": "benchmarks/sim_100_clients.py:render",
    "coordinator_costs:table": "benchmarks/coordinator_costs.py:render",
    "coordinator_costs:effect": "benchmarks/coordinator_costs.py:render_effect",
    "reproduce_parallel": "benchmarks/reproduce_parallel.py:render",
    "link_fidelity": "benchmarks/link_fidelity.py:render",
    "netns_links": "benchmarks/netns_links.py:render",
    "transport": "benchmarks/transport.py:render",
    "compression": "benchmarks/compression.py:render",
    "live_efficiency": "benchmarks/live_efficiency.py:render",
    "slots_memory": "benchmarks/slots_memory.py:render",
    "slots_live": "benchmarks/slots_live.py:render",
    "churn_live": "benchmarks/churn_live.py:render",
    "dana_coordinator": "benchmarks/dana_coordinator.py:render",
    "dana_coordinator:live": "benchmarks/dana_coordinator.py:render_live",
    "dana_lr": "benchmarks/dana_lr.py:render",
    "tuned": "benchmarks/tuned_comparison.py:render",
    "eq3": "benchmarks/eq3_sharding.py:render",
    "allreduce": "benchmarks/allreduce_rounds.py:render",
    "cross_check": "benchmarks/cross_check.py:render",
    "baselines": "edgesync/reproduce/baselines.py:render",
    "stragglers": "edgesync/reproduce/shootout.py:render",
    "suite_time": "scripts/suite_time.py:render",
    "peers": "benchmarks/peers/report.py:render",
    "coordinator_floor": "benchmarks/coordinator_floor.py:render",
    "dashboard_overhead": "benchmarks/dashboard_overhead.py:render",
    "suite_cpu": "scripts/suite_cpu.py:render",
}


def data_path(block: str, folder: Path = DATA_DIR) -> Path:
    return folder / f"{block.replace(':', '-')}.json"


def renderer(block: str) -> Callable[[Any], str] | None:
    """The registered render function of `block`'s key, imported from its benchmark file; None if none is."""
    spec = RENDERERS.get(block) or RENDERERS.get(block.split(":")[0])
    if spec is None:
        return None
    file, name = spec.split(":")
    module_spec = importlib.util.spec_from_file_location(f"_docs_data_{Path(file).stem}", ROOT / file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # where a dataclass of the file looks its module up
    module_spec.loader.exec_module(module)
    return getattr(module, name, None)  # None: the benchmark does not keep its data yet


EARLIER_HEAD = "Before this run"  # the section under a re-written block that keeps the table it replaced


def write_block(doc: Path, block: str, note: str, data: Any, folder: Path = DATA_DIR) -> str:
    """Keep `data` (JSON: the per-run figures) in docs/data/, and write `block` in `doc` as `note` (the line that
    names the command; it should name the data file) and the registered renderer's table of `data`, then the
    table the block held before (its figures kept beside the new ones: `earlier_section`), unless `data` keeps
    its own earlier figures. Returns the body written. Rendering the stored record, not the live objects, keeps
    the page and the file in step."""
    render = renderer(block)
    if render is None:
        raise ValueError(f"block {block!r}: no renderer in edgesync/docs_data.py RENDERERS")
    record = {"block": block, "note": note, "data": data}
    if not (isinstance(data, dict) and "earlier" in data) and (old := current_block(doc, block)) is not None:
        record["earlier"] = old
    folder.mkdir(parents=True, exist_ok=True)
    path = data_path(block, folder)
    path.write_text(json.dumps(record, indent=1) + "\n")
    stored = json.loads(path.read_text())  # what a reader of the file gets: tuples as lists, and so on
    body = note + "\n\n" + render(stored["data"]) + earlier_section(stored)
    replace_block(doc, f"<!-- {block}:begin -->", f"<!-- {block}:end -->", body)
    return body


def earlier_section(record: dict) -> str:
    """What a block shows under its table of the one it replaced: that run's note, and its table as written."""
    old = record.get("earlier")
    if not old:
        return ""
    return f"\n\n{EARLIER_HEAD} — the table it replaced, as written then ({old['note']}):\n\n{old['table']}"


def current_block(doc: Path, block: str) -> dict | None:
    """The note (unwrapped) and table `block` holds in `doc` now, without the section it kept of an earlier run."""
    text = doc.read_text()
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    if begin not in text or end not in text:
        return None
    body = text.split(begin, 1)[1].split(end, 1)[0].strip("\n")  # an empty block is "begin\nend": no body
    note, _, table = body.partition("\n\n")
    table = table.split(f"\n\n{EARLIER_HEAD} — ", 1)[0].strip()
    return {"note": note.strip().removeprefix("_Written by ").removesuffix("_").rstrip("."), "table": table} if table else None


def cpu_model() -> str:
    """The processor's name as the OS gives it ('AMD EPYC', 'Intel(R) Xeon(R) Processor'), else the architecture:
    figures that depend on caches and memory differ between two VMs of the same size."""
    import platform
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ran_on(with_torch: bool = False) -> str:
    """Where and when a benchmark ran, as its note says it: 'vm (AMD EPYC, x86_64, 2 cores), 2026-11-27'."""
    import os
    import platform
    import time
    torch = ""
    if with_torch:
        import torch as _torch
        torch = f", torch {_torch.__version__}"
    return (f"{platform.node()} ({cpu_model()}, {platform.machine()}, {len(os.sched_getaffinity(0))} cores{torch}), "
            f"{time.strftime('%Y-%m-%d')}")


def data_note(block: str) -> str:
    """How a note names its data file: 'per-run figures: docs/data/NAME.json'."""
    return f"per-run figures: docs/data/{data_path(block).name}"

"""`edgesync reproduce`: the seed papers' headline comparisons, run over seeds and checked claim by claim.

    edgesync reproduce --quick            # reduced runs (simulator), 3 seeds, two experiments at a time: ~16 min on 2 cores
    edgesync reproduce                    # the scenarios' own settings, 5 seeds
    edgesync reproduce --from runs/reproduce --write-docs   # re-read finished runs; table into docs/results.md

Each experiment is a scenario of scenarios/ run with a few `--set` overrides (fewer algorithms,
shorter runs in --quick) and `seeds` (0–2 quick, 0–4 full; `--seeds` to change); every experiment but
DANA's first tunes baseline and method alike on one grid, on validation data and on seed 100, which is
never evaluated. Each claim's figure is computed per seed from the run folder's summary.json (paired: a
ratio of two entries is taken within one seed), then summarised as a mean with a 95% Student-t interval
over the seeds (metrics/seeds.py), and read twice by the project's one verdict rule (metrics/verdict.py,
at least three seeds): *direction*, the method better at all, and *magnitude*, at least the paper's own
figure. Each reading *holds* when the whole interval is on its bound's side, *does not hold* when the
whole interval is on the other side, and is *inconclusive* otherwise (and when a seed that did not give a
plain figure could turn it). A figure that follows from the configuration (a configured compression
density fixes bytes per update; ESync's rounds fix its traffic; the largest shard's share bounds a sharded
server's throughput) is listed apart, with the formula that fixes it, and never counted as a verdict.
Nothing in the table is typed in. The output folder's reproduce.json records, per experiment, the mode,
runtime, overrides, seeds, wall time and machine; `--write-docs` puts the table into docs/results.md
between the markers of its mode and runtime, with the machine, base step times and seeds it was run
with, and the per-run figures it was computed from into docs/data/ (audit.py).

The `fl_baselines` experiment (FedAvg and the seven FL baselines on non-i.i.d. data, tuned alike) states no
claim: none of the seed papers reports those baselines. Its runs give a comparison table instead, each entry
beside FedAvg, read by the same verdict and censoring rules (baselines.py), and a block of its own in
docs/results.md with its record in docs/data/. It runs in the full mode; `--quick` runs it only when `--only`
names it, so that the quick suite keeps to its minutes.

The straggler shoot-out (`--only shootout`: eight experiments, one per device mix × data split) ranks every
mitigation practitioners use, plain SSGD and ASGD and the seed papers' methods per mix, reads each against the
best practitioners' mitigation, and writes docs/stragglers.md with its Pareto plots (shootout.py).

experiments.py: what runs; claims.py: each claim, defined once (the benchmarks use them too); suite.py:
running and the manifest; verdicts.py: figures, intervals, verdicts and the table; censoring.py: seeds
without a plain figure (an unreached time censored at its run's end, divergence named), counted against
the method; baselines.py: an experiment's comparison table; results_doc.py: docs/results.md; audit.py:
docs/data/.
"""
from __future__ import annotations

from edgesync.reproduce import baselines, shootout, suite
from edgesync.reproduce.baselines import COMPARISONS, Comparison
from edgesync.reproduce.claims import CLAIMED, CLAIMS, Claim, Rows
from edgesync.reproduce.experiments import EXPERIMENTS, GROUPS, SEEDS, Experiment
from edgesync.reproduce.results_doc import (base_steps, baselines_block, docs_note, markers, write_baselines, write_docs,
                                            write_shootout)
from edgesync.reproduce.suite import MANIFEST, ROOT, folder_key, machine, read_manifest, run_suite
from edgesync.reproduce.verdicts import count_line, evaluate, table, verdict

__all__ = ["COMPARISONS", "Comparison", "baselines", "shootout", "GROUPS", "write_shootout", "CLAIMED", "CLAIMS", "Claim", "Rows", "EXPERIMENTS", "SEEDS",
           "Experiment", "base_steps", "baselines_block", "docs_note", "markers", "write_baselines", "write_docs",
           "MANIFEST", "ROOT", "folder_key", "machine", "read_manifest", "run_suite", "suite", "count_line",
           "evaluate", "table", "verdict"]

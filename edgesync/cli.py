"""The `edgesync` command.

    edgesync run scenarios/quickstart.yaml            # coordinator + local clients, then a report
    edgesync run --resume runs/quickstart-…           # go on from a killed run's last checkpoint
    edgesync run scenarios/quickstart.yaml --curve    # the same over CURVE, with throw-away keys
    edgesync run scenarios/live_100_clients.yaml --processes 4   # 100 clients as slots of 4 processes
    edgesync run scenarios/quickstart.yaml --tensorboard   # also TensorBoard event files in RUN_DIR/tensorboard
    edgesync validate scenarios/quickstart.yaml       # check a scenario, print every problem
    edgesync coordinator --scenario FILE --bind tcp://0.0.0.0:5555   # on the lab's server
    edgesync client --connect tcp://HOST:5555 --profile x10          # on each lab machine
    edgesync client --connect tcp://HOST:5555 --rank 0 --slots 50    # clients 0-49 in one process
    edgesync keys keys/ --name coordinator --name client-0           # CURVE key pairs (docs/lab.md)
    edgesync coordinator --scenario FILE --curve-secret keys/coordinator.key_secret --allow keys/allow
    edgesync client --connect tcp://HOST:5555 --curve-secret keys/client-0.key_secret \
                    --server-key keys/coordinator.key
    edgesync profiles                                 # the device profiles
    edgesync report runs/quickstart-…                 # re-render a run folder's report
    edgesync flower-up --nodes 2 --run scenarios/flower_fedavg.yaml   # the same on a local Flower SuperLink
    edgesync reproduce --quick                        # the papers' claims, ours beside theirs
"""
from __future__ import annotations

import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from edgesync.constants import CONNECT_TIMEOUT_S

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="EdgeSync: distributed training on heterogeneous, slow and badly connected devices.")
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


@app.callback()
def _start() -> None:
    # Before any model-sized buffer exists: large messages then reuse memory (transport/allocator.py).
    from edgesync.transport.allocator import tune_allocator
    tune_allocator()


def _load(path: Path, overrides: list[str]):
    from edgesync.scenario import ScenarioError, load_scenario
    try:
        return load_scenario(path, overrides)
    except ScenarioError as exc:
        err.print(f"[red]invalid scenario[/red]\n{exc}", highlight=False)
        raise typer.Exit(2) from None


def _server_keys(curve_secret: Path | None, allow: Path | None):
    """The coordinator's CURVE keys from its options, or None for plain TCP; exits 2 on a bad file."""
    if curve_secret is None and allow is None:
        return None
    if curve_secret is None or allow is None:
        err.print("[red]CURVE needs both --curve-secret (the coordinator's NAME.key_secret) and --allow "
                  "(the folder of client public keys)[/red]", highlight=False)
        raise typer.Exit(2)
    from edgesync.transport.security import KeyFileError, ServerKeys
    try:
        return ServerKeys.from_files(curve_secret, allow)
    except KeyFileError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def _client_keys(curve_secret: Path | None, server_key: Path | None):
    """A client's CURVE keys from its options, or None for plain TCP; exits 2 on a bad file."""
    if curve_secret is None and server_key is None:
        return None
    if curve_secret is None or server_key is None:
        err.print("[red]CURVE needs both --curve-secret (this client's NAME.key_secret) and --server-key "
                  "(the coordinator's public NAME.key)[/red]", highlight=False)
        raise typer.Exit(2)
    from edgesync.transport.security import ClientKeys, KeyFileError
    try:
        return ClientKeys.from_files(curve_secret, server_key)
    except KeyFileError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def _endpoint(value: str, option: str, bind: bool = False) -> str:
    """`value` as a ZeroMQ endpoint (HOST:PORT means tcp://HOST:PORT); exits 2 on a malformed one."""
    from edgesync.transport.addresses import AddressError, endpoint
    try:
        return endpoint(value, option, bind=bind)
    except AddressError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def _listen(bind: str, keys):
    """The coordinator's socket, bound before anything is written (a busy address leaves no run folder);
    exits 1 saying why it cannot listen there."""
    from edgesync.transport.sockets import BindFailed, CoordinatorSocket
    try:
        return CoordinatorSocket(bind, keys=keys)
    except BindFailed as exc:
        err.print(f"[red]--bind {exc}[/red]", highlight=False)
        raise typer.Exit(1) from None


@app.command()
def run(scenario: Optional[Path] = typer.Argument(None, help="scenario YAML file (not with --resume)"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="go on with this run folder from its "
                                              "checkpoint (a live run that was killed)"),
        out_dir: Optional[Path] = typer.Option(None, "--out", help="run folder (default: output.dir/NAME-TIME); "
                                               "one that holds a run is refused without --overwrite"),
        overwrite: bool = typer.Option(False, "--overwrite", help="--out holds an earlier run: move it aside "
                                       "(to NAME.old-TIME, nothing deleted) and start afresh"),
        set_: Optional[List[str]] = typer.Option(None, "--set", help="override a scenario value: KEY.PATH=VALUE"),
        runtime: str = typer.Option("", "--runtime", help="live or sim (default: the scenario's runtime)"),
        seeds: Optional[str] = typer.Option(None, "--seeds", help="run every entry once per seed: 0-4, 0,2,5 or 3 "
                                            "(the scenario's `seeds`); summary.json adds mean and 95% interval"),
        curve: bool = typer.Option(False, "--curve", help="live: CURVE-encrypt the local links, with throw-away "
                                                          "keys for the coordinator and its client processes"),
        processes: Optional[int] = typer.Option(None, "--processes", metavar="N", help="live: host the clients in "
                                                "N processes, as slots (sets live.processes; default: one per "
                                                "client, or one per core when there are many)"),
        tensorboard: bool = typer.Option(False, "--tensorboard", help="also write TensorBoard event files into "
                                         "RUN_DIR/tensorboard as the run goes (sets output.tensorboard; allowed "
                                         "with --resume)"),
        ray: Optional[str] = typer.Option(None, "--ray", metavar="[ADDRESS]", help="simulator: run the clients' "
                                          "work on Ray workers (sets sim.backend=ray), on the cluster at ADDRESS "
                                          "(default: RAY_ADDRESS, else one started on this machine, else a new one)"),
        parallel: int = typer.Option(1, "--parallel", metavar="N", min=1, help="simulator: run N of the sweep's "
                                     "variants and seeds at a time, as Ray tasks (the same run folder as one "
                                     "at a time)"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress display"),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="log coordinator events")):
    """Run every algorithm of a scenario, then write the run folder's summary and report."""
    overrides = list(set_ or [])
    if runtime:
        overrides.append(f"runtime={runtime}")
    if seeds is not None:
        overrides.append(f"seeds={_parse_seeds(seeds)}")
    if processes is not None:
        overrides.append(f"live.processes={processes}")
    _on_ray(ray, overrides)
    if (scenario is None) == (resume is None):
        err.print("[red]give a scenario file, or --resume RUN_DIR (not both)[/red]", highlight=False)
        raise typer.Exit(2)
    if resume is not None and (overrides or out_dir or overwrite):
        err.print("[red]--resume replays the run folder's own scenario.yaml: no --set, --runtime, --out or "
                  "--overwrite[/red]", highlight=False)
        raise typer.Exit(2)
    if tensorboard:  # where results go, not what runs: a resumed run may turn it on too
        overrides.append("output.tensorboard=true")
    sc = _load(resume / "scenario.yaml" if resume else scenario, overrides)
    if (ray is not None or parallel > 1) and sc.runtime != "sim":
        err.print(f"[red]{'--ray' if ray is not None else '--parallel'} is for the simulator; this scenario's "
                  "runtime is live (add --runtime sim)[/red]", highlight=False)
        raise typer.Exit(2)
    from edgesync.runtime.runs import log_to, run_scenario
    run_dir = _claim(sc, out_dir, resume, overwrite)
    log_to(run_dir, verbose)
    err.print(f"[bold]{sc.name}[/bold] ({sc.runtime}): {len(sc.clients)} clients "
              f"({', '.join(c.profile.label for c in sc.clients)}), algorithms "
              f"{', '.join(a.key for a in sc.algorithms)} → {run_dir}", highlight=False)
    if sc.output.tensorboard:
        err.print(f"TensorBoard: tensorboard --logdir {run_dir / 'tensorboard'}", highlight=False)
    _run_and_report(run_dir, lambda: run_scenario(sc, run_dir, progress=not quiet, resume=resume is not None,
                                                  curve=curve, claimed=True, parallel=parallel))


def _parse_seeds(text: str) -> list[int]:
    """'0-4' → [0, 1, 2, 3, 4]; '0,2,5' → [0, 2, 5]; '3' → [3]; exits 2 naming the bad part otherwise."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            err.print(f"[red]--seeds {text!r}: {part!r} is not a seed (N) or a range (LOW-HIGH, LOW ≤ HIGH), "
                      "e.g. --seeds 0-4 or --seeds 0,2,5[/red]", highlight=False)
            raise typer.Exit(2)
        seeds += list(range(int(low), int(high) + 1)) if dash else [int(low)]
    return seeds


def _claim(sc, out_dir: Path | None, resume: Path | None, overwrite: bool) -> Path:
    """The run folder for this command, claimed before anything is written to it: one that holds a run
    only with --resume, or moved aside with --overwrite; exits 2 otherwise, every file left as it was."""
    from edgesync.runtime.runs import RunFolderExists, claim_run_folder, run_folder
    try:
        run_dir = resume or run_folder(sc, out_dir)
        if moved := claim_run_folder(run_dir, resume is not None, overwrite):
            err.print(f"--overwrite: the earlier run in {run_dir} was moved to {moved}", highlight=False)
    except RunFolderExists as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    return run_dir


def _run_and_report(run_dir: Path, start) -> None:
    """`start()` runs an experiment and returns its summary, printed here; one that cannot start or go on
    exits saying why (2: fix the input, 1: the run itself failed)."""
    from edgesync.runtime.bookkeeping.checkpoint import CheckpointError
    from edgesync.runtime.bookkeeping.membership import RunAborted
    try:
        summary = start()
    except CheckpointError as exc:
        err.print(f"[red]cannot resume:[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    except RunAborted as exc:
        err.print(f"[red]run aborted:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    except FileNotFoundError as exc:  # the dataset is missing: the message says where we looked
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    _print_summary(summary)
    out.print(f"report: {run_dir / 'report.md'}", highlight=False)


def _print_summary(summary: dict) -> None:
    """The summary as a table; with seeds, one row per entry: the mean over seeds ± the 95% half-width."""
    aggregates = {label: s for label, s in summary.items() if "seeds" in s}
    rows = aggregates or summary
    title = "summary (accuracy on the test set; target time in the runtime's seconds)"
    if aggregates:
        title += "; mean ± 95% t-interval over seeds, every seed in summary.json and report.md"
    t = Table(title=title)
    for col in ("entry", "final", "best", "to target", "updates", "samples/s", "MB up", "MB down"):
        t.add_column(col, justify="left" if col == "entry" else "right", no_wrap=True)

    def fig(s: dict, key: str, fmt: str, scale: float = 1.0) -> str:
        value, ci = s.get(key), s.get("stats", {}).get(key, {}).get("ci95")
        if value is None:
            return "–"
        text = format(value * scale, fmt)
        return f"{text} ± {format((ci[1] - value) * scale, fmt)}" if ci else text

    for label, s in rows.items():
        reached = s.get("stats", {}).get("time_to_target_s", {}).get("reached")
        ttt = fig(s, "time_to_target_s", ".1f")
        ttt = f"{ttt} s" if ttt != "–" else (f"{reached} reached" if reached else "not reached")
        t.add_row(label + (f" ({len(s['seeds'])} seeds)" if "seeds" in s else ""), fig(s, "final_acc", ".3f"),
                  fig(s, "best_acc", ".3f"), ttt, fig(s, "updates", ".0f"), fig(s, "samples_per_s", ".0f"),
                  fig(s, "bytes_up", ".1f", 1e-6), fig(s, "bytes_down", ".1f", 1e-6))
    out.print(t)


@app.command()
def validate(scenarios: List[Path] = typer.Argument(..., help="scenario YAML files"),
             set_: Optional[List[str]] = typer.Option(None, "--set", help="override: KEY.PATH=VALUE")):
    """Check scenario files; print every problem with its file and key, exit 2 if any."""
    from edgesync.emulation.device_model import local_notes
    from edgesync.scenario import ScenarioError, load_scenario
    from edgesync.transport.protocol import usable_cores
    bad = 0
    for path in scenarios:
        try:
            sc = load_scenario(path, list(set_ or []))
        except ScenarioError as exc:
            bad += 1
            err.print(str(exc), highlight=False)
            continue
        out.print(f"{path}: ok — {len(sc.clients)} clients, algorithms "
                  f"{', '.join(a.key for a in sc.algorithms)}", highlight=False)
        from edgesync.runtime.tuning import run_counts, tunes
        if tunes(sc):
            out.print(f"{path}: tune: {run_counts(sc)}, before the runs", highlight=False)
        if sc.runtime == "live":
            from edgesync.runtime.live.launcher import describe_layout, process_layout
            layout = process_layout(len(sc.clients), sc.live.processes, usable_cores())
            if len(layout) < len(sc.clients) and sc.links.backend != "netns":
                out.print(f"{path}: note: `edgesync run` here hosts {describe_layout(layout)} (live.processes; "
                          "docs/lab.md, many devices per machine)", highlight=False)
            for note in local_notes(len(sc.clients), usable_cores(), sc.emulation.resolved_mode,
                                    sc.emulation.isolation, processes=len(layout)):
                out.print(f"{path}: note: {note}", highlight=False)
    if bad:
        raise typer.Exit(2)


@app.command()
def coordinator(scenario: Optional[Path] = typer.Option(None, "--scenario", help="scenario YAML file"),
                resume: Optional[Path] = typer.Option(None, "--resume", help="go on with this run folder from its "
                                                      "checkpoint (the coordinator was killed); clients reconnect"),
                bind: str = typer.Option("tcp://0.0.0.0:5555", help="address to listen at: tcp://HOST:PORT or "
                                                                   "HOST:PORT (0.0.0.0: every interface)"),
                out_dir: Optional[Path] = typer.Option(None, "--out", help="run folder (default: output.dir/"
                                                       "NAME-TIME); one that holds a run is refused without "
                                                       "--overwrite"),
                overwrite: bool = typer.Option(False, "--overwrite", help="--out holds an earlier run: move it "
                                               "aside (to NAME.old-TIME, nothing deleted) and start afresh"),
                set_: Optional[List[str]] = typer.Option(None, "--set", help="override: KEY.PATH=VALUE"),
                curve_secret: Optional[Path] = typer.Option(None, "--curve-secret",
                                                            help="CURVE: this coordinator's NAME.key_secret"),
                allow: Optional[Path] = typer.Option(None, "--allow", help="CURVE: folder of the public NAME.key "
                                                                           "files of the clients to admit"),
                shard: Optional[List[str]] = typer.Option(None, "--shard", help="a follower shard's address "
                                                          "(`edgesync shard`), once per follower: sharding needs "
                                                          "shards − 1 of them"),
                quiet: bool = typer.Option(False, "--quiet", "-q")):
    """Serve a scenario to clients started elsewhere (`edgesync client --connect …`)."""
    bind = _endpoint(bind, "--bind", bind=True)
    if (scenario is None) == (resume is None):
        err.print("[red]give --scenario FILE, or --resume RUN_DIR (not both)[/red]", highlight=False)
        raise typer.Exit(2)
    if resume is not None and (set_ or out_dir or overwrite):
        err.print("[red]--resume replays the run folder's own scenario.yaml: no --set, --out or --overwrite[/red]",
                  highlight=False)
        raise typer.Exit(2)
    sc = _load(resume / "scenario.yaml" if resume else scenario, list(set_ or []))
    from edgesync.runtime.tuning import tunes
    if tunes(sc):
        err.print(f"[red]{scenario or resume}: tune: runs with `edgesync run` (it starts the tuning runs' clients "
                  "itself); for remote clients, put the values a tuning.json chose into `algorithms`[/red]",
                  highlight=False)
        raise typer.Exit(2)
    if len(shard or []) != sc.shard_count - 1:
        err.print(f"[red]{scenario or resume}: sharding {sc.sharding} with {sc.shard_count} shards needs "
                  f"{sc.shard_count - 1} --shard ADDRESS (one per `edgesync shard` process), got {len(shard or [])}"
                  "[/red]", highlight=False)
        raise typer.Exit(2)
    keys = _server_keys(curve_secret, allow)
    sock = _listen(bind, keys)  # one socket for every variant: the clients stay connected to it
    from edgesync.runtime.live.coordinator import Coordinator
    from edgesync.runtime.runs import log_to, run_experiment
    try:
        run_dir = _claim(sc, out_dir, resume, overwrite)
    except typer.Exit:
        sock.close()
        raise
    log_to(run_dir, verbose=True)
    hint = (f"--curve-secret CLIENT.key_secret --server-key {curve_secret.with_suffix('.key').name}" if keys else "")

    def run_variant(variant, recorder, checkpoints, display, resolved) -> None:
        # Each variant has its own coordinator on the one socket. The clients, told nothing between
        # variants, are unknown to the next coordinator and asked to say HELLO again (as after a restart).
        last = variant.tag == variants[-1].tag
        coord = Coordinator(variant.scenario, recorder, progress=display, sock=sock, shutdown_clients=last, keys=keys)
        coord.checkpoints = checkpoints
        coord.shard_addresses = [_endpoint(a, "--shard") for a in shard or []]
        port = coord.address.rsplit(':', 1)[-1]
        how = ("CURVE, admitting the keys in " + str(keys.allow_dir) if keys else
               "plain TCP: anyone who reaches this port can join; on a shared network use --curve-secret and --allow")
        err.print(f"coordinator for {variant.tag or sc.name} on {coord.address} ({how}): start "
                  f"{len(variant.scenario.clients)} clients with `edgesync client --connect tcp://THIS-HOST:{port}"
                  f"{' ' + hint if hint else ''}`", highlight=False)
        coord.run()

    from edgesync.sweep import variants as sweep_variants
    variants = sweep_variants(sc)
    if len({len(v.scenario.clients) for v in variants}) > 1:
        err.print(f"[red]{scenario or resume}: the sweep changes the number of clients, but the coordinator's clients "
                  "serve every variant: run it with `edgesync run`, or one coordinator per count[/red]",
                  highlight=False)
        sock.close()
        raise typer.Exit(2)

    def start() -> dict:
        try:
            return run_experiment(sc, run_dir, run_variant, progress=not quiet, resume=resume is not None,
                                  claimed=True)
        finally:
            sock.close()

    _run_and_report(run_dir, start)


@app.command()
def shard(bind: str = typer.Option("tcp://0.0.0.0:5601", help="address to listen at: tcp://HOST:PORT or HOST:PORT"),
          address_file: Optional[Path] = typer.Option(None, "--address-file",
                                                      help="write the address it listens at here once it does"),
          state_dir: Path = typer.Option(Path("shard-state"), "--state-dir", help="where its part of the lead's "
                                         "checkpoints goes (a resumed run's shards read it back)"),
          curve_secret: Optional[Path] = typer.Option(None, "--curve-secret",
                                                      help="CURVE: the coordinator's NAME.key_secret (shards share it)"),
          allow: Optional[Path] = typer.Option(None, "--allow", help="CURVE: folder of the public NAME.key files "
                                                                     "to admit: the clients' (the lead holds the coordinator's pair)")):
    """Serve one slice of the model for a sharded coordinator (`sharding: layer | memory`): start K − 1 of
    these, then `edgesync coordinator --shard ADDRESS …` leads them; clients learn their addresses."""
    from edgesync.runtime.sharding.server import serve_shard
    from edgesync.transport.sockets import BindFailed

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    keys = _server_keys(curve_secret, allow)
    ready = (lambda address: address_file.write_text(address)) if address_file is not None else None
    try:
        serve_shard(_endpoint(bind, "--bind", bind=True), keys, ready, state_dir)
    except BindFailed as exc:
        err.print(f"[red]--bind {exc}[/red]", highlight=False)
        raise typer.Exit(1) from None


@app.command()
def client(connect: str = typer.Option(..., "--connect", help="the coordinator: tcp://HOST:PORT or HOST:PORT"),
           connect_timeout: float = typer.Option(CONNECT_TIMEOUT_S, "--connect-timeout", metavar="SECONDS",
                                                 help="give up if the coordinator has not answered in this long"),
           rank: Optional[int] = typer.Option(None, help="ask for this rank (default: the next free one); with "
                                              "--slots K, ranks RANK … RANK+K-1"),
           slots: int = typer.Option(1, "--slots", metavar="K", help="host K clients in this process, taking "
                                     "turns on its one torch thread (docs/lab.md, many devices per machine)"),
           profile: Optional[str] = typer.Option(None, help="device profile, overriding the scenario's (e.g. x10)"),
           device: Optional[str] = typer.Option(None, help="torch device: cpu, cuda:N or auto"),
           data_root: Optional[str] = typer.Option(None, "--data-root", help="dataset folder on this machine"),
           curve_secret: Optional[Path] = typer.Option(None, "--curve-secret",
                                                       help="CURVE: this client's NAME.key_secret"),
           server_key: Optional[Path] = typer.Option(None, "--server-key",
                                                     help="CURVE: the coordinator's public NAME.key")):
    """Join a coordinator and train until it says the run is over.

    Every mistake is one line naming the option: exit 2 for a bad option, 1 when the client could not
    join or go on (no coordinator within --connect-timeout, refused, a --device this machine lacks)."""
    connect = _endpoint(connect, "--connect")
    if not connect_timeout > 0:
        err.print(f"[red]--connect-timeout {connect_timeout:g}: must be more than 0 seconds[/red]", highlight=False)
        raise typer.Exit(2)
    if rank is not None and rank < 0:
        err.print(f"[red]--rank {rank}: must be 0 or more[/red]", highlight=False)
        raise typer.Exit(2)
    if slots < 1:
        err.print(f"[red]--slots {slots}: must be 1 or more[/red]", highlight=False)
        raise typer.Exit(2)
    if profile is not None:
        from edgesync.emulation.profiles import parse_profile
        try:
            parse_profile(profile)
        except ValueError as exc:
            err.print(f"[red]--profile {profile}: {getattr(exc, 'problem', exc)}[/red]", highlight=False)
            raise typer.Exit(2) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s"
                        f"{' [%(threadName)s]' if slots > 1 else ''}: %(message)s")
    keys = _client_keys(curve_secret, server_key)
    if slots > 1:
        _client_slots(connect, slots, rank, profile, device, data_root, keys, connect_timeout)
        return
    from edgesync.runtime.live.client import ClientFailed, EdgeClient
    try:
        edge = EdgeClient(connect, rank=rank, profile=profile, device=device, data_root=data_root, keys=keys,
                          connect_timeout_s=connect_timeout)
    except ValueError as exc:  # a malformed --device (one this machine lacks is told to the coordinator)
        err.print(f"[red]--device {device}: {exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    try:
        edge.run()
    except ClientFailed as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        err.print("client stopped (Ctrl-C)", highlight=False)
        raise typer.Exit(130) from None


def _client_slots(connect: str, slots: int, rank: int | None, profile: str | None, device: str | None,
                  data_root: str | None, keys, connect_timeout: float) -> None:
    """`edgesync client --slots K`: K clients in this process (runtime/live/slots.py); exit 1 if any failed."""
    from edgesync.runtime.live.slots import SlotHost
    try:
        host = SlotHost(connect, slots, first_rank=rank, profile=profile, device=device, data_root=data_root,
                        keys=keys, connect_timeout_s=connect_timeout)
    except ValueError as exc:  # a malformed --device
        err.print(f"[red]--device {device}: {exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    try:
        failures = host.run()
    except KeyboardInterrupt:
        err.print("client stopped (Ctrl-C)", highlight=False)
        raise typer.Exit(130) from None
    for f in failures:
        err.print(f"[red]slot {f.index} (client {'?' if f.rank is None else f.rank}): {f.reason}[/red]",
                  highlight=False)
    if failures:
        err.print(f"[red]{len(failures)} of {slots} slots failed[/red]", highlight=False)
        raise typer.Exit(1)


@app.command("keys")
def keys_command(directory: Path = typer.Argument(..., help="folder to write the key files into, e.g. keys"),
                 names: Optional[List[str]] = typer.Option(
                     None, "--name", help="one key pair per --name (default: the coordinator's only), e.g. "
                                          "--name coordinator --name client-0 --name client-1"),
                 coordinator: str = typer.Option("coordinator", "--coordinator", metavar="NAME",
                                                 help="which --name is the coordinator's; every other is a "
                                                      "client, whose public key goes into DIR/allow"),
                 host: str = typer.Option("COORDINATOR-HOST", "--host",
                                          help="the coordinator's address as the clients reach it, for the "
                                               "printed client commands")):
    """Create CURVE key pairs and the coordinator's allow-list folder DIR/allow; print each machine's command.

    NAME.key is the public key, NAME.key_secret the secret one (mode 600). Each client's NAME.key is
    also copied into DIR/allow. Existing keys are kept as they are: run it again with new names to add
    clients to the same allow-list.
    """
    from edgesync.transport.security import ALLOW_FOLDER, KeyFileError, set_up_keys
    names = list(names or [coordinator])
    try:
        pairs = set_up_keys(directory, names, coordinator=coordinator)
    except KeyFileError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None
    allow = directory / ALLOW_FOLDER
    server_public = directory / f"{coordinator}.key"
    server_secret = directory / f"{coordinator}.key_secret"
    say = lambda text="": out.print(text, highlight=False, soft_wrap=True)  # noqa: E731 - commands stay on one line
    say(f"in {directory}:")
    for pair in pairs:
        state = "made" if pair.made else "exists, kept as it is"
        role = "the coordinator" if pair.allowed is None else "a client"
        say(f"  {pair.name} ({role}): {state}: {pair.public}" + (f", {pair.secret}" if pair.secret else ""))
        if pair.allowed is not None:
            say(f"    public key admitted by the coordinator: {pair.allowed}")
    if not server_public.exists():
        say(f"note: {server_public} does not exist yet; make the coordinator's pair with "
            f"`edgesync keys {directory} --name {coordinator}` (or pass --coordinator NAME)")
    say()
    say(f"On the coordinator machine (it needs {server_secret} and the folder {allow}/; "
        "use your own scenario file):")
    say(f"  edgesync coordinator --scenario scenarios/quickstart.yaml --bind tcp://0.0.0.0:5555 "
        f"--curve-secret {server_secret} --allow {allow}")
    clients = [pair for pair in pairs if pair.allowed is not None]
    for pair in clients:
        secret = directory / f"{pair.name}.key_secret"
        say(f"On {pair.name}'s machine: copy {secret} and {server_public} there, to the same path "
            f"({directory}/ in the folder you run the client from), then:" if not directory.is_absolute() else
            f"On {pair.name}'s machine: copy {secret} and {server_public} there, to the same path, then:")
        say(f"  edgesync client --connect tcp://{host}:5555 --curve-secret {secret} --server-key {server_public}")
    if any(pair.made for pair in clients) and not any(pair.made and pair.allowed is None for pair in pairs):
        say(f"A coordinator already running with --allow {allow} admits the new clients from their next "
            f"connection on, without a restart (if it runs on another machine, copy their {allow}/NAME.key there).")
    say("A .key_secret never leaves its machine: once copied, delete the other copies (docs/lab.md, Security).")


@app.command()
def profiles():
    """List the named device profiles scenarios and clients can use."""
    from edgesync.emulation.profiles import DESCRIPTIONS, NAMED
    t = Table(title="device profiles")
    t.add_column("name")
    t.add_column("definition")
    t.add_column("what it emulates")
    for name, p in NAMED.items():
        spec = ", ".join(f"{k}={v}" for k, v in p.model_dump().items() if k != "kind")
        t.add_row(name, f"{p.kind}: {spec}", DESCRIPTIONS[name])
    out.print(t)
    out.print("Any xK with K >= 1 works (x3, x2.5); gamma profiles take a mapping: "
              "{kind: gamma, machines: heterogeneous|homogeneous, mean: 1.0, v_task: 0.1, v_mach: 0.6}. "
              "Nothing emulates a device faster than it is: a factor below 1 (x0.5, or a gamma mean below 1) "
              "is refused, in scenarios and in --profile alike; live, a single gamma step drawn below 1 runs "
              "at full speed.", highlight=False)


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a run folder")):
    """Re-render report.md and the plots from a run folder."""
    from edgesync.metrics.report import render_report
    if not (run_dir / "metrics.jsonl").exists():
        err.print(f"[red]{run_dir}: not a run folder (no metrics.jsonl)[/red]", highlight=False)
        raise typer.Exit(2)
    out.print(f"report: {render_report(run_dir)}", highlight=False)


@app.command()
def reproduce(quick: bool = typer.Option(False, "--quick", help="reduced runs, 3 seeds: about 11 minutes on 2 cores"),
              runtime: str = typer.Option("sim", "--runtime", help="sim (default) or live"),
              seeds: Optional[str] = typer.Option(None, "--seeds", help="seeds for every experiment, e.g. 0-4 "
                                                  "(default 0-2 with --quick, else 0-4)"),
              jobs: int = typer.Option(min(2, os.cpu_count() or 1), "--jobs", "-j", help="simulator experiments "
                                       "run at once, one process each (live runs: always one)"),
              parallel: int = typer.Option(1, "--parallel", metavar="N", min=1, help="simulator: one experiment at "
                                           "a time, N of its seeds at once as Ray tasks (instead of --jobs; "
                                           "a cluster: RAY_ADDRESS)"),
              out_dir: Path = typer.Option(Path("runs/reproduce"), "--out", help="folder for the runs"),
              reuse: Optional[Path] = typer.Option(None, "--from", help="read finished runs from this folder"),
              only: Optional[str] = typer.Option(None, "--only", help="comma-separated experiments to run"),
              write_docs: bool = typer.Option(False, "--write-docs", help="put the table into docs/results.md"),
              quiet: bool = typer.Option(False, "--quiet", "-q")):
    """Run the seed papers' headline comparisons and print, claim by claim, the paper's figure beside ours."""
    from edgesync import reproduce as rp
    if runtime not in ("sim", "live"):
        err.print(f"[red]--runtime must be sim or live, not {runtime!r}[/red]", highlight=False)
        raise typer.Exit(2)
    keys = [e.key for e in rp.EXPERIMENTS]
    chosen = [k.strip() for k in only.split(",")] if only else None
    if chosen and set(chosen) - set(keys):
        err.print(f"[red]--only: unknown {sorted(set(chosen) - set(keys))}; experiments are {keys}[/red]",
                  highlight=False)
        raise typer.Exit(2)
    root = reuse or out_dir
    if reuse is None:
        chosen_seeds = _parse_seeds(seeds) if seeds is not None else None
        if chosen_seeds is not None and len(chosen_seeds) < 2:
            err.print("[yellow]--seeds: with one seed no claim gets an interval; every verdict will be "
                      "inconclusive[/yellow]", highlight=False)
        rp.run_suite(out_dir, quick, runtime, chosen, progress=not quiet, seeds=chosen_seeds, jobs=jobs,
                     parallel=parallel)
    results = rp.evaluate(root)
    if not results:
        err.print(f"[red]no finished experiment in {root}[/red]", highlight=False)
        raise typer.Exit(1)
    text = rp.table(results)
    (root / "claims.md").write_text(text + "\n")
    out.print(text, highlight=False)
    if write_docs:
        # The folder's record says how its runs were made; runs without one are taken as the options say.
        key = rp.folder_key(root) or f"{'quick' if quick else 'full'}-{runtime}"
        rp.write_docs(text, key, rp.docs_note(root, key))
        out.print(f"table written to docs/results.md ({key})", highlight=False)


@app.command("flower-up")
def flower_up(nodes: int = typer.Option(2, "--nodes", "-n", help="SuperNodes to start on 127.0.0.1"),
              profiles_: Optional[str] = typer.Option(None, "--profiles",
                                                      help="comma-separated profile per node, e.g. x1,x10 "
                                                           "(default: the scenario's)"),
              home: Path = typer.Option(Path("runs/.flower"), "--home", help="FLWR_HOME: config, logs, PIDs"),
              run_scenario: Optional[Path] = typer.Option(None, "--run", help="run this scenario with `flwr run`, "
                                                                             "then stop everything"),
              set_: Optional[List[str]] = typer.Option(None, "--set", help="with --run: KEY.PATH=VALUE"),
              out_dir: Optional[Path] = typer.Option(None, "--out", help="with --run: the run folder"),
              detach: bool = typer.Option(False, "--detach", help="leave the lab running; stop it with flower-down")):
    """Start a local Flower SuperLink and N SuperNodes (the repository is the Flower app); stop them by PID."""
    from edgesync.flower.lab import CONNECTION, FlowerLab, LabError
    names = [p.strip() for p in profiles_.split(",")] if profiles_ else []
    if names and len(names) != nodes:
        err.print(f"[red]--profiles names {len(names)} profiles for {nodes} nodes[/red]", highlight=False)
        raise typer.Exit(2)
    if run_scenario is not None:
        _load(run_scenario, set_ or [])  # a bad scenario fails here, before anything starts
    node_configs = [{"partition-id": i, **({"profile": names[i]} if names else {})} for i in range(nodes)]
    lab = FlowerLab(home, node_configs)
    try:
        lab.start()
        lab.wait_for_nodes()
    except LabError as exc:
        lab.stop()  # the SuperLink and SuperNodes are up when it is the nodes that did not register
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        lab.stop()
        err.print("Flower lab stopped", highlight=False)
        raise typer.Exit(130) from None
    err.print(f"SuperLink {lab.address} and {nodes} SuperNodes up (logs: {lab.home / 'logs'})", highlight=False)
    if detach:
        out.print(f"FLWR_HOME={lab.home} flwr run . {CONNECTION} --stream\n"
                  f"edgesync flower-down --home {home}", highlight=False)
        return
    try:
        if run_scenario is None:
            err.print(f"in another shell: FLWR_HOME={lab.home} flwr run . {CONNECTION} --stream   "
                      "(Ctrl-C here stops the lab)", highlight=False)
            while lab.alive():
                time.sleep(1.0)
            return
        config = {"scenario": str(run_scenario.resolve()), "set": "; ".join(set_ or [])}
        if out_dir is not None:
            config["out"] = str(out_dir.resolve())
        result = lab.run_app(Path.cwd(), config, stream=True)
        if result.returncode != 0:
            raise typer.Exit(result.returncode)
    except KeyboardInterrupt:
        pass
    finally:
        lab.stop()
        err.print("Flower lab stopped", highlight=False)


@app.command("flower-down")
def flower_down(home: Path = typer.Option(Path("runs/.flower"), "--home", help="the lab's FLWR_HOME")):
    """Stop a lab started with `flower-up --detach`, by the PIDs it recorded."""
    from edgesync.flower.lab import LabError, stop_detached
    try:
        n = stop_detached(home)
    except LabError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"stopped {n} Flower processes", highlight=False)


RAY_DEFAULT = "default"  # `--ray` alone: RAY_ADDRESS, else a cluster started on this machine, else a new one
_RAY_ADDRESS = re.compile(r"(rays?://\S+|auto|local|[\w.\-\[\]:]+:\d+)")


def ray_flag(argv: list[str]) -> list[str]:
    """`--ray` may stand alone or take an ADDRESS (host:port, ray://…, auto, local); click's options always
    take a value, so a lone one is given the default's name."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--ray" and (i + 1 == len(out) or not _RAY_ADDRESS.fullmatch(out[i + 1])):
            out[i] = f"--ray={RAY_DEFAULT}"
    return out


def _on_ray(address: str | None, overrides: list[str]) -> None:
    """`--ray [ADDRESS]`: the simulator's clients run on Ray (sim.backend ray), on the cluster at ADDRESS."""
    if address is None:
        return
    overrides.append("sim.backend=ray")
    if address != RAY_DEFAULT:
        os.environ["RAY_ADDRESS"] = address  # read by ray.init(), as in any Ray program


def main() -> None:
    sys.argv = ray_flag(sys.argv)
    app()


if __name__ == "__main__":
    main()

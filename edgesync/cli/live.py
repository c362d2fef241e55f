"""The live runtime across machines: `edgesync coordinator`, `shard` and `client`."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import typer

from edgesync.cli.dashboard import DASHBOARD_HELP, check_bind, live_dashboard
from edgesync.cli.running import claim_folder, export_to_mlflow, run_and_report
from edgesync.cli.shared import address_option, client_keys, err, listen, load_scenario_or_exit, server_keys
from edgesync.constants import CONNECT_TIMEOUT_S


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
                dashboard: Optional[str] = typer.Option(None, "--dashboard", metavar="[HOST:]PORT", help=DASHBOARD_HELP),
                quiet: bool = typer.Option(False, "--quiet", "-q")):
    """Serve a scenario to clients started elsewhere (`edgesync client --connect …`)."""
    bind = address_option(bind, "--bind", bind=True)
    check_bind(dashboard)
    if (scenario is None) == (resume is None):
        err.print("[red]give --scenario FILE, or --resume RUN_DIR (not both)[/red]", highlight=False)
        raise typer.Exit(2)
    if resume is not None and (set_ or out_dir or overwrite):
        err.print("[red]--resume replays the run folder's own scenario.yaml: no --set, --out or --overwrite[/red]",
                  highlight=False)
        raise typer.Exit(2)
    sc = load_scenario_or_exit(resume / "scenario.yaml" if resume else scenario, list(set_ or []))
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
    keys = server_keys(curve_secret, allow)
    sock = listen(bind, keys)  # one socket for every variant: the clients stay connected to it
    from edgesync.runtime.live.coordinator import Coordinator
    from edgesync.runtime.runs import log_to, run_experiment
    try:
        run_dir = claim_folder(sc, out_dir, resume, overwrite)
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
        coord.shard_addresses = [address_option(a, "--shard") for a in shard or []]
        port = coord.address.rsplit(':', 1)[-1]
        how = ("CURVE, admitting the keys in " + str(keys.allow_dir) if keys else
               "plain TCP: anyone who reaches this port can join; on a shared network use --curve-secret and --allow")
        err.print(f"coordinator for {variant.tag or sc.name} on {coord.address} ({how}): start "
                  f"{len(variant.scenario.clients)} clients with `edgesync client --connect tcp://THIS-HOST:{port}"
                  f"{' ' + hint if hint else ''}`", highlight=False)
        coord.run()

    from edgesync.config import variants as sweep_variants
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

    with live_dashboard(run_dir, dashboard):
        run_and_report(run_dir, start)
    export_to_mlflow(run_dir, sc.output.mlflow)


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
    from edgesync.transport.bind_errors import BindFailed

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    keys = server_keys(curve_secret, allow)
    ready = (lambda address: address_file.write_text(address)) if address_file is not None else None
    try:
        serve_shard(address_option(bind, "--bind", bind=True), keys, ready, state_dir)
    except BindFailed as exc:
        err.print(f"[red]--bind {exc}[/red]", highlight=False)
        raise typer.Exit(1) from None


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
    connect = address_option(connect, "--connect")
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
    keys = client_keys(curve_secret, server_key)
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

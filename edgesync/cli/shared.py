"""What the commands share: the consoles, and the options several commands read the same way (a scenario
with `--set` overrides, CURVE keys, addresses, seeds), each turned into its object or an exit naming the problem."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console


err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def load_scenario_or_exit(path: Path, overrides: list[str]):
    from edgesync.config import ScenarioError, load_scenario
    try:
        return load_scenario(path, overrides)
    except ScenarioError as exc:
        err.print(f"[red]invalid scenario[/red]\n{exc}", highlight=False)
        raise typer.Exit(2) from None


def server_keys(curve_secret: Path | None, allow: Path | None):
    """The coordinator's CURVE keys from its options, or None for plain TCP; exits 2 on a bad file."""
    return _curve_keys("ServerKeys", curve_secret, allow,
                       "--curve-secret (the coordinator's NAME.key_secret) and --allow (the folder of client public keys)")


def client_keys(curve_secret: Path | None, server_key: Path | None):
    """A client's CURVE keys from its options, or None for plain TCP; exits 2 on a bad file."""
    return _curve_keys("ClientKeys", curve_secret, server_key,
                       "--curve-secret (this client's NAME.key_secret) and --server-key (the coordinator's public NAME.key)")


def _curve_keys(kind: str, curve_secret: Path | None, other: Path | None, both: str):
    """transport.security's `kind` (ServerKeys or ClientKeys) from a secret key file and the other side's
    file(s): None when neither option is given, one red line and exit 2 when one is missing or bad."""
    if curve_secret is None and other is None:
        return None
    if curve_secret is None or other is None:
        err.print(f"[red]CURVE needs both {both}[/red]", highlight=False)
        raise typer.Exit(2)
    from edgesync.transport import security  # imported on use: a plain-TCP run never loads the CURVE code
    try:
        return getattr(security, kind).from_files(curve_secret, other)
    except security.KeyFileError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def address_option(value: str, option: str, bind: bool = False) -> str:
    """`value` as a ZeroMQ endpoint (HOST:PORT means tcp://HOST:PORT); exits 2 on a malformed one."""
    from edgesync.transport.addresses import AddressError, endpoint
    try:
        return endpoint(value, option, bind=bind)
    except AddressError as exc:
        err.print(f"[red]{exc}[/red]", highlight=False)
        raise typer.Exit(2) from None


def listen(bind: str, keys):
    """The coordinator's socket, bound before anything is written (a busy address leaves no run folder);
    exits 1 saying why it cannot listen there."""
    from edgesync.transport.bind_errors import BindFailed
    from edgesync.transport.sockets import CoordinatorSocket
    try:
        return CoordinatorSocket(bind, keys=keys)
    except BindFailed as exc:
        err.print(f"[red]--bind {exc}[/red]", highlight=False)
        raise typer.Exit(1) from None


def parse_seeds(text: str) -> list[int]:
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

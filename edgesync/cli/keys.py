"""`edgesync keys`: CURVE key pairs and the allow-list for a lab (docs/lab.md)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from edgesync.cli.shared import err, out


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

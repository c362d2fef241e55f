"""A wire contract's id and version, and the connect-time check that both sides speak the same one.

The id and version travel once, when the two sides first meet (in meta key `protocol`, e.g.
"edgesync.coordinator/1"), never on every message: the simulator counts the bytes of the messages it
models, and those stay as they were. A peer that speaks another contract, or an older EdgeSync that
names none, is refused with one line naming both; the refused side raises `ContractMismatch` (or is told
that line in an ERROR) and stops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROTOCOL_KEY = "protocol"  # the meta key of the connect-time message that names the sender's contract
_UNNAMED = "no versioned protocol (an EdgeSync from before versioned contracts)"


class ContractMismatch(ConnectionError):
    """The other side speaks another wire contract (or version): the text is the one line that says so."""


@dataclass(frozen=True)
class Contract:
    name: str     # "coordinator", "shard", …: the id is edgesync.<name>
    version: int  # raised whenever a change would make the two sides misunderstand each other
    server: str   # the side that is connected to (the coordinator, a follower shard, the driver, …)
    client: str   # the side that connects

    @property
    def id(self) -> str:
        return f"edgesync.{self.name}"

    @property
    def tag(self) -> str:
        """What travels at connect time: id/version."""
        return f"{self.id}/{self.version}"

    def offer(self) -> dict[str, str]:
        """The meta entry a connect-time message carries."""
        return {PROTOCOL_KEY: self.tag}

    def refusal(self, meta: Any, here: str) -> str | None:
        """None when `meta` (the peer's connect-time message) names this contract and version; else the one
        line naming both. `here`: which side this is, "server" or "client"."""
        heard = meta.get(PROTOCOL_KEY) if isinstance(meta, dict) else None
        if heard == self.tag:
            return None
        theirs = heard if isinstance(heard, str) and len(heard) <= 80 else (
            _UNNAMED if heard is None else f"an unreadable protocol {str(heard)[:60]!r}")
        server, client = (self.tag, theirs) if here == "server" else (theirs, self.tag)
        return f"{self.server} speaks {server}, this {self.client} {client}: use the same EdgeSync version on both"

    def check(self, meta: Any, here: str) -> None:
        """Raise ContractMismatch with the one line if `meta` names another contract or version."""
        if (line := self.refusal(meta, here)) is not None:
            raise ContractMismatch(line)

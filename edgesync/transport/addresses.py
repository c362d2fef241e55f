"""ZeroMQ endpoints from what a user types on the command line: `--connect` and `--bind`.

`tcp://HOST:PORT` as ZeroMQ writes it, or just `HOST:PORT` (taken as tcp://). `ipc://PATH` goes
through as it is. Anything else is an `AddressError` whose message names the option, the value and
what was expected, on one line: ZeroMQ's own error for a bad endpoint ("Invalid argument") names
neither.
"""
from __future__ import annotations

import re

_HOST = re.compile(r"^(\*|\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)$")  # *, [IPv6], name, IPv4 or interface


class AddressError(ValueError):
    """A malformed endpoint; the message names the option."""


def endpoint(value: str, option: str = "--connect", bind: bool = False) -> str:
    """The ZeroMQ endpoint `value` means: `HOST:PORT` becomes `tcp://HOST:PORT`.

    `bind`: a listening address, where the host may be `*` (every interface) and the port `*` or 0 (any
    free one); a connecting address needs a host and a port from 1 to 65535."""
    text = value.strip() if isinstance(value, str) else ""
    example = "tcp://0.0.0.0:5555 or 0.0.0.0:5555" if bind else "tcp://HOST:5555 or HOST:5555"

    def bad(problem: str) -> AddressError:
        return AddressError(f"{option} {value!r}: {problem} (expected {example})")

    if not text:
        raise bad("no address")
    scheme, sep, rest = text.partition("://")
    if not sep:
        if "/" in text:
            raise bad("not an address")
        scheme, rest = "tcp", text
    scheme = scheme.lower()
    if scheme == "ipc":
        if not rest:
            raise bad("ipc:// needs a path")
        return f"ipc://{rest}"
    if scheme != "tcp":
        raise bad(f"unsupported scheme {scheme + '://'!r}; edgesync speaks tcp://")
    host, colon, port = rest.rpartition(":")
    if not colon:
        raise bad("no port")
    if not host:
        if not bind:
            raise bad("no host")
        host = "*"
    if not _HOST.match(host) or (host == "*" and not bind):
        raise bad(f"{host!r} is not a host name or IP address")
    if bind and port == "*":
        return f"tcp://{host}:*"
    if not port.isdigit() or not (0 if bind else 1) <= int(port) <= 65535:
        raise bad(f"port {port!r} is not a number from {0 if bind else 1} to 65535")
    return f"tcp://{host}:{int(port)}"

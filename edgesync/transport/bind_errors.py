"""Why a coordinator cannot listen at its address, in one line a user can act on."""
from __future__ import annotations

import errno

import zmq


class BindFailed(zmq.ZMQError):
    """The coordinator cannot listen at its address; the message says why, on one line."""


def bind_failed(address: str, exc: zmq.ZMQError) -> BindFailed:
    port = address.rsplit(":", 1)[-1]
    if exc.errno == zmq.EADDRINUSE:
        why = (f"the address is in use: another program (another coordinator?) listens on port {port}; "
               "stop it or choose another port")
    elif exc.errno == zmq.EADDRNOTAVAIL:
        why = "this machine has no such IP address (0.0.0.0 listens on every interface)"
    elif exc.errno == errno.ENODEV:
        why = "no such host name, IP address or network interface on this machine"
    elif exc.errno == errno.EACCES:
        why = f"not allowed to listen on port {port} (ports below 1024 need root): choose another port"
    else:
        why = f"cannot listen there ({exc.strerror})"
    return BindFailed(exc.errno, f"{address}: {why}")

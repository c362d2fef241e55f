"""The wire: protocol (one module) and the sockets that carry it."""
from edgesync.transport.protocol import Message, ProtocolError  # noqa: F401
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket  # noqa: F401

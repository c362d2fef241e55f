"""The wire: the frame and its codec (protocol.py), one module per wire contract (contracts/), and the sockets
that carry them."""
from edgesync.transport.protocol import Message, ProtocolError  # noqa: F401
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket  # noqa: F401

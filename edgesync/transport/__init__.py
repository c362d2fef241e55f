"""The wire: the frame and its codec (protocol.py), one module per wire contract (contracts/), and the sockets
that carry them. Nothing is imported here: `edgesync.transport.allocator`, which every command loads first,
stays free of torch, so a command line that is refused is refused at once."""

"""EdgeSync's wire contracts, one module each, every one with a protocol id and a version checked when
its two sides first meet (version.py): the client ↔ coordinator protocol (coordinator.py), the lead ↔
follower shard protocol (shard.py), the simulator's Ray driver ↔ worker channel (ray_worker.py) and the
all-reduce ring's set-up (ring.py). They share the frame and its codec (transport/protocol.py)."""

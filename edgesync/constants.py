"""Tunables of the runtime, in one place, with units in their names."""

# The frame format (transport/protocol.py: `proto`, `v` on every message). Each wire contract's own id and
# version travel at connect time only (transport/contracts/).
PROTOCOL_VERSION = 1
PROTOCOL_NAME = "edgesync"

# Coordinator loop: the longest a poll may block, so stop checks and evaluations stay on time.
POLL_INTERVAL_S = 0.02
# How long the coordinator waits for every client to say hello / get ready before giving up.
JOIN_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 120.0
# At the end of an algorithm, how long to wait for each client's closing statistics.
STATS_TIMEOUT_S = 30.0
# A client with no word from the coordinator for this long gives up.
CLIENT_IDLE_TIMEOUT_S = 600.0
# A client that has not joined yet gives up after this long without a word from the coordinator
# (`edgesync client --connect-timeout`), saying every CONNECT_REPORT_EVERY_S that it is still waiting.
CONNECT_TIMEOUT_S = 120.0
CONNECT_REPORT_EVERY_S = 3.0

# The simulator's clock: virtual times are rounded to 1 ns, where events and evaluations are scheduled.
TIME_GRID_DIGITS = 9

# Throttle calibration: steps to warm up, then steps whose median is the reference step time.
CALIBRATION_WARMUP_STEPS = 3
CALIBRATION_STEPS = 10

# The simulator's coordinator cost model (runtime/sim/server_calibration.py): a calibration runs the
# algorithm with this many x1 clients until it has timed this many applied updates; past the target
# time it stops at the first moment it has the minimum, and it never runs past the limit.
SERVER_CALIBRATION_CLIENTS = 4
SERVER_CALIBRATION_UPDATES = 20
SERVER_CALIBRATION_MIN_UPDATES = 3
SERVER_CALIBRATION_TARGET_S = 3.0
SERVER_CALIBRATION_LIMIT_S = 30.0

# glibc maps fresh memory for every allocation above its mmap threshold (32 MiB by default), which
# slows large ZeroMQ messages; processes the runtime starts get these, and every edgesync command sets
# them with mallopt(3) at start-up (transport/allocator.py).
MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
}
# One torch thread per client process: more threads than cores slows training ~25x.
CLIENT_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# Largest message a socket accepts (ZeroMQ's ZMQ_MAXMSGSIZE): far above ResNet-18's 45 MB.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024

# Flower runtime (edgesync/flower/): how often the ServerApp asks the SuperLink for replies and for
# newly connected SuperNodes, and how long a local SuperLink/SuperNode may take to start or stop.
FLOWER_PULL_INTERVAL_S = 0.05
FLOWER_NODE_POLL_INTERVAL_S = 1.0
FLOWER_START_TIMEOUT_S = 60.0
FLOWER_STOP_TIMEOUT_S = 10.0

# Updates with NaN/Inf are refused; this many per client mean the algorithm's training diverged.
NONFINITE_UPDATES_DIVERGED = 3

# Liveness (docs/lab.md "Faults"): a side that has sent nothing for HEARTBEAT_INTERVAL_S sends a
# HEARTBEAT; the scenario's faults.client_timeout_s says when silence means gone. A client that lost
# its coordinator reconnects with exponential backoff from RECONNECT_FIRST_S up to RECONNECT_MAX_S
# between tries, for RECONNECT_GIVE_UP_S in all.
HEARTBEAT_INTERVAL_S = 1.0
RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 8.0
RECONNECT_GIVE_UP_S = 600.0
# A device offline by its availability asks the coordinator this often whether it may return: the next
# algorithm (or a sweep's next variant) may have begun, on a schedule in which it is online at once.
OFFLINE_PROBE_S = 1.0

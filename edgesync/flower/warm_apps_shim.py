"""What a lab's SuperExecs start in place of `flwr-clientapp` and `flwr-serverapp` (warm_apps.py): it asks
the lab's warm process to fork the app, hands it this process's stdin, stdout and stderr, passes on the
signals it gets, and exits with the app's exit code. Run as `python -S -E warm_apps_shim.py REAL ARGS…`
(the standard library only: it starts in milliseconds); where no warm process answers it runs REAL, the
Flower command itself.
"""
import array
import json
import os
import signal
import socket
import sys

SOCKET_ENV = "EDGESYNC_WARM_APPS"  # the warm process's abstract socket name (warm_apps.py)


def main(real: str, args: list) -> int:
    name = os.environ.get(SOCKET_ENV)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not name:
            raise OSError("no warm process named")
        sock.connect("\0" + name)
        request = {"app": os.path.basename(real), "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
        fds = array.array("i", [0, 1, 2])
        sock.sendmsg([json.dumps(request).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        replies = sock.makefile("rb")
        forked = replies.readline()
    except OSError:
        forked = b""
    if not forked:  # no warm process, or it could not fork: the command itself, as Flower would start it
        sock.close()
        os.execv(real, [real, *args])
    pid = json.loads(forked)["pid"]

    def pass_on(signum, _frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    ended = replies.readline()
    if not ended:
        return 1  # the warm process is gone (stopped with its lab)
    code = json.loads(ended)["code"]
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

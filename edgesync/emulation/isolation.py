"""Keep emulated clients that share a host off each other's CPU.

A ×k client paces its steps by sleeping so that a step lasts k × a common base step. That only holds
if no client eats the CPU another one needs: two busy processes on one core both run at half speed,
and the emulated speeds stop meaning anything. So each client process caps itself:

- **affinity**: pin the process to one core of its own (``sched_setaffinity``), when the host has at
  least as many cores as clients. Needs no root.
- **cgroup-v2**: a leaf group ``<cgroup2 mount>/edgesync/client-<pid>`` with ``cpu.max`` set to the
  client's CPU share, where the v2 ``cpu`` controller is available.
- **cgroup-v1**: the same folder under the v1 ``cpu`` hierarchy, with a CFS quota
  (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) equal to the share.
- **none**: nothing applied (not root, no cpu controller, read-only cgroupfs, ...); steps are then
  paced by sleeping only. ``Isolation.detail`` says why, for the run log.

Mount points come from ``/proc/self/mounts``; only mounts at or under ``sysfs`` count, so tests can
point both at a fake tree. ``release`` moves the process back and removes its folder but leaves the
shared ``edgesync/`` parent, which another client may be creating its folder in. OS limitations never raise: they give mechanism "none" with the reason.
"""
from __future__ import annotations

import atexit
import os
import re
from dataclasses import dataclass

PERIOD_US = 100_000
MIN_QUOTA_US = 1_000  # the kernel refuses a smaller CFS quota
GROUP = "edgesync"


@dataclass(frozen=True)
class Isolation:
    mechanism: str  # "affinity", "cgroup-v2", "cgroup-v1" or "none"
    detail: str  # one line for the run log
    path: str | None = None  # the cgroup folder created, if any
    previous: str | None = None  # the cgroup folder the process was in before, for release


def isolate(*, cpu_share: float | None = None, core: int | None = None, prefer: str = "auto",
            pid: int | None = None, sysfs: str = "/sys/fs/cgroup", mounts: str = "/proc/self/mounts") -> Isolation:
    """Apply to process `pid` (default: this one). `core` is an INDEX into the process's allowed CPU set
    (sorted(os.sched_getaffinity(pid))[core]), not a CPU number. prefer: "auto" (core given → affinity; else
    cpu_share given → cgroup v2 if its cpu controller can be used, else v1 CFS quota; else none),
    "affinity", "cgroup", "none". Never raises for an OS limitation: returns mechanism "none" with the reason
    (not root, no cpu controller, read-only sysfs, affinity not supported, core index out of range...).
    Bad arguments raise ValueError: cpu_share <= 0, an unknown prefer, or prefer without its core/cpu_share."""
    if prefer not in ("auto", "affinity", "cgroup", "none"):
        raise ValueError(f"prefer must be auto, affinity, cgroup or none, not {prefer!r}")
    if cpu_share is not None and not cpu_share > 0:  # also catches NaN
        raise ValueError(f"cpu_share must be > 0, not {cpu_share}")
    pid = os.getpid() if pid is None else pid
    if prefer == "affinity" or (prefer == "auto" and core is not None):
        if core is None:
            raise ValueError("prefer='affinity' needs a core")
        return _pin(pid, core)
    if prefer == "cgroup" or (prefer == "auto" and cpu_share is not None):
        if cpu_share is None:
            raise ValueError("prefer='cgroup' needs a cpu_share")
        return _cap(pid, cpu_share, sysfs, mounts)
    return _none("isolation off" if prefer == "none" else "no core or CPU share given")


def release(isolation: Isolation, pid: int | None = None) -> None:
    """Undo: move the process back to the cgroup it came from (root of the hierarchy is fine) and remove the
    folder; restore the full affinity set for affinity. Never raises."""
    pid = os.getpid() if pid is None else pid
    if isolation.mechanism == "affinity":
        try:  # the kernel trims the set to what the process's cpuset allows
            os.sched_setaffinity(pid, range(os.cpu_count() or 1))
        except (OSError, AttributeError):
            pass
    elif isolation.path is not None:
        root = os.path.dirname(os.path.dirname(isolation.path))  # <mount>/edgesync/client-<pid>
        for group in (isolation.previous, root):
            if group is not None and _write(os.path.join(group, "cgroup.procs"), str(pid)) is None:
                break
        try:
            os.rmdir(isolation.path)
        except OSError:
            pass


def release_at_exit(isolation: Isolation) -> None:
    """Release this process's isolation when it exits."""
    atexit.register(release, isolation)


def _none(reason: str) -> Isolation:
    return Isolation("none", f"none: {reason}; steps are paced by sleeping only")


def _pin(pid: int, core: int) -> Isolation:
    try:
        allowed = sorted(os.sched_getaffinity(pid))
    except AttributeError:
        return _none("affinity not supported on this platform")
    except OSError as e:
        return _none(f"cannot read the affinity of pid {pid}: {e}")
    if not 0 <= core < len(allowed):
        return _none(f"core index {core} out of range (allowed CPUs: {allowed})")
    try:
        os.sched_setaffinity(pid, {allowed[core]})
    except OSError as e:
        return _none(f"cannot pin pid {pid} to CPU {allowed[core]}: {e}")
    return Isolation("affinity", f"pinned to core {allowed[core]} (index {core} of {len(allowed)} allowed CPUs)")


def _cap(pid: int, share: float, sysfs: str, mounts: str) -> Isolation:
    if os.geteuid() != 0:
        return _none("not root (cgroups need root)")
    v2, v1 = _cgroup_mounts(sysfs, mounts)
    cpus = os.cpu_count() or 1
    capped = f" (asked {share:g}, the host has {cpus} CPUs)" if share > cpus else ""
    quota = max(MIN_QUOTA_US, round(min(share, cpus) * PERIOD_US))
    reasons = []
    if v2 is not None and "cpu" in (_read(os.path.join(v2, "cgroup.controllers")) or "").split():
        result = _join(v2, pid, v2=True, files={"cpu.max": f"{quota} {PERIOD_US}"},
                       detail=f"cgroup v2 cpu.max {quota / PERIOD_US:g} CPU{capped}")
        if isinstance(result, Isolation):
            return result
        reasons.append(f"cgroup v2: {result}")
    elif v2 is not None:
        reasons.append(f"no cpu controller in cgroup v2 at {v2}")
    if v1 is None:
        return _none("; ".join(reasons + ["no cgroup v1 cpu controller mounted"]))
    result = _join(v1, pid, v2=False, files={"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)},
                   detail=f"cgroup v1 CFS quota {quota / PERIOD_US:g} CPU{capped}")
    return result if isinstance(result, Isolation) else _none("; ".join(reasons + [f"cgroup v1: {result}"]))


def _join(mount: str, pid: int, *, v2: bool, files: dict[str, str], detail: str) -> Isolation | str:
    """Create (or reuse) <mount>/edgesync/client-<pid>, write `files` into it and move pid in.
    Returns the Isolation, or why it failed."""
    parent = os.path.join(mount, GROUP)
    path = os.path.join(parent, f"client-{pid}")
    previous = _group_of(pid, mount, v2=v2)
    # v2: children get the cpu controller only where their parent enables it for its subtree, and only
    # a group holding no processes may do that (edgesync/ never holds any; the root is exempt).
    enable = [(os.path.join(mount, "cgroup.subtree_control"), "+cpu"),
              (os.path.join(parent, "cgroup.subtree_control"), "+cpu")] if v2 else []
    fill = [(os.path.join(path, name), text) for name, text in files.items()]
    fill.append((os.path.join(path, "cgroup.procs"), str(pid)))  # last: the limits hold from the move on
    try:
        os.makedirs(parent, exist_ok=True)
        _remove_stale(parent, keep=path)
        error = next(filter(None, (_write(file, text) for file, text in enable)), None)
        if error is None:
            os.makedirs(path, exist_ok=True)
            error = next(filter(None, (_write(file, text) for file, text in fill)), None)
    except OSError as e:
        error = f"cannot create {path}: {e.strerror or e}"
    if error is not None:
        try:  # leave nothing behind; refused harmlessly if the group is in use
            os.rmdir(path)
        except OSError:
            pass
        return error
    # re-isolating a pid already in its folder: where it came from is unknown, so release uses the root
    return Isolation("cgroup-v2" if v2 else "cgroup-v1", f"{detail} ({path})", path,
                     None if previous == path else previous)


def _remove_stale(parent: str, keep: str) -> None:
    """Remove client folders of processes that no longer run (killed clients leave them behind).
    A folder still holding processes refuses rmdir (EBUSY): that is fine, it is not stale."""
    for name in os.listdir(parent):
        match = re.fullmatch(r"client-(\d+)", name)
        path = os.path.join(parent, name)
        if match and path != keep and not os.path.exists(f"/proc/{match.group(1)}"):
            try:
                os.rmdir(path)
            except OSError:
                pass


def _group_of(pid: int, mount: str, *, v2: bool) -> str | None:
    """The folder under mount that pid is in now, from /proc/<pid>/cgroup ("id:controllers:/path")."""
    for line in (_read(f"/proc/{pid}/cgroup") or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, relative = rest.partition(":")
        if (hierarchy == "0" and not controllers) if v2 else "cpu" in controllers.split(","):
            return os.path.normpath(os.path.join(mount, relative.lstrip("/")))
    return None


def _cgroup_mounts(sysfs: str, mounts: str) -> tuple[str | None, str | None]:
    """(cgroup2 mount point, cgroup v1 mount point holding the cpu controller), under sysfs."""
    v2 = v1 = None
    top = os.path.normpath(sysfs)
    for line in (_read(mounts) or "").splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        # /proc/mounts escapes spaces and the like as \ooo
        point = os.path.normpath(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1]))
        if point != top and not point.startswith(top + os.sep):
            continue
        if fields[2] == "cgroup2" and v2 is None:
            v2 = point
        elif fields[2] == "cgroup" and "cpu" in fields[3].split(",") and v1 is None:
            v1 = point
    return v2, v1


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _write(path: str, text: str) -> str | None:
    """Write text; None, or why it failed (cgroupfs answers a refused value with an OSError)."""
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(text)
        return None
    except OSError as e:
        return f"writing {text!r} to {path}: {e.strerror or e}"

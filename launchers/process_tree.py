"""Every process a server started, found again after the leader died, after a worker left the
process group (double fork + setsid), and after a ``kill -9`` of the advisor itself.

Three marks, checked together:
- a cgroup v2 of the server's own, where the advisor's cgroup can be written (a systemd user
  session that delegates it, a container or VM as root): the child joins it before exec, and every
  descendant stays in it whatever it does. ``cgroup.kill`` (Linux 5.14+) ends them all at once.
  Not available in a root-owned login scope (plain ssh) or with a read-only /sys/fs/cgroup;
- the environment marker NVFP4_ADVISOR_SERVER=<token>, inherited by every descendant that keeps
  its environment (a daemon that clears it AND leaves the session is found by the cgroup only);
- the leader's process group and session, for processes that dropped the marker; trusted only
  while that pgid/sid is still the leader's own (the kernel does not hand out a pid that is still a
  group or session id, and a new process under the old number has a different start time).
Every candidate must have started no earlier than the leader (the recorded start time), so a
reused pid is never taken for part of the server.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

MARKER = "NVFP4_ADVISOR_SERVER"
_CGROUP_PREFIX = "nvfp4-advisor-"


@dataclass(frozen=True)
class Tree:
    token: str                 # the marker's value: unique per server
    leader: int                # pid of the leader = its process group and session id (start_new_session)
    started: float             # psutil create_time of the leader
    cgroup: str = ""           # cgroup v2 directory holding the server, "" when unavailable


# ------------------------------------------------------------------ cgroup v2

def cgroup_parent() -> str | None:
    """This process's cgroup v2 directory when a child cgroup can be made in it, else None."""
    try:
        mount = next(line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                     if " - cgroup2 " in line)
        own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    path = os.path.join(mount, own.lstrip("/"))
    return path if os.access(path, os.W_OK) and os.path.isfile(os.path.join(path, "cgroup.procs")) else None


def make_cgroup(token: str) -> str:
    """A fresh cgroup for one server ("" when none can be made here)."""
    parent = cgroup_parent()
    if parent is None:
        return ""
    path = os.path.join(parent, _CGROUP_PREFIX + token)
    try:
        os.mkdir(path)
    except OSError:
        return ""
    return path


def cgroup_pids(path: str) -> list[int]:
    """Pids in ``path`` and its sub-cgroups (an engine may make its own)."""
    out: list[int] = []
    if not path:
        return out
    for root, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                out += [int(x) for x in Path(root, "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                continue
    return out


def kill_cgroup(path: str) -> None:
    """SIGKILL everything in the cgroup: cgroup.kill where the kernel has it, else pid by pid."""
    if not path or not os.path.isdir(path):
        return
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    for pid in cgroup_pids(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def remove_cgroup(path: str) -> bool:
    """Remove an empty cgroup (sub-cgroups first); False while processes are still in it."""
    if not path or not os.path.isdir(path):
        return True
    for root, dirs, _files in os.walk(path, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        return not os.path.isdir(path)
    return True


def remove_stale_cgroups(min_age_s: float = 60.0) -> None:
    """Empty server cgroups older than ``min_age_s`` next to ours (an advisor killed while its
    server was already gone leaves one; a fresh one may be waiting for its child to join)."""
    parent = cgroup_parent()
    if parent is None:
        return
    try:
        names = [n for n in os.listdir(parent) if n.startswith(_CGROUP_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(parent, name)
        try:
            if time.time() - os.stat(path).st_mtime > min_age_s and not cgroup_pids(path):
                remove_cgroup(path)
        except OSError:
            continue


# ------------------------------------------------------------------ finding the members

def _ours(p: psutil.Process, tree: Tree, leader_is_ours: bool) -> bool:
    try:
        if p.pid == os.getpid() or p.status() == psutil.STATUS_ZOMBIE:
            return False
        if p.create_time() < tree.started - 1.0:           # older than the server: a reused pid or a stranger
            return False
        if leader_is_ours and (os.getpgid(p.pid) == tree.leader or os.getsid(p.pid) == tree.leader):
            return True
        return p.environ().get(MARKER) == tree.token
    except (psutil.Error, OSError):
        return False


def _leader_is_ours(tree: Tree) -> bool:
    """May pgid/sid == leader be trusted? Yes while no other process holds the leader's pid."""
    try:
        return abs(psutil.Process(tree.leader).create_time() - tree.started) < 1.0
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def members(tree: Tree) -> list[psutil.Process]:
    """Every live process of the server (zombies left out), found by any of the three marks
    (the cgroup's own list first)."""
    leader_ok = _leader_is_ours(tree)
    found: dict[int, psutil.Process] = {}
    for pid in cgroup_pids(tree.cgroup):
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE and p.create_time() >= tree.started - 1.0:
                found[pid] = p
        except psutil.Error:
            continue
    for p in psutil.process_iter():
        if p.pid not in found and _ours(p, tree, leader_ok):
            found[p.pid] = p
    return sorted(found.values(), key=lambda p: p.pid)


def outside_group(tree: Tree, procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those that left the leader's process group (killpg does not reach them)."""
    out = []
    for p in procs:
        try:
            if os.getpgid(p.pid) != tree.leader:
                out.append(p)
        except OSError:
            continue
    return out


def signal_all(tree: Tree, sig: int, procs: list[psutil.Process] | None = None) -> None:
    """``sig`` to the leader's group and to every member outside it; SIGKILL also via the cgroup."""
    if _leader_is_ours(tree):
        try:
            os.killpg(tree.leader, sig)
        except OSError:
            pass
    for p in outside_group(tree, members(tree) if procs is None else procs):
        try:
            p.send_signal(sig)
        except psutil.Error:
            continue
    if sig == signal.SIGKILL:
        kill_cgroup(tree.cgroup)


def describe(procs: list[psutil.Process]) -> tuple[str, ...]:
    """'pid 1234 (python3)' for each process, for a report of what was ended."""
    out = []
    for p in procs:
        try:
            name = p.name()
        except psutil.Error:
            name = "?"
        out.append(f"pid {p.pid} ({name})")
    return tuple(out)


def wait_gone(tree: Tree, timeout_s: float, leader=None) -> bool:
    """Poll until no member is left (and a Popen leader is reaped); True when all are gone."""
    end = time.monotonic() + timeout_s
    while True:
        if leader is not None:
            leader.poll()
        if (leader is None or leader.returncode is not None) and not members(tree):
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.1)

"""Pidfiles of servers the advisor started, so the next start can find and stop leftovers.

One JSON file per server (``PORT-PID.json``) under the user data dir: a new server on the port of
a leftover must not overwrite the leftover's record, or the leftover could never be found again. A
record counts as a leftover only while a process of its tree is alive (launchers/process_tree.py:
its cgroup, its environment marker, or its process group and session, none older than the
recorded start time). The record also names the advisor that owns the server: when that advisor
is gone and so is the server's leader, whatever is left is an orphan the next start ends. A
record of another host (a shared home folder) or of an earlier boot never names a process here.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from launchers import process_tree


def run_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("nvfp4-advisor")) / "servers"


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    pgid: int
    port: int
    engine: str
    started: float              # psutil create_time of the leader
    command_line: str           # redacted
    log: str
    path: str = ""
    token: str = ""             # the environment marker's value (records written before it: "")
    cgroup: str = ""            # the server's cgroup v2 directory, "" when none
    owner_pid: int = 0          # the advisor that started it (0: unknown, an older record)
    owner_started: float = 0.0
    host: str = ""              # where it ran: pids mean nothing on another host (a shared home)
    boot: str = ""              # ... or after a reboot ("": an older record)

    @property
    def tree(self) -> process_tree.Tree:
        return process_tree.Tree(self.token or f"pgid-{self.pgid}", self.pgid, self.started, self.cgroup)


def write(rec: ServerRecord, directory: Path | None = None) -> Path:
    d = directory or run_dir()
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{rec.port}-{rec.pid}.json"
    data = {k: v for k, v in rec.__dict__.items() if k != "path"}
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, p)
    return p


def remove(port: int, directory: Path | None = None, pid: int | None = None) -> None:
    """Delete the record of the server ``pid`` on ``port`` (every record of the port when pid is None)."""
    d = directory or run_dir()
    paths = [d / f"{port}-{pid}.json"] if pid is not None else list(d.glob(f"{port}-*.json"))
    for p in paths + [d / f"{port}.json"]:          # PORT.json: the layout before PORT-PID.json
        try:
            if p.name == f"{port}.json" and pid is not None and json.loads(p.read_text()).get("pid") != pid:
                continue
            p.unlink()
        except (OSError, ValueError):
            pass


def remove_record(rec: "ServerRecord") -> None:
    """Delete exactly the file ``rec`` was read from."""
    if rec.path:
        Path(rec.path).unlink(missing_ok=True)
    else:
        remove(rec.port, pid=rec.pid)


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if os.getpgid(proc.pid) == pgid:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out


def _running(pid: int, started: float) -> bool:
    """The process ``pid`` that started at ``started`` is alive (not a zombie, not a reused pid)."""
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - started) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def leader_alive(rec: ServerRecord) -> bool:
    return _running(rec.pid, rec.started)


def owner_alive(rec: ServerRecord) -> bool:
    """The advisor that started the server still runs (it will stop the server itself)."""
    return rec.owner_pid > 0 and _running(rec.owner_pid, rec.owner_started)


def alive(rec: ServerRecord) -> bool:
    return leader_alive(rec) or (rec.pgid > 1 and bool(process_tree.members(rec.tree)))


def this_boot() -> tuple[str, str]:
    """(host name, boot id): a record from elsewhere or before a reboot names pids that are not its."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return socket.gethostname(), boot


def records(directory: Path | None = None) -> list[ServerRecord]:
    """Every readable record of this host and boot. Unreadable ones and those of an earlier boot
    are deleted; another host's (a home folder shared over the network) are left to that host."""
    d = directory or run_dir()
    out: list[ServerRecord] = []
    if not d.is_dir():
        return out
    host, boot = this_boot()
    for p in sorted(d.glob("*.json")):
        try:
            data = json.loads(p.read_text())
            rec = ServerRecord(**data, path=str(p))
        except (OSError, ValueError, TypeError):
            p.unlink(missing_ok=True)
            continue
        if rec.host and rec.host != host:
            continue
        if rec.boot and boot and rec.boot != boot:
            p.unlink(missing_ok=True)
            continue
        out.append(rec)
    return out


def leftovers(directory: Path | None = None) -> list[ServerRecord]:
    """Records whose server is still running; stale records are deleted (with their empty cgroup)."""
    out = []
    for rec in records(directory):
        if alive(rec):
            out.append(rec)
        else:
            process_tree.remove_cgroup(rec.cgroup)
            remove_record(rec)
    return out

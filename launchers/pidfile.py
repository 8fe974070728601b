"""Pidfiles of servers the advisor started, so the next start can find and stop leftovers.

One JSON file per server (``PORT-PID.json``) under the user data dir: a new server on the port of
a leftover must not overwrite the leftover's record, or the leftover could never be found again. A
record counts as a leftover only while a process with the recorded pid AND start time is alive, or
any process is still in its process group.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import psutil


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


def alive(rec: ServerRecord) -> bool:
    try:
        p = psutil.Process(rec.pid)
        if abs(p.create_time() - rec.started) < 1.0 and p.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.Error:
        pass
    return bool(group_members(rec.pgid)) if rec.pgid > 1 else False


def leftovers(directory: Path | None = None) -> list[ServerRecord]:
    """Records whose server is still running; stale records are deleted."""
    d = directory or run_dir()
    out = []
    if not d.is_dir():
        return out
    for p in sorted(d.glob("*.json")):
        try:
            data = json.loads(p.read_text())
            rec = ServerRecord(**data, path=str(p))
        except (OSError, ValueError, TypeError):
            p.unlink(missing_ok=True)
            continue
        if alive(rec):
            out.append(rec)
        else:
            p.unlink(missing_ok=True)
    return out

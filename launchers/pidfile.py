"""Pidfiles of servers the advisor started, so the next start can find and stop leftovers.

One JSON file per port under the user data dir. A record counts as a leftover only while a process
with the recorded pid AND start time is alive, or any process is still in its process group.
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
    p = d / f"{rec.port}.json"
    data = {k: v for k, v in rec.__dict__.items() if k != "path"}
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, p)
    return p


def remove(port: int, directory: Path | None = None, pid: int | None = None) -> None:
    p = (directory or run_dir()) / f"{port}.json"
    try:
        if pid is not None and json.loads(p.read_text()).get("pid") != pid:
            return
        p.unlink()
    except (OSError, ValueError):
        pass


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

"""Paths and helpers shared by the reliability suites (importable: unique name): fake engines that
fight their supervisor, and the count of what they leave behind."""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FAKE_ENGINE = HERE / "reliability_fake_engine.py"
sys.path.insert(0, str(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose command line carries ``tag``: what a stop left behind."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and tag in " ".join(p.info["cmdline"] or ()):
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def fake_command(mode: str, engine: str = "vllm", port: int | None = None, tag: str | None = None):
    from launchers.command import LaunchCommand
    from launchers.settings import ServeSettings

    s = ServeSettings(engine=engine, model="/fake", port=port or free_port())
    tag = tag or f"nvfp4-test-{uuid.uuid4().hex[:12]}"
    argv = (sys.executable, str(FAKE_ENGINE), mode, str(s.port), tag)
    return LaunchCommand(settings=s, version=None, version_note=None, argv=argv), tag


def cgroups_available() -> bool:
    from launchers import process_tree

    return process_tree.cgroup_parent() is not None

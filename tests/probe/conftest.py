"""Probe fixtures: recorded NVML snapshots replayed in place of the pynvml module."""

from __future__ import annotations

import sys

import pytest
from probe_fixtures import load_snapshot


@pytest.fixture
def install_nvml(monkeypatch):
    """Replace ``pynvml`` (what `import pynvml` returns) with a replay of a snapshot.

    The probe then runs its real code path: lazy import, nvmlInit, every query, shutdown.
    Process names come from the snapshot instead of psutil (the pids are not on this machine).
    """
    from advisor.probe import nvml_source
    from advisor.probe.snapshot import ReplayNvml, replay_process_name

    def install(name: str) -> ReplayNvml:
        snap = load_snapshot(name)
        fake = ReplayNvml(snap)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        monkeypatch.setattr(nvml_source, "default_process_name", replay_process_name(snap))
        return fake

    return install


@pytest.fixture
def probe_snapshot():
    """Raw snapshot -> (ProbeResult, replay) without touching sys.modules."""
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import read_snapshot
    from advisor.probe.snapshot import ReplayNvml, replay_process_name

    def run(name: str, own_pid: int = 1):
        snap = load_snapshot(name)
        fake = ReplayNvml(snap)
        raw = read_snapshot(fake, process_name=replay_process_name(snap), own_pid=own_pid)
        return build_result(raw), fake

    return run

"""Fixtures of the reliability suites; the helpers live in reliability_support.py (a unique name)."""

from __future__ import annotations

import psutil
import pytest

from reliability_support import cgroups_available, tagged  # noqa: F401 - also puts this folder on sys.path


@pytest.fixture(params=["cgroup", "scan"])
def tracking(request) -> bool:
    """Both ways of finding a server's processes: its own cgroup v2 (where this machine allows one)
    and the process scan every machine has."""
    if request.param == "cgroup" and not cgroups_available():
        pytest.skip("no writable cgroup v2 here: the process scan is the only tracking")
    return request.param == "cgroup"


@pytest.fixture
def cleanup():
    """Tags to kill at the end whatever the test did (a failing test must not leave orphans)."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        for pid in tagged(tag):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass

"""A hub id the hub cannot answer fails fast with one line that says why, through the real
huggingface_hub client: a closed port on 127.0.0.1 (refused), a server that accepts and never
answers (silent), HF_HUB_OFFLINE=1 (no request at all), and a cached repository whose hub went away
(configs from the cache). huggingface_hub alone retries such requests for ~23 s; the bounds below
are behaviour bounds (seconds, not a benchmark)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from ckpt_builders import LLAMA_CONFIG, llama_tensors, write_checkpoint
from test_checkpoint_hub_server import _inspect, hub_server  # noqa: F401 - the fake hub fixture

pytestmark = [pytest.mark.server, pytest.mark.timeout(120)]

BOUND_S = 10.0


@pytest.fixture
def closed_endpoint():
    """An endpoint on 127.0.0.1 where nothing listens: connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def silent_endpoint():
    """An endpoint on 127.0.0.1 whose kernel accepts connections that nobody ever reads or answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield f"http://127.0.0.1:{s.getsockname()[1]}", s
    s.close()


def _timed(args, endpoint, hf_home, offline=False):
    t0 = time.monotonic()
    proc = _inspect(args, endpoint, hf_home, offline=offline)
    return proc, time.monotonic() - t0


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr           # no retry chatter, no traceback
    return lines[0]


def test_refused_connection_fails_fast(tmp_path, closed_endpoint):
    proc, elapsed = _timed(["some-org/typo-model"], closed_endpoint, tmp_path / "hf")
    assert proc.returncode == 3
    line = _one_line(proc)
    assert line.startswith("nvfp4-advisor: error: some-org/typo-model: ")
    assert "hub unreachable" in line and "refused" in line and closed_endpoint in line
    assert elapsed < BOUND_S, elapsed


def test_silent_server_fails_fast(tmp_path, silent_endpoint):
    endpoint, _ = silent_endpoint
    proc, elapsed = _timed(["some-org/typo-model"], endpoint, tmp_path / "hf")
    assert proc.returncode == 3
    line = _one_line(proc)
    assert "hub unreachable" in line and "did not answer" in line and endpoint in line
    assert elapsed < BOUND_S, elapsed


def test_offline_mode_is_immediate_and_says_so(tmp_path, silent_endpoint):
    endpoint, listener = silent_endpoint
    proc, elapsed = _timed(["some-org/typo-model"], endpoint, tmp_path / "hf", offline=True)
    assert proc.returncode == 3
    line = _one_line(proc)
    assert "HF_HUB_OFFLINE=1 is set" in line and "not in the local cache" in line
    assert elapsed < BOUND_S, elapsed
    listener.settimeout(0.2)
    with pytest.raises(socket.timeout):          # not even a connection was attempted
        listener.accept()


def test_cached_repository_survives_an_unreachable_hub(tmp_path, hub_server, closed_endpoint):  # noqa: F811
    endpoint, hub = hub_server
    hub.repos["org/tiny"] = write_checkpoint(tmp_path / "repo", llama_tensors("bf16"), LLAMA_CONFIG)
    proc = _inspect(["org/tiny", "--json"], endpoint, tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["checkpoint"]["totals"]["sizes_from"] == "headers"

    # the hub goes away: the cached configs answer at once, headers are said to be unavailable and why
    proc, elapsed = _timed(["org/tiny", "--json"], closed_endpoint, tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["checkpoint"]
    assert got["label"] == "BF16" and got["totals"]["sizes_from"] == "config"
    notes = [f["message"] for f in got["findings"] if f["code"] == "no-weights"]
    assert notes and "refused" in notes[0] and "cache" in notes[0], got["findings"]
    assert elapsed < BOUND_S, elapsed

    # a repository the (reachable) hub does not have is told apart from an unreachable hub
    proc, elapsed = _timed(["org/typo"], endpoint, tmp_path / "hf")
    assert proc.returncode == 3
    line = _one_line(proc)
    assert "repository not found" in line and "unreachable" not in line
    assert elapsed < BOUND_S, elapsed

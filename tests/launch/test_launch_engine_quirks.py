"""Engine readiness quirks read from the registry (advisor.engines): FastLLM's startup.ready event counts as
ready before its HTTP answers, and its exit status 0 before serving is a failure."""

from __future__ import annotations

import sys

import pytest

from launch_support import free_port
from launchers.command import LaunchCommand
from launchers.settings import ServeSettings
from launchers.signatures import FATAL, diagnose
from launchers.supervisor import Server, ServerFailed

pytestmark = pytest.mark.timeout(60)

# listens on the port but never answers HTTP, and prints FastLLM's ready event
_SILENT_LISTENER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "print('FTLLM_PROGRESS {\"type\":\"startup.ready\"}', flush=True)\n"
    "time.sleep(60)\n")


def _silent(engine: str) -> LaunchCommand:
    s = ServeSettings(engine=engine, model="/fake", port=free_port())
    return LaunchCommand(settings=s, version=None, version_note=None,
                         argv=(sys.executable, "-c", _SILENT_LISTENER, str(s.port)))


def test_the_ready_event_of_fastllm_counts_as_ready(tmp_path):
    with Server(_silent("fastllm"), log_path=tmp_path / "s.log", records_dir=tmp_path / "r") as srv:
        ready = srv.wait_ready(timeout_s=20, poll_s=0.1)
    assert not ready.probe.ok          # ready by the event, not by the HTTP probe


def test_the_same_event_does_not_make_another_engine_ready(tmp_path):
    with Server(_silent("vllm"), log_path=tmp_path / "s.log", records_dir=tmp_path / "r") as srv:
        with pytest.raises(ServerFailed, match="not ready after"):
            srv.wait_ready(timeout_s=2, poll_s=0.1)


def test_exit_status_zero_before_serving_is_a_failure_only_where_the_engine_exits_zero_on_errors():
    fastllm = [f for f in diagnose("fastllm", [], exit_code=0) if f.kind == FATAL]
    assert [f.cause for f in fastllm] == ["FastLLM exited with status 0 before serving"]
    vllm = [f for f in diagnose("vllm", [], exit_code=0) if f.kind == FATAL]
    assert [f.cause for f in vllm] == ["the server exited with status 0 before it was ready"]

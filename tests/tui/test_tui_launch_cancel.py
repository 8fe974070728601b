"""Stop or quit in the first instant of a launch (Ctrl+L, then Ctrl+X / Ctrl+Q before the supervisor
has the process): the launch is cancelled and no process of its group survives.

The engine is the scripted fake engine of tests/launch (a real process serving /health on
127.0.0.1). The supervisor's start is held at a gate until the key has been handled, so "before the
process exists" is a fact of the test, not a race it hopes to win."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from tests_tui_helpers import free_port_for_test
from textual.widgets import TextArea

from launchers import pidfile
from launchers.supervisor import Server

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]

FAKE_ENGINE = Path(__file__).resolve().parents[1] / "launch" / "launch_fake_engine.py"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


@pytest.fixture
def gated_start(monkeypatch):
    """Server.start waits for ``gate``; every server whose process was created is recorded (and
    stopped at teardown if a test left it running)."""
    gate = threading.Event()
    started: list[Server] = []
    real = Server.start

    def start(self):
        assert gate.wait(60), "the test never opened the gate"
        out = real(self)
        started.append(self)
        return out

    monkeypatch.setattr(Server, "start", start)
    yield gate, started
    gate.set()
    for s in started:
        s.stop(int_timeout_s=1, term_timeout_s=1, kill_timeout_s=1)


def _fake_engine_line(mode: str, port: int) -> str:
    return f"{sys.executable} {FAKE_ENGINE} {mode} {port} --port {port}"


async def _ready_to_launch(app, pilot, mode: str = "ready") -> int:
    await settle(app, pilot)
    assert app.analysis.checkpoint is not None, app.analysis.errors
    port = free_port_for_test()
    app.query_one("#launch-command", TextArea).text = _fake_engine_line(mode, port)
    return port


def _survivors(servers) -> list[int]:
    out = []
    for s in servers:
        out += [p.pid for p in pidfile.group_members(s.pid)]
        if psutil.pid_exists(s.pid) and psutil.Process(s.pid).status() != psutil.STATUS_ZOMBIE:
            out.append(s.pid)
    return out


def _state(app) -> str:
    return str(app.query_one("#launch-state").render())


async def test_stop_right_after_launch_cancels_it(make_app, tui_tiny_model, gated_start):
    gate, started = gated_start
    app = make_app(checkpoint=str(tui_tiny_model))
    async with app.run_test(size=(100, 30)) as pilot:
        await _ready_to_launch(app, pilot)
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("ctrl+x")            # the supervisor has no process yet
        await pilot.pause()
        assert "cancelling" in _state(app)
        gate.set()
        await settle(app, pilot)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "cancelled" not in _state(app):
            await pilot.pause(0.1)
        assert _state(app) == "launch cancelled"
        assert any("launch cancelled" in n.message for n in app._notifications)
        assert app.supervisor is None and app.is_running
        assert not app.query_one("#launch-start").disabled and app.query_one("#launch-stop").disabled
        # the process came into being after the stop and was taken down as soon as it existed
        assert len(started) == 1
        assert _survivors(started) == []
        # the tab works again: a second launch starts and is stopped the ordinary way
        port = free_port_for_test()
        app.query_one("#launch-command", TextArea).text = _fake_engine_line("ready", port)
        await pilot.press("ctrl+l")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "ready after" not in _state(app):
            await pilot.pause(0.2)
        assert "ready after" in _state(app) and app.supervisor is started[1]
        await pilot.press("ctrl+x")
        await settle(app, pilot)
        assert _state(app) == "stopped" and app.supervisor is None
        assert _survivors(started) == []


async def test_quit_right_after_launch_leaves_nothing_running(make_app, tui_tiny_model, gated_start):
    gate, started = gated_start
    app = make_app(checkpoint=str(tui_tiny_model))
    async with app.run_test(size=(100, 30)) as pilot:
        await _ready_to_launch(app, pilot)
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert "stopping the server, then quitting" in _state(app)
        gate.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and app.is_running:
            await pilot.pause(0.1)
        assert not app.is_running
    assert len(started) == 1
    assert _survivors(started) == []


async def test_stop_while_loading_says_stopped_not_failed(make_app, tui_tiny_model):
    """A server stopped while it loads ends as "stopped", not as an engine failure."""
    app = make_app(checkpoint=str(tui_tiny_model))
    async with app.run_test(size=(100, 30)) as pilot:
        await _ready_to_launch(app, pilot, mode="never_ready")
        await pilot.press("ctrl+l")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (app.supervisor is None or "loading" not in _state(app)):
            await pilot.pause(0.1)
        sup = app.supervisor
        assert sup is not None and "loading" in _state(app), _state(app)
        await pilot.press("ctrl+x")
        await settle(app, pilot)
        assert _state(app) == "stopped" and app.supervisor is None
        assert not any(n.severity == "error" for n in app._notifications), [n.message for n in app._notifications]
    assert _survivors([sup]) == []


def test_a_cancelled_launch_never_starts(monkeypatch):
    """Cancelled before the worker reaches the start: no process at all."""
    from advisor.services.launch import server
    from advisor.tui import actions

    calls = []
    monkeypatch.setattr(server, "start_server", lambda *a, **k: calls.append(a))
    launch = actions.Launch()
    assert launch.cancel() is None
    assert launch.start("anything", None) is None
    assert calls == [] and launch.settled.is_set() and launch.server is None
    t0 = time.monotonic()
    early = actions.Launch()
    early.cancel()
    early.wait_settled(30)                     # cancelled before its worker ran: nothing to wait for
    assert time.monotonic() - t0 < 5

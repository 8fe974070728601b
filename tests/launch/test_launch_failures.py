"""The supervisor against scripted fake engines: one per failure signature, plus stop escalation,
leftover pidfiles, parent-death cleanup and secret redaction in logs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from launch_support import FAKE_ENGINE, free_port
from launchers import pidfile
from launchers.command import LaunchCommand
from launchers.settings import ServeSettings
from launchers.supervisor import Server, ServerFailed, stop_leftover

pytestmark = pytest.mark.timeout(60)


def fake(mode: str, engine: str, port: int | None = None, api_key: str | None = None) -> LaunchCommand:
    s = ServeSettings(engine=engine, model="/fake", port=port or free_port(), api_key=api_key)
    argv = (sys.executable, str(FAKE_ENGINE), mode, str(s.port)) + (("--api-key", api_key) if api_key else ())
    return LaunchCommand(settings=s, version=None, version_note=None, argv=argv)


def server(cmd, tmp_path, **kw) -> Server:
    return Server(cmd, log_path=tmp_path / "server.log", records_dir=tmp_path / "records", **kw)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_oom_is_diagnosed(tmp_path):
    srv = server(fake("oom", "vllm"), tmp_path).start()
    with pytest.raises(ServerFailed) as exc:
        srv.wait_ready(30, poll_s=0.1)
    srv.stop()
    err = exc.value
    assert err.server_exit_code == 1
    assert err.findings[0].kind == "oom" and "CUDA out of memory" in err.findings[0].line
    assert "lower max batch" in err.findings[0].remedy
    assert "CUDA out of memory" in (tmp_path / "server.log").read_text()


def test_port_taken_after_load_is_diagnosed(tmp_path):
    port = free_port()
    srv = server(fake("port_after_load", "fastllm", port), tmp_path).start()
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", port))
    blocker.listen(1)        # a foreign listener: it accepts TCP but never answers HTTP
    try:
        with pytest.raises(ServerFailed) as exc:
            srv.wait_ready(30, poll_s=0.1)
    finally:
        blocker.close()
        srv.stop()
    assert exc.value.server_exit_code == 3
    assert exc.value.findings[0].kind == "port_in_use"
    assert "address already in use" in exc.value.findings[0].line


def test_port_in_use_before_start(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        cmd = fake("ready", "vllm", s.getsockname()[1])
        with pytest.raises(ServerFailed, match="already in use"):
            server(cmd, tmp_path).start()


def test_fastllm_error_with_exit_zero(tmp_path):
    srv = server(fake("fastllm_error", "fastllm"), tmp_path).start()
    with pytest.raises(ServerFailed) as exc:
        srv.wait_ready(30, poll_s=0.1)   # returns only because stdin is /dev/null (getchar gets EOF)
    srv.stop()
    assert exc.value.server_exit_code == 0
    f = exc.value.findings[0]
    assert f.kind == "fatal_error" and f.line.startswith("FastLLM Error:")


def test_never_ready_times_out_while_loading(tmp_path):
    phases = []
    srv = server(fake("never_ready", "llamacpp"), tmp_path).start()
    try:
        with pytest.raises(ServerFailed, match="not ready after 3 s") as exc:
            srv.wait_ready(3, poll_s=0.2, on_progress=lambda p: phases.append((p.phase, p.probe)))
    finally:
        res = srv.stop()
    assert ("loading", "/health 503") in phases
    assert exc.value.findings[0].kind == "not_ready" and exc.value.findings[0].cause == "the server never became ready"
    assert res.signal == "SIGINT" and gone(srv.pid)


def test_ignores_sigterm_escalates_to_sigkill_for_whole_group(tmp_path):
    srv = server(fake("ignore_term", "sglang"), tmp_path).start()
    ready = srv.wait_ready(30, poll_s=0.1)
    assert ready.probe.ok
    pids = [p.pid for p in srv.processes()]
    assert len(pids) >= 2                                  # the engine and its worker
    res = srv.stop(int_timeout_s=0.5, term_timeout_s=0.5, kill_timeout_s=5)
    assert res.signal == "SIGKILL" and res.survivors == ()
    assert all(gone(p) for p in pids)
    assert pidfile.leftovers(tmp_path / "records") == []


def test_leftover_found_and_stopped_by_next_start(tmp_path):
    cmd = fake("ready", "vllm")
    first = server(cmd, tmp_path).start()
    first.wait_ready(30, poll_s=0.1)
    # a new advisor process: it only has the pidfile
    (rec,) = pidfile.leftovers(tmp_path / "records")
    assert rec.pid == first.pid and rec.port == cmd.settings.port
    with pytest.raises(ServerFailed, match="nvfp4-advisor started earlier"):
        server(cmd, tmp_path).start()
    res = stop_leftover(rec)
    assert res.signal == "SIGINT" and gone(first.pid)
    assert pidfile.leftovers(tmp_path / "records") == []
    first.stop()


def test_new_server_on_a_leftovers_port_keeps_the_leftover_record(tmp_path):
    # The leader died (SIGKILL, like a parent-death kill) but its worker lives on in the group and
    # the port is free again: the next server on that port must not erase the leftover's record.
    port = free_port()
    old = server(fake("ignore_term", "sglang", port), tmp_path).start()
    old.wait_ready(30, poll_s=0.1)
    worker = [p.pid for p in old.processes() if p.pid != old.pid][0]
    old.proc.kill()
    old.proc.wait()
    new = server(fake("ready", "vllm", port), tmp_path).start()
    try:
        new.wait_ready(30, poll_s=0.1)
        assert {r.pid for r in pidfile.leftovers(tmp_path / "records")} == {old.pid, new.pid}
    finally:
        new.stop()
    (rec,) = pidfile.leftovers(tmp_path / "records")        # still findable after the new one stopped
    assert rec.pid == old.pid and not gone(worker)
    res = stop_leftover(rec, int_timeout_s=0.3, term_timeout_s=0.3, kill_timeout_s=5)
    assert res.signal == "SIGKILL" and gone(worker)
    assert pidfile.leftovers(tmp_path / "records") == []


CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from launchers.command import LaunchCommand
from launchers.settings import ServeSettings
from launchers.supervisor import Server
s = ServeSettings(engine="vllm", model="/fake", port={port})
cmd = LaunchCommand(settings=s, version=None, version_note=None,
                    argv=({exe!r}, {fake!r}, "ready", "{port}"))
srv = Server(cmd, log_path=Path({tmp!r}) / "c.log", records_dir=Path({tmp!r}) / "rec").start()
print(srv.pid, flush=True)
time.sleep(600)
"""


def test_server_dies_with_the_advisor(tmp_path):
    port = free_port()
    root = str(FAKE_ENGINE.parents[2])
    code = CHILD.format(root=root, port=port, exe=sys.executable, fake=str(FAKE_ENGINE), tmp=str(tmp_path))
    advisor = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True)
    engine_pid = int(advisor.stdout.readline())
    assert psutil.pid_exists(engine_pid)
    advisor.send_signal(signal.SIGKILL)      # no atexit, no cleanup: only the parent-death signal acts
    advisor.wait()
    deadline = time.monotonic() + 10
    while not gone(engine_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(engine_pid)


def test_api_key_never_in_display_or_logs(tmp_path):
    key = "sk-test-0123456789abcdef"
    seen = []
    cmd = fake("ready", "vllm", api_key=key)
    srv = server(cmd, tmp_path, on_line=seen.append).start()
    srv.wait_ready(30, poll_s=0.1)
    record = (tmp_path / "records" / f"{cmd.settings.port}-{srv.pid}.json").read_text()
    srv.stop()
    log = (tmp_path / "server.log").read_text()
    assert "args" in log and "***" in log          # the engine echoed its argv (vLLM does) ...
    assert key not in log                          # ... but the log file has it redacted
    assert seen and not any(key in line for line in seen)   # and so does the line stream
    assert key not in record                       # the pidfile stores the redacted command line
    assert key not in cmd.display() and key not in str(cmd.to_json())
    assert key not in repr(cmd.settings) and key not in str(cmd.settings.to_json())


def test_server_started_from_a_short_lived_thread_survives_it(tmp_path):
    # The TUI starts servers from worker threads that end; the parent-death signal is per thread.
    import threading

    box = {}
    t = threading.Thread(target=lambda: box.setdefault("srv", server(fake("ready", "vllm"), tmp_path).start()))
    t.start()
    t.join()
    srv = box["srv"]
    try:
        time.sleep(0.5)
        assert srv.wait_ready(30, poll_s=0.1).probe.ok and not gone(srv.pid)
    finally:
        srv.stop()

"""`nvfp4-advisor launch` as a user runs it, with a scripted fake engine standing in for `vllm` on
PATH: SIGTERM stops the server like Ctrl-C, and leftovers are reported before serving starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from launch_support import FAKE_ENGINE, as_in_a_terminal, free_port

pytestmark = pytest.mark.timeout(90)

SHIM = """#!/bin/sh
port=8000; prev=""
for a in "$@"; do [ "$prev" = "--port" ] && port=$a; prev=$a; done
exec {python} {fake} "${{FAKE_MODE:-ready}}" "$port" "$@"
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    """A `vllm` executable on PATH that runs the fake engine (mode from $FAKE_MODE)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(SHIM.format(python=sys.executable, fake=FAKE_ENGINE))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return exe


def start_cli(port: int, mode: str = "ready", model: str = "fake-org/fake-model") -> subprocess.Popen:
    # --engine-version: skip detection (`vllm --version` would run the shim)
    return subprocess.Popen([sys.executable, "-m", "advisor", "launch", model, "--engine", "vllm",
                             "--engine-version", "0.33.0", "--port", str(port), "--ready-timeout", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=dict(os.environ, FAKE_MODE=mode), preexec_fn=as_in_a_terminal)


def wait_serving(cli: subprocess.Popen) -> list[str]:
    lines, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline:
        line = cli.stderr.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("serving "):
            return lines
    raise AssertionError("never served:\n" + "".join(lines))


def engine_pids(port: int) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"])
            if str(FAKE_ENGINE) in " ".join(p.info["cmdline"] or ()) and str(port) in p.info["cmdline"]]


def records() -> list[str]:
    from launchers import pidfile

    d = pidfile.run_dir()
    return sorted(p.name for p in d.glob("*.json")) if d.is_dir() else []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_stops_the_server_like_ctrl_c(fake_vllm, sig):
    port = free_port()
    cli = start_cli(port)
    try:
        wait_serving(cli)
        (engine,) = engine_pids(port)
        assert records() == [f"{port}-{engine}.json"]
        cli.send_signal(sig)
        out, err = cli.communicate(timeout=40)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, err
    assert "stopped with  SIGINT" in out        # the graceful first step, not the parent-death SIGKILL
    assert engine_pids(port) == [] and records() == []


def test_server_of_a_background_advisor_still_stops_on_sigint(fake_vllm):
    """`nvfp4-advisor launch ... &` from a script (or under nohup) starts with SIGINT ignored; the server must
    not inherit that, or the graceful first step of the stop does nothing and only SIGTERM ends it."""
    port = free_port()
    cli = subprocess.Popen([sys.executable, "-m", "advisor", "launch", "fake-org/fake-model", "--engine", "vllm",
                            "--engine-version", "0.33.0", "--port", str(port), "--ready-timeout", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                           env=dict(os.environ, FAKE_MODE="ready"),
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_serving(cli)
        (engine,) = engine_pids(port)
        assert psutil.Process(engine).status() != psutil.STATUS_ZOMBIE
        cli.send_signal(signal.SIGTERM)
        out, err = cli.communicate(timeout=40)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, err
    assert "stopped with  SIGINT" in out
    assert engine_pids(port) == [] and records() == []


def test_leftover_is_reported_before_serving(fake_vllm):
    # a leftover: a worker of an earlier server whose leader (and advisor) died
    from launchers import pidfile
    from launchers.command import LaunchCommand
    from launchers.settings import ServeSettings
    from launchers.supervisor import Server, stop_leftover

    old_port = free_port()
    cmd = LaunchCommand(ServeSettings(engine="sglang", model="/fake", port=old_port), None, None,
                        (sys.executable, str(FAKE_ENGINE), "ignore_term", str(old_port)))
    old = Server(cmd, log_path=pidfile.run_dir().parent / "old.log").start()
    old.wait_ready(30, poll_s=0.1)
    old.proc.kill()
    old.proc.wait()
    port = free_port()
    cli = start_cli(port)
    try:
        lines = wait_serving(cli)
        warn = [ln for ln in lines if f"pid {old.pid}" in ln]
        assert warn and "--stop-leftovers" in warn[0]
        cli.send_signal(signal.SIGINT)
        cli.communicate(timeout=40)
    finally:
        if cli.poll() is None:
            cli.kill()
        for rec in pidfile.leftovers():
            stop_leftover(rec, int_timeout_s=0.2, term_timeout_s=0.2, kill_timeout_s=5)
    assert records() == []


def test_missing_local_checkpoint_is_bad_input_before_anything_starts(fake_vllm, tmp_path):
    port = free_port()
    cli = start_cli(port, model=str(tmp_path / "no-such-model"))
    out, err = cli.communicate(timeout=40)
    assert cli.returncode == 3 and "no such checkpoint" in err and "starting:" not in err
    assert engine_pids(port) == [] and records() == []


def test_launch_warns_up_front_when_explain_predicts_failure(fake_vllm, capsys):
    from pathlib import Path

    from advisor.cli import main

    # NVFP4 on a Turing card: SGLang refuses below sm_80; vLLM 0.33 runs the weights (FP4 Marlin from
    # sm_75) but not the FP8 KV the checkpoint declares, unless told --kv-cache-dtype fp16
    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3-8b-nvfp4"
    sglang = fake_vllm.parent / "sglang"
    sglang.symlink_to(fake_vllm)
    for engine, version, kv, predicted_failure in (("sglang", "0.5.23", "auto", True), ("vllm", "0.33.0", "auto", True),
                                                   ("vllm", "0.33.0", "fp16", False)):
        rc = main(["launch", str(demo), "--engine", engine, "--engine-version", version, "--gpu", "rtx-2080-ti",
                   "--kv-cache-dtype", kv, "--port", str(free_port()), "--check", "--ready-timeout", "30"])
        err = capsys.readouterr().err
        assert rc == 0
        warned = "warning: explain predicts this will not run" in err
        assert warned == predicted_failure, err
        if warned:
            assert err.index("explain predicts") < err.index("starting:")

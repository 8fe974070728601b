"""Fixtures for launch/bench tests: the tiny random Llama (built once per session, no hub), a real
`transformers serve` started through the supervisor, fake engines and a fake SSE server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import FAKE_ENGINE, HERE, MAIN_VENV_BIN, free_port, transformers_exe  # noqa: F401


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, str(HERE / "launch_make_tiny.py"), str(out)], check=True, env=env,
                   timeout=300, stdin=subprocess.DEVNULL, capture_output=True)
    assert (out / "model.safetensors").stat().st_size < 8_000_000
    return out


@pytest.fixture(scope="session")
def tiny_server(tiny_model, tmp_path_factory):
    """A real `transformers serve` on CPU, started and stopped by the supervisor (shared by tests)."""
    from launchers.engines import build_command
    from launchers.settings import ServeSettings
    from launchers.supervisor import Server

    exe = transformers_exe()
    if exe is None:
        pytest.skip("transformers serve is not installed")
    d = tmp_path_factory.mktemp("serve")
    s = ServeSettings(engine="transformers", model=str(tiny_model), port=free_port(), device="cpu")
    server = Server(build_command(s), log_path=d / "serve.log", records_dir=d / "records")
    server.start()
    try:
        ready = server.wait_ready(180)
    except Exception:
        server.stop()
        raise
    yield server, ready
    server.stop()

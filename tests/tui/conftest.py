"""TUI fixtures: a deterministic app (fake no-GPU probe, isolated state file) and the tiny model."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCH_TESTS = Path(__file__).resolve().parents[1] / "launch"


def no_gpu_probe():
    """The probe as it answers on a machine without an NVIDIA driver (real code path, no NVML)."""
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import RawSnapshot

    return build_result(RawSnapshot(status="no-driver", message="no NVIDIA driver found (test)",
                                    driver_version=None, cuda_driver_version=None, nvml_version=None,
                                    devices=(), pairs=()))


@pytest.fixture
def make_app(tmp_path):
    from advisor.tui import create_app

    def factory(**kw):
        kw.setdefault("state_file", tmp_path / "state.yaml")
        kw.setdefault("probe", no_gpu_probe)
        return create_app(**kw)

    return factory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def tui_tiny_model(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("tui-tiny") / "tiny-llama"
    subprocess.run([sys.executable, str(LAUNCH_TESTS / "launch_make_tiny.py"), str(out)], check=True,
                   env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=300, stdin=subprocess.DEVNULL,
                   capture_output=True)
    return out

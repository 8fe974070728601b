"""Paths and helpers shared by the launch tests (importable: unique name)."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAIN_VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
FAKE_ENGINE = HERE / "launch_fake_engine.py"
sys.path.insert(0, str(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def transformers_exe() -> Path | None:
    for cand in (MAIN_VENV_BIN / "transformers", Path(sys.executable).parent / "transformers"):
        if cand.exists():
            return cand
    return None


def as_in_a_terminal() -> None:
    """preexec_fn for an advisor a test sends Ctrl-C (SIGINT) to: a terminal's shell starts commands with
    SIGINT at its default, but pytest may run with it ignored (started with `&` from a script), and an
    ignored signal is inherited, so the advisor would never see the Ctrl-C the test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

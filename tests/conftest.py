"""Shared test fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path, tmp_path_factory, monkeypatch):
    """Never touch the real user's config/data dirs (saved profiles, calibration, state). The cache dir
    lies outside tmp_path: every command may store caches there on exit (advisor.code_cache), and tests
    that check a command left nothing behind list tmp_path."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield


def quant_python() -> str | None:
    """The interpreter of the oracle venv (llm-compressor + nvidia-modelopt), if set up."""
    p = os.environ.get("NVFP4_ADVISOR_QUANT_PYTHON") or str(ROOT / ".venv-quant" / "bin" / "python")
    return p if Path(p).exists() else None

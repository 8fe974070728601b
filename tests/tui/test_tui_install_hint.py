"""The install hint for torch + triton works where the advisor runs: from a clone (what `.ci/dev`
installs, editable) it names this clone and this interpreter, not the PyPI name, which would fetch
another copy of the advisor. The µbench tab and `microbench` both print it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from advisor.install_hint import install_extra, source_tree

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def test_hint_from_a_clone_names_the_clone_and_this_python():
    assert source_tree() == ROOT
    words = shlex.split(install_extra("kernels"))
    assert words == [sys.executable, "-m", "pip", "install", "-e", f"{ROOT}[kernels]"]
    assert "nvfp4-advisor[kernels]" not in install_extra("kernels")


def test_hint_from_a_wheel_names_the_package(monkeypatch):
    monkeypatch.setattr("advisor.install_hint.source_tree", lambda: None)
    assert shlex.split(install_extra("kernels"))[-1] == "nvfp4-advisor[kernels]"


async def test_microbench_tab_prints_the_working_hint(make_app, monkeypatch):
    monkeypatch.setattr("advisor.services.microbench.gpu_unavailable", lambda: "no CUDA GPU here (test)")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.action_show_tab("microbench")
        app.run_microbench()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = app.query_one("#microbench-view").text
    assert install_extra("kernels") in text and "pip install 'nvfp4-advisor[kernels]'" not in text

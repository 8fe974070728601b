"""Snapshot tests of the main screens at 80x24 (pytest-textual-snapshot; renderer stack pinned in
.ci/constraints-test.txt). Update with `pytest tests/tui --snapshot-update` after a deliberate change."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)


def _tab(name):
    async def run_before(pilot):
        app = pilot.app
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        app.action_show_tab(name)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("tab", ["hardware", "checkpoint", "explain", "cost", "launch", "export"])
def test_screen(tab, snap_compare, make_app):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_tab(tab))

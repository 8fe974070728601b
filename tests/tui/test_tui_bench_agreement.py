"""The Bench tab's reference URL: speed first, then output agreement with the reference server on
the bundled prompts (scripted SSE servers: both send the same tokens, so agreement is 100 %)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Input

from advisor.tui.docview import DocView

pytestmark = pytest.mark.timeout(300)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))


async def test_bench_tab_with_a_reference_url(make_app):
    from launch_fake_sse import FakeSSE

    cand, ref = FakeSSE(tokens=8, interval_s=0.001).start(), FakeSSE(tokens=8, interval_s=0.001).start()
    try:
        app = make_app()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            app.action_show_tab("bench")
            app.query_one("#bench-url", Input).value = cand.url
            app.query_one("#bench-reference", Input).value = ref.url
            app.run_bench()
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
            text = app.query_one("#bench-view", DocView).text
            assert "TTFT" in text and "Output agreement with the reference" in text
            assert "100.0% of greedy tokens agree" in text and "12/12 outputs identical" in text
            # every bundled prompt reached the reference server at temperature 0
            assert len(ref.bodies) == 12 and all(b["temperature"] == 0 for b in ref.bodies)
    finally:
        cand.stop()
        ref.stop()

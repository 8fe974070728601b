"""The Bench tab runs `bench`'s one set of defaults (launchers.bench.BenchConfig, the CLI's) and shows a
live ProgressBar: tokens done of the planned total, the phase, an ETA; it hides when the run ends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Input, Label, ProgressBar

from launchers import bench

pytestmark = pytest.mark.timeout(300)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))


async def test_bench_tab_uses_the_cli_defaults(make_app, monkeypatch):
    from advisor.doc import Doc
    from advisor.tui import actions

    seen = {}
    monkeypatch.setattr(actions, "bench_doc", lambda url, analysis, **kw: seen.update(kw) or Doc())
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.query_one("#bench-url", Input).value = "http://127.0.0.1:9"
        app.run_bench()
        await pilot.pause()
        await app.workers.wait_for_complete()
    assert seen["cfg"] == bench.BenchConfig()


async def test_bench_tab_shows_tokens_and_eta_while_it_runs(make_app, monkeypatch):
    from launch_fake_sse import FakeSSE

    from advisor.tui import actions

    srv = FakeSSE(tokens=6, interval_s=0.05, ttft_s=0.005).start()
    real = actions.bench_doc
    small = bench.BenchConfig(max_tokens=6, shots=1, concurrency=1, long_prompt_words=0)
    monkeypatch.setattr(actions, "bench_doc", lambda url, analysis, **kw: real(url, analysis, **{**kw, "cfg": small}))
    try:
        app = make_app()
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            app.action_show_tab("bench")
            app.query_one("#bench-url", Input).value = srv.url
            app.run_bench()
            seen = set()
            for _ in range(200):                      # sample the bar while the run goes on
                await pilot.pause(0.05)
                bar = app.query_one("#bench-progress")
                if bar.display:
                    seen.add((bar.query_one(ProgressBar).total, str(bar.query_one(Label).render())))
                if not app.workers._workers or all(w.is_finished for w in app.workers):
                    break
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert not app.query_one("#bench-progress").display          # hidden once done
            assert "TTFT" in app.query_one("#bench-view").text
        assert any(total == small.planned_tokens for total, _ in seen), seen
        assert any(f"/{small.planned_tokens} tok — single stream" in text for _, text in seen), seen
    finally:
        srv.stop()

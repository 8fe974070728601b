"""Pilot-driven flows through the TUI, asserting on app state and what each tab shows."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input, OptionList, Select, TextArea

from advisor import views
from advisor.analysis import Selection, analyze
from advisor.kernel_path.rules import available_versions
from advisor.tui.docview import DocView
from advisor.user_state import load_state

pytestmark = pytest.mark.timeout(300)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_no_gpu_demo_answer_on_first_paint(make_app):
    """No GPU, no checkpoint: a full answer on a bundled demo, with the what-if GPU named."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        hw = app.query_one("#hardware-view", DocView).text
        assert "No GPU here" in hw and "what-if" in hw
        assert app.analysis is not None and app.analysis.ok, app.analysis.errors
        assert app.state.checkpoint == f"demo:{views.demo_names()[0]}"
        # The Explain tab shows exactly what the core says for this selection.
        expected = views.explain_doc(analyze(app.analysis.selection))
        assert app.query_one("#explain-view", DocView).doc == expected


async def test_pick_gpu_load_demo_explain_plan_export(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.query_one("#gpu-select", Select).value = "rtx-5090"
        await settle(app, pilot)
        app.action_show_tab("checkpoint")
        await pilot.pause()
        demos = app.query_one("#demo-list", OptionList)
        target = "qwen3-30b-a3b-nvfp4"
        demos.highlighted = [o.id for o in demos._options].index(f"demo:{target}")
        demos.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        a = app.analysis
        newest_vllm = available_versions("vllm")[-1]
        assert a.selection == Selection(f"demo:{target}", "rtx-5090", 1, "vllm", newest_vllm, "interactive")
        assert a.checkpoint.arch.moe is not None
        ref = analyze(a.selection)
        assert app.query_one("#checkpoint-view", DocView).doc == views.checkpoint_doc(ref)
        explain_text = app.query_one("#explain-view", DocView).text
        for d in ref.explanation.decisions:
            if d.kernel:
                assert d.kernel in explain_text
        cost = app.query_one("#cost-view", DocView)
        assert any(type(b).__name__ == "Chart" for b in cost.doc.blocks)
        assert f"{ref.plan.to_json()['predictions']['decode_tok_s']:,.1f}" in cost.text
        # Export a Markdown report of what is on screen.
        out = tmp_path / "report.md"
        app.query_one("#export-path", Input).value = str(out)
        app.action_show_tab("export")
        app.export_report()
        await settle(app, pilot)
        text = out.read_text()
        assert target in text and "rtx-5090" in text.lower().replace(" ", "-") or "RTX 5090" in text
        assert app.last_report == out
    # State is remembered for the next start.
    st = load_state(tmp_path / "state.yaml")
    assert st.gpu_id == "rtx-5090" and st.checkpoint == f"demo:{target}"


async def test_engine_and_workload_change_reanalyse(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        sglang = next(v for _, v in views.engine_choices() if v.startswith("sglang@"))
        app.query_one("#engine-select", Select).value = sglang
        await settle(app, pilot)
        assert app.analysis.explanation.engine == "sglang"
        assert app.analysis.explanation.engine_version == sglang.split("@")[1]
        app.query_one("#workload-select", Select).value = "batch"
        await settle(app, pilot)
        assert app.analysis.selection.workload == "batch"
        assert app.analysis.plan.workload.name == "batch"


async def test_bad_path_shows_inspect_error_in_place(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("checkpoint")
        bad = tmp_path / "missing-model"
        inp = app.query_one("#checkpoint-input", Input)
        inp.value = str(bad)
        inp.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        assert "inspect" in app.analysis.errors
        shown = app.query_one("#checkpoint-view", DocView).text
        assert str(bad) in shown and "failed" in shown
        assert app.is_running
        # A notification carried the same one-line cause.
        assert any(str(bad) in n.message for n in app._notifications)


async def test_microbench_without_gpu_explains_why(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("microbench")
        app.run_microbench()
        await settle(app, pilot)
        text = app.query_one("#microbench-view", DocView).text
        assert text.startswith("No microbenchmarks:")


async def test_theme_toggle_is_remembered(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        before = app.theme
        await pilot.press("ctrl+t")
        assert app.theme != before
    assert load_state(tmp_path / "state.yaml").theme == app.theme


async def test_command_palette_lists_actions(make_app):
    from advisor.tui.commands import AdvisorCommands

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        provider = AdvisorCommands(app.screen)
        titles = [t for t, _, _ in provider._commands()]
        for needed in ("Launch server", "Stop server", "Run benchmark", "Run microbenchmarks",
                       "Export report as html"):
            assert needed in titles
        assert any(t.startswith("Load demo") for t in titles)


@pytest.mark.server
async def test_launch_tiny_real_server_and_stop(make_app, tui_tiny_model):
    """Launch `transformers serve` from the Launch tab (edited command: free port), see it become
    ready, benchmark it, stop it, and leave no process behind."""
    import psutil

    from tests_tui_helpers import free_port_for_test

    app = make_app(checkpoint=str(tui_tiny_model))
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.analysis.checkpoint is not None, app.analysis.errors
        app.action_show_tab("launch")
        app.query_one("#launch-engine", Select).value = "transformers"
        await pilot.pause()
        area = app.query_one("#launch-command", TextArea)
        assert "transformers serve" in area.text and "--device cpu" in area.text
        port = free_port_for_test()
        area.text = area.text.replace("--port 8000", f"--port {port}")
        app.launch_server()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (app.supervisor is None or "ready" not in str(
                app.query_one("#launch-state").render())):
            await pilot.pause(0.5)
        state = str(app.query_one("#launch-state").render())
        assert "ready after" in state, state
        sup = app.supervisor
        pids = [p.pid for p in sup.processes()]
        assert pids
        app.query_one("#bench-url", Input).value = f"http://127.0.0.1:{port}"
        app.run_bench()
        await settle(app, pilot)
        bench = app.query_one("#bench-view", DocView).text
        assert "TTFT" in bench or "ttft" in bench.lower()
        app.stop_server()
        await settle(app, pilot)
        assert app.supervisor is None
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

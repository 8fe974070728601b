"""Pilot-driven flows through the TUI, asserting on app state and what each tab shows."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input, OptionList, Select, TextArea

from advisor.kernel_path.rule_versions import available_versions
from advisor.services import views
from advisor.services.analysis import Selection, analyze
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
                       "Export report as html", "Save launch profile", "Workload: batch"):
            assert needed in titles
        assert any(t.startswith("Load demo") for t in titles)
        # Picking a GPU from the palette re-plans for it.
        callback = next(cb for t, cb, _ in provider._commands() if t.startswith("GPU: ") and "5090" in t)
        callback()
        await settle(app, pilot)
        assert app.state.gpu_id == "rtx-5090" and app.analysis.selection.gpu_id == "rtx-5090"


@pytest.mark.server
@pytest.mark.timeout(600)          # a CPU server's start-up alone can take minutes on a loaded 2-core runner
async def test_launch_tiny_real_server_and_stop(make_app, tui_tiny_model, monkeypatch):
    """Launch `transformers serve` from the Launch tab (edited command: free port), see it become
    ready, benchmark it, stop it, and leave no process behind."""
    import psutil
    from tests_tui_helpers import free_port_for_test

    from advisor.tui import actions
    from launchers.bench import BenchConfig

    # bench's defaults (512 tokens x 3 shots x 3 kinds, 4 streams, 3,000 words) take minutes on a CPU
    # server; the path from the tab to the server is what this checks (the defaults: test_tui_bench_progress)
    real, small = actions.bench_doc, BenchConfig(max_tokens=8, shots=1, concurrency=2, long_prompt_words=0)
    monkeypatch.setattr(actions, "bench_doc", lambda url, analysis, **kw: real(url, analysis, **{**kw, "cfg": small}))
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
        # A CPU transformers server is measured, not judged against the vllm plan.
        assert "Not judged" in bench and "→ below" not in bench
        assert str(app.query_one("#status").render()) == app._summary
        # Ctrl+X stops it even from the command TextArea (whose own ctrl+x is cut).
        app.action_show_tab("launch")
        await pilot.pause()
        area.focus()
        await pilot.pause()
        before = area.text
        await pilot.press("ctrl+x")
        await settle(app, pilot)
        assert app.supervisor is None and area.text == before
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_function_keys_switch_tabs_from_inside_a_pane(make_app):
    """F-keys work wherever the focus is: a focused control of the old pane used to pull the tab back,
    and the command TextArea swallowed F6/F7 (its select-line / select-all keys)."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        tabs = app.query_one("#tabs")
        app.query_one("#gpu-select", Select).focus()
        await pilot.pause()
        await pilot.press("f3")
        await pilot.pause()
        assert tabs.active == "checkpoint"
        app.action_show_tab("launch")
        await pilot.pause()
        app.query_one("#launch-command", TextArea).focus()
        await pilot.pause()
        await pilot.press("f7")
        await pilot.pause()
        assert tabs.active == "bench"
        await pilot.press("f6")
        await pilot.pause()
        assert tabs.active == "launch"
        # No server: ctrl+x is the inputs' cut again (nothing stops, the tab stays).
        inp = app.query_one("#profile-name", Input)
        inp.value = "abc"
        inp.focus()
        await pilot.pause()
        await pilot.press("ctrl+a", "shift+end", "ctrl+x")     # select all, cut
        await pilot.pause()
        assert inp.value == "" and tabs.active == "launch" and app.is_running


async def test_export_to_missing_folder_is_an_error_not_a_crash(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("export")
        await pilot.pause()
        path = app.query_one("#export-path", Input)
        target = tmp_path / "no-such-dir" / "report.md"
        path.value = str(target)
        path.focus()
        await pilot.press("enter")                  # Enter in the path field exports
        await settle(app, pilot)
        assert app.is_running and not target.exists() and app.last_report is None
        assert "does not exist" in app.query_one("#export-view", DocView).text
        assert any("does not exist" in n.message for n in app._notifications)
        ok = tmp_path / "report.html"
        app.query_one("#export-format", Select).value = "html"
        await pilot.pause()
        path.value = str(ok)
        path.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.last_report == ok and ok.read_text().lstrip().lower().startswith("<!doctype html")


async def test_saved_profile_keeps_edits_and_reloads_with_its_engine(make_app):
    """Save an edited command (port, an added flag and variable), switch engine, pick the profile:
    the profile's engine and exact command come back (the engine switch must not regenerate it)."""
    from launchers import profiles

    app = make_app(engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("launch")
        await pilot.pause()
        area = app.query_one("#launch-command", TextArea)
        assert "--port 8000" in area.text
        area.text = "VLLM_LOGGING_LEVEL=DEBUG " + area.text.replace("--port 8000", "--port 18555") + " --enforce-eager"
        name = app.query_one("#profile-name", Input)
        name.value = "edited"
        name.focus()
        await pilot.press("enter")                  # Enter in the name field saves
        await settle(app, pilot)
        settings, _ = profiles.load("edited")
        assert settings.engine == "vllm" and settings.port == 18555
        assert settings.extra_args == ("--enforce-eager",)
        assert settings.extra_env == (("VLLM_LOGGING_LEVEL", "DEBUG"),)
        app.query_one("#launch-engine", Select).value = "sglang"
        await settle(app, pilot)
        assert "sglang" in area.text
        app.query_one("#profile-select", Select).value = "edited"
        await settle(app, pilot)
        assert app.launch_engine == "vllm"
        assert "--port 18555" in area.text and "--enforce-eager" in area.text
        assert "VLLM_LOGGING_LEVEL=DEBUG" in area.text


async def test_launch_engine_follows_the_explained_engine(make_app):
    app = make_app(engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        sglang = next(v for _, v in views.engine_choices() if v.startswith("sglang@"))
        app.query_one("#engine-select", Select).value = sglang
        await settle(app, pilot)
        assert app.launch_engine == "sglang"
        assert app.query_one("#launch-command", TextArea).text.startswith("sglang ")


async def test_gpu_count_field_shows_the_count_in_use(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        count = app.query_one("#gpu-count", Input)
        count.value = ""
        count.focus()
        await pilot.press("enter")
        await settle(app, pilot)
        assert count.value == "1" and app.state.gpus == 1
        count.value = "4"
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.state.gpus == 4 and app.analysis.selection.gpus == 4


async def test_recent_items_are_checkpoints_that_inspect(make_app, tmp_path, tui_tiny_model):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        bad = str(tmp_path / "missing-model")
        app.action_load_checkpoint(bad)
        await settle(app, pilot)
        assert "inspect" in app.analysis.errors and bad not in app.state.recent
        app.action_load_checkpoint(str(tui_tiny_model))
        await settle(app, pilot)
        assert app.analysis.checkpoint is not None
        assert app.state.recent[0] == str(tui_tiny_model) and bad not in app.state.recent
        ids = [o.id for o in app.query_one("#demo-list", OptionList)._options]
        assert f"recent:{tui_tiny_model}" in ids and f"recent:{bad}" not in ids
    st = load_state(tmp_path / "state.yaml")
    assert st.checkpoint == str(tui_tiny_model) and st.recent[0] == str(tui_tiny_model)


@pytest.mark.server
async def test_quit_with_a_running_server_stops_it_first(make_app, tui_tiny_model):
    import psutil
    from tests_tui_helpers import free_port_for_test

    app = make_app(checkpoint=str(tui_tiny_model))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.query_one("#launch-engine", Select).value = "transformers"
        await pilot.pause()
        area = app.query_one("#launch-command", TextArea)
        area.text = area.text.replace("--port 8000", f"--port {free_port_for_test()}")
        await pilot.press("ctrl+l")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and "ready" not in str(app.query_one("#launch-state").render()):
            await pilot.pause(0.5)
        pids = [p.pid for p in app.supervisor.processes()]
        assert pids
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert "stopping" in str(app.query_one("#launch-state").render())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and app.is_running:
            await pilot.pause(0.2)
        assert app.supervisor is None
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_views_do_not_show_the_previous_checkpoint_while_loading(make_app):
    """A hub fetch can take seconds: until it answers, the tabs say what is loading."""
    import threading

    release = threading.Event()
    from advisor.tui import app as app_module

    real = app_module.analyze

    def slow_analyze(sel):
        release.wait(30)
        return real(sel)

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app_module.analyze = slow_analyze
        try:
            app.action_load_checkpoint("demo:llama-3.1-8b-gptq-int4")
            await pilot.pause()
            for view in ("#checkpoint-view", "#explain-view", "#cost-view"):
                assert app.query_one(view, DocView).text == "loading demo:llama-3.1-8b-gptq-int4…"
        finally:
            release.set()
            app_module.analyze = real
        await settle(app, pilot)
        assert "llama-3.1-8b-gptq-int4" in app.query_one("#checkpoint-view", DocView).text

"""Palette actions land where their result shows and write what they say; a quit while the GPU probe
still runs ends cleanly; the demo's launch step says what to replace, with the command `launch
--dry-run` prints for the same GPU (one command, one answer)."""

from __future__ import annotations

import json
import time

import pytest
from tests_tui_helpers import no_gpu_probe_result as no_gpu_probe
from textual.widgets import Input, Static, TextArea

from advisor.tui import actions
from advisor.tui.app import AdvisorApp

pytestmark = pytest.mark.timeout(300)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def palette(pilot, title: str) -> None:
    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*title)
    await pilot.pause(0.3)
    await pilot.press("enter")


@pytest.mark.parametrize("fmt", ["html", "json"])
async def test_palette_export_writes_the_format_it_names(make_app, tmp_path, fmt):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.query_one("#export-path", Input).value = str(tmp_path / "report.md")
        await pilot.pause()
        await palette(pilot, f"Export report as {fmt}")
        await settle(app, pilot)
        assert app.query_one("#tabs").active == "export"
        assert app.last_report == tmp_path / f"report.{fmt}"
    assert not (tmp_path / "report.md").exists()          # the race wrote HTML/JSON into the .md name
    text = (tmp_path / f"report.{fmt}").read_text()
    if fmt == "html":
        assert text.startswith("<!DOCTYPE html>")
    else:
        assert json.loads(text)["kind"] == "report"


@pytest.mark.parametrize("title,tab", [("Run benchmark", "bench"), ("Run microbenchmarks", "microbench"),
                                       ("Stop server", "launch"), ("Re-probe GPUs", "hardware")])
async def test_palette_actions_show_their_tab(make_app, title, tab):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("cost" if tab != "cost" else "explain")
        await pilot.pause()
        await palette(pilot, title)
        await settle(app, pilot)
        assert app.query_one("#tabs").active == tab


async def test_quit_while_the_probe_runs_touches_no_widget(make_app, monkeypatch):
    """The probe (or an analysis) finishing while Ctrl+Q tears the screen down: its result is
    dropped, not written into widgets that are gone (that printed a NoMatches traceback)."""
    raised, called = [], []
    done = AdvisorApp._probe_done

    def spy(self, result):
        called.append(True)
        try:
            return done(self, result)
        except Exception as err:            # noqa: BLE001 - what the app would have died of
            raised.append(err)
            raise

    monkeypatch.setattr(AdvisorApp, "_probe_done", spy)
    box = {}

    def gone(app) -> bool:
        try:
            return not app.screen_stack or not app.screen_stack[0].query("#hardware-view")
        except Exception:                   # noqa: BLE001 - torn down
            return True

    def slow_probe():
        while "go" not in box:
            time.sleep(0.002)
        t0 = time.monotonic()
        while not gone(box["app"]) and time.monotonic() - t0 < 20:   # finish once the widgets are gone
            time.sleep(0.0005)
        return no_gpu_probe()

    app = make_app(probe=slow_probe, checkpoint="demo:qwen3-8b-nvfp4", gpu="rtx-3090")
    box["app"] = app
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        box["go"] = True
        await app.action_quit()             # Ctrl+Q's action (a key press would wait on the closing screen)
    time.sleep(0.3)
    assert raised == [] and called == []
    assert app.return_code == 0


async def test_demo_launch_step_says_what_to_replace(make_app):
    from advisor.cli import main

    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("f6")
        await pilot.pause()
        note = str(app.query_one("#launch-note", Static).render())
        assert "replace demo:qwen3-8b-nvfp4 with your checkpoint" in note and "F3" in note
        line = app.query_one("#launch-command", TextArea).text
        await pilot.press("ctrl+l")
        await settle(app, pilot)
        said = [n.message for n in app._notifications]
        assert any("replace it with your checkpoint" in m and "F3" in m for m in said), said
        assert app.supervisor is None
    # the CLI's dry run for the same GPU is the same command
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["launch", "demo:qwen3-8b-nvfp4", "--engine", "vllm", "--gpu", "rtx-3090", "--dry-run",
                     "--json"]) == 0
    argv = json.loads(buf.getvalue())["command"]["argv"]
    assert line.split() == [w for w in actions.command_from_line(line, app.analysis, "vllm").argv] == argv

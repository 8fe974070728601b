"""The keyboard review's defects, each driven through the app (Pilot) or the views it shows."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Input, OptionList, Select, Static, TextArea

from advisor import views
from advisor.analysis import Selection, analyze
from advisor.tui import actions
from advisor.tui.app import report_path_for
from advisor.tui.docview import DocView
from advisor.user_state import UserState, load_state, save_state

pytestmark = pytest.mark.timeout(300)

QWEN36 = "demo:qwen3.6-27b-nvfp4-mixed"
QWEN3 = "demo:qwen3-8b-nvfp4"
GPT_OSS = "demo:gpt-oss-20b-mxfp4"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def _status(app) -> str:
    return str(app.query_one("#status", Static).render())


def _note(app) -> str:
    note = app.query_one("#launch-note", Static)
    return str(note.render()) if note.display else ""


# 1 ------------------------------------------------------------------------------------------
async def test_other_checkpoint_forgets_the_saved_profile(make_app, tmp_path):
    app = make_app(checkpoint=QWEN36, gpu="rtx-3090", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("launch")
        app.save_launch_profile()                 # profile "default" serving the qwen3.6 demo
        await settle(app, pilot)
        assert app.state.launch_profile == "default"
        app.action_load_checkpoint(QWEN3)
        await settle(app, pilot)
        assert app.state.launch_profile is None
        assert QWEN3 in app.query_one("#launch-command", TextArea).text
    again = make_app()                            # restart from the saved state
    async with again.run_test(size=(80, 24)) as pilot:
        await settle(again, pilot)
        line = again.query_one("#launch-command", TextArea).text
        assert QWEN3 in line and QWEN36 not in line
        assert not isinstance(again.query_one("#profile-select", Select).value, str)


async def test_stale_profile_of_another_model_is_not_restored(make_app, tmp_path):
    """A state written before the fix (profile of qwen3.6, checkpoint qwen3-8b) restores nothing."""
    app = make_app(checkpoint=QWEN36, gpu="rtx-3090", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.save_launch_profile()
        await settle(app, pilot)
    state_file = tmp_path / "state.yaml"
    save_state(dataclasses.replace(load_state(state_file), checkpoint=QWEN3, launch_profile="default"), state_file)
    again = make_app()
    async with again.run_test(size=(80, 24)) as pilot:
        await settle(again, pilot)
        line = again.query_one("#launch-command", TextArea).text
        assert QWEN3 in line and QWEN36 not in line
        assert again.state.launch_profile is None
    # the profile of the model being analysed is still restored
    save_state(dataclasses.replace(load_state(state_file), checkpoint=QWEN36, launch_profile="default"), state_file)
    third = make_app()
    async with third.run_test(size=(80, 24)) as pilot:
        await settle(third, pilot)
        assert third.query_one("#profile-select", Select).value == "default"
        assert QWEN36 in third.query_one("#launch-command", TextArea).text


# 2 ------------------------------------------------------------------------------------------
async def test_will_not_run_is_said_on_status_launch_and_cost(make_app):
    app = make_app(checkpoint=GPT_OSS, gpu="rtx-3090", engine="fastllm")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        a = app.analysis
        assert a.ok and a.verdict == "will not run"        # no stage failed; the answer is "no"
        assert _status(app).endswith("— will not run")
        assert "unsupport src dtype U8" in _note(app)
        assert _note(app).startswith("explain predicts this will not run:")
        assert app.query_one("#cost-view", DocView).text.startswith("Verdict: will not run")


def test_does_not_fit_verdict_and_cost_first():
    a = analyze(Selection(QWEN36, "rtx-3060-12gb"))
    assert a.plan.recommendation.blocked
    assert a.verdict == "does not fit"
    assert a.verdict_reason == f"the plan has no launch line: {a.plan.recommendation.blocked}"
    doc = views.cost_doc(a)
    assert doc.blocks[0].text == "Verdict: does not fit"
    assert actions.launch_note(a, "vllm") == a.verdict_reason
    ok = analyze(Selection(QWEN3, "rtx-3090"))
    assert ok.verdict == "" and views.verdict_doc(ok).blocks == ()


# 3 ------------------------------------------------------------------------------------------
def test_explain_names_the_plans_kv_dtype_when_it_differs():
    # the agents workload's 8 x 32k-token contexts fit the 3090's pool only as 4-bit KV (the checkpoint
    # declares FP8, which explain shows)
    a = analyze(Selection(QWEN36, "rtx-3090", engine="vllm", workload="agents"))
    explained = next(d for d in a.explanation.decisions if d.layer_class == "attention_kv")
    planned = a.plan.recommendation.kv_cache_dtype
    chosen = a.kv_decisions[planned]
    assert chosen.kv_cache_dtype != explained.kv_cache_dtype
    text = "\n".join(getattr(b, "text", "") for b in views.explain_doc(a).blocks[:3])   # right under the answer
    assert f"With the plan's KV cache dtype {planned}" in text
    assert f"runs on {chosen.kernel}" in text and f"stored as {chosen.kv_cache_dtype}" in text
    same = analyze(Selection(QWEN3, "rtx-3090", engine="vllm"))
    assert views.plan_kv_note(same) == ""


# 4 ------------------------------------------------------------------------------------------
def test_other_engine_gets_a_tp_the_model_allows():
    a = analyze(Selection(QWEN36, "rtx-3090", gpus=3, engine="fastllm"))
    assert a.checkpoint.arch.num_kv_heads == 4 and a.plan.recommendation.tp == 2
    line = actions.launch_command_line(a, "sglang")
    assert "--tp-size 2" in line
    unplanned = dataclasses.replace(a, plan=None)
    assert actions.untuned_tp(unplanned) == 2          # 3 does not split 4 KV heads
    assert "--device cpu" in actions.launch_command_line(a, "transformers")
    assert "--device cpu" not in actions.launch_command_line(a, "transformers", gpu_here=True)
    assert actions.launch_note(a, "sglang", ("vllm", "sglang", "fastllm")) == (
        "not tuned: explain/plan use fastllm — pick the engine on the Explain tab to tune it")


async def test_launch_tab_hints_an_untuned_engine(make_app):
    app = make_app(checkpoint=QWEN3, gpu="rtx-3090", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert _note(app) == actions.demo_note(app.analysis)     # a demo: only what to replace
        app.query_one("#launch-engine", Select).value = "sglang"
        await settle(app, pilot)
        assert _note(app).startswith("not tuned: explain/plan use vllm")
        app.query_one("#launch-engine", Select).value = "vllm"
        await settle(app, pilot)
        assert _note(app) == actions.demo_note(app.analysis)


# 5, 6 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("before,after", [
    ("/tmp/rv/v1.2/report", "/tmp/rv/v1.2/report.json"),
    ("./reports/q3", "./reports/q3.json"),
    ("out/nvfp4-report.md", "out/nvfp4-report.json"),
    ("notes-v1.2", "notes-v1.2.json"),
    ("", "nvfp4-report.json"),
])
def test_format_change_sets_only_the_file_suffix(before, after):
    assert report_path_for(before, "json") == after


async def test_export_asks_before_overwriting(make_app, tmp_path):
    app = make_app(checkpoint=QWEN3, gpu="rtx-3090")
    target = tmp_path / "v1.2" / "report"
    target.parent.mkdir()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("export")
        app.query_one("#export-path", Input).value = str(target)
        app.query_one("#export-format", Select).value = "json"
        await settle(app, pilot)
        out = target.with_name("report.json")
        assert app.query_one("#export-path", Input).value == str(out)
        out.write_text("keep me")
        app.export_report()
        await settle(app, pilot)
        assert out.read_text() == "keep me"
        assert "press Export again to overwrite" in app.query_one("#export-view", DocView).text
        app.export_report()                       # the second Export is the user's yes
        await settle(app, pilot)
        assert out.read_text() != "keep me" and app.last_report == out


# 7 ------------------------------------------------------------------------------------------
async def test_first_start_analyses_once(make_app, monkeypatch):
    import advisor.tui.app as tui_app

    calls = []
    real = tui_app.analyze
    monkeypatch.setattr(tui_app, "analyze", lambda sel: calls.append(sel) or real(sel))
    app = make_app()                               # fresh state: no engine version remembered
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await settle(app, pilot)
        shown = str(app.query_one("#engine-select", Select).value)
    assert len(calls) == 1, calls
    assert calls[0].engine_version == shown.partition("@")[2]
    assert load_state(app.state_file).engine_version is None     # newer rule files still win later


# 8 ------------------------------------------------------------------------------------------
async def test_recent_folders_first_and_all_rows_visible(make_app, tmp_path):
    recent = tuple(str(tmp_path / f"model-{i}") for i in range(3))
    save_state(UserState(checkpoint=QWEN3, gpu_id="rtx-3090", recent=recent), tmp_path / "state.yaml")
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("checkpoint")
        await pilot.pause()
        lst = app.query_one("#demo-list", OptionList)
        ids = [lst.get_option_at_index(i).id for i in range(lst.option_count)]
        assert ids[:3] == [f"recent:{r}" for r in recent]
        assert ids[3:] == [f"demo:{d}" for d in app.demos]
        assert lst.max_scroll_y == 0 and lst.size.height >= lst.option_count   # no fixed 5 rows
        assert app.query_one("#checkpoint-view", DocView).size.height >= 10


# 9 ------------------------------------------------------------------------------------------
async def test_theme_from_the_palette_is_remembered(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.theme = "nord"                        # what the palette's Theme command does
        await pilot.pause()
    assert load_state(tmp_path / "state.yaml").theme == "nord"


# 10 -----------------------------------------------------------------------------------------
def no_gpu_probe():
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import RawSnapshot

    return build_result(RawSnapshot(status="no-driver", message="no NVIDIA driver found (test)", driver_version=None,
                                    cuda_driver_version=None, nvml_version=None, devices=(), pairs=()))


def test_plain_output_keeps_its_promises():
    a = analyze(Selection(QWEN3, "rtx-3090"))
    warnings = {w.text for d in a.explanation.decisions for w in d.warnings}
    assert warnings and "listed below" in a.explanation.summary
    doc = views.plain_doc(no_gpu_probe(), a)
    blocks = [b for b in doc.blocks if getattr(b, "title", None) == "Engine warnings and what they mean"]
    assert blocks and all(any(item.startswith(w) for item in blocks[0].items) for w in warnings)
    first = doc.blocks[0].text
    assert "--gpu ID" in first and "above" not in first
    assert "above" in views.hardware_doc(no_gpu_probe(), "rtx-3090", 1).blocks[0].text

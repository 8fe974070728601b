"""The Launch tab: a saved profile serves one model, another engine's command gets a TP the model
allows, and an engine explain did not tune is said so."""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Select, Static, TextArea

from advisor.services.analysis import Selection, analyze
from advisor.tui import actions
from advisor.user_state import load_state, save_state

pytestmark = pytest.mark.timeout(300)

QWEN36 = "demo:qwen3.6-27b-nvfp4-mixed"
QWEN3 = "demo:qwen3-8b-nvfp4"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def _note(app) -> str:
    note = app.query_one("#launch-note", Static)
    return str(note.render()) if note.display else ""


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

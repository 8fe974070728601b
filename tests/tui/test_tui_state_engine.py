"""The Launch tab's engine and last-used saved profile come back after a restart (same isolated XDG
dirs and state file); stale values in the state file fall back to the defaults without a word."""

from __future__ import annotations

import pytest
import yaml
from textual.widgets import Input, Select, TextArea

from advisor.user_state import load_state

pytestmark = pytest.mark.timeout(120)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_launch_engine_is_remembered(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        explained = app.state.engine
        app.action_show_tab("launch")
        app.query_one("#launch-engine", Select).value = "transformers"
        await settle(app, pilot)
        assert app.query_one("#launch-command", TextArea).text.count("transformers serve ") == 1
        await pilot.press("ctrl+q")
    assert load_state(tmp_path / "state.yaml").launch_engine == "transformers"

    app = make_app()                                   # restart: same state file, same XDG dirs
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.launch_engine == "transformers"
        assert app.query_one("#launch-command", TextArea).text.count("transformers serve ") == 1
        assert app.state.engine == explained           # the explained engine is its own choice

    app = make_app(engine="sglang")                    # an engine given on the command line is launched
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        assert app.launch_engine == "sglang"


async def test_last_used_profile_is_restored(make_app, tmp_path):
    app = make_app(engine="vllm")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        app.action_show_tab("launch")
        app.query_one("#launch-engine", Select).value = "sglang"
        await settle(app, pilot)
        area = app.query_one("#launch-command", TextArea)
        assert area.text.startswith("sglang ") and "--port 8000" in area.text
        area.text = area.text.replace("--port 8000", "--port 18556")
        name = app.query_one("#profile-name", Input)
        name.value = "mine"
        name.focus()
        await pilot.press("enter")                     # Enter in the name field saves
        await settle(app, pilot)
        app.query_one("#launch-engine", Select).value = "vllm"   # then the generated vllm command again
        await settle(app, pilot)
        app.query_one("#profile-select", Select).value = "mine"  # and the profile picked again
        await settle(app, pilot)
        assert app.launch_engine == "sglang" and "--port 18556" in area.text
    st = load_state(tmp_path / "state.yaml")
    assert (st.launch_profile, st.launch_engine) == ("mine", "sglang")

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await settle(app, pilot)
        assert app.query_one("#profile-select", Select).value == "mine"
        assert app.query_one("#profile-name", Input).value == "mine"
        assert app.launch_engine == "sglang"
        area = app.query_one("#launch-command", TextArea)
        assert area.text.startswith("sglang ") and "--port 18556" in area.text
        # choosing another engine replaces the profile's command: the profile is no longer the last used
        app.query_one("#launch-engine", Select).value = "transformers"
        await settle(app, pilot)
    st = load_state(tmp_path / "state.yaml")
    assert (st.launch_profile, st.launch_engine) == (None, "transformers")


@pytest.mark.parametrize("stale", [
    {"launch_engine": "no-such-engine", "launch_profile": "deleted-profile"},
    {"launch_engine": ["vllm"], "launch_profile": {"a": 1}},
    {"launch_engine": 7, "engine": "sglang"},
])
async def test_stale_launch_state_falls_back_silently(make_app, tmp_path, stale):
    (tmp_path / "state.yaml").write_text(yaml.safe_dump(stale))
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await settle(app, pilot)
        want = "sglang" if stale.get("engine") == "sglang" else "vllm"
        assert app.launch_engine == want
        assert app.query_one("#launch-command", TextArea).text.startswith(f"{want} ")
        assert app.query_one("#profile-select", Select).value == Select.NULL
        assert not [n.message for n in app._notifications]
        assert app.analysis is not None and app.analysis.ok
    assert load_state(tmp_path / "state.yaml").launch_profile is None

"""What the app remembers between starts: the engine version (analysed once at start), the recent
folders (listed first, all rows visible) and the theme."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList, Select

from advisor.tui.docview import DocView
from advisor.user_state import UserState, load_state, save_state

pytestmark = pytest.mark.timeout(300)

QWEN3 = "demo:qwen3-8b-nvfp4"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


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


async def test_theme_from_the_palette_is_remembered(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.theme = "nord"                        # what the palette's Theme command does
        await pilot.pause()
    assert load_state(tmp_path / "state.yaml").theme == "nord"

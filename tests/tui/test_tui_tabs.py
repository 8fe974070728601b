"""One table of tabs (advisor/tui/tabs.py) drives the F-keys, the tab bar's panes and the command
palette's "Show …" entries: they list the same tabs in the same order."""

from __future__ import annotations

import pytest
from textual.widgets import TabbedContent

from advisor.tui.commands import AdvisorCommands
from advisor.tui.tabs import TABS

pytestmark = pytest.mark.timeout(300)


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_keys_panes_and_palette_follow_the_table(make_app):
    app = make_app(gpu="rtx-3090", checkpoint="demo:qwen3-8b-nvfp4", engine="vllm")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        tabs = app.query_one("#tabs", TabbedContent)
        panes = [p for p in tabs.query("TabPane") if p.parent.parent is tabs]
        assert [(p.id, type(p)) for p in panes] == [(t.id, t.pane) for t in TABS]
        assert [str(tabs.get_tab(t.id).label) for t in TABS] == [t.title for t in TABS]
        shown = {b.key: (b.action, b.description) for b in app.BINDINGS if b.action.startswith("show_tab")}
        assert shown == {t.key: (f"show_tab('{t.id}')", t.key_label) for t in TABS}
        for tab in reversed(TABS):
            await pilot.press(tab.key)
            await pilot.pause()
            assert tabs.active == tab.id
        palette = [title for title, _, _ in AdvisorCommands(app.screen)._commands() if title.startswith("Show ")]
        assert palette == [t.palette for t in TABS]

"""The Export tab's path: a format change sets only the file's suffix, and an existing file is
replaced only when the user exports again."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from advisor.tui.docview import DocView
from advisor.tui.panes.export import report_path_for

pytestmark = pytest.mark.timeout(300)

QWEN3 = "demo:qwen3-8b-nvfp4"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


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

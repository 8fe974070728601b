"""F9, Export: write the current analysis as a Markdown, JSON or HTML report."""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Input, Select

from advisor.doc import Doc, Paragraph
from advisor.errors import AdvisorError
from advisor.tui import actions
from advisor.tui.docview import DocView
from advisor.tui.messages import ExportFailed, ReportExported
from advisor.tui.panes.pane import Pane

REPORT_SUFFIXES = (".md", ".json", ".html")


def report_path_for(value: str, fmt: str) -> str:
    """The export path with the file name's report suffix set to ``fmt``: only the name changes
    (dots in folders stay), and a name with another suffix (v1.2) keeps it and gains ``.fmt``."""
    text = value.strip()
    if not text or text.endswith(("/", "\\")):
        return f"{text}nvfp4-report.{fmt}"
    p = Path(text)
    name = p.name
    if p.suffix.lower() in REPORT_SUFFIXES:
        name = p.stem
    new = f"{name}.{fmt}"
    head = text[: len(text) - len(p.name)] if text.endswith(p.name) else ""
    return f"{head}{new}"


class ExportPane(Pane):
    def __init__(self, title: str, *, id: str):
        super().__init__(title, id=id)
        self._overwrite: Path | None = None     # an existing report file the next Export may replace

    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Select([("Markdown", "md"), ("JSON", "json"), ("HTML", "html")], value="md",
                         allow_blank=False, id="export-format")
            yield Input("nvfp4-report.md", id="export-path")
            yield Button("Export", id="export-run", variant="primary")
        yield DocView(id="export-view", placeholder="Export the current analysis as a report.")

    @property
    def format_select(self) -> Select:
        return self.query_one("#export-format", Select)

    @property
    def path_input(self) -> Input:
        return self.query_one("#export-path", Input)

    @property
    def view(self) -> DocView:
        return self.query_one("#export-view", DocView)

    def set_format(self, fmt: str) -> None:
        """The palette's export: the path's suffix follows the format now, not when the Select's
        Changed message arrives (that came after the export had read the old .md path)."""
        path = self.path_input
        wanted = report_path_for(path.value, fmt)
        if path.value != wanted:
            path.value = wanted
        self.format_select.value = fmt

    @on(Button.Pressed, "#export-run")
    @on(Input.Submitted, "#export-path")
    def export(self) -> None:
        """Export what the tab shows now: format, path and command are read here, on the UI thread,
        and handed to the worker (it never reads widgets another handler may still be changing)."""
        fmt = str(self.format_select.value)
        path = Path(self.path_input.value).expanduser()
        if path.is_file() and self._overwrite != path:
            # nothing is replaced without the user saying so: the same Export again confirms
            self._overwrite = path
            msg = f"{path} exists: press Export again to overwrite it"
            self.advisor.notify(msg, title="not exported", severity="warning")
            self.view.message(msg, "warn")
            return
        confirmed, self._overwrite = self._overwrite == path, None
        self._export_worker(fmt, path, self.advisor.launch_line, self.advisor.launch_engine, confirmed)

    @work(thread=True, exclusive=True, group="export")
    def _export_worker(self, fmt: str, path: Path, line: str, engine: str, confirmed: bool) -> None:
        app = self.advisor
        try:
            written = actions.export_report(app.analysis, app.probe_result, fmt, path, launch_line=line,
                                            launch_engine=engine, overwrite=confirmed)
        except (AdvisorError, OSError) as err:
            self.report(ExportFailed(str(err)))
            return
        app.last_report = written
        self.report(ReportExported(written))

    def on_report_exported(self, event: ReportExported) -> None:
        if self.leaving:
            return
        self.view.show(Doc((Paragraph(f"Report written to {event.path}", "good"),)))
        self.advisor.notify(f"report written: {event.path}")

    def on_export_failed(self, event: ExportFailed) -> None:
        if self.leaving:
            return
        self.advisor.notify(event.error, title="export failed", severity="error")
        self.view.message(event.error, "bad")

    @on(Select.Changed, "#export-format")
    def _format_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.path_input.value = report_path_for(self.path_input.value, event.value)

    @on(Input.Changed, "#export-path")
    def _export_path_edited(self, event: Input.Changed) -> None:
        if self._overwrite is not None and Path(event.value).expanduser() != self._overwrite:
            self._overwrite = None    # the confirmation was for the file named before

"""F8, µbench: measure this card with the bundled Triton kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button

from advisor.doc import Doc, Paragraph
from advisor.errors import AdvisorError
from advisor.tui import actions
from advisor.tui.docview import DocView
from advisor.tui.messages import MicrobenchFinished
from advisor.tui.panes.pane import Pane
from advisor.tui.stepbar import StepBar

if TYPE_CHECKING:
    from advisor.progress import Throttled


class MicrobenchPane(Pane):
    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Button("Run microbenchmarks", id="microbench-run", variant="primary")
        yield StepBar(id="microbench-progress")
        yield DocView(id="microbench-view", placeholder="Measures this card with our Triton kernels.")

    @property
    def progress(self) -> StepBar:
        return self.query_one("#microbench-progress", StepBar)

    @property
    def view(self) -> DocView:
        return self.query_one("#microbench-view", DocView)

    @on(Button.Pressed, "#microbench-run")
    def run(self) -> None:
        self.view.message("running microbenchmarks…")
        self._microbench_worker(self.progress.bar("µbench"))

    @work(thread=True, exclusive=True, group="microbench")
    def _microbench_worker(self, bar: Throttled) -> None:
        from advisor.progress import Step

        error = None
        try:
            doc = actions.microbench_doc(self.advisor.analysis,
                                         on_progress=lambda done, total, label: bar(Step(done, total, "case", label)))
        except AdvisorError as err:
            error = str(err)
            doc = Doc((Paragraph(error, "bad"),))
        finally:
            bar.close()
        self.report(MicrobenchFinished(doc, error))

    def on_microbench_finished(self, event: MicrobenchFinished) -> None:
        if self.leaving:
            return
        if event.error is not None:
            self.advisor.notify(event.error, severity="error")
        self.view.show(event.doc)

"""F7, Bench: benchmark a server (the launched one or a URL) against the plan, with its progress."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Input

from advisor.errors import AdvisorError
from advisor.tui import actions
from advisor.tui.docview import DocView
from advisor.tui.messages import BenchFinished, StatusChanged
from advisor.tui.panes.pane import Pane
from advisor.tui.stepbar import StepBar

if TYPE_CHECKING:      # annotations only: the launchers load when a run starts
    from advisor.progress import Throttled
    from launchers.bench import BenchConfig


class BenchPane(Pane):
    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Input("", placeholder="server URL (default: the launched server)", id="bench-url")
            yield Input("", placeholder="reference URL (optional: output agreement)", id="bench-reference")
            yield Button("Run", id="bench-run", variant="primary")
        yield StepBar(id="bench-progress")
        yield DocView(id="bench-view", placeholder="Launch a server (F6) or enter a URL, then Run.")

    @property
    def url_input(self) -> Input:
        return self.query_one("#bench-url", Input)

    @property
    def reference_input(self) -> Input:
        return self.query_one("#bench-reference", Input)

    @property
    def progress(self) -> StepBar:
        return self.query_one("#bench-progress", StepBar)

    @property
    def view(self) -> DocView:
        return self.query_one("#bench-view", DocView)

    @on(Button.Pressed, "#bench-run")
    @on(Input.Submitted, "#bench-url")
    @on(Input.Submitted, "#bench-reference")
    def run(self) -> None:
        """Benchmark the URL on the tab (or the launched server) with the CLI's defaults; what the
        worker needs is read here, on the UI thread, and the progress bar shows tokens and the ETA."""
        app = self.advisor
        url = self.url_input.value.strip() or actions.server_url(app.supervisor)
        if not url:
            app.notify("launch a server or enter its URL first", severity="warning")
            return
        reference = self.reference_input.value.strip()
        from launchers.bench import BenchConfig

        cfg = BenchConfig()
        self.view.message(f"benchmarking {url}: {cfg.settings}…")
        self._bench_worker(url, reference, cfg, self.progress.bar("bench"))

    @work(thread=True, exclusive=True, group="bench")
    def _bench_worker(self, url: str, reference: str, cfg: BenchConfig, bar: Throttled) -> None:
        app = self.advisor
        try:
            doc = actions.bench_doc(url, app.analysis, server=app.supervisor, on_step=bar, cfg=cfg)
            if reference:
                doc = doc + actions.agreement_doc(url, reference,
                                                  on_progress=lambda s: self.report(StatusChanged(s)))
        except AdvisorError as err:
            self.report(BenchFinished(None, str(err)))
            return
        finally:
            bar.close()
        self.report(BenchFinished(doc))

    def on_bench_finished(self, event: BenchFinished) -> None:
        if self.leaving:
            return
        if event.doc is None:
            self.advisor.notify(event.error, severity="error")
            self.view.message(event.error, "bad")
        else:
            self.view.show(event.doc)
        self.advisor.show_summary()

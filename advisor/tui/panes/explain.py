"""F4, Explain: the engine (and rule version) to explain with, and the kernel path it takes."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Select

from advisor.tui import actions
from advisor.tui.docview import DocView
from advisor.tui.panes.pane import Pane


class ExplainPane(Pane):
    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Select(self.advisor.engine_choices, value=self.advisor.initial_engine(),
                         allow_blank=False, id="engine-select")
        yield DocView(id="explain-view", placeholder="Load a checkpoint first.")

    @property
    def engine_select(self) -> Select:
        return self.query_one("#engine-select", Select)

    @property
    def view(self) -> DocView:
        return self.query_one("#explain-view", DocView)

    @on(Select.Changed, "#engine-select")
    def _engine_changed(self, event: Select.Changed) -> None:
        if not isinstance(event.value, str):
            return
        app = self.advisor
        engine, _, version = event.value.partition("@")
        if (engine, version or None) != app.selected_engine():     # not the value set at mount
            app.update_state(engine=engine, engine_version=version or None)
            if engine in actions.LAUNCH_ENGINES:   # launch what is explained (the tuned command)
                app.choose_launch_engine(engine)
            app.start_analysis()

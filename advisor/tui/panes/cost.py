"""F5, Cost: the workload to plan and tune for, and the cost model's answer."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Select

from advisor.tui.docview import DocView
from advisor.tui.panes.pane import Pane


class CostPane(Pane):
    def compose(self) -> ComposeResult:
        workloads, chosen = self.advisor.workloads, self.advisor.state.workload
        with Horizontal(classes="toolbar"):
            yield Select([(w, w) for w in workloads], value=chosen if chosen in workloads else workloads[0],
                         allow_blank=False, id="workload-select")
        yield DocView(id="cost-view", placeholder="Load a checkpoint first.")

    @property
    def workload_select(self) -> Select:
        return self.query_one("#workload-select", Select)

    @property
    def view(self) -> DocView:
        return self.query_one("#cost-view", DocView)

    @on(Select.Changed, "#workload-select")
    def _workload_changed(self, event: Select.Changed) -> None:
        app = self.advisor
        if event.value != app.state.workload and isinstance(event.value, str):
            app.update_state(workload=event.value)
            app.start_analysis()

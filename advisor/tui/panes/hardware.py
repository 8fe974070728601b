"""F2, GPU: the card to plan for, how many, and the first screen's answer."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from advisor.doc import Doc
from advisor.tui.docview import DocView
from advisor.tui.panes.pane import Pane


class HardwarePane(Pane):
    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Select(self.advisor.gpu_choices, prompt="GPU", value=self._initial_gpu(),
                         allow_blank=False, id="gpu-select")
            yield Input(str(self.advisor.state.gpus), id="gpu-count", type="integer",
                        tooltip="GPUs (tensor parallel)")
        yield DocView(id="hardware-view", placeholder="Probing GPUs…")

    @property
    def gpu_select(self) -> Select:
        return self.query_one("#gpu-select", Select)

    @property
    def view(self) -> DocView:
        return self.query_one("#hardware-view", DocView)

    def show(self, doc: Doc) -> None:
        self.view.show(doc)

    def _initial_gpu(self) -> str:
        ids = [v for _, v in self.advisor.gpu_choices]
        if self.advisor.state.gpu_id in ids:
            return self.advisor.state.gpu_id
        return "rtx-3090" if "rtx-3090" in ids else ids[0]

    @on(Select.Changed, "#gpu-select")
    def _gpu_changed(self, event: Select.Changed) -> None:
        app = self.advisor
        if event.value != app.state.gpu_id and isinstance(event.value, str):
            app.update_state(gpu_id=event.value)
            app.start_analysis()
            app.show_hardware()

    @on(Input.Submitted, "#gpu-count")
    @on(Input.Blurred, "#gpu-count")
    def _count_changed(self, event: Input.Submitted | Input.Blurred) -> None:
        try:
            n = max(1, min(64, int(event.input.value or 1)))
        except ValueError:
            n = 1
        if event.input.value != str(n):
            event.input.value = str(n)
        app = self.advisor
        if n != app.state.gpus:
            app.update_state(gpus=n)
            app.start_analysis()
            app.show_hardware()

"""F3, Checkpoint: a folder, file, hub id or demo to load, the recent ones, and what it holds."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Input, OptionList
from textual.widgets.option_list import Option

from advisor.tui.docview import DocView
from advisor.tui.panes.pane import Pane


class CheckpointPane(Pane):
    def compose(self) -> ComposeResult:
        with Horizontal(classes="toolbar"):
            yield Input(self.advisor.state.checkpoint or "",
                        placeholder="folder, file.safetensors, org/name or demo:NAME", id="checkpoint-input")
            yield Button("Load", id="checkpoint-load", variant="primary")
        yield OptionList(*self._source_options(), id="demo-list")
        yield DocView(id="checkpoint-view", placeholder="Pick a demo or enter a checkpoint.")

    @property
    def source_input(self) -> Input:
        return self.query_one("#checkpoint-input", Input)

    @property
    def view(self) -> DocView:
        return self.query_one("#checkpoint-view", DocView)

    def refresh_sources(self) -> None:
        """The recent folders changed: the list updates in place."""
        demo_list = self.query_one("#demo-list", OptionList)
        demo_list.clear_options()
        demo_list.add_options(self._source_options())

    def _source_options(self) -> list[Option]:
        # a returning user's own folders first, then the bundled demos
        state = self.advisor.state
        opts = [Option(f"recent: {r}", id=f"recent:{r}") for r in state.recent if not r.startswith("demo:")]
        opts += [Option(f"demo: {d}", id=f"demo:{d}") for d in self.advisor.demos]
        return opts

    @on(Input.Submitted, "#checkpoint-input")
    @on(Button.Pressed, "#checkpoint-load")
    def _checkpoint_entered(self) -> None:
        source = self.source_input.value.strip()
        if not source:
            self.advisor.notify("enter a folder, a .safetensors file, a hub id or demo:NAME", severity="warning")
            return
        self.advisor.action_load_checkpoint(source)

    @on(OptionList.OptionSelected, "#demo-list")
    def _demo_picked(self, event: OptionList.OptionSelected) -> None:
        oid = event.option.id or ""
        self.advisor.action_load_checkpoint(oid.split(":", 1)[1] if oid.startswith("recent:") else oid)

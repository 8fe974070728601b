"""advisor.progress steps drawn with Textual's ProgressBar (bar, percentage, ETA) and a line saying
what runs now and how far it is (tokens, bytes, cases). The Bench and µbench tabs use it; the CLI
draws the same steps with rich.progress (advisor/cli.py RichBar)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label, ProgressBar

from advisor.progress import Step, Throttled, amount


class StepBar(Vertical):
    DEFAULT_CSS = """
    StepBar { height: auto; padding: 0 1; display: none; }
    StepBar > Label { width: 1fr; color: $text-muted; }
    """

    @dataclass
    class Updated(Message):
        step: Step

    def compose(self) -> ComposeResult:
        yield ProgressBar(show_eta=True)
        yield Label("", markup=False)

    def bar(self, title: str) -> Throttled:
        """A Bar for a worker thread: each step is posted (thread-safe, never blocks the worker: a
        benchmark's timing must not wait for a redraw), at most ten a second."""
        self.display = True
        self.query_one(ProgressBar).update(total=None, progress=0)
        self.query_one(Label).update(f"{title}: starting…")
        return Throttled(_Posted(self, title))

    def on_step_bar_updated(self, event: "StepBar.Updated") -> None:
        step = event.step
        if step.total is None and step.done < 0:      # closed
            self.display = False
            return
        self.query_one(ProgressBar).update(total=step.total, progress=step.done)
        done = amount(step.done, step.unit, with_unit=step.total is None)
        shown = f"{done}/{amount(step.total, step.unit)}" if step.total else done
        self.query_one(Label).update(f"{shown} — {step.phase}" if step.phase else shown)


class _Posted:
    def __init__(self, widget: StepBar, title: str):
        self.widget, self.title = widget, title

    def __call__(self, step: Step) -> None:
        self.widget.post_message(StepBar.Updated(step))

    def close(self) -> None:
        self.widget.post_message(StepBar.Updated(Step(-1, None, "")))

"""Progress of a long task (bench, convert, microbench) as plain records; the renderers draw them.

The core calls a ``Bar`` with ``Step``s; the CLI draws them with rich.progress (advisor/cli.py), the
TUI with Textual's ProgressBar (advisor/tui/), and a plain stream gets one line per phase. Nothing
here imports a renderer, and the ETA is the renderer's (it knows the rate it has seen).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol, TextIO


@dataclass(frozen=True)
class Step:
    done: float                      # work done, in ``unit``
    total: float | None              # work planned (None: unknown)
    unit: str                        # "tok", "B", "case"
    phase: str = ""                  # what runs now: "single stream: code shot 2/3"


class Bar(Protocol):
    def __call__(self, step: Step) -> None: ...

    def close(self) -> None: ...


BarFactory = Callable[[str], Bar]      # title -> a bar (the CLI's, the TUI's, or plain lines)


class _Silent:
    def __call__(self, step: Step) -> None:
        pass

    def close(self) -> None:
        pass


class _Lines:
    """One line per phase on a stream that is not a terminal (a log, CI): no redraws, no noise."""

    def __init__(self, title: str, stream: TextIO):
        self.title, self.stream = title, stream
        self.phase: str | None = None

    def __call__(self, step: Step) -> None:
        if step.phase and step.phase != self.phase:
            self.phase = step.phase
            total = f" of {amount(step.total, step.unit)}" if step.total else ""
            print(f"  {self.title}: {step.phase} ({amount(step.done, step.unit)}{total})", file=self.stream,
                  flush=True)

    def close(self) -> None:
        pass


def amount(value: float | None, unit: str, with_unit: bool = True) -> str:
    """'1,234 tok', '1.23 GB' (bytes), '7 case'; without the unit for the left side of 'a/b unit'."""
    if value is None:
        return "?"
    if unit == "B":
        text = f"{value / 1e9:.2f}"
        return f"{text} GB" if with_unit else text
    return f"{value:,.0f} {unit}" if with_unit else f"{value:,.0f}"


def silent(title: str = "") -> Bar:
    return _Silent()


def lines(stream: TextIO) -> BarFactory:
    return lambda title: _Lines(title, stream)


def bar_for(args, title: str, *, lines_off_terminal: bool = True) -> Bar:
    """The bar the front end handed the command (``args.progress``, a BarFactory: a terminal), else
    one line per phase on stderr (``lines_off_terminal``; convert keeps a log free of them); none
    with --json (stdout is the document, stderr stays quiet)."""
    import sys

    if getattr(args, "json", False):
        return silent()
    factory = getattr(args, "progress", None)
    if factory is None:
        factory = lines(sys.stderr) if lines_off_terminal else silent
    return factory(title)


class Throttled:
    """Forwards at most one step per ``interval_s`` (a TUI redraw per token would flood it), but
    always a new phase and the last step."""

    def __init__(self, bar: Bar, interval_s: float = 0.1):
        self.bar, self.interval_s = bar, interval_s
        self.last = 0.0
        self.phase: str | None = None

    def __call__(self, step: Step) -> None:
        now = time.monotonic()
        final = step.total is not None and step.done >= step.total
        if step.phase == self.phase and not final and now - self.last < self.interval_s:
            return
        self.last, self.phase = now, step.phase
        self.bar(step)

    def close(self) -> None:
        self.bar.close()

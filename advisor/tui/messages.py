"""What the TUI's thread workers hand back: past-tense Textual messages.

A worker posts one (``post_message`` is thread-safe and never blocks the worker) and the pane or the
app that shows the result handles it on the UI thread (``on_<name>``). Messages posted by a pane bubble
on to the app, which keeps the app-wide state (analysis, probe, server).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from advisor.doc import Doc
from advisor.services.analysis import Analysis
from advisor.tui import actions

if TYPE_CHECKING:      # annotations only: the probe and the supervisor load in their workers
    from advisor.probe.model import ProbeResult
    from launchers.supervisor import Server


@dataclass
class ProbeFinished(Message):
    result: ProbeResult | None  # the probe's answer; None when it failed
    error: str | None = None


@dataclass
class AnalysisFinished(Message):
    analysis: Analysis


@dataclass
class StatusChanged(Message):
    """A progress line for the status bar while a worker runs."""
    text: str


@dataclass
class LogLine(Message):
    engine: str
    line: str


@dataclass
class LaunchProgressed(Message):
    """The launch state line: starting…, loading progress, the readiness summary."""
    text: str


@dataclass
class LaunchFailed(Message):
    error: str


@dataclass
class LaunchCancelled(Message):
    """Stopped (or quit) before the server was up: nothing was left running."""


@dataclass
class ServerStarted(Message):
    launch: actions.Launch
    server: Server              # the supervisor it started


@dataclass
class ServerChecked(Message):
    """The server answered (or gave up): its readiness summary and the kernel check to show."""
    summary: str
    doc: Doc
    ok: bool


@dataclass
class ServerStopped(Message):
    why: str = "stopped"


@dataclass
class BenchFinished(Message):
    doc: Doc | None             # None when it failed
    error: str = ""


@dataclass
class MicrobenchFinished(Message):
    doc: Doc
    error: str | None = None


@dataclass
class ReportExported(Message):
    path: Path


@dataclass
class ExportFailed(Message):
    error: str

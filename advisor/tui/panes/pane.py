"""The base of every tab's pane, and what a pane may ask of the app (AdvisorHost).

Panes see the app through ``AdvisorHost`` only, never ``advisor.tui.app`` (the app imports the panes):
the state every tab shares and the few app-wide moves (re-analyse, show the first screen).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from textual.message import Message
from textual.widgets import TabPane

from advisor.services.analysis import Analysis
from advisor.tui import actions
from advisor.user_state import UserState

if TYPE_CHECKING:      # annotations only
    from textual.notifications import SeverityLevel

    from advisor.probe.model import ProbeResult
    from launchers.supervisor import Server


class AdvisorHost(Protocol):
    """The app as the panes use it (AdvisorApp implements it)."""

    state: UserState
    analysis: Analysis | None
    probe_result: ProbeResult | None
    supervisor: Server | None
    current_launch: actions.Launch | None
    last_report: Path | None
    quitting: bool
    leaving: bool
    gpu_choices: tuple[tuple[str, str], ...]
    engine_choices: tuple[tuple[str, str], ...]
    workloads: tuple[str, ...]
    demos: tuple[str, ...]

    @property
    def gpu_here(self) -> bool: ...

    @property
    def launch_engine(self) -> str: ...

    @property
    def launch_line(self) -> str: ...

    # UserState's fields by name: typing.Unpack of a TypedDict needs Python 3.11, and 3.10 is supported
    def update_state(self, **changes: Any) -> None: ...

    def start_analysis(self) -> None: ...

    def show_hardware(self) -> None: ...

    def show_summary(self) -> None: ...

    def selected_engine(self) -> tuple[str, str | None]: ...

    def initial_engine(self) -> str: ...

    def choose_launch_engine(self, engine: str) -> None: ...

    def action_load_checkpoint(self, source: str) -> None: ...

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...


class Pane(TabPane):
    """One tab: it composes its widgets, handles their events and offers them as typed properties,
    so nothing outside the pane looks a widget up by its id."""

    def __init__(self, title: str, *, id: str):
        super().__init__(title, id=id)

    @property
    def advisor(self) -> AdvisorHost:
        """The app with the state every pane shares (selection, analysis, probe, server)."""
        return cast(AdvisorHost, self.app)

    @property
    def leaving(self) -> bool:
        return self.advisor.leaving

    def report(self, message: Message) -> None:
        """Hand a worker's result back to the UI thread; once the app is closing its widgets are being
        removed, so the result is dropped."""
        try:
            if not self.leaving:
                self.post_message(message)
        except RuntimeError:        # the pane (or the whole app) has already gone
            pass

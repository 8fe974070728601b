"""AdvisorApp: tabs over the chain (hardware -> checkpoint -> explain -> cost -> launch/bench).

The app holds the state every tab shares (the selection, the analysis, the probe, the server) and
routes between the panes (advisor/tui/panes/, listed in advisor/tui/tabs.py); every answer comes from
the application layer (advisor.services). Slow work runs in thread workers, which post
past-tense messages (advisor/tui/messages.py) that the app and the panes handle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane, Tabs

from advisor.services import views
from advisor.services.analysis import Analysis, Selection, analyze
from advisor.tui import actions
from advisor.tui.commands import AdvisorCommands
from advisor.tui.messages import AnalysisFinished, ProbeFinished, ServerStarted, ServerStopped, StatusChanged
from advisor.tui.panes.bench import BenchPane
from advisor.tui.panes.checkpoint import CheckpointPane
from advisor.tui.panes.cost import CostPane
from advisor.tui.panes.explain import ExplainPane
from advisor.tui.panes.export import ExportPane
from advisor.tui.panes.hardware import HardwarePane
from advisor.tui.panes.launch import LaunchPane
from advisor.tui.panes.microbench import MicrobenchPane
from advisor.tui.panes.pane import Pane
from advisor.tui.tabs import tab_bindings, tab_panes
from advisor.user_state import UserState, save_state

if TYPE_CHECKING:      # annotations only: the probe and the supervisor load in their workers
    from rich.console import RenderableType
    from textual.theme import Theme

    from advisor.probe.model import ProbeResult
    from launchers.supervisor import Server


class AdvisorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "nvfp4-advisor"
    COMMANDS = App.COMMANDS | {AdvisorCommands}
    BINDINGS = [
        *tab_bindings(),
        Binding("ctrl+t", "toggle_theme", "Theme", show=False),
        Binding("ctrl+l", "launch", "Launch"),
        # priority: Input/TextArea bind ctrl+x to cut; with no server running the key falls through to them
        Binding("ctrl+x", "stop", "Stop", priority=True),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, *, state: UserState, state_file: Path | None, probe: Callable[[], ProbeResult],
                 gpu_choices: tuple[tuple[str, str], ...], demos: tuple[str, ...],
                 workloads: tuple[str, ...], gpu_explicit: bool = False):
        super().__init__()
        self.state = state
        self.state_file = state_file
        self._probe_fn = probe
        self.gpu_choices = gpu_choices
        self.engine_choices = views.engine_choices()
        self.demos = demos
        self.workloads = workloads or ("interactive",)
        self.probe_result: ProbeResult | None = None
        self.analysis: Analysis | None = None
        self.supervisor: Server | None = None
        self.current_launch: actions.Launch | None = None   # from Ctrl+L until the server is gone
        self.last_report: Path | None = None
        self._gpu_explicit = gpu_explicit
        self._summary = ""                 # the status line between progress messages
        self.quitting = False              # Ctrl+Q with a server up: quit once it is stopped
        self.leaving = False               # exit() was asked for: worker results no longer touch the widgets
        self._later_panes: list[Pane] = []      # composed after the first paint

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        yield Header()
        first, *self._later_panes = tab_panes()
        with TabbedContent(initial=first.id or "", id="tabs"):
            yield first         # the other tabs' panes after the first paint (_start_background)
        yield Static("", id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.theme = self.state.theme if self.state.theme in self.available_themes else "textual-dark"
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        # Slow work starts after the first paint: a worker thread holding the GIL would delay it.
        self.call_after_refresh(self._start_background)

    async def _start_background(self) -> None:
        """The other tabs' panes (composing them was a third of the first paint's CPU, issue 23), in order,
        then the probe and the analysis that fill them; nothing once the app is quitting."""
        if not self.leaving:
            tabs = self.query_one("#tabs", TabbedContent)
            with self.batch_update():
                added = [tabs.add_pane(pane) for pane in self._later_panes]
            for pane_added in added:
                await pane_added
            self._later_panes = []
        if self.leaving:
            return
        self.run_probe()
        if self.state.checkpoint:
            self.start_analysis()

    # ------------------------------------------------------------------ panes
    @property
    def hardware_pane(self) -> HardwarePane:
        return self.query_one(HardwarePane)

    @property
    def checkpoint_pane(self) -> CheckpointPane:
        return self.query_one(CheckpointPane)

    @property
    def explain_pane(self) -> ExplainPane:
        return self.query_one(ExplainPane)

    @property
    def cost_pane(self) -> CostPane:
        return self.query_one(CostPane)

    @property
    def launch_pane(self) -> LaunchPane:
        return self.query_one(LaunchPane)

    @property
    def bench_pane(self) -> BenchPane:
        return self.query_one(BenchPane)

    @property
    def microbench_pane(self) -> MicrobenchPane:
        return self.query_one(MicrobenchPane)

    @property
    def export_pane(self) -> ExportPane:
        return self.query_one(ExportPane)

    # ------------------------------------------------------------------ state
    @property
    def launch_engine(self) -> str:
        return self.launch_pane.engine

    @property
    def launch_line(self) -> str:
        return self.launch_pane.command_line

    def choose_launch_engine(self, engine: str) -> None:
        self.launch_pane.engine_select.value = engine    # -> the Launch pane shows its command

    def selected_engine(self) -> tuple[str, str | None]:
        """(engine, version) that explain uses: a remembered version, else the newest one shown
        in the engine list (state keeps None so a newer rule file is picked up later)."""
        if self.state.engine_version:
            return self.state.engine, self.state.engine_version
        engine, _, version = self.initial_engine().partition("@")
        return (self.state.engine, version or None) if engine == self.state.engine else (self.state.engine, None)

    def initial_engine(self) -> str:
        values = [v for _, v in self.engine_choices]
        want = f"{self.state.engine}@{self.state.engine_version}" if self.state.engine_version else None
        if want in values:
            return want
        return next((v for v in values if v.startswith(f"{self.state.engine}@")), values[0])

    def selection(self) -> Selection | None:
        if not self.state.checkpoint or not self.state.gpu_id:
            return None
        engine, version = self.selected_engine()
        return Selection(checkpoint=self.state.checkpoint, gpu_id=self.state.gpu_id, gpus=self.state.gpus,
                         engine=engine, engine_version=version, workload=self.state.workload)

    def update_state(self, **changes: Any) -> None:     # UserState's fields (typing.Unpack needs 3.11)
        self.state = dataclasses.replace(self.state, **changes)
        try:
            save_state(self.state, self.state_file)
        except OSError as err:
            self.notify(f"could not save state: {err}", severity="warning")

    @property
    def gpu_here(self) -> bool:
        """The probe found an NVIDIA GPU on this machine."""
        return bool(getattr(self.probe_result, "devices", ()))

    def set_status(self, text: str) -> None:
        from advisor.untrusted import printable

        self.query_one("#status", Static).update(printable(text))

    def show_summary(self) -> None:
        """The status line between progress messages: what is analysed and its verdict."""
        self.set_status(self._summary)

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Notifications carry paths, errors and server text: shown as written, never as markup."""
        from advisor.untrusted import printable

        super().notify(printable(message, multiline=True), title=printable(title), severity=severity,
                       timeout=timeout, markup=False)

    def exit(self, result: object = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        self.leaving = True
        super().exit(result, return_code, message)

    def _report(self, message: Message) -> None:
        """A worker's result for the UI thread; workers may finish after Ctrl+Q, and once the app is
        closing its widgets are being removed, so the result is dropped."""
        try:
            if not self.leaving:
                self.post_message(message)
        except RuntimeError:        # the app has already gone
            pass

    # ------------------------------------------------------------------ actions
    def action_show_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active == tab or self._later_panes:     # the other tabs come a moment after the first paint
            return
        # A focused control inside the old pane would be hidden by the switch; Textual then focuses
        # its neighbour, whose pane claims the tab back (F-keys seemed dead). Hand focus to the
        # tab bar first, as at start-up.
        focused = self.focused
        if focused is not None and any(isinstance(n, TabPane) for n in focused.ancestors):
            self.screen.set_focus(tabs.query_one(Tabs))
        tabs.active = tab

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"   # -> _theme_changed

    def _theme_changed(self, theme: Theme) -> None:
        """Any theme change (Ctrl+T, the palette's Theme command) is remembered."""
        if theme.name != self.state.theme:
            self.update_state(theme=theme.name)

    def action_load_checkpoint(self, source: str) -> None:
        if self._later_panes:      # its pane is not there yet (a moment after the first paint)
            return
        self.checkpoint_pane.source_input.value = source
        if source != self.state.checkpoint:
            self.launch_pane.forget_profile()
            self.update_state(checkpoint=source, launch_profile=None)   # recent once it inspects (_remember_source)
        self.start_analysis()
        self.action_show_tab("checkpoint")

    def action_launch(self) -> None:
        if self._later_panes:      # its pane is not there yet (a moment after the first paint)
            return
        self.action_show_tab("launch")
        self.launch_server()

    def action_stop(self) -> None:
        if self.current_launch is None:
            raise SkipAction()
        self.stop_server()

    async def action_quit(self) -> None:
        """With a server running or starting, stop it first where the user sees it (the engine may
        take seconds); the app exits once it is gone (on_server_stopped)."""
        launch = self.current_launch
        if launch is None:
            self.exit()
            return
        if self.quitting:           # pressed again: leave now (on_unmount and atexit still stop the server)
            self.exit()
            return
        self.quitting = True
        self.launch_pane.state_label.update("stopping the server, then quitting…")
        self.notify("stopping the server before quitting…", timeout=30)
        sup = launch.cancel()
        if sup is not None:
            self.launch_pane.stop_worker(sup)

    def action_export(self, fmt: str) -> None:
        if self._later_panes:      # its pane is not there yet (a moment after the first paint)
            return
        self.export_pane.set_format(fmt)
        self.action_show_tab("export")
        self.export_report()

    # the palette's and the tests' entry points: each pane does the work
    def launch_server(self) -> None:
        self.launch_pane.start()

    def stop_server(self) -> None:
        self.launch_pane.stop()

    def save_launch_profile(self) -> None:
        self.launch_pane.save_profile()

    def run_bench(self) -> None:
        self.bench_pane.run()

    def run_microbench(self) -> None:
        self.microbench_pane.run()

    def export_report(self) -> None:
        self.export_pane.export()

    # ------------------------------------------------------------------ probe
    @work(thread=True, exclusive=True, group="probe")
    def run_probe(self) -> None:
        try:
            self._report(ProbeFinished(self._probe_fn()))
        except Exception as err:  # the probe must never take the app down
            self._report(ProbeFinished(None, f"probe failed: {err}"))

    def on_probe_finished(self, event: ProbeFinished) -> None:
        if self.leaving:
            return
        if event.error is not None:
            self.notify(event.error, severity="error")
        self._probe_done(event.result)

    def _probe_done(self, result: ProbeResult | None) -> None:
        self.probe_result = result
        probed = views.probed_gpu_id(result)
        if probed and not self._gpu_explicit and probed != self.state.gpu_id:
            self.hardware_pane.gpu_select.value = probed   # -> HardwarePane re-analyses
        self.show_hardware()

    def show_hardware(self) -> None:
        """The first screen: the answer for the current choice, then the probe and the planning set."""
        doc = views.start_doc(self.probe_result, self.analysis, self.selection(), self.state.gpu_id, self.state.gpus)
        self.hardware_pane.show(doc)

    # ------------------------------------------------------------------ analysis
    def start_analysis(self) -> None:
        sel = self.selection()
        if sel is None:
            return
        self.set_status(f"analysing {sel.checkpoint} on {sel.gpus}× {sel.gpu_id} with {sel.engine}…")
        if self.analysis is not None and self.analysis.selection.checkpoint != sel.checkpoint:
            # another checkpoint: the old one's tables must not stand in for it while it loads (hub fetch)
            for pane in (self.checkpoint_pane, self.explain_pane, self.cost_pane):
                pane.view.message(f"loading {sel.checkpoint}…")
        self.run_analysis(sel)

    @work(thread=True, exclusive=True, group="analysis")
    def run_analysis(self, sel: Selection) -> None:
        self._report(AnalysisFinished(analyze(sel)))

    def on_analysis_finished(self, event: AnalysisFinished) -> None:
        if self.leaving:
            return
        result = self.analysis = event.analysis
        self._remember_source(result)
        for stage, err in result.errors.items():
            self.notify(err, title=f"{stage} failed", severity="error", timeout=8)
        self.checkpoint_pane.view.show(views.checkpoint_doc(result))
        self.explain_pane.view.show(views.explain_doc(result))
        self.cost_pane.view.show(views.cost_doc(result))
        self.show_hardware()
        self.launch_pane.show_analysis(result)
        sel = result.selection
        state = result.verdict or ("ok" if result.ok else "with errors")
        self._summary = f"{sel.checkpoint} · {sel.gpus}× {sel.gpu_id} · {sel.engine} · {sel.workload} — {state}"
        self.show_summary()

    def _remember_source(self, result: Analysis) -> None:
        """Only checkpoints that inspect become recent items; the list updates in place."""
        source = result.selection.checkpoint
        if result.checkpoint is None or source.startswith("demo:") or source != self.state.checkpoint:
            return
        if self.state.recent[:1] != (source,):
            self.update_state(recent=self.state.with_recent(source).recent)
            self.checkpoint_pane.refresh_sources()

    # ------------------------------------------------------------------ what the panes' workers report
    def on_status_changed(self, event: StatusChanged) -> None:
        if not self.leaving:
            self.set_status(event.text)

    def on_server_started(self, event: ServerStarted) -> None:
        if self.current_launch is event.launch and not event.launch.cancelled:
            self.supervisor = event.server

    def on_server_stopped(self, event: ServerStopped) -> None:
        """After the Launch pane has shown it: forget the server, and quit if Ctrl+Q asked to."""
        if self.leaving:
            return
        self.supervisor = None
        self.current_launch = None
        if self.quitting:
            self.exit()

    def on_unmount(self) -> None:
        launch = self.current_launch
        if launch is not None:
            launch.cancel()
            launch.wait_settled(15)     # a start in flight stops what it started once it sees the cancel
            if launch.server is not None:
                actions.stop_server(launch.server)

"""F6, Launch: the generated (editable) serve command, saved profiles, start/stop, the live log and
the kernel check once the server answers.

The server itself is app-wide state (the app holds the launch in flight and its supervisor, which
Bench and Export use); this pane runs the workers that start and stop it and shows their progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Input, Label, Select, Static

from advisor import engines
from advisor.errors import AdvisorError
from advisor.services.analysis import Analysis
from advisor.tui import actions
from advisor.tui.docview import DocView
from advisor.tui.messages import (
    LaunchCancelled,
    LaunchFailed,
    LaunchProgressed,
    LogLine,
    ServerChecked,
    ServerStarted,
    ServerStopped,
)
from advisor.tui.panes.pane import Pane

if TYPE_CHECKING:      # annotations only: the supervisor loads when a server starts
    from textual.widgets import RichLog, TextArea

    from launchers.supervisor import Server


class LaunchPane(Pane):
    def __init__(self, title: str, *, id: str):
        super().__init__(title, id=id)
        self._pending_line: str | None = None   # a profile's command, set once its engine is selected
        self._restore_profile: str | None = None   # shown once the first analysis has a command

    def compose(self) -> ComposeResult:
        # RichLog and TextArea (rich.pretty, attrs: 20 ms on a 2-core box) load with this pane, after the first paint
        from textual.widgets import RichLog, TextArea

        self._restore_profile = self.advisor.state.launch_profile
        with Horizontal(classes="toolbar"):
            yield Select([(e, e) for e in actions.LAUNCH_ENGINES], value=self.remembered_engine(),
                         allow_blank=False, id="launch-engine", compact=True)
            yield Button("Launch", id="launch-start", variant="success", compact=True)
            yield Button("Stop", id="launch-stop", variant="error", disabled=True, compact=True)
        yield Static("", id="launch-note", markup=False)
        yield TextArea("", id="launch-command", language=None, soft_wrap=True)
        with Horizontal(classes="toolbar"):
            yield Select([(n, n) for n in actions.saved_profiles()], prompt="saved profiles",
                         id="profile-select", compact=True)
            yield Input("", placeholder="profile name", id="profile-name", compact=True)
            yield Button("Save", id="launch-save", compact=True)
        yield Label("stopped", id="launch-state", markup=False)
        yield DocView(id="kernel-check", placeholder="")
        yield RichLog(id="launch-log", highlight=True, markup=False, max_lines=5000)

    # ------------------------------------------------------------------ widgets
    @property
    def start_button(self) -> Button:
        return self.query_one("#launch-start", Button)

    @property
    def stop_button(self) -> Button:
        return self.query_one("#launch-stop", Button)

    @property
    def engine_select(self) -> Select:
        return self.query_one("#launch-engine", Select)

    @property
    def command_area(self) -> TextArea:
        from textual.widgets import TextArea

        return self.query_one("#launch-command", TextArea)

    @property
    def profile_select(self) -> Select:
        return self.query_one("#profile-select", Select)

    @property
    def profile_name(self) -> Input:
        return self.query_one("#profile-name", Input)

    @property
    def state_label(self) -> Label:
        return self.query_one("#launch-state", Label)

    @property
    def note(self) -> Static:
        return self.query_one("#launch-note", Static)

    @property
    def kernel_check(self) -> DocView:
        return self.query_one("#kernel-check", DocView)

    @property
    def log_view(self) -> RichLog:
        from textual.widgets import RichLog

        return self.query_one("#launch-log", RichLog)

    @property
    def engine(self) -> str:
        return str(self.engine_select.value)

    @property
    def command_line(self) -> str:
        return self.command_area.text.strip()

    def remembered_engine(self) -> str:
        """The remembered Launch engine; an unknown (stale) value falls back to the explained engine."""
        state = self.advisor.state
        for engine in (state.launch_engine, state.engine):
            if isinstance(engine, str) and engine in actions.LAUNCH_ENGINES:
                return engine
        return engines.DEFAULT

    # ------------------------------------------------------------------ the analysis
    def show_analysis(self, result: Analysis) -> None:
        app = self.advisor
        self.command_area.text = actions.launch_command_line(result, self.engine, gpu_here=app.gpu_here)
        self.show_note()
        self._restore_launch_profile()
        if app.supervisor is None:
            demo = result.selection.checkpoint.startswith("demo:")
            self.state_label.update("demo: load your checkpoint on F3 to launch" if demo else "stopped")

    def show_note(self) -> None:
        app = self.advisor
        explainable = tuple(dict.fromkeys(v.partition("@")[0] for _, v in app.engine_choices))
        text = actions.launch_note(app.analysis, self.engine, explainable) or actions.demo_note(app.analysis)
        note = self.note
        note.update(text)
        note.tooltip = text or None       # the whole warning where 4 lines cut it (80 columns)
        note.display = bool(text)

    def forget_profile(self) -> None:
        """A saved launch profile serves one model: it does not follow the user to another checkpoint."""
        self._restore_profile = None
        self.profile_select.clear()

    def _restore_launch_profile(self) -> None:
        """Once, after the first analysis: pick the remembered profile again (its engine and command)
        when it still exists and loads; otherwise forget it without a word."""
        name, self._restore_profile = self._restore_profile, None
        if not name:
            return
        try:
            known = name in actions.saved_profiles()
            if known:
                actions.profile_command_line(name)
                # a profile of another model (saved before the checkpoint changed) is not this command
                known = actions.same_model(actions.profile_model(name), self.advisor.analysis)
        except (AdvisorError, OSError):
            known = False
        if known:
            self.profile_select.value = name     # -> _profile_picked
        else:
            self.advisor.update_state(launch_profile=None)

    # ------------------------------------------------------------------ profiles
    @on(Button.Pressed, "#launch-save")
    @on(Input.Submitted, "#profile-name")
    def save_profile(self) -> None:
        app = self.advisor
        name = self.profile_name.value.strip() or "default"
        try:
            path = actions.save_profile(name, self.command_line, app.analysis, self.engine, gpu_here=app.gpu_here)
        except AdvisorError as err:
            app.notify(str(err), severity="error")
            return
        app.notify(f"profile saved: {path}")
        self.profile_select.set_options([(n, n) for n in actions.saved_profiles()])
        app.update_state(launch_profile=name)

    @on(Select.Changed, "#profile-select")
    def _profile_picked(self, event: Select.Changed) -> None:
        if not isinstance(event.value, str):
            return
        app = self.advisor
        try:
            engine, line = actions.profile_command_line(event.value)
        except AdvisorError as err:
            app.notify(str(err), severity="error")
            return
        self.profile_name.value = event.value
        launch_engine = self.engine_select
        if engine in actions.LAUNCH_ENGINES and launch_engine.value != engine:
            self._pending_line = line      # _launch_engine_changed shows it instead of the generated one
            launch_engine.value = engine
        else:
            self.command_area.text = line
        if app.state.launch_profile != event.value:
            app.update_state(launch_profile=event.value)

    @on(Select.Changed, "#launch-engine")
    def _launch_engine_changed(self, event: Select.Changed) -> None:
        app = self.advisor
        area = self.command_area
        pending, self._pending_line = self._pending_line, None
        from_profile = pending is not None
        if pending is not None:
            area.text = pending
        elif app.analysis is not None:
            area.text = actions.launch_command_line(app.analysis, str(event.value), gpu_here=app.gpu_here)
        self.show_note()
        if isinstance(event.value, str) and event.value != self.remembered_engine():
            # another engine's generated command replaces the profile's: the profile is no longer in use
            app.update_state(launch_engine=event.value, **({} if from_profile else {"launch_profile": None}))

    # ------------------------------------------------------------------ start and stop
    @on(Button.Pressed, "#launch-start")
    def start(self) -> None:
        app = self.advisor
        if app.current_launch is not None:
            app.notify("a server is already running; stop it first", severity="warning")
            return
        line = self.command_line
        if not line:
            app.notify("no command to launch: load a checkpoint first", severity="warning")
            return
        self.log_view.clear()
        self.start_button.disabled = True
        self.stop_button.disabled = False
        app.current_launch = actions.Launch()
        self._server_worker(line, self.engine, app.current_launch)

    @work(thread=True, exclusive=True, group="launch")
    def _server_worker(self, line: str, engine: str, launch: actions.Launch) -> None:
        app = self.advisor
        try:
            sup = launch.start(line, app.analysis, engine=engine, gpu_here=app.gpu_here,
                               on_line=lambda s: self.report(LogLine(engine, s)))
        except AdvisorError as err:
            self.report(LaunchFailed(str(err)))
            self.report(ServerStopped())
            return
        if sup is None:             # stopped (or quit) before the server was up: nothing was left running
            self.report(ServerStopped("launch cancelled"))
            self.report(LaunchCancelled())
            return
        self.report(ServerStarted(launch, sup))
        self.report(LaunchProgressed("starting…"))
        ready = actions.wait_ready(sup, on_progress=lambda s: self.report(LaunchProgressed(s)))
        if launch.cancelled:        # stopped while loading: the stop worker reports it
            return
        doc = actions.kernel_check_doc(sup, app.analysis) + ready.detail if ready.ok else ready.detail
        self.report(ServerChecked(ready.summary, doc, ready.ok))
        if not ready.ok:
            actions.stop_server(sup)
            self.report(ServerStopped())

    @on(Button.Pressed, "#launch-stop")
    def stop(self) -> None:
        launch = self.advisor.current_launch
        if launch is None:
            return
        sup = launch.cancel()
        if sup is None:             # still starting: the launch worker cancels it (LaunchCancelled)
            self.state_label.update("cancelling the launch…")
            return
        self.state_label.update("stopping…")
        self.stop_worker(sup)

    @work(thread=True, group="stop")
    def stop_worker(self, sup: Server) -> None:
        try:
            actions.stop_server(sup)
        finally:
            self.report(ServerStopped())

    # ------------------------------------------------------------------ what the workers report
    def on_log_line(self, event: LogLine) -> None:
        from rich.text import Text

        if not self.leaving:
            self.log_view.write(Text(event.line, style=actions.line_style(event.engine, event.line)))

    def on_launch_progressed(self, event: LaunchProgressed) -> None:
        if not self.leaving:
            self.state_label.update(event.text)

    def on_launch_failed(self, event: LaunchFailed) -> None:
        if not self.leaving:
            self.advisor.notify(event.error, severity="error")

    def on_server_checked(self, event: ServerChecked) -> None:
        if self.leaving:
            return
        self.state_label.update(event.summary)
        self.kernel_check.show(event.doc)
        if not event.ok:
            self.advisor.notify(event.summary, severity="error", timeout=10)

    def on_server_stopped(self, event: ServerStopped) -> None:
        """The buttons and the state line; the app then forgets the server (and quits if asked)."""
        if self.leaving:
            return
        self.start_button.disabled = False
        self.stop_button.disabled = True
        self.state_label.update(event.why)

    def on_launch_cancelled(self, event: LaunchCancelled) -> None:
        if not self.leaving and not self.advisor.quitting:
            self.advisor.notify("launch cancelled: the server was stopped before it came up")

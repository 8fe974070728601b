"""AdvisorApp: tabs over the chain (hardware -> checkpoint -> explain -> cost -> launch/bench).

The app holds UI state only; every answer comes from the core (advisor.analysis, advisor.views,
launchers). Slow work runs in thread workers and comes back through ``call_from_thread``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.actions import SkipAction
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import (
    Button,
    Footer,
    Header,
    Input,
    Label,
    OptionList,
    RichLog,
    Select,
    Static,
    TabbedContent,
    TabPane,
    Tabs,
    TextArea,
)
from textual.widgets.option_list import Option

from advisor import views
from advisor.tui import actions
from advisor.analysis import Analysis, Selection, analyze
from advisor.doc import Doc, Paragraph
from advisor.errors import AdvisorError
from advisor.tui.commands import AdvisorCommands
from advisor.tui.docview import DocView
from advisor.tui.stepbar import StepBar
from advisor.user_state import UserState, load_state, save_state

REPORT_SUFFIXES = (".md", ".json", ".html")


def report_path_for(value: str, fmt: str) -> str:
    """The export path with the file name's report suffix set to ``fmt``: only the name changes
    (dots in folders stay), and a name with another suffix (v1.2) keeps it and gains ``.fmt``."""
    text = value.strip()
    if not text or text.endswith(("/", "\\")):
        return f"{text}nvfp4-report.{fmt}"
    p = Path(text)
    name = p.name
    if p.suffix.lower() in REPORT_SUFFIXES:
        name = p.stem
    new = f"{name}.{fmt}"
    head = text[: len(text) - len(p.name)] if text.endswith(p.name) else ""
    return f"{head}{new}"


TABS = ("hardware", "checkpoint", "explain", "cost", "launch", "bench", "microbench", "export")
# F2…F9 share one footer entry ("f2 … f9 tabs", in the tab bar's order): every key fits in 80 columns
_TAB_KEYS = Binding.Group("tabs", compact=False)


class AdvisorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "nvfp4-advisor"
    COMMANDS = App.COMMANDS | {AdvisorCommands}
    BINDINGS = [
        Binding("f2", "show_tab('hardware')", "GPU", priority=True, group=_TAB_KEYS),
        Binding("f3", "show_tab('checkpoint')", "Ckpt", priority=True, group=_TAB_KEYS),
        Binding("f4", "show_tab('explain')", "Explain", priority=True, group=_TAB_KEYS),
        Binding("f5", "show_tab('cost')", "Cost", priority=True, group=_TAB_KEYS),
        Binding("f6", "show_tab('launch')", "Launch", priority=True, group=_TAB_KEYS),
        Binding("f7", "show_tab('bench')", "Bench", priority=True, group=_TAB_KEYS),
        Binding("f8", "show_tab('microbench')", "µbench", priority=True, group=_TAB_KEYS),
        Binding("f9", "show_tab('export')", "Export", priority=True, group=_TAB_KEYS),
        Binding("ctrl+t", "toggle_theme", "Theme", show=False),
        Binding("ctrl+l", "launch", "Launch"),
        # priority: Input/TextArea bind ctrl+x to cut; with no server running the key falls through to them
        Binding("ctrl+x", "stop", "Stop", priority=True),
        Binding("ctrl+q", "quit", "Quit"),
    ]

    def __init__(self, *, state: UserState, state_file: Path | None, probe: Callable[[], Any],
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
        self.probe_result: Any = None
        self.analysis: Analysis | None = None
        self.supervisor: Any = None
        self._launch: actions.Launch | None = None   # from Ctrl+L until the server is gone
        self.last_report: Path | None = None
        self._gpu_explicit = gpu_explicit
        self._summary = ""                 # the status line between progress messages
        self._pending_line: str | None = None   # a profile's command, set once its engine is selected
        self._restore_profile = state.launch_profile   # shown once the first analysis has a command
        self._quitting = False
        self._overwrite: Path | None = None     # an existing report file the next Export may replace
        self._leaving = False                   # exit() was asked for: workers no longer touch the widgets

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        st = self.state
        yield Header()
        with TabbedContent(initial="hardware", id="tabs"):
            with TabPane("GPU", id="hardware"):
                with Horizontal(classes="toolbar"):
                    yield Select(self.gpu_choices, prompt="GPU", value=self._initial_gpu(),
                                 allow_blank=False, id="gpu-select")
                    yield Input(str(st.gpus), id="gpu-count", type="integer", tooltip="GPUs (tensor parallel)")
                yield DocView(id="hardware-view", placeholder="Probing GPUs…")
            with TabPane("Checkpoint", id="checkpoint"):
                with Horizontal(classes="toolbar"):
                    yield Input(st.checkpoint or "", placeholder="folder, file.safetensors, org/name or demo:NAME",
                                id="checkpoint-input")
                    yield Button("Load", id="checkpoint-load", variant="primary")
                yield OptionList(*self._source_options(), id="demo-list")
                yield DocView(id="checkpoint-view", placeholder="Pick a demo or enter a checkpoint.")
            with TabPane("Explain", id="explain"):
                with Horizontal(classes="toolbar"):
                    yield Select(self.engine_choices, value=self._initial_engine(),
                                 allow_blank=False, id="engine-select")
                yield DocView(id="explain-view", placeholder="Load a checkpoint first.")
            with TabPane("Cost", id="cost"):
                with Horizontal(classes="toolbar"):
                    yield Select([(w, w) for w in self.workloads],
                                 value=st.workload if st.workload in self.workloads else self.workloads[0],
                                 allow_blank=False, id="workload-select")
                yield DocView(id="cost-view", placeholder="Load a checkpoint first.")
            with TabPane("Launch", id="launch"):
                with Horizontal(classes="toolbar"):
                    yield Select([(e, e) for e in actions.LAUNCH_ENGINES], value=self._launch_engine(),
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
            with TabPane("Bench", id="bench"):
                with Horizontal(classes="toolbar"):
                    yield Input("", placeholder="server URL (default: the launched server)", id="bench-url")
                    yield Input("", placeholder="reference URL (optional: output agreement)", id="bench-reference")
                    yield Button("Run", id="bench-run", variant="primary")
                yield StepBar(id="bench-progress")
                yield DocView(id="bench-view", placeholder="Launch a server (F6) or enter a URL, then Run.")
            with TabPane("µbench", id="microbench"):
                with Horizontal(classes="toolbar"):
                    yield Button("Run microbenchmarks", id="microbench-run", variant="primary")
                yield StepBar(id="microbench-progress")
                yield DocView(id="microbench-view", placeholder="Measures this card with our Triton kernels.")
            with TabPane("Export", id="export"):
                with Horizontal(classes="toolbar"):
                    yield Select([("Markdown", "md"), ("JSON", "json"), ("HTML", "html")], value="md",
                                 allow_blank=False, id="export-format")
                    yield Input("nvfp4-report.md", id="export-path")
                    yield Button("Export", id="export-run", variant="primary")
                yield DocView(id="export-view", placeholder="Export the current analysis as a report.")
        yield Static("", id="status", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.theme = self.state.theme if self.state.theme in self.available_themes else "textual-dark"
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        # Slow work starts after the first paint: a worker thread holding the GIL would delay it.
        self.call_after_refresh(self._start_background)

    def _start_background(self) -> None:
        self.run_probe()
        if self.state.checkpoint:
            self.start_analysis()

    # ------------------------------------------------------------------ state
    @property
    def launch_engine(self) -> str:
        return str(self.query_one("#launch-engine", Select).value)

    def _launch_engine(self) -> str:
        """The remembered Launch engine; an unknown (stale) value falls back to the explained engine."""
        for engine in (self.state.launch_engine, self.state.engine):
            if isinstance(engine, str) and engine in actions.LAUNCH_ENGINES:
                return engine
        return "vllm"

    def _selected_engine(self) -> tuple[str, str | None]:
        """(engine, version) that explain uses: a remembered version, else the newest one shown
        in the engine list (state keeps None so a newer rule file is picked up later)."""
        if self.state.engine_version:
            return self.state.engine, self.state.engine_version
        engine, _, version = self._initial_engine().partition("@")
        return (self.state.engine, version or None) if engine == self.state.engine else (self.state.engine, None)

    def _initial_engine(self) -> str:
        values = [v for _, v in self.engine_choices]
        want = f"{self.state.engine}@{self.state.engine_version}" if self.state.engine_version else None
        if want in values:
            return want
        return next((v for v in values if v.startswith(f"{self.state.engine}@")), values[0])

    def _initial_gpu(self) -> str:
        ids = [v for _, v in self.gpu_choices]
        if self.state.gpu_id in ids:
            return self.state.gpu_id
        return "rtx-3090" if "rtx-3090" in ids else ids[0]

    def _source_options(self) -> list[Option]:
        # a returning user's own folders first, then the bundled demos
        opts = [Option(f"recent: {r}", id=f"recent:{r}") for r in self.state.recent if not r.startswith("demo:")]
        opts += [Option(f"demo: {d}", id=f"demo:{d}") for d in self.demos]
        return opts

    def selection(self) -> Selection | None:
        if not self.state.checkpoint or not self.state.gpu_id:
            return None
        engine, version = self._selected_engine()
        return Selection(checkpoint=self.state.checkpoint, gpu_id=self.state.gpu_id, gpus=self.state.gpus,
                         engine=engine, engine_version=version, workload=self.state.workload)

    def update_state(self, **changes: Any) -> None:
        self.state = dataclasses.replace(self.state, **changes)
        try:
            save_state(self.state, self.state_file)
        except OSError as err:
            self.notify(f"could not save state: {err}", severity="warning")

    @property
    def gpu_here(self) -> bool:
        """The probe found an NVIDIA GPU on this machine."""
        return bool(getattr(self.probe_result, "devices", ()))

    def _show_launch_note(self) -> None:
        explainable = tuple(dict.fromkeys(v.partition("@")[0] for _, v in self.engine_choices))
        text = actions.launch_note(self.analysis, self.launch_engine, explainable) or actions.demo_note(self.analysis)
        note = self.query_one("#launch-note", Static)
        note.update(text)
        note.tooltip = text or None       # the whole warning where 4 lines cut it (80 columns)
        note.display = bool(text)

    def set_status(self, text: str) -> None:
        from advisor.untrusted import printable

        self.query_one("#status", Static).update(printable(text))

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Notifications carry paths, errors and server text: shown as written, never as markup."""
        from advisor.untrusted import printable

        super().notify(printable(message, multiline=True), title=printable(title), severity=severity,
                       timeout=timeout, markup=False)

    def exit(self, *args: Any, **kwargs: Any) -> None:
        self._leaving = True
        super().exit(*args, **kwargs)

    def _from_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call_from_thread`` for workers, which may finish after Ctrl+Q: once the app is closing its
        widgets are being removed, so the result is dropped (a query would raise NoMatches)."""
        if self._leaving:
            return None
        try:
            return self.call_from_thread(self._while_open, fn, *args, **kwargs)
        except RuntimeError:        # the app has already gone
            return None

    def _while_open(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return None if self._leaving else fn(*args, **kwargs)

    # ------------------------------------------------------------------ actions
    def action_show_tab(self, tab: str) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active == tab:
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

    def _theme_changed(self, theme: Any) -> None:
        """Any theme change (Ctrl+T, the palette's Theme command) is remembered."""
        name = getattr(theme, "name", theme)
        if isinstance(name, str) and name != self.state.theme:
            self.update_state(theme=name)

    def action_load_checkpoint(self, source: str) -> None:
        self.query_one("#checkpoint-input", Input).value = source
        if source != self.state.checkpoint:
            # a saved launch profile serves one model: it does not follow the user to another checkpoint
            self._restore_profile = None
            self.query_one("#profile-select", Select).clear()
            self.update_state(checkpoint=source, launch_profile=None)   # recent once it inspects (_remember_source)
        self.start_analysis()
        self.action_show_tab("checkpoint")

    def action_launch(self) -> None:
        self.action_show_tab("launch")
        self.launch_server()

    def action_stop(self) -> None:
        if self._launch is None:
            raise SkipAction()
        self.stop_server()

    async def action_quit(self) -> None:
        """With a server running or starting, stop it first where the user sees it (the engine may
        take seconds); the app exits once it is gone (_server_gone)."""
        launch = self._launch
        if launch is None:
            self.exit()
            return
        if self._quitting:          # pressed again: leave now (on_unmount and atexit still stop the server)
            self.exit()
            return
        self._quitting = True
        self.query_one("#launch-state", Label).update("stopping the server, then quitting…")
        self.notify("stopping the server before quitting…", timeout=30)
        sup = launch.cancel()
        if sup is not None:
            self._stop_worker(sup)

    def action_export(self, fmt: str) -> None:
        """The palette's export: the path's suffix follows the format now, not when the Select's
        Changed message arrives (that came after the export had read the old .md path)."""
        path = self.query_one("#export-path", Input)
        wanted = report_path_for(path.value, fmt)
        if path.value != wanted:
            path.value = wanted
        self.query_one("#export-format", Select).value = fmt
        self.action_show_tab("export")
        self.export_report()

    # ------------------------------------------------------------------ events
    @on(Select.Changed, "#gpu-select")
    def _gpu_changed(self, event: Select.Changed) -> None:
        if event.value != self.state.gpu_id and isinstance(event.value, str):
            self.update_state(gpu_id=event.value)
            self.start_analysis()
            self.show_hardware()

    @on(Input.Submitted, "#gpu-count")
    @on(Input.Blurred, "#gpu-count")
    def _count_changed(self, event) -> None:
        try:
            n = max(1, min(64, int(event.input.value or 1)))
        except ValueError:
            n = 1
        if event.input.value != str(n):
            event.input.value = str(n)
        if n != self.state.gpus:
            self.update_state(gpus=n)
            self.start_analysis()
            self.show_hardware()

    @on(Select.Changed, "#engine-select")
    def _engine_changed(self, event: Select.Changed) -> None:
        if not isinstance(event.value, str):
            return
        engine, _, version = event.value.partition("@")
        if (engine, version or None) != self._selected_engine():     # not the value set at mount
            self.update_state(engine=engine, engine_version=version or None)
            if engine in actions.LAUNCH_ENGINES:   # launch what is explained (the tuned command)
                self.query_one("#launch-engine", Select).value = engine
            self.start_analysis()

    @on(Select.Changed, "#profile-select")
    def _profile_picked(self, event: Select.Changed) -> None:
        if not isinstance(event.value, str):
            return
        try:
            engine, line = actions.profile_command_line(event.value)
        except AdvisorError as err:
            self.notify(str(err), severity="error")
            return
        self.query_one("#profile-name", Input).value = event.value
        launch_engine = self.query_one("#launch-engine", Select)
        if engine in actions.LAUNCH_ENGINES and launch_engine.value != engine:
            self._pending_line = line      # _launch_engine_changed shows it instead of the generated one
            launch_engine.value = engine
        else:
            self.query_one("#launch-command", TextArea).text = line
        if self.state.launch_profile != event.value:
            self.update_state(launch_profile=event.value)

    @on(Select.Changed, "#workload-select")
    def _workload_changed(self, event: Select.Changed) -> None:
        if event.value != self.state.workload and isinstance(event.value, str):
            self.update_state(workload=event.value)
            self.start_analysis()

    @on(Select.Changed, "#launch-engine")
    def _launch_engine_changed(self, event: Select.Changed) -> None:
        area = self.query_one("#launch-command", TextArea)
        from_profile = self._pending_line is not None
        if from_profile:
            area.text, self._pending_line = self._pending_line, None
        elif self.analysis is not None:
            area.text = actions.launch_command_line(self.analysis, str(event.value), gpu_here=self.gpu_here)
        self._show_launch_note()
        if isinstance(event.value, str) and event.value != self._launch_engine():
            # another engine's generated command replaces the profile's: the profile is no longer in use
            self.update_state(launch_engine=event.value,
                              **({} if from_profile else {"launch_profile": None}))

    @on(Input.Submitted, "#checkpoint-input")
    @on(Button.Pressed, "#checkpoint-load")
    def _checkpoint_entered(self, event) -> None:
        source = self.query_one("#checkpoint-input", Input).value.strip()
        if not source:
            self.notify("enter a folder, a .safetensors file, a hub id or demo:NAME", severity="warning")
            return
        self.action_load_checkpoint(source)

    @on(OptionList.OptionSelected, "#demo-list")
    def _demo_picked(self, event: OptionList.OptionSelected) -> None:
        oid = event.option.id or ""
        self.action_load_checkpoint(oid.split(":", 1)[1] if oid.startswith("recent:") else oid)

    @on(Select.Changed, "#export-format")
    def _format_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            path = self.query_one("#export-path", Input)
            path.value = report_path_for(path.value, event.value)

    @on(Button.Pressed, "#export-run")
    @on(Input.Submitted, "#export-path")
    def _export_pressed(self) -> None:
        self.export_report()

    @on(Input.Changed, "#export-path")
    def _export_path_edited(self, event: Input.Changed) -> None:
        if self._overwrite is not None and Path(event.value).expanduser() != self._overwrite:
            self._overwrite = None    # the confirmation was for the file named before

    @on(Button.Pressed, "#launch-start")
    def _launch_pressed(self) -> None:
        self.launch_server()

    @on(Button.Pressed, "#launch-stop")
    def _stop_pressed(self) -> None:
        self.stop_server()

    @on(Button.Pressed, "#launch-save")
    @on(Input.Submitted, "#profile-name")
    def _save_pressed(self) -> None:
        self.save_launch_profile()

    @on(Button.Pressed, "#bench-run")
    @on(Input.Submitted, "#bench-url")
    @on(Input.Submitted, "#bench-reference")
    def _bench_pressed(self) -> None:
        self.run_bench()

    @on(Button.Pressed, "#microbench-run")
    def _microbench_pressed(self) -> None:
        self.run_microbench()

    # ------------------------------------------------------------------ probe
    @work(thread=True, exclusive=True, group="probe")
    def run_probe(self) -> None:
        try:
            result = self._probe_fn()
        except Exception as err:  # the probe must never take the app down
            result = None
            self._from_worker(self.notify, f"probe failed: {err}", severity="error")
        self._from_worker(self._probe_done, result)

    def _probe_done(self, result: Any) -> None:
        self.probe_result = result
        probed = views.probed_gpu_id(result)
        if probed and not self._gpu_explicit and probed != self.state.gpu_id:
            self.query_one("#gpu-select", Select).value = probed   # -> _gpu_changed re-analyses
        self.show_hardware()

    def show_hardware(self) -> None:
        """The first screen: the answer for the current choice, then the probe and the planning set."""
        doc = views.start_doc(self.probe_result, self.analysis, self.selection(), self.state.gpu_id, self.state.gpus)
        self.query_one("#hardware-view", DocView).show(doc)

    # ------------------------------------------------------------------ analysis
    def start_analysis(self) -> None:
        sel = self.selection()
        if sel is None:
            return
        self.set_status(f"analysing {sel.checkpoint} on {sel.gpus}× {sel.gpu_id} with {sel.engine}…")
        if self.analysis is not None and self.analysis.selection.checkpoint != sel.checkpoint:
            # another checkpoint: the old one's tables must not stand in for it while it loads (hub fetch)
            for view in ("#checkpoint-view", "#explain-view", "#cost-view"):
                self.query_one(view, DocView).message(f"loading {sel.checkpoint}…")
        self.run_analysis(sel)

    @work(thread=True, exclusive=True, group="analysis")
    def run_analysis(self, sel: Selection) -> None:
        result = analyze(sel)
        self._from_worker(self._analysis_done, result)

    def _analysis_done(self, result: Analysis) -> None:
        self.analysis = result
        self._remember_source(result)
        for stage, err in result.errors.items():
            self.notify(err, title=f"{stage} failed", severity="error", timeout=8)
        self.query_one("#checkpoint-view", DocView).show(views.checkpoint_doc(result))
        self.query_one("#explain-view", DocView).show(views.explain_doc(result))
        self.query_one("#cost-view", DocView).show(views.cost_doc(result))
        self.show_hardware()
        self.query_one("#launch-command", TextArea).text = actions.launch_command_line(
            result, self.launch_engine, gpu_here=self.gpu_here)
        self._show_launch_note()
        self._restore_launch_profile()
        if self.supervisor is None:
            demo = result.selection.checkpoint.startswith("demo:")
            self.query_one("#launch-state", Label).update(
                "demo: load your checkpoint on F3 to launch" if demo else "stopped")
        sel = result.selection
        state = result.verdict or ("ok" if result.ok else "with errors")
        self._summary = f"{sel.checkpoint} · {sel.gpus}× {sel.gpu_id} · {sel.engine} · {sel.workload} — {state}"
        self.set_status(self._summary)

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
                known = actions.same_model(actions.profile_model(name), self.analysis)
        except (AdvisorError, OSError):
            known = False
        if known:
            self.query_one("#profile-select", Select).value = name     # -> _profile_picked
        else:
            self.update_state(launch_profile=None)

    def _remember_source(self, result: Analysis) -> None:
        """Only checkpoints that inspect become recent items; the list updates in place."""
        source = result.selection.checkpoint
        if result.checkpoint is None or source.startswith("demo:") or source != self.state.checkpoint:
            return
        if self.state.recent[:1] != (source,):
            self.update_state(recent=self.state.with_recent(source).recent)
            demo_list = self.query_one("#demo-list", OptionList)
            demo_list.clear_options()
            demo_list.add_options(self._source_options())

    # ------------------------------------------------------------------ export
    def export_report(self) -> None:
        """Export what the tab shows now: format, path and command are read here, on the UI thread,
        and handed to the worker (it never reads widgets another handler may still be changing)."""
        fmt = str(self.query_one("#export-format", Select).value)
        path = Path(self.query_one("#export-path", Input).value).expanduser()
        view = self.query_one("#export-view", DocView)
        if path.is_file() and self._overwrite != path:
            # nothing is replaced without the user saying so: the same Export again confirms
            self._overwrite = path
            msg = f"{path} exists: press Export again to overwrite it"
            self.notify(msg, title="not exported", severity="warning")
            view.message(msg, "warn")
            return
        confirmed, self._overwrite = self._overwrite == path, None
        line = self.query_one("#launch-command", TextArea).text.strip()
        self._export_worker(fmt, path, line, self.launch_engine, confirmed, view)

    @work(thread=True, exclusive=True, group="export")
    def _export_worker(self, fmt: str, path: Path, line: str, engine: str, confirmed: bool, view: DocView) -> None:
        try:
            written = actions.export_report(self.analysis, self.probe_result, fmt, path, launch_line=line,
                                            launch_engine=engine, overwrite=confirmed)
        except (AdvisorError, OSError) as err:
            self._from_worker(self.notify, str(err), title="export failed", severity="error")
            self._from_worker(view.message, str(err), "bad")
            return
        self.last_report = written
        self._from_worker(view.show, Doc((Paragraph(f"Report written to {written}", "good"),)))
        self._from_worker(self.notify, f"report written: {written}")

    # ------------------------------------------------------------------ launch
    def launch_server(self) -> None:
        if self._launch is not None:
            self.notify("a server is already running; stop it first", severity="warning")
            return
        line = self.query_one("#launch-command", TextArea).text.strip()
        if not line:
            self.notify("no command to launch: load a checkpoint first", severity="warning")
            return
        self.query_one("#launch-log", RichLog).clear()
        self.query_one("#launch-start", Button).disabled = True
        self.query_one("#launch-stop", Button).disabled = False
        self._launch = actions.Launch()
        self.run_server(line, self.launch_engine, self._launch, self.query_one("#launch-log", RichLog),
                        self.query_one("#launch-state", Label), self.query_one("#kernel-check", DocView))

    @work(thread=True, exclusive=True, group="launch")
    def run_server(self, line: str, engine: str, launch: actions.Launch, log: RichLog, state: Label,
                   check: DocView) -> None:
        try:
            sup = launch.start(line, self.analysis, engine=engine, gpu_here=self.gpu_here,
                               on_line=lambda s: self._from_worker(self._log_line, log, engine, s))
        except AdvisorError as err:
            self._from_worker(self.notify, str(err), severity="error")
            self._from_worker(self._server_gone)
            return
        if sup is None:             # stopped (or quit) before the server was up: nothing was left running
            self._from_worker(self._launch_cancelled)
            return
        self._from_worker(self._server_started, launch, sup)
        self._from_worker(state.update, "starting…")
        ready = actions.wait_ready(sup, on_progress=lambda s: self._from_worker(state.update, s))
        if launch.cancelled:        # stopped while loading: the stop worker reports it
            return
        self._from_worker(state.update, ready.summary)
        self._from_worker(check.show, actions.kernel_check_doc(sup, self.analysis) + ready.detail
                          if ready.ok else ready.detail)
        if not ready.ok:
            self._from_worker(self.notify, ready.summary, severity="error", timeout=10)
            actions.stop_server(sup)
            self._from_worker(self._server_gone)

    def _log_line(self, log: RichLog, engine: str, line: str) -> None:
        from rich.text import Text

        log.write(Text(line, style=actions.line_style(engine, line)))

    def _server_started(self, launch: actions.Launch, sup: Any) -> None:
        if self._launch is launch and not launch.cancelled:
            self.supervisor = sup

    def stop_server(self) -> None:
        launch = self._launch
        if launch is None:
            return
        sup = launch.cancel()
        if sup is None:             # still starting: the launch worker cancels it (_launch_cancelled)
            self.query_one("#launch-state", Label).update("cancelling the launch…")
            return
        self.query_one("#launch-state", Label).update("stopping…")
        self._stop_worker(sup)

    @work(thread=True, group="stop")
    def _stop_worker(self, sup: Any) -> None:
        try:
            actions.stop_server(sup)
        finally:
            self._from_worker(self._server_gone)

    def _launch_cancelled(self) -> None:
        self._server_gone("launch cancelled")
        if not self._quitting:
            self.notify("launch cancelled: the server was stopped before it came up")

    def _server_gone(self, why: str = "stopped") -> None:
        self.supervisor = None
        self._launch = None
        self.query_one("#launch-start", Button).disabled = False
        self.query_one("#launch-stop", Button).disabled = True
        self.query_one("#launch-state", Label).update(why)
        if self._quitting:
            self.exit()

    def save_launch_profile(self) -> None:
        line = self.query_one("#launch-command", TextArea).text.strip()
        name = self.query_one("#profile-name", Input).value.strip() or "default"
        try:
            path = actions.save_profile(name, line, self.analysis, self.launch_engine, gpu_here=self.gpu_here)
        except AdvisorError as err:
            self.notify(str(err), severity="error")
            return
        self.notify(f"profile saved: {path}")
        self.query_one("#profile-select", Select).set_options([(n, n) for n in actions.saved_profiles()])
        self.update_state(launch_profile=name)

    # ------------------------------------------------------------------ bench
    def run_bench(self) -> None:
        """Benchmark the URL on the tab (or the launched server) with the CLI's defaults; what the
        worker needs is read here, on the UI thread, and the progress bar shows tokens and the ETA."""
        view = self.query_one("#bench-view", DocView)
        url = self.query_one("#bench-url", Input).value.strip() or actions.server_url(self.supervisor)
        if not url:
            self.notify("launch a server or enter its URL first", severity="warning")
            return
        reference = self.query_one("#bench-reference", Input).value.strip()
        from launchers.bench import BenchConfig

        cfg = BenchConfig()
        view.message(f"benchmarking {url}: {cfg.settings}…")
        bar = self.query_one("#bench-progress", StepBar).bar("bench")
        self._bench_worker(url, reference, cfg, view, bar)

    @work(thread=True, exclusive=True, group="bench")
    def _bench_worker(self, url: str, reference: str, cfg: Any, view: DocView, bar: Any) -> None:
        try:
            doc = actions.bench_doc(url, self.analysis, server=self.supervisor, on_step=bar, cfg=cfg)
            if reference:
                doc = doc + actions.agreement_doc(url, reference,
                                                  on_progress=lambda s: self._from_worker(self.set_status, s))
        except AdvisorError as err:
            self._from_worker(self.notify, str(err), severity="error")
            self._from_worker(view.message, str(err), "bad")
            return
        finally:
            bar.close()
            self._from_worker(self.set_status, self._summary)
        self._from_worker(view.show, doc)

    # ------------------------------------------------------------------ microbench
    def run_microbench(self) -> None:
        view = self.query_one("#microbench-view", DocView)
        view.message("running microbenchmarks…")
        self._microbench_worker(view, self.query_one("#microbench-progress", StepBar).bar("µbench"))

    @work(thread=True, exclusive=True, group="microbench")
    def _microbench_worker(self, view: DocView, bar: Any) -> None:
        from advisor.progress import Step

        try:
            doc = actions.microbench_doc(self.analysis,
                                         on_progress=lambda done, total, label: bar(Step(done, total, "case", label)))
        except AdvisorError as err:
            self._from_worker(self.notify, str(err), severity="error")
            doc = Doc((Paragraph(str(err), "bad"),))
        finally:
            bar.close()
        self._from_worker(view.show, doc)

    def on_unmount(self) -> None:
        launch = self._launch
        if launch is not None:
            launch.cancel()
            launch.wait_settled(15)     # a start in flight stops what it started once it sees the cancel
            if launch.server is not None:
                actions.stop_server(launch.server)


def make_app(*, state_file: Path | None = None, probe: Callable[[], Any] | None = None,
             checkpoint: str | None = None, gpu: str | None = None, gpus: int | None = None,
             engine: str | None = None) -> AdvisorApp:
    """The one factory (CLI and tests): reads remembered state, applies explicit choices."""
    from advisor.user_state import state_path

    state_file = state_file or state_path()
    state = load_state(state_file)
    probe_fn = probe or views.default_probe
    gpu_choices = views.gpu_choices()
    explicit = bool(gpu or state.gpu_id)     # chosen now or remembered: the probe does not override it
    if gpu:
        state = dataclasses.replace(state, gpu_id=gpu)
    elif state.gpu_id is None:
        state = dataclasses.replace(state, gpu_id=views.default_gpu_id(gpu_choices))
    if gpus:
        state = dataclasses.replace(state, gpus=gpus)
    if engine:      # an engine chosen now is also the one to launch
        state = dataclasses.replace(state, engine=engine, launch_engine=None, launch_profile=None)
    demos = views.demo_names()
    if checkpoint:      # becomes a recent item once it inspects, like one typed in the app
        state = dataclasses.replace(state, checkpoint=checkpoint)
    elif not state.checkpoint and demos:
        state = dataclasses.replace(state, checkpoint=f"demo:{demos[0]}")
    return AdvisorApp(state=state, state_file=state_file, probe=probe_fn, gpu_choices=gpu_choices,
                      demos=demos, workloads=views.workload_names(), gpu_explicit=explicit)

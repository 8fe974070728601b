"""Command palette: every action of the app, searchable (Ctrl+P)."""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.widgets import Select

from advisor.tui.panes.cost import CostPane
from advisor.tui.panes.explain import ExplainPane
from advisor.tui.panes.hardware import HardwarePane
from advisor.tui.panes.pane import AdvisorHost
from advisor.tui.tabs import TABS


class PaletteHost(AdvisorHost, Protocol):
    """The app as the palette uses it: the panes with pickers and every action (AdvisorApp)."""

    @property
    def hardware_pane(self) -> HardwarePane: ...

    @property
    def explain_pane(self) -> ExplainPane: ...

    @property
    def cost_pane(self) -> CostPane: ...

    def action_show_tab(self, tab: str) -> None: ...

    def action_launch(self) -> None: ...

    def action_export(self, fmt: str) -> None: ...

    def action_toggle_theme(self) -> None: ...

    def save_launch_profile(self) -> None: ...

    def stop_server(self) -> None: ...

    def run_bench(self) -> None: ...

    def run_microbench(self) -> None: ...

    def run_probe(self) -> None: ...


def _on_tab(app: PaletteHost, tab: str, action: Callable[[], object]) -> Callable[[], None]:
    """An action run where its result shows: the palette closes onto that tab."""
    def run() -> None:
        app.action_show_tab(tab)
        action()

    return run


def _choose(select: Select, value: str) -> None:
    select.value = value        # its Changed message re-plans


class AdvisorCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = cast(PaletteHost, self.app)
        for tab in TABS:
            yield tab.palette, partial(app.action_show_tab, tab.id), f"switch to the {tab.id} tab"
        for demo in app.demos:
            yield f"Load demo {demo}", partial(app.action_load_checkpoint, f"demo:{demo}"), "bundled demo checkpoint"
        for label, value in app.engine_choices:
            yield f"Engine: {label}", partial(_choose, app.explain_pane.engine_select, value), \
                "explain/plan with this engine's rules"
        for w in app.workloads:
            yield f"Workload: {w}", partial(_choose, app.cost_pane.workload_select, w), \
                "plan and tune for this workload"
        for label, gpu_id in app.gpu_choices:
            yield f"GPU: {label}", partial(_choose, app.hardware_pane.gpu_select, gpu_id), \
                "plan for this card (what-if)"
        yield "Launch server", app.action_launch, "start the generated serve command"
        yield "Save launch profile", _on_tab(app, "launch", app.save_launch_profile), \
            "save the (edited) command under the profile name"
        yield "Stop server", _on_tab(app, "launch", app.stop_server), "stop the launched server (whole process group)"
        yield "Run benchmark", _on_tab(app, "bench", app.run_bench), "benchmark the running server against the plan"
        yield "Run microbenchmarks", _on_tab(app, "microbench", app.run_microbench), \
            "measure this GPU with the bundled Triton kernels"
        for fmt in ("md", "json", "html"):
            yield f"Export report as {fmt}", partial(app.action_export, fmt), "write a compatibility report"
        yield "Re-probe GPUs", _on_tab(app, "hardware", app.run_probe), "query NVML again"
        yield "Toggle dark/light theme", app.action_toggle_theme, "switch theme (remembered)"

    async def discover(self) -> Hits:
        for title, callback, help_text in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)

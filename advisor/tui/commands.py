"""Command palette: every action of the app, searchable (Ctrl+P)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


def _on_tab(app, tab: str, action):
    """An action run where its result shows: the palette closes onto that tab."""
    def run() -> None:
        app.action_show_tab(tab)
        action()

    return run


class AdvisorCommands(Provider):
    def _commands(self):
        app = self.app
        tabs = [("Show GPU / hardware", "hardware"), ("Show checkpoint", "checkpoint"),
                ("Show kernel path (explain)", "explain"), ("Show cost and tuning", "cost"),
                ("Show launch", "launch"), ("Show benchmark", "bench"),
                ("Show microbenchmarks", "microbench"), ("Show export", "export")]
        for title, tab in tabs:
            yield title, partial(app.action_show_tab, tab), f"switch to the {tab} tab"
        for demo in getattr(app, "demos", ()):
            yield f"Load demo {demo}", partial(app.action_load_checkpoint, f"demo:{demo}"), "bundled demo checkpoint"
        for label, value in getattr(app, "engine_choices", ()):
            yield f"Engine: {label}", partial(app.query_one("#engine-select").__setattr__, "value", value), \
                "explain/plan with this engine's rules"
        for w in getattr(app, "workloads", ()):
            yield f"Workload: {w}", partial(app.query_one("#workload-select").__setattr__, "value", w), \
                "plan and tune for this workload"
        for label, gpu_id in getattr(app, "gpu_choices", ()):
            yield f"GPU: {label}", partial(app.query_one("#gpu-select").__setattr__, "value", gpu_id), \
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

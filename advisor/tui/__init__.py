"""The Textual TUI: a thin view over the application layer (advisor.services).

``create_app`` is the one factory used by the CLI and the tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from advisor import code_cache

if TYPE_CHECKING:
    from advisor.probe.model import ProbeResult
    from advisor.tui.app import AdvisorApp

code_cache.install()    # before Textual's and our dataclasses: compiled code kept between runs


def create_app(*, state_file: Path | None = None, probe: Callable[[], ProbeResult] | None = None,
               checkpoint: str | None = None, gpu: str | None = None, gpus: int | None = None,
               engine: str | None = None) -> AdvisorApp:
    """Reads remembered state and applies the explicit choices (each import waits for the call: the CLI
    imports this package on every command)."""
    import dataclasses

    from advisor.services import views
    from advisor.tui.app import AdvisorApp
    from advisor.user_state import load_state, state_path

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


def run_app(**kwargs) -> int:
    import sys

    from advisor.errors import UsageError

    # Textual reads keys from stdin and draws on stderr: without both, the screen would wait forever.
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError("the TUI needs a terminal (stdin and stderr); for scripts use inspect, explain or plan")
    app = create_app(**kwargs)
    app.run()
    return app.return_code or 0

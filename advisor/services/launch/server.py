"""A launched engine server: started with its log under the user's data folder, waited on until it
serves (or fails, with the log lines that say why), its kernels checked against explain, watched, stopped."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from advisor.doc import Doc
from advisor.errors import UsageError

if TYPE_CHECKING:      # annotations only: the supervisor loads when a server starts
    from advisor.kernel_path.model import Explanation
    from advisor.services.analysis import Analysis
    from launchers.command import LaunchCommand
    from launchers.kernel_check import KernelCheck
    from launchers.supervisor import Server, StopResult


@dataclasses.dataclass(frozen=True)
class ReadyState:
    ok: bool
    summary: str
    detail: Doc = Doc()


def log_path(engine: str, port: int, log_dir: Path | None = None) -> Path:
    """Where a server's log goes: ``log_dir`` (default: the logs folder beside the run records), one
    file per engine, port and start time."""
    from launchers import pidfile

    log_dir = log_dir or pidfile.run_dir().parent / "logs"
    return log_dir / f"{engine}-{port}-{time.strftime('%Y%m%d-%H%M%S')}.log"


def server_for(cmd: LaunchCommand, log: Path, on_line: Callable[[str], None] | None = None) -> Server:
    """The supervised server for CMD, not started yet (``start()``; it raises ServerFailed)."""
    from launchers.supervisor import Server

    return Server(cmd, log_path=log, on_line=on_line)


def start_server(line: str, analysis: Analysis | None, *, engine: str | None = None,
                 on_line: Callable[[str], None] | None = None, log_dir: Path | None = None,
                 gpu_here: bool = False) -> Server:
    """Start the (edited) command line for an analysis; the orphans an earlier run left and this start
    ended are said through ``on_line``."""
    from advisor.services.launch.command import command_from_line

    cmd = command_from_line(line, analysis, engine, gpu_here=gpu_here)
    if cmd.settings.model.startswith("demo:"):
        raise UsageError(f"{cmd.settings.model} is a demo without weights: replace it with your checkpoint — load "
                         "your folder on F3 (Checkpoint), then launch")
    server = server_for(cmd, log_path(cmd.engine, cmd.settings.port, log_dir), on_line).start()
    for swept in server.swept:           # orphans of an earlier run this start ended: said in the live log
        if on_line:
            on_line(f"nvfp4-advisor: {swept.text}")
    return server


class Launch:
    """One launch from the TUI. A stop asked for before the server process exists cancels it: the
    start is skipped, or the process group is stopped as soon as it exists. Exactly one side stops a
    started server: the first ``cancel()`` hands it to its caller when it is already known, otherwise
    ``start()`` stops it itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.server: Server | None = None
        self.cancelled = False
        self._under_way = False              # start() got past the cancel check: a process may appear
        self.settled = threading.Event()     # start() has returned (and stopped what it cancelled)

    def cancel(self) -> Server | None:
        """Ask the launch to stop. Returns the server for the caller to stop, or None when there is
        none yet (start() then never starts it, or stops it as soon as it exists) or it was handed
        out by an earlier cancel()."""
        with self._lock:
            first = not self.cancelled
            self.cancelled = True
            return self.server if first else None

    def start(self, line: str, analysis: Analysis | None, *, engine: str | None = None,
              on_line: Callable[[str], None] | None = None, log_dir: Path | None = None,
              gpu_here: bool = False) -> Server | None:
        """start_server() unless cancelled; None when the launch was cancelled (nothing left running)."""
        try:
            with self._lock:
                if self.cancelled:
                    return None
                self._under_way = True
            server = start_server(line, analysis, engine=engine, on_line=on_line, log_dir=log_dir, gpu_here=gpu_here)
            with self._lock:
                cancelled = self.cancelled
                self.server = None if cancelled else server
            if cancelled:
                server.stop()
                return None
            return server
        finally:
            self.settled.set()

    def wait_settled(self, timeout_s: float) -> None:
        """After cancel(): wait for a start already under way (it stops what it started); a start
        that has not begun never will, so there is nothing to wait for."""
        with self._lock:
            under_way = self._under_way
        if under_way:
            self.settled.wait(timeout_s)


def wait_ready(server: Server, *, timeout_s: float = 900.0,
               on_progress: Callable[[str], None] | None = None) -> ReadyState:
    """Wait until the server serves; ``on_progress`` gets one line per poll (phase, time, probe)."""
    from launchers import report
    from launchers.supervisor import ServerFailed

    def progress(p) -> None:
        if on_progress:
            on_progress(f"{p.phase} {p.elapsed_s:.0f} s — {p.probe}")

    try:
        ready = server.wait_ready(timeout_s, on_progress=progress)
    except ServerFailed as err:
        return ReadyState(False, str(err), report.failure_doc(err))
    return ReadyState(True, f"ready after {ready.elapsed_s:.1f} s at {ready.base_url}",
                      report.findings_doc(ready.findings, "Warnings at start-up"))


def check_kernels(server: Server, explanation: Explanation | None, kv_tokens: int | None = None) -> KernelCheck:
    """The kernel check: the server's recent log against explain's prediction and the plan's KV pool."""
    from launchers import kernel_check

    return kernel_check.check(server.tail(4000), explanation, kv_tokens)


def kernel_check_doc(server: Server, analysis: Analysis | None) -> Doc:
    """The kernel check of a server against an analysis (its explanation only for the same engine)."""
    from launchers import report
    from launchers.settings import predicted_kv_tokens

    explanation = analysis.explanation if analysis is not None else None
    if explanation is not None and explanation.engine != server.engine:
        explanation = None        # a transformers/llama.cpp server has no explain prediction
    plan = analysis.plan if analysis is not None else None
    kv = predicted_kv_tokens(plan.to_json()) if plan is not None and explanation is not None else None
    return report.kernel_check_doc(check_kernels(server, explanation, kv))


def line_style(engine: str, line: str) -> str:
    """How the live log shows a server line: failures red, known warnings yellow."""
    from launchers.signatures import match_line

    found = match_line(engine, line)
    if any(f.fatal for f in found):
        return "bold red"
    if any(f.kind != "ready" for f in found):
        return "yellow"
    return "green" if found else ""


def stop_server(server: Server) -> StopResult:
    return server.stop()


def server_url(server: Server | None) -> str:
    return server.cmd.settings.base_url if server is not None else ""


def leftovers() -> list:
    """Servers an earlier advisor run started and left running (their run records)."""
    from launchers import pidfile

    return pidfile.leftovers()


def stop_leftover(record):
    from launchers.supervisor import stop_leftover as stop

    return stop(record)


def watch(pids: Callable[[], list[int]]):
    """A started watchdog over the processes ``pids()`` names (GPU use, CPU fallback); ``stop()``
    returns its samples for watch_findings()."""
    from launchers import watchdog

    return watchdog.Watchdog(pids).start()


def watch_findings(samples, device: str | None):
    """What the watchdog saw, judged for a server on ``device`` ("cpu": no GPU expected)."""
    from launchers import watchdog

    return watchdog.findings(samples, expect_gpu=device != "cpu")

"""What the TUI's Launch, Bench, µbench and Export tabs run: thin calls into launchers/ and
advisor.report, the same functions the `launch`, `bench`, `microbench` and `report` commands use.

Lives in the TUI package because launchers/ sits downstream of the core (the core never imports it).
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
import time
from pathlib import Path
from typing import Any, Callable

from advisor.doc import Doc, Paragraph
from advisor.errors import AdvisorError, UsageError

LAUNCH_ENGINES = ("vllm", "sglang", "fastllm", "llamacpp", "trtllm", "transformers")


@dataclasses.dataclass(frozen=True)
class ReadyState:
    ok: bool
    summary: str
    detail: Doc = Doc()


def untuned_tp(analysis: Any) -> int:
    """TP for an engine the plan did not tune: the plan's TP where it fits the GPUs, else the largest
    split of the model (attention and KV heads) over at most the selected GPUs."""
    from advisor.cost.feasibility import tp_problem

    gpus = max(1, analysis.selection.gpus)
    arch = analysis.checkpoint.arch
    rec = getattr(analysis.plan, "recommendation", None)
    planned = getattr(rec, "tp", None)
    if planned and planned <= gpus and tp_problem(planned, arch) is None:
        return planned
    return next((n for n in range(gpus, 0, -1) if tp_problem(n, arch) is None), 1)


def generated_command(analysis: Any, engine: str | None = None, port: int = 8000, *, gpu_here: bool = False):
    """The tuned serve command for an analysis (plan recommendation -> ServeSettings -> argv).
    Another engine than the explained one gets untuned settings with a TP the model allows;
    ``gpu_here``: the probe found a GPU (transformers serve then picks it, else runs on the CPU)."""
    from launchers.engines import build_command
    from launchers.settings import ServeSettings, settings_from_plan

    if analysis is None or analysis.checkpoint is None:
        return None
    engine = engine or analysis.selection.engine
    model = analysis.checkpoint.source
    moe = analysis.checkpoint.arch.moe is not None
    if analysis.plan is not None and engine == analysis.selection.engine:
        settings = settings_from_plan(analysis.plan, engine=engine, model=model, port=port,
                                      checkpoint_scheme=analysis.checkpoint.label, checkpoint_moe=moe)
    else:
        tp = 1 if engine == "transformers" else untuned_tp(analysis)     # transformers serve: one device
        settings = ServeSettings(engine=engine, model=model, port=port, tp=tp,
                                 device="cpu" if engine == "transformers" and not gpu_here else None,
                                 checkpoint_scheme=analysis.checkpoint.label, checkpoint_moe=moe)
    return build_command(settings)


def launch_note(analysis: Any, engine: str | None, explainable: tuple[str, ...] = ()) -> str:
    """The warning above the Launch tab's command: the verdict `launch --dry-run` prints for the
    explained engine, or that another engine's command is not tuned ('' when neither applies)."""
    if analysis is None or analysis.checkpoint is None:
        return ""
    planned = analysis.selection.engine
    if engine and engine != planned:
        how = ("pick the engine on the Explain tab to tune it" if engine in explainable
               else f"the advisor has no {engine} rules to tune it")
        return f"not tuned: explain/plan use {planned} — {how}"
    return analysis.verdict_reason


def demo_note(analysis: Any) -> str:
    """What to replace in a demo's command ('' for a real checkpoint): the demo has no weights."""
    source = analysis.selection.checkpoint if analysis is not None else ""
    if not source.startswith("demo:"):
        return ""
    return (f"{source} is a demo (configs, no weights): this is its tuned command. To run it, replace {source} "
            "with your checkpoint — load your folder on F3 (Checkpoint) and the command is re-tuned for it — "
            "then Ctrl+L.")


def launch_command_line(analysis: Any, engine: str | None = None, *, gpu_here: bool = False) -> str:
    try:
        cmd = generated_command(analysis, engine, gpu_here=gpu_here)
    except AdvisorError as err:
        return f"# {err}"
    return cmd.display() if cmd is not None else ""


def command_from_line(line: str, analysis: Any, engine: str | None = None, *, gpu_here: bool = False):
    """The (possibly edited) shell line -> a LaunchCommand: leading KEY=VALUE words are the
    environment, `--port N` / `--host H` update where readiness is polled."""
    base = generated_command(analysis, engine, gpu_here=gpu_here)
    if base is None:
        raise UsageError("load a checkpoint first")
    try:
        words = shlex.split(line.replace("\\\n", " "), comments=True)   # join `\`-continued lines
    except ValueError as err:
        raise UsageError(f"cannot parse the command: {err}") from None
    env = []
    while words and "=" in words[0] and not words[0].startswith("-") and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        env.append((k, v))
    if not words:
        raise UsageError("the command is empty")
    settings = base.settings
    for flag, field, conv in (("--port", "port", int), ("--host", "host", str)):
        if flag in words:
            i = words.index(flag) + 1
            try:
                settings = dataclasses.replace(settings, **{field: conv(words[i])})
            except (IndexError, ValueError):
                raise UsageError(f"{flag} needs a value") from None
    return dataclasses.replace(base, settings=settings, argv=tuple(words), env=tuple(env))


def start_server(line: str, analysis: Any, *, engine: str | None = None, on_line: Callable[[str], None] | None = None,
                 log_dir: Path | None = None, gpu_here: bool = False):
    from launchers import pidfile
    from launchers.supervisor import Server

    cmd = command_from_line(line, analysis, engine, gpu_here=gpu_here)
    if cmd.settings.model.startswith("demo:"):
        raise UsageError(f"{cmd.settings.model} is a demo without weights: replace it with your checkpoint — load "
                         "your folder on F3 (Checkpoint), then launch")
    log_dir = log_dir or pidfile.run_dir().parent / "logs"
    log = log_dir / f"{cmd.engine}-{cmd.settings.port}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    server = Server(cmd, log_path=log, on_line=on_line).start()
    for swept in server.swept:           # orphans of an earlier run this start ended: said in the live log
        if on_line:
            on_line(f"nvfp4-advisor: {swept.text}")
    return server


class Launch:
    """One launch from the Launch tab. A stop asked for before the server process exists cancels
    it: the start is skipped, or the process group is stopped as soon as it exists. Exactly one side
    stops a started server: the first ``cancel()`` hands it to its caller when it is already known,
    otherwise ``start()`` stops it itself."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.server: Any = None
        self.cancelled = False
        self._under_way = False              # start() got past the cancel check: a process may appear
        self.settled = threading.Event()     # start() has returned (and stopped what it cancelled)

    def cancel(self) -> Any:
        """Ask the launch to stop. Returns the server for the caller to stop, or None when there is
        none yet (start() then never starts it, or stops it as soon as it exists) or it was handed
        out by an earlier cancel()."""
        with self._lock:
            first = not self.cancelled
            self.cancelled = True
            return self.server if first else None

    def start(self, line: str, analysis: Any, *, engine: str | None = None,
              on_line: Callable[[str], None] | None = None, log_dir: Path | None = None,
              gpu_here: bool = False) -> Any:
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


def wait_ready(server: Any, *, timeout_s: float = 900.0, on_progress: Callable[[str], None] | None = None) -> ReadyState:
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


def kernel_check_doc(server: Any, analysis: Any) -> Doc:
    from launchers import kernel_check, report
    from launchers.settings import predicted_kv_tokens

    explanation = getattr(analysis, "explanation", None)
    if explanation is not None and explanation.engine != server.engine:
        explanation = None        # a transformers/llama.cpp server has no explain prediction
    plan = getattr(analysis, "plan", None)
    kv = predicted_kv_tokens(plan.to_json()) if plan is not None and explanation is not None else None
    return report.kernel_check_doc(kernel_check.check(server.tail(4000), explanation, kv))


def line_style(engine: str, line: str) -> str:
    """How the live log shows a server line: failures red, known warnings yellow."""
    from launchers.signatures import match_line

    found = match_line(engine, line)
    if any(f.fatal for f in found):
        return "bold red"
    if any(f.kind != "ready" for f in found):
        return "yellow"
    return "green" if found else ""


def saved_profiles() -> list[str]:
    from launchers import profiles

    return profiles.list_names()


def profile_model(name: str) -> str:
    """The model (checkpoint) a saved launch profile serves."""
    from launchers import profiles

    settings, _ = profiles.load(name)
    return settings.model


def same_model(model: str, analysis: Any) -> bool:
    """A profile's model is the analysed checkpoint (as typed, as inspected, or the same folder)."""
    if analysis is None:
        return False
    names = {analysis.selection.checkpoint}
    if analysis.checkpoint is not None:
        names.add(analysis.checkpoint.source)
    if model in names:
        return True
    try:
        return any(Path(model).expanduser().resolve() == Path(n).expanduser().resolve() and Path(n).expanduser().exists()
                   for n in names)
    except (OSError, ValueError):
        return False


def profile_command_line(name: str) -> tuple[str, str]:
    """(engine, display line) of a saved launch profile."""
    from launchers import profiles
    from launchers.engines import build_command

    settings, _ = profiles.load(name)
    return settings.engine, build_command(settings).display()


def stop_server(server: Any):
    return server.stop()


def server_url(server: Any) -> str:
    return server.cmd.settings.base_url if server is not None else ""


def _flag_groups(argv) -> list[tuple[str, ...]]:
    """argv as units: a flag with the values that follow it, or a lone positional word."""
    groups: list[list[str]] = []
    for word in argv:
        if word.startswith("-") or not groups or not groups[-1][0].startswith("-"):
            groups.append([word])
        else:
            groups[-1].append(word)
    return [tuple(g) for g in groups]


def save_profile(name: str, line: str, analysis: Any, engine: str | None = None, *, gpu_here: bool = False) -> Path:
    """Save the (edited) command as a launch profile: --port/--host become settings, every other
    flag or environment variable the edit added (or changed) is kept as an extra."""
    from launchers import profiles
    from launchers.engines import build_command

    cmd = command_from_line(line, analysis, engine, gpu_here=gpu_here)
    settings = cmd.settings
    rebuilt = build_command(settings)           # the generated command with the edited port/host
    known = set(_flag_groups(rebuilt.argv))
    extra = tuple(w for g in _flag_groups(cmd.argv) if g not in known for w in g)
    env = tuple(kv for kv in cmd.env if kv not in rebuilt.env)
    if extra or env:
        settings = dataclasses.replace(settings, extra_args=settings.extra_args + extra,
                                       extra_env=settings.extra_env + env)
    return profiles.save(name, settings)


def bench_doc(url: str, analysis: Any, *, server: Any = None, on_progress: Callable[[str], None] | None = None,
              on_step: Callable[[Any], None] | None = None, cfg: Any = None) -> Doc:
    """Benchmark a server and judge it against the plan, as `bench --plan` does, with the CLI's
    defaults (launchers.bench.BenchConfig): the server's processes watched, the kernel check of a
    server launched here (or by `nvfp4-advisor launch`) as evidence. A server of another engine than
    the plan's (e.g. `transformers serve` on the CPU) is measured but not judged."""
    from urllib.parse import urlparse

    from launchers import bench, kernel_check, report, served, verdict, watchdog
    from launchers.settings import predicted_kv_tokens

    base = bench.check_url(url)
    cfg = cfg or bench.BenchConfig()
    port = urlparse(base).port or 80
    served_here = server is not None and port == server.cmd.settings.port
    launched = None if served_here else served.find(port)
    pids = [p.pid for p in server.processes()] if served_here else watchdog.listener_pids(port)
    dog = watchdog.Watchdog(lambda: pids).start() if pids else None
    try:
        rep = bench.run(base, cfg, on_progress=on_progress, on_step=on_step)
    finally:
        samples = dog.stop() if dog else []
    if rep.ttft_s is None and (rep.concurrency is None or rep.concurrency.aggregate_tps is None):
        raise AdvisorError(bench.no_measurement(rep))
    device = server.cmd.settings.device if served_here else (launched.device if launched is not None else None)
    found = watchdog.findings(samples, expect_gpu=device != "cpu") if dog else None
    plan = getattr(analysis, "plan", None)
    planned = analysis.selection.engine if analysis is not None else None
    notes: tuple = ()
    if plan is not None and served_here and server.engine != planned:
        plan = None
        notes = (Paragraph(f"Not judged: the plan predicts {planned} on {analysis.selection.gpus} × "
                           f"{analysis.gpu.name}; this is a {server.engine} server.", "dim"),)
    verdicts = []
    if plan is not None:
        pred = verdict.prediction_from_plan(plan.to_json(), "plan")
        check = None
        if served_here and getattr(analysis, "explanation", None) is not None:
            check = kernel_check.check(server.tail(4000), analysis.explanation, predicted_kv_tokens(plan.to_json()))
        elif launched is not None:
            from advisor.commands.bench import launch_check

            check, _ = launch_check(launched, None, port)
        judged = dict(kernel_check=check, watch_findings=found, what_if=pred.what_if)
        verdicts.append(verdict.judge("decode tok/s (1 stream)", rep.decode_tps, pred.decode_tps, **judged))
        if rep.concurrency:
            band = verdict.aggregate_for(pred, rep.concurrency.streams)
            verdicts.append(verdict.judge(f"aggregate tok/s ({rep.concurrency.streams} streams)",
                                          rep.concurrency.aggregate_tps, band, **judged))
    return report.bench_doc(rep, verdicts, found or ()) + Doc(notes)


def agreement_doc(url: str, reference_url: str, *, on_progress: Callable[[str], None] | None = None,
                  max_tokens: int | None = None) -> Doc:
    """Output agreement with a reference server on the bundled prompts, as `bench --reference-url`."""
    from advisor.quality.prompts import load_prompts
    from advisor.quality.report import agreement_doc as to_doc
    from launchers import agreement

    return to_doc(agreement.run(url, reference_url, load_prompts(), max_tokens=max_tokens, timeout_s=120.0,
                                on_progress=on_progress))


def microbench_doc(analysis: Any, *, on_progress: Callable[[int, int, str], None] | None = None) -> Doc:
    """Run the Triton microbenchmarks when a GPU is usable (``on_progress(done, total, case)``);
    otherwise say why not."""
    from advisor.commands.microbench import gpu_unavailable
    from advisor.install_hint import install_extra

    why = gpu_unavailable()
    if why:
        return Doc((Paragraph(f"No microbenchmarks: {why}", "warn"),
                    Paragraph("They measure this card's real bandwidth and kernel efficiency and calibrate the "
                              "cost model; run them on a machine with an NVIDIA GPU and torch + triton installed:",
                              "dim"),
                    Paragraph(install_extra("kernels"), "code")))
    from advisor.commands.microbench import measure
    from advisor.microbench.shapes import DEFAULT_M, default_shapes, shapes_from_checkpoint

    shapes = default_shapes()
    if analysis is not None and analysis.checkpoint is not None:
        shapes = shapes_from_checkpoint(analysis.checkpoint)
    return measure(shapes, DEFAULT_M, budget_s=600.0, save=True, progress=on_progress).doc


def export_report(analysis: Any, probe_result: Any, fmt: str, path: Path, *, launch_line: str = "",
                  launch_engine: str | None = None, overwrite: bool = False) -> Path:
    """The report of what the TUI shows; secrets, GPU UUIDs and host paths scrubbed like `report`.
    An existing file is replaced only with ``overwrite`` (the user pressed Export twice)."""
    import os

    from advisor import __version__
    from advisor.errors import AdvisorError as _Err
    from advisor.probe import resolve_gpus
    from advisor.report.build import Hardware, Header, LaunchCommand
    from advisor.report.export import ExportRequest, export
    from advisor.report.privacy import scrubber_for

    from advisor.report.output import check_target

    if analysis is None or analysis.checkpoint is None:
        raise UsageError("nothing to export: load a checkpoint first")
    sel = analysis.selection
    path = check_target(path, protect=(sel.checkpoint,) if not sel.checkpoint.startswith("demo:") else (),
                        overwrite=overwrite, exists_hint="press Export again to overwrite it")
    command = (f"nvfp4-advisor report {shlex.quote(sel.checkpoint)} --gpu {sel.gpu_id} --gpus {sel.gpus} "
               f"--engine {sel.engine} --workload {sel.workload} --format {fmt} -o {shlex.quote(str(path))}")
    header = Header(tool_version=__version__, generated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    command=command)
    hardware = None
    if probe_result is not None:
        try:
            hardware = Hardware(resolve_gpus(probe_result, sel.gpu_id, sel.gpus), probe_result)
        except _Err:
            hardware = None
    launch = ()
    if launch_line:
        launch = (LaunchCommand(engine=launch_engine or sel.engine, command_line=launch_line),)
    scrubber = scrubber_for(os.environ, home=str(Path.home()), cwd=os.getcwd(), probe_result=probe_result,
                            paths=(sel.checkpoint, str(path)))
    _, written, _ = export(ExportRequest(analysis=analysis, header=header, fmt=fmt, hardware=hardware,
                                         launch=launch, scrubber=scrubber), path, overwrite=overwrite)
    return written

"""A running server measured (streaming TTFT, ITL, tokens/s, concurrency, prefill) and judged against
the plan, with the evidence that explains a miss: the server's processes watched while it ran, and the
kernel check of a server `nvfp4-advisor launch` (or the TUI) started. Also output agreement with a
reference server, and the draft acceptance an engine's log reports.

`nvfp4-advisor bench` and the TUI's Bench tab call these."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

from advisor.doc import Doc, Paragraph
from advisor.errors import AdvisorError

if TYPE_CHECKING:      # annotations only: the launchers load when a run starts
    from advisor.progress import Step
    from advisor.services.analysis import Analysis
    from launchers.bench import BenchConfig, BenchReport
    from launchers.kernel_check import KernelCheck
    from launchers.served import Launched
    from launchers.supervisor import Server
    from launchers.verdict import Band, Prediction, Verdict
    from launchers.watchdog import WatchFinding


@dataclasses.dataclass(frozen=True)
class Measured:
    """One benchmark run and what was seen beside it."""

    report: BenchReport
    port: int
    served_here: bool = False           # the server given to measure() is the one measured
    watched_pids: tuple[int, ...] = ()
    findings: list[WatchFinding] | None = None   # watchdog findings; None when no process was watched
    launched: Launched | None = None    # a server `launch` started on the port


def check_url(url: str) -> str:
    """The base URL to benchmark (no trailing /v1); a usage error without a scheme or off loopback."""
    from launchers.stream_client import check_url as check

    return check(url)


def config(**given):
    """The run's settings: the given values over launchers.bench.BenchConfig's defaults (the TUI's too)."""
    from launchers import bench

    return bench.BenchConfig(**{k: v for k, v in given.items() if v is not None})


def load_prediction(path: str):
    """The prediction to judge against, from `plan --json` output or a prediction file."""
    from launchers import verdict

    return verdict.load_prediction(path)


def measure(url: str, cfg: BenchConfig | None = None, *, model: str | None = None, api_key: str | None = None,
            server: Server | None = None, on_progress: Callable[[str], None] | None = None,
            on_step: Callable[[Step], None] | None = None) -> Measured:
    """Benchmark the server at URL, watching the processes listening on its port. ``server``: one
    started here (a launchers.supervisor.Server); on its port its own processes are watched and its
    device is known, elsewhere a server `nvfp4-advisor launch` recorded is looked up."""
    from urllib.parse import urlparse

    from launchers import bench, served, watchdog

    base = check_url(url)
    cfg = cfg or bench.BenchConfig()
    port = urlparse(base).port or 80
    here = server if server is not None and port == server.cmd.settings.port else None
    served_here = here is not None
    launched = None if here is not None else served.find(port)       # its log holds the kernels
    pids = [p.pid for p in here.processes()] if here is not None else watchdog.listener_pids(port)
    dog = watchdog.Watchdog(lambda: pids).start() if pids else None
    try:
        rep = bench.run(base, cfg, model=model, api_key=api_key, on_progress=on_progress, on_step=on_step)
    finally:
        samples = dog.stop() if dog else []
    device = here.cmd.settings.device if here is not None else (launched.device if launched is not None else None)
    # a server launched for the CPU (transformers serve --device cpu) is not a CPU fallback
    found = watchdog.findings(samples, expect_gpu=device != "cpu") if dog else None
    return Measured(rep, port, served_here, tuple(pids), found, launched)


def require_measurement(rep) -> None:
    """Raise when the run measured nothing usable (no first token, no aggregate rate)."""
    from launchers import bench

    why = bench.no_measurement(rep)       # None once a first token or an aggregate rate was measured
    if why:
        raise AdvisorError(why)


def judge(rep: BenchReport, prediction: Prediction, *, kernel_check: KernelCheck | None = None,
          watch_findings: list[WatchFinding] | None = None) -> list[Verdict]:
    """The measured decode rate (one stream) and aggregate rate (N streams) against the prediction's
    bands, a miss ranked by its likely causes (kernel check, watchdog, what-if GPU)."""
    from launchers import verdict

    def judged(metric: str, measured: float | None, band: Band | None) -> Verdict:
        return verdict.judge(metric, measured, band, kernel_check=kernel_check, watch_findings=watch_findings,
                             what_if=prediction.what_if)

    verdicts = [judged("decode tok/s (1 stream)", rep.decode_tps, prediction.decode_tps)]
    if rep.concurrency:
        band = verdict.aggregate_for(prediction, rep.concurrency.streams)
        verdicts.append(judged(f"aggregate tok/s ({rep.concurrency.streams} streams)",
                               rep.concurrency.aggregate_tps, band))
    return verdicts


def launch_check(launched, plan_path: str | None, port: int):
    """The kernel check of a server `nvfp4-advisor launch` started on ``port``: its log against explain
    for its checkpoint on the plan's GPU (--plan) or this machine's, and the plan's KV pool. (None, why)
    for a server started otherwise."""
    from launchers import kernel_check

    if launched is None:
        return None, (f"kernels not checked: no server started by `nvfp4-advisor launch` listens on port {port} "
                      "(a launch records its log; that is what the check reads)")
    plan_doc = _plan_json(plan_path)
    explanation, why = _launch_explanation(launched, plan_doc)
    from launchers.settings import predicted_kv_tokens

    kv = predicted_kv_tokens(plan_doc) if plan_doc is not None else None
    check = kernel_check.check(launched.log_tail(), explanation, kv)
    note = f"kernel check: {launched.engine} server pid {launched.record.pid}, log {launched.record.log}"
    return check, note + (f"; {why}" if why else "")


def _plan_json(path: str | None) -> dict | None:
    import json

    if not path:
        return None
    from advisor.textfile import read_text

    try:
        doc = json.loads(read_text(path, what="plan file"))
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("recommendation"), dict) else None


def _launch_explanation(launched, plan_doc):
    """explain's prediction for the launched command: (Explanation, "") or (None, why not)."""
    import os
    from types import SimpleNamespace

    from advisor.services.launch.command import TUNED_ENGINES, launch_options

    if launched.engine not in TUNED_ENGINES or not launched.model:
        return None, f"no prediction: the advisor has no {launched.engine} rules"
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.rule_files import load_rules
    from launchers.served import _argv

    try:
        if plan_doc is not None and isinstance(plan_doc.get("gpu"), dict) and plan_doc["gpu"].get("id"):
            from advisor.gpu_table import get_gpu

            spec = get_gpu(plan_doc["gpu"]["id"])
        else:
            from advisor.probe import probe, resolve_gpus

            spec = resolve_gpus(probe(), "auto", None).spec      # the server runs on this machine
        argv = _argv(launched.record.command_line)
        tp = next((int(argv[i + 1]) for i, w in enumerate(argv[:-1])
                   if w in ("--tensor-parallel-size", "--tp-size", "--tp") and argv[i + 1].isdigit()), 1)
        cmd = SimpleNamespace(argv=tuple(argv), engine=launched.engine, env=(), settings=SimpleNamespace(tp=tp))
        options = launch_options(cmd, load_rules(launched.engine, None)[0], os.environ)
        info = inspect_checkpoint(launched.model)
        return explain(info, spec, gpus=max(tp, 1), engine=launched.engine, options=options), ""
    except AdvisorError as err:
        return None, f"no prediction: {err}"


def bench_doc(url: str, analysis: Analysis | None, *, server: Server | None = None,
              on_progress: Callable[[str], None] | None = None, on_step: Callable[[Step], None] | None = None,
              cfg: BenchConfig | None = None) -> Doc:
    """Benchmark a server and judge it against the analysis' plan, as `bench --plan` does, with the
    CLI's defaults (launchers.bench.BenchConfig): the server's processes watched, the kernel check of a
    server launched here (or by `nvfp4-advisor launch`) as evidence. A server of another engine than
    the plan's (e.g. `transformers serve` on the CPU) is measured but not judged."""
    from advisor.services.launch.server import check_kernels
    from launchers import report, verdict
    from launchers.settings import predicted_kv_tokens

    run = measure(url, cfg, server=server, on_progress=on_progress, on_step=on_step)
    rep = run.report
    require_measurement(rep)
    here = server if run.served_here else None
    plan = analysis.plan if analysis is not None else None
    notes: tuple[Paragraph, ...] = ()
    if analysis is not None and plan is not None and here is not None and here.engine != analysis.selection.engine:
        plan = None
        gpu_name = analysis.gpu.name if analysis.gpu is not None else analysis.selection.gpu_id
        notes = (Paragraph(f"Not judged: the plan predicts {analysis.selection.engine} on {analysis.selection.gpus} × "
                           f"{gpu_name}; this is a {here.engine} server.", "dim"),)
    verdicts: list[Verdict] = []
    if analysis is not None and plan is not None:
        pred = verdict.prediction_from_plan(plan.to_json(), "plan")
        check: KernelCheck | None = None
        if here is not None and analysis.explanation is not None:
            check = check_kernels(here, analysis.explanation, predicted_kv_tokens(plan.to_json()))
        elif run.launched is not None:
            check, _ = launch_check(run.launched, None, run.port)
        verdicts = judge(rep, pred, kernel_check=check, watch_findings=run.findings)
    return report.bench_doc(rep, verdicts, run.findings or ()) + Doc(notes)


def agreement(url: str, reference_url: str, *, prompts: str | None = None, model: str | None = None,
              reference_model: str | None = None, api_key: str | None = None, max_tokens: int | None = None,
              timeout_s: float = 300.0, on_progress: Callable[[str], None] | None = None,
              server_log: str | None = None, reference_server_log: str | None = None, engine: str | None = None):
    """Output agreement with a reference server on a prompt set (default: the bundled prompts); where
    the server did not report draft acceptance but both logs do, the acceptance canary from the logs."""
    from advisor.quality.canary import compare_acceptance, from_log
    from advisor.quality.prompts import load_prompts
    from launchers import agreement as run

    ag = run.run(url, reference_url, load_prompts(prompts), model=model, reference_model=reference_model,
                 api_key=api_key, max_tokens=max_tokens, timeout_s=timeout_s, on_progress=on_progress)
    if ag.canary is None and server_log and reference_server_log:
        cand = from_log(logged_acceptance(server_log, engine))
        ref = from_log(logged_acceptance(reference_server_log, engine))
        if cand is not None and ref is not None:
            ag = dataclasses.replace(ag, canary=compare_acceptance(cand, ref))
    return ag


def agreement_doc(url: str, reference_url: str, *, on_progress: Callable[[str], None] | None = None,
                  max_tokens: int | None = None) -> Doc:
    """Output agreement with a reference server on the bundled prompts, as `bench --reference-url`."""
    from advisor.quality.report import agreement_doc as to_doc

    return to_doc(agreement(url, reference_url, max_tokens=max_tokens, timeout_s=120.0, on_progress=on_progress))


def logged_acceptance(path: str, engine: str | None):
    """The engine's own acceptance line from its log (the last 4 MiB: engines print running windows)."""
    from advisor.textfile import read_text
    from launchers import spec_log

    return spec_log.parse(read_text(path, limit_bytes=4 * 2**20, what="server log", tail=True), engine)

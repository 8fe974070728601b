"""The compatibility report written to a file: the analysis it is about, its launch command, the
measurements it includes (each read from its file and judged against the plan), and the TUI's export
of what it shows, scrubbed of secrets, GPU UUIDs and host paths like `report`.

`nvfp4-advisor report` and the TUI's Export tab call these; advisor.report builds and writes the document.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError, UsageError

if TYPE_CHECKING:      # annotations only: the chain and the report load when a report is made
    from advisor.calibration import Calibration
    from advisor.cost.overrides import Overrides
    from advisor.gpu_spec import GpuSpec
    from advisor.probe.model import ProbeResult
    from advisor.report.build import Extra, LaunchCommand
    from advisor.services.analysis import Analysis, Selection


@dataclasses.dataclass(frozen=True)
class Measurements:
    """The files of measurements a report includes (None / empty: that section is left out)."""

    launch_log: str | None = None      # an engine's start-up log: its kernel check
    bench: str | None = None           # `bench --json` output
    microbench: str | None = None      # `microbench --json` output
    quality: tuple[str, ...] = ()      # `quality --json` / `bench --reference-url --json` outputs


def report_analysis(sel: Selection, gpu: GpuSpec, calibration: Calibration | None,
                    overrides: Overrides | None) -> Analysis:
    """inspect -> explain -> plan for the planning set (the shared chain `plan` and the TUI use), with
    exactly the calibration given; no checkpoint or GPU is one BadInput line."""
    from advisor.cost.workload import get_workload
    from advisor.services.analysis import analyze

    get_workload(sel.workload)                       # a bad name is a usage error, before any work
    analysis = analyze(sel, overrides=overrides, gpu=gpu, calibration=calibration, use_calibration=False)
    for stage in ("gpu", "inspect"):                  # no checkpoint (or GPU), no report: one line
        if stage in analysis.errors:
            from advisor.errors import BadInput

            raise BadInput(analysis.errors[stage])
    return analysis


def launch_commands(analysis: Analysis, engine: str, model: str, *, port: int = 8000,
                    api_key: str | None = None) -> tuple[LaunchCommand, ...]:
    """The report's tuned launch command for ENGINE (none without a plan; '# why' when it cannot be made)."""
    from advisor.report.build import LaunchCommand

    if analysis.plan is None or analysis.checkpoint is None:     # a plan was made from a checkpoint
        return ()
    try:
        from launchers.engines import build_command
        from launchers.settings import settings_from_plan

        settings = settings_from_plan(analysis.plan, engine=engine, model=model, port=port,
                                      api_key=api_key, checkpoint_scheme=analysis.checkpoint.label)
        cmd = build_command(settings)
    except AdvisorError as err:
        return (LaunchCommand(engine, f"# no launch command: {err}"),)
    notes = tuple(cmd.warnings) + tuple(cmd.notes)
    if model.startswith("demo:"):
        notes += ("demo checkpoint: replace the model argument with your local checkpoint folder",)
    return (LaunchCommand(engine, cmd.display(), cmd.display_steps(), notes),)


def measurement_extras(analysis: Analysis, calibration: Calibration | None,
                       measured: Measurements) -> tuple[Extra, ...]:
    """The report's measurement sections, each read from its file and judged against this analysis:
    the launch log's kernel check, a benchmark, microbenchmarks, quality, the calibration used."""
    from advisor.doc import Doc
    from advisor.jsonout import read_json_object
    from advisor.report.build import Extra
    from advisor.report.extras import benchmark_extra, calibration_extra, microbench_extra

    out = []
    plan = analysis.plan
    if measured.launch_log:
        from advisor.textfile import LOG_TAIL, read_text
        from launchers.kernel_check import check
        from launchers.report import kernel_check_doc
        from launchers.settings import predicted_kv_tokens

        # a long-running engine's log can be huge: its start-up lines are near the end of the last run
        lines = read_text(measured.launch_log, limit_bytes=LOG_TAIL, what="launch log", tail=True).splitlines()
        kc = check(lines, analysis.explanation, predicted_kv_tokens(plan) if plan is not None else None)
        doc = kernel_check_doc(kc)
        data = {"rows": [{"layer_class": r.layer_class, "predicted": r.predicted, "observed": list(r.observed),
                          "status": r.status, "line": r.line} for r in kc.rows],
                "kv": {"predicted_tokens": kc.kv.predicted_tokens, "observed_tokens": kc.kv.observed_tokens,
                       "error_pct": kc.kv.error_pct},
                "mismatches": len(kc.mismatches)}
        out.append(Extra("kernel_check", "Launch kernel check", Doc(doc.blocks[1:]), data))
    if measured.bench:
        out.append(_bench_extra(read_json_object(measured.bench), plan, benchmark_extra, measured.bench))
    if measured.microbench:
        from advisor.errors import BadInput

        try:
            out.append(microbench_extra(read_json_object(measured.microbench)))
        except (TypeError, ValueError) as err:
            raise BadInput(f"not a `microbench --json` document ({err})", path=measured.microbench) from None
    if measured.quality:
        from advisor.quality.evidence import load_files
        from advisor.report.extras import quality_extra

        weights, outputs = load_files(list(measured.quality))
        shares = analysis.checkpoint.scheme_shares if analysis.checkpoint is not None else {}
        out.append(quality_extra(weights, outputs, shares))
    if calibration is not None:
        out.append(calibration_extra(calibration))
    return tuple(out)


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bench_extra(doc: dict, plan, benchmark_extra, path: str):
    """Measured numbers from a `bench --json` document, judged against this report's plan."""
    from advisor.errors import BadInput
    from launchers.verdict import DEFAULT_BAND, Band, judge

    report = doc.get("report")
    rep: dict = report if isinstance(report, dict) else doc
    conc = rep.get("concurrency") if isinstance(rep.get("concurrency"), dict) else None
    prefill = rep.get("prefill") if isinstance(rep.get("prefill"), dict) else None
    decode = _num(rep.get("decode_tps"))
    aggregate = _num(conc.get("aggregate_tps")) if conc else None
    streams = conc.get("streams") if conc and isinstance(conc.get("streams"), int) else None
    if decode is None and aggregate is None:
        raise BadInput("no measured decode_tps or concurrency.aggregate_tps (expected `bench --json` output)",
                       path=path)
    measured = {"decode tok/s (1 stream)": decode, "TTFT median (s)": _num(rep.get("ttft_s"))}
    if conc:
        measured[f"aggregate tok/s ({streams} streams)"] = aggregate
    if prefill:
        measured["long-prompt prefill (s)"] = _num(prefill.get("prefill_s"))

    def band(v):
        return Band(v * (1 - DEFAULT_BAND), v * (1 + DEFAULT_BAND)) if v else None

    verdicts = []
    if plan is not None:
        p = plan.predictions
        verdicts.append(judge("decode tok/s (1 stream)", decode, band(p.decode_tok_s)))
        if streams in p.decode_aggregate_tok_s:
            verdicts.append(judge(f"aggregate tok/s ({streams} streams)", aggregate,
                                  band(p.decode_aggregate_tok_s[streams])))
    return benchmark_extra(measured, verdicts)


def export_shown(analysis: Analysis | None, probe_result: ProbeResult | None, fmt: str, path: Path, *,
                 launch_line: str = "",
                 launch_engine: str | None = None, overwrite: bool = False) -> Path:
    """The report of what the TUI shows; secrets, GPU UUIDs and host paths scrubbed like `report`.
    An existing file is replaced only with ``overwrite`` (the user pressed Export twice)."""
    import os
    import shlex
    import time

    from advisor import __version__
    from advisor.probe import resolve_gpus
    from advisor.report.build import Hardware, Header, LaunchCommand
    from advisor.report.export import ExportRequest, export
    from advisor.services.answer import answer_doc
    from advisor.report.output import check_target
    from advisor.report.privacy import scrubber_for

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
        except AdvisorError:
            hardware = None
    launch: tuple[LaunchCommand, ...] = ()
    if launch_line:
        launch = (LaunchCommand(engine=launch_engine or sel.engine, command_line=launch_line),)
    scrubber = scrubber_for(os.environ, home=str(Path.home()), cwd=os.getcwd(), probe_result=probe_result,
                            paths=(sel.checkpoint, str(path)))
    _, written, _ = export(ExportRequest(analysis=analysis, header=header, fmt=fmt, answer=answer_doc(analysis),
                                         hardware=hardware, launch=launch, scrubber=scrubber), path,
                           overwrite=overwrite)
    return written

"""One call from an analysis to a report file: the `report` command and the TUI's Export both use it.

The edge passes what only it knows (launch commands from launchers/, measurement sections, the
secrets and host paths to keep out); this assembles the charts and the matrix, builds the
report, checks it against its schema and writes it atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from advisor import engines as engine_registry
from advisor.doc import Doc
from advisor.errors import AdvisorError
from advisor.report.build import Extra, Hardware, Header, LaunchCommand, Report, ReportInputs, build_report
from advisor.report.privacy import Scrubber


@dataclass(frozen=True)
class ExportRequest:
    analysis: Any                               # advisor.services.analysis.Analysis
    header: Header
    fmt: str                                    # md | json | html
    answer: Doc                                 # the answer block (advisor.services.answer.answer_doc)
    hardware: Hardware | None = None
    compare: Sequence = ()                      # GpuSpecs for the matrix (empty: no matrix)
    engines: tuple[str, ...] = (engine_registry.DEFAULT,)   # matrix engines (E or E@VERSION)
    launch: tuple[LaunchCommand, ...] = ()
    extras: tuple[Extra, ...] = ()
    calibration: Any = None                     # what the plan used (the decode-vs-batch chart uses it too)
    overrides: Any = None                       # advisor.cost.overrides.Overrides the plan used
    scrubber: Scrubber = field(default_factory=Scrubber)


def make_report(req: ExportRequest) -> Report:
    from advisor.report.charts import plan_charts
    from advisor.report.output import schema_errors

    a = req.analysis
    matrix = None
    if req.compare and a.checkpoint is not None:
        from advisor.report.matrix import compute_matrix

        matrix = compute_matrix(a.checkpoint, list(req.compare), req.engines, count=a.selection.gpus,
                                workload=a.selection.workload)
    charts: tuple = ()
    if a.plan is not None:
        charts = plan_charts(a.checkpoint, a.explanation, a.gpu, a.plan, calibration=req.calibration,
                             overrides=req.overrides)
    assumed = tuple(dict.fromkeys((c.engine, c.engine_version) for c in (matrix.cells if matrix else ())
                                  if c.engine_version))
    report = build_report(ReportInputs(
        analysis=a, header=req.header, answer=req.answer, hardware=req.hardware, matrix=matrix, charts=charts,
        launch=req.launch, extras=req.extras, engines_assumed=assumed, scrubber=req.scrubber))
    problems = schema_errors(report.data)
    if problems:                       # a report that breaks its own schema is a bug: say so, write nothing
        raise AdvisorError(f"internal error: the report does not match its schema ({problems[0]})")
    return report


def export(req: ExportRequest, target: str | Path, *, overwrite: bool = False) -> tuple[Report, Path, int]:
    """Build, render and atomically write the report; returns it, the path and the bytes written.
    An existing regular file is replaced only with ``overwrite``; never a symlink, FIFO or device."""
    from advisor.report.output import render, write_atomic

    report = make_report(req)
    text = render(report, req.fmt)
    path = write_atomic(target, text, overwrite=overwrite)
    return report, path, len(text.encode("utf-8"))

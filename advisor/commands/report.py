"""`nvfp4-advisor report CHECKPOINT -o FILE`: a shareable compatibility report (md | json | html).

One checkpoint on the planning GPU(s): hardware, checkpoint classification, kernel path, predictions
and the tuned launch command; optionally measurements (launch log, benchmark, microbench,
calibration) and the compatibility matrix across many GPUs and engines (--compare).
"""

from __future__ import annotations

import argparse

NAME = "report"
HELP = "write a compatibility report (Markdown, JSON or HTML) for a checkpoint, optionally across many GPUs"
ORDER = 80

FORMATS = ("md", "json", "html")
_SUFFIX = {".md": "md", ".markdown": "md", ".json": "json", ".html": "html", ".htm": "html"}


def _engines(text: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    if not items:
        raise argparse.ArgumentTypeError("expected one or more engines, e.g. vllm or vllm,sglang")
    return items


def add_arguments(parser) -> None:
    from advisor.commands._args import add_checkpoint_argument, add_gpu_arguments

    add_checkpoint_argument(parser)
    add_gpu_arguments(parser, what_if=True)
    parser.add_argument("--compare", metavar="all|ID,ID,...",
                        help="add the compatibility matrix for these GPU ids (or the whole table)")
    parser.add_argument("--engine", type=_engines, default=("vllm",), metavar="E[@V][,E...]",
                        help="engine(s); the first is the report's, all appear in the matrix (default: vllm)")
    parser.add_argument("--workload", default="interactive",
                        help="workload profile: interactive, agents, long-context, batch (default: interactive)")
    parser.add_argument("--format", choices=FORMATS, help="md, json or html (default: from the -o suffix, else md)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the report")
    parser.add_argument("--force", action="store_true", help="overwrite FILE if it exists (a regular file only)")
    parser.add_argument("--port", type=int, default=8000, help="port in the generated launch command (default 8000)")
    parser.add_argument("--api-key", metavar="KEY",
                        help="API key the launch command sets (shown as *** in the report)")
    m = parser.add_argument_group("measurements to include (optional)")
    m.add_argument("--launch-log", metavar="FILE", help="engine start-up log: kernel check against the prediction")
    m.add_argument("--bench", metavar="FILE", help="`bench --json` output: measured vs this report's prediction")
    m.add_argument("--microbench", metavar="FILE", help="`microbench --json` output")
    m.add_argument("--quality", metavar="FILE", action="append", default=[],
                   help="`quality --json` or `bench --reference-url --json` output: a quality section; repeat for more")
    m.add_argument("--calibration", metavar="FILE",
                   help="calibration JSON (default: the one saved by microbench for this GPU, if any)")
    m.add_argument("--no-calibration", action="store_true", help="ignore saved microbench calibration")


# ---------------------------------------------------------------- edge helpers
def _format(args) -> str:
    from pathlib import Path

    if args.format:
        return args.format
    return _SUFFIX.get(Path(args.output).suffix.lower(), "md")


def reproduce_command(args, fmt: str) -> str:
    """The command line that regenerates this report (secrets shown as ***)."""
    import shlex

    parts = ["nvfp4-advisor", "report", args.checkpoint]
    if args.gpu is not None:
        parts += ["--gpu", args.gpu]
    if args.gpus is not None:
        parts += ["--gpus", str(args.gpus)]
    parts += ["--engine", ",".join(args.engine), "--workload", args.workload]
    if args.compare:
        parts += ["--compare", args.compare]
    if args.port != 8000:
        parts += ["--port", str(args.port)]
    if args.api_key:
        parts += ["--api-key", "***"]
    for flag, value in (("--launch-log", args.launch_log), ("--bench", args.bench),
                        ("--microbench", args.microbench), ("--calibration", args.calibration)):
        if value:
            parts += [flag, value]
    if args.no_calibration:
        parts.append("--no-calibration")
    parts += ["--format", fmt, "-o", args.output]
    return " ".join(shlex.quote(p) if p != "***" else p for p in parts)


def _read_json(path: str) -> dict:
    from advisor.jsonout import read_json_object

    return read_json_object(path)


def _compare_gpus(text: str, table) -> list:
    from advisor.errors import UsageError
    from advisor.gpu_table import get_gpu

    if text.strip().lower() == "all":
        return list(table)
    ids = [x.strip() for x in text.split(",") if x.strip()]
    if not ids:
        raise UsageError("--compare needs 'all' or GPU ids, e.g. --compare rtx-3090,rtx-5090")
    return [get_gpu(i) for i in dict.fromkeys(ids)]


def _planning_selection(args, probe_result, compare):
    """The planning GPU: --gpu, else the probed cards; on a machine without a GPU, the compared GPUs are
    the plan (the first of --compare heads the report, every one of them is in the matrix)."""
    from advisor.commands._args import selection_from_args
    from advisor.probe import resolve_gpus

    auto = args.gpu is None or args.gpu.strip().lower() == "auto"
    if auto and compare and not (probe_result is not None and probe_result.devices):
        first = compare[0]
        selection = resolve_gpus(probe_result, first.id, args.gpus)
        from dataclasses import replace

        return replace(selection, note=f"no GPU on this machine: planned for the compared GPUs, first {first.name} "
                                        f"({selection.note})")
    return selection_from_args(args, probe_result, what_if=True)


def _plan_overrides(args, selection, probe_result):
    """What `plan CHECKPOINT --gpu ...` would use: a probed card's power limit and PCIe link."""
    from advisor.commands import plan as plan_cmd

    parser = argparse.ArgumentParser(add_help=False)
    plan_cmd.add_arguments(parser)
    device = plan_cmd.probed_device(selection, probe_result)
    return plan_cmd.overrides_from_args(parser.parse_args([args.checkpoint]), device), device


def _measurements(args):
    from advisor.services.export import Measurements

    return Measurements(launch_log=args.launch_log, bench=args.bench, microbench=args.microbench,
                        quality=tuple(getattr(args, "quality", None) or ()))


def _calibration(args, selection, device):
    if args.no_calibration:
        return None
    if args.calibration:
        from advisor.calibration import from_dict
        from advisor.errors import BadInput

        cal = from_dict(_read_json(args.calibration))
        if cal is None:
            raise BadInput("not a calibration file (microbench output)", path=args.calibration)
        return cal
    from advisor.calibration import load_calibration

    return load_calibration(selection.spec.id, device.nvml.uuid if device is not None else None)


# ---------------------------------------------------------------- run
def run(args):
    import os
    from datetime import datetime, timezone
    from pathlib import Path

    import advisor
    from advisor.commands import Outcome
    from advisor.doc import Doc, Heading, Paragraph
    from advisor.jsonout import document
    from advisor.kernel_path.rule_versions import parse_engine_spec
    from advisor.probe import probe
    from advisor.report.build import Hardware, Header
    from advisor.report.export import ExportRequest, export
    from advisor.services.answer import answer_doc
    from advisor.report.output import check_target
    from advisor.report.privacy import scrubber_for
    from advisor.services.analysis import Selection
    from advisor.services.export import launch_commands, measurement_extras, report_analysis

    fmt = _format(args)
    engine, version = parse_engine_spec(args.engine[0])
    for spec in args.engine[1:]:
        parse_engine_spec(spec)                       # every engine name checked before any work
    if args.output == "-":
        # A file literally named "-" is never what was meant; a report is a file (HTML is self-contained).
        from advisor.errors import BadInput

        raise BadInput("a report is written to a file, not to standard output: give a name (e.g. -o report.md)",
                       path="-o -")
    local_ck = not args.checkpoint.startswith("demo:") and Path(args.checkpoint).expanduser().exists()
    target = check_target(args.output, (args.checkpoint,) if local_ck else (), overwrite=args.force)

    probe_result = probe()             # also for an id: a probed card of that model is a real fingerprint
    compare: list | tuple = ()
    if args.compare:
        from advisor.gpu_table import load_gpu_table

        table = load_gpu_table()
        compare = _compare_gpus(args.compare, list(table.values()) if isinstance(table, dict) else list(table))
    selection = _planning_selection(args, probe_result, compare)
    overrides, device = _plan_overrides(args, selection, probe_result)
    calibration = _calibration(args, selection, device)
    analysis = report_analysis(Selection(args.checkpoint, selection.spec.id, selection.count, engine, version,
                                                args.workload), selection.spec, calibration, overrides)

    scrub = scrubber_for(os.environ, home=os.path.expanduser("~"), cwd=os.getcwd(), secrets=(args.api_key,),
                         probe_result=probe_result, calibration=calibration, paths=(args.checkpoint, args.output))
    header = Header(advisor.__version__, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    reproduce_command(args, fmt))
    req = ExportRequest(analysis=analysis, header=header, fmt=fmt, answer=answer_doc(analysis),
                        hardware=Hardware(selection, probe_result),
                        compare=compare, engines=args.engine,
                        launch=launch_commands(analysis, engine, args.checkpoint, port=args.port,
                                                      api_key=args.api_key),
                        extras=measurement_extras(analysis, calibration, _measurements(args)),
                        calibration=calibration,
                        overrides=overrides, scrubber=scrub)
    report, path, size = export(req, target, overwrite=args.force)
    summary = {"path": str(path), "format": fmt, "bytes": size,
               "sections": [b.text for b in report.doc.blocks if isinstance(b, Heading) and b.level <= 2],
               "errors": dict(analysis.errors)}
    blocks = [Paragraph(f"Report written to {path} ({fmt}, {size:,} bytes).", style="good")]
    if analysis.errors:
        blocks.append(Paragraph("Some stages could not be computed: " + "; ".join(
            f"{k}: {v}" for k, v in analysis.errors.items()), style="warn"))
    return Outcome(json=document("report-written", summary), doc=Doc(tuple(blocks)), exit_code=0)

"""`nvfp4-advisor microbench`: measure this GPU's bandwidth and kernel classes, calibrate `plan`."""

from __future__ import annotations

import argparse

from advisor.services.microbench import gpu_unavailable  # looked up here by run()

NAME = "microbench"
HELP = "measure what this GPU achieves per kernel class (Triton) and save a calibration for plan"
ORDER = 70


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from advisor.commands._args import number, whole

    parser.add_argument("--shapes-from", metavar="CHECKPOINT",
                        help="benchmark the dominant projection shapes (K x N) of this checkpoint "
                             "(default: 5120 x 17408)")
    parser.add_argument("--m", metavar="LIST", default=None,
                        help="token counts M to sweep, comma-separated (default: 1,4,16,128,2048,8192)")
    parser.add_argument("--device", metavar="INDEX", type=whole(0, 1023), default=0,
                        help="CUDA device index (default: 0)")
    parser.add_argument("--budget", metavar="SECONDS", default=600.0,
                        type=number(0, 7 * 86400, lo_ok=True, what="number of seconds, 0 or more"),
                        help="wall-clock budget; late cases are reported as skipped (default: 600)")
    parser.add_argument("--no-save", action="store_true", help="do not write the calibration file")


def run(args: argparse.Namespace):
    from advisor.commands import Outcome
    from advisor.doc import Doc, Paragraph
    from advisor.jsonout import document
    from advisor.microbench.shapes import DEFAULT_M, default_shapes, parse_m_list

    ms = parse_m_list(args.m) if args.m else DEFAULT_M
    reason = gpu_unavailable()
    if reason is not None:
        line = f"No GPU benchmark: {reason}; nothing measured."
        return Outcome(json=document("microbench", {"available": False, "reason": reason, "results": []}),
                       doc=Doc((Paragraph(line, style="warn"),)), exit_code=0)

    shapes = default_shapes()
    if args.shapes_from:
        from advisor.checkpoint.inspect import inspect_checkpoint
        from advisor.microbench.shapes import shapes_from_checkpoint

        shapes = shapes_from_checkpoint(inspect_checkpoint(args.shapes_from))
    from advisor.progress import Step, bar_for

    bar = bar_for(args, "microbench")
    try:
        return measure(shapes, ms, device=args.device, budget_s=args.budget, save=not args.no_save,
                       progress=lambda done, total, label: bar(Step(done, total, "case", label)))
    finally:
        bar.close()


def measure(shapes, ms, *, device: int = 0, budget_s: float | None = 600.0, save: bool = True, progress=None):
    """advisor.services.microbench.measure as an Outcome."""
    from advisor.commands import Outcome
    from advisor.jsonout import document
    from advisor.services import microbench

    done = microbench.measure(shapes, ms, device=device, budget_s=budget_s, save=save, progress=progress)
    return Outcome(json=document("microbench", done.payload), doc=done.doc, exit_code=0)

"""`nvfp4-advisor microbench`: measure this GPU's bandwidth and kernel classes, calibrate `plan`."""

from __future__ import annotations

import argparse

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


def gpu_unavailable() -> str | None:
    """One line saying why no GPU benchmark can run here, or None when one can. The packages are
    looked up and the driver asked through NVML before torch is imported: that import alone takes
    seconds, wasted on a machine without a GPU."""
    import importlib.util

    from advisor.install_hint import install_extra

    for name in ("torch", "triton"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{name} not installed (install it with: {install_extra('kernels')})"
    from advisor.probe import probe

    seen = probe()
    if not seen.devices:
        return f"no CUDA GPU here ({seen.message})"
    try:
        import torch
    except ImportError:
        return f"torch not installed (install it with: {install_extra('kernels')})"
    try:
        import triton  # noqa: F401
    except ImportError:
        return f"triton not installed (install it with: {install_extra('kernels')})"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    return None


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
    """Run the suite on CUDA device `device` and save the calibration; returns an Outcome."""
    from datetime import datetime, timezone

    from advisor.calibration import save_calibration
    from advisor.commands import Outcome
    from advisor.jsonout import document
    from advisor.microbench import results, runner

    dev = runner.cuda_device(device)
    spec, gpu_id = resolve_spec(dev.name, dev.uuid)
    suite = runner.run_suite(shapes, ms, dev=dev, spec=spec, gpu_id=gpu_id, budget_s=budget_s, progress=progress)
    cal = results.calibration_from(suite, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    path = str(save_calibration(cal)) if (save and cal is not None) else None
    return Outcome(json=document("microbench", results.to_payload(suite, cal, path)),
                   doc=results.to_doc(suite, path), exit_code=0)


def resolve_spec(name: str, uuid: str | None):
    """(GpuSpec or None, advisor GPU id) for a CUDA device: the probe's match (same id `plan`
    uses), else the table by name; an unknown card gets an id from its name."""
    try:
        from advisor.probe import probe

        result = probe()
        for d in result.devices:
            if uuid and d.nvml.uuid == uuid:
                return d.spec, d.spec.id
        for d in result.devices:
            if d.label == name:
                return d.spec, d.spec.id
    except Exception:  # noqa: BLE001 - the probe is optional here; the table lookup follows
        pass
    try:
        from advisor.gpu_table import find_by_name

        spec = find_by_name(name)
        if spec is not None:
            return spec, spec.id
    except Exception:  # noqa: BLE001
        pass
    from advisor.microbench.results import slug

    return None, slug(name)

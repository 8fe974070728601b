"""Microbenchmarks on this machine's GPU: whether they can run, the suite, the calibration saved for `plan`.

`nvfp4-advisor microbench` and the TUI's µbench tab call these. torch and triton are imported only
once a GPU is known to be usable (that import alone takes seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from advisor.doc import Doc, Paragraph

if TYPE_CHECKING:
    from advisor.services.analysis import Analysis


@dataclass(frozen=True)
class Measured:
    """One suite run: the `microbench --json` payload and its document."""

    payload: dict
    doc: Doc


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


def measure(shapes, ms, *, device: int = 0, budget_s: float | None = 600.0, save: bool = True,
            progress: Callable[[int, int, str], None] | None = None) -> Measured:
    """Run the suite on CUDA device ``device`` and save the calibration (``save``)."""
    from datetime import datetime, timezone

    from advisor.calibration import save_calibration
    from advisor.microbench import results, runner

    dev = runner.cuda_device(device)
    spec, gpu_id = resolve_spec(dev.name, dev.uuid)
    suite = runner.run_suite(shapes, ms, dev=dev, spec=spec, gpu_id=gpu_id, budget_s=budget_s, progress=progress)
    cal = results.calibration_from(suite, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    path = str(save_calibration(cal)) if (save and cal is not None) else None
    return Measured(results.to_payload(suite, cal, path), results.to_doc(suite, path))


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


def measured_doc(analysis: Analysis | None, *, on_progress: Callable[[int, int, str], None] | None = None) -> Doc:
    """The suite on the analysed checkpoint's projection shapes (the default shapes without one),
    calibration saved, when a GPU is usable (``on_progress(done, total, case)``); otherwise why not
    and how to install what is missing."""
    from advisor.install_hint import install_extra

    why = gpu_unavailable()
    if why:
        return Doc((Paragraph(f"No microbenchmarks: {why}", "warn"),
                    Paragraph("They measure this card's real bandwidth and kernel efficiency and calibrate the "
                              "cost model; run them on a machine with an NVIDIA GPU and torch + triton installed:",
                              "dim"),
                    Paragraph(install_extra("kernels"), "code")))
    from advisor.microbench.shapes import DEFAULT_M, default_shapes, shapes_from_checkpoint

    shapes = default_shapes()
    if analysis is not None and analysis.checkpoint is not None:
        shapes = shapes_from_checkpoint(analysis.checkpoint)
    return measure(shapes, DEFAULT_M, budget_s=600.0, save=True, progress=on_progress).doc

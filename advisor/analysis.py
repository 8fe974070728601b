"""The whole chain in one call: checkpoint -> kernel path -> cost, for one GPU selection.

Used by the TUI, the report builder and the launcher so that none of them re-implements the
chain. Pure apart from reading the checkpoint's config/headers (inspect) and the calibration file
(when present); every stage's failure is kept as a one-line error so a view can still show the
stages that worked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.errors import AdvisorError


@dataclass(frozen=True)
class Selection:
    checkpoint: str                    # folder, .safetensors file, hub id[@rev] or demo:NAME
    gpu_id: str
    gpus: int = 1
    engine: str = "vllm"
    engine_version: str | None = None
    workload: str = "interactive"


@dataclass(frozen=True)
class Analysis:
    selection: Selection
    gpu: Any = None                    # GpuSpec
    checkpoint: Any = None             # CheckpointInfo
    explanation: Any = None            # Explanation
    plan: Any = None                   # Plan
    errors: dict[str, str] = field(default_factory=dict)   # stage -> one-line error

    @property
    def ok(self) -> bool:
        return not self.errors


def analyze(sel: Selection, *, options: Any = None, overrides: Any = None, gpu: Any = None,
            checkpoint: Any = None) -> Analysis:
    """Run inspect -> explain -> plan. ``gpu``/``checkpoint`` skip the lookups when given."""
    errors: dict[str, str] = {}
    explanation = plan = None
    try:
        if gpu is None:
            from advisor.gpu_table import get_gpu

            gpu = get_gpu(sel.gpu_id)
    except AdvisorError as err:
        return Analysis(sel, errors={"gpu": str(err)})
    try:
        if checkpoint is None:
            from advisor.checkpoint.inspect import inspect_checkpoint

            checkpoint = inspect_checkpoint(sel.checkpoint)
    except AdvisorError as err:
        return Analysis(sel, gpu=gpu, errors={"inspect": str(err)})
    try:
        from advisor.kernel_path.explain import explain

        kwargs = {"gpus": sel.gpus, "engine": sel.engine, "version": sel.engine_version}
        if options is not None:
            kwargs["options"] = options
        explanation = explain(checkpoint, gpu, **kwargs)
    except AdvisorError as err:
        errors["explain"] = str(err)
    if explanation is not None:
        try:
            from advisor.cost.plan import make_plan

            plan = make_plan(checkpoint, explanation, gpu, gpus=sel.gpus, workload=sel.workload,
                             overrides=overrides, calibration=_calibration(gpu))
        except AdvisorError as err:
            errors["plan"] = str(err)
    return Analysis(sel, gpu=gpu, checkpoint=checkpoint, explanation=explanation, plan=plan,
                    errors=errors)


def _calibration(gpu: Any) -> Any:
    try:
        from advisor.calibration import load_calibration
    except ImportError:
        return None
    return load_calibration(gpu.id)

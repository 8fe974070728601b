"""The whole chain in one call: checkpoint -> kernel path -> cost, for one GPU selection.

Used by the `plan` command, the TUI and the report builder so that none of them re-implements the
chain. Pure apart from reading the checkpoint's config/headers (inspect) and profile files; each
stage's failure is kept as a one-line error so a view can still show the stages that worked.

One analysis explains each distinct (gpus, engine, version, options) once (Explainer): a TP size the
tuner weighs that is the explained one, and the explain-only answer after a failed plan, reuse the
explanation already made. The KV dtypes the tuner weighs take explain_kv's attention decision alone, so
one GPU (gpus=1) costs one full explain; more GPUs add one per other TP size the tuner weighs (the whole
path decides whether a TP size keeps every layer on the GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError

if TYPE_CHECKING:      # annotations only: the chain's modules load when a stage runs
    from advisor.calibration import Calibration
    from advisor.checkpoint.model import CheckpointInfo
    from advisor.cost.overrides import Overrides
    from advisor.cost.workload import Workload
    from advisor.cost.plan_records import Plan
    from advisor.gpu_spec import GpuSpec
    from advisor.kernel_path.model import Explanation, LayerDecision
    from advisor.kernel_path.options import InstallOptions


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
    gpu: GpuSpec | None = None
    checkpoint: CheckpointInfo | None = None
    explanation: Explanation | None = None
    plan: Plan | None = None
    options: InstallOptions | None = None                  # the install options explain used
    errors: dict[str, str] = field(default_factory=dict)   # stage -> one-line error
    kv_decisions: dict[str, LayerDecision] = field(default_factory=dict)   # KV flag value -> attention decision

    @property
    def ok(self) -> bool:
        """Every stage produced its answer (the answer itself may still be "will not run")."""
        return not self.errors

    @property
    def verdict(self) -> str:
        """What the answer says about running it, short: "" (nothing stands in the way, as far as
        the stages got), "will not run" (the engine refuses or crashes) or "does not fit"."""
        return self._verdict()[0]

    @property
    def verdict_reason(self) -> str:
        """The verdict's long form, in the words `launch --dry-run` uses ("" with no verdict)."""
        return self._verdict()[1]

    def _verdict(self) -> tuple[str, str]:
        ex = self.explanation
        rec = getattr(self.plan, "recommendation", None)
        blocked = getattr(rec, "blocked", "") or ""
        if ex is not None and not ex.runs:
            # the plan may replace a default KV dtype that does not run; only then is the path fine
            kv_only = all(d.runs or d.layer_class == "attention_kv" for d in ex.decisions)
            if not (kv_only and rec is not None and not blocked):
                return "will not run", f"explain predicts this will not run: {ex.summary}"
        if blocked:
            refused = ex is not None and blocked.startswith(f"{ex.engine} cannot run")
            return ("will not run" if refused else "does not fit"), f"the plan has no launch line: {blocked}"
        return "", ""


class Explainer:
    """explain() for one checkpoint on one GPU, each (gpus, engine, version, options) computed once:
    a repeat returns the same Explanation (or raises the same error) without running the rules again."""

    def __init__(self, checkpoint: CheckpointInfo, gpu: GpuSpec):
        self.checkpoint, self.gpu = checkpoint, gpu
        self._made: dict[tuple, tuple[Explanation | None, AdvisorError | None]] = {}
        self.runs = 0                      # explain() calls really made (tests count them)

    def __call__(self, *, gpus: int = 1, engine: str = "vllm", version: str | None = None,
                 options: InstallOptions | None = None) -> Explanation:
        from advisor.kernel_path.explain import explain
        from advisor.kernel_path.options import InstallOptions

        options = options if options is not None else InstallOptions()
        key = (gpus, engine, version, options, options.labels)     # labels: shown, but not compared
        if key not in self._made:
            self.runs += 1
            try:
                self._made[key] = (explain(self.checkpoint, self.gpu, gpus=gpus, engine=engine, version=version,
                                           options=options), None)
            except AdvisorError as err:
                self._made[key] = (None, err)
        explanation, failed = self._made[key]
        if failed is not None:
            raise failed
        assert explanation is not None      # stored with its error when explain failed
        return explanation


def kv_decisions(checkpoint: CheckpointInfo, gpu: GpuSpec, gpus: int, engine: str, version: str | None,
                 names: list[str], options: InstallOptions | None = None) -> dict[str, LayerDecision]:
    """explain's attention decision for each KV dtype the tuner may pick (by engine flag value),
    so the tuner never recommends a KV dtype the attention backend rejects. Each is explain_kv's
    attention-only decision (equal to the full explain's, tests/kernel_path/test_explain_kv.py), so
    the KV dtypes add no full explain."""
    from advisor.kernel_path.explain import explain_kv
    from advisor.kernel_path.model import LayerDecision
    from advisor.kernel_path.options import InstallOptions

    base = options or InstallOptions()
    out: dict[str, LayerDecision] = {}
    for name in names:
        try:
            decision = explain_kv(checkpoint, gpu, gpus=gpus, engine=engine, version=version,
                                  options=replace(base, kv_cache_dtype=name))
        except AdvisorError as err:
            out[name] = LayerDecision("attention_kv", ("attention",), "KV", f"KV {name}", None, "none", "bf16",
                                      "none", False, (), error=f"no rule in explain: {err}")
            continue
        if decision is not None:
            out[name] = decision
    return out


def explain_and_plan(checkpoint, gpu, *, gpus: int = 1, engine: str = "vllm", version: str | None = None,
                     workload: str | Workload = "interactive", workloads_file: str | None = None,
                     overrides: Overrides | None = None, calibration: Calibration | None = None,
                     options: InstallOptions | None = None) -> tuple[Explanation, Plan]:
    """Explain the kernel path, then cost it and tune the settings. Returns (explanation, plan)."""
    explanation, plan, _ = explain_plan_kv(checkpoint, gpu, gpus=gpus, engine=engine, version=version,
                                           workload=workload, workloads_file=workloads_file, overrides=overrides,
                                           calibration=calibration, options=options)
    return explanation, plan


def explain_plan_kv(checkpoint, gpu, *, gpus: int = 1, engine: str = "vllm", version: str | None = None,
                    workload: str | Workload = "interactive", workloads_file: str | None = None,
                    overrides: Overrides | None = None, calibration: Calibration | None = None,
                    options: InstallOptions | None = None, explainer: Explainer | None = None
                    ) -> tuple[Explanation, Plan, dict[str, LayerDecision]]:
    """explain_and_plan, plus the attention decision for each KV dtype the tuner weighed:
    (explanation, plan, {KV flag value: LayerDecision}). ``explainer``: one shared with the caller,
    so what it explained here is not explained again."""
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.overrides import Overrides
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import get_workload
    from advisor.kernel_path.options import InstallOptions

    if isinstance(workload, str):
        workload = get_workload(workload, workloads_file)
    overrides = overrides or Overrides()
    if options is None:
        options = InstallOptions(kv_cache_dtype=overrides.kv_cache_dtype, tp=overrides.tp)
    explain = explainer or Explainer(checkpoint, gpu)
    eng = load_engine_memory(engine, version)
    explanation = explain(gpus=gpus, engine=engine, version=version, options=options)
    names = [options.kv_cache_dtype] if options.kv_cache_dtype else list(eng.kv_tune)
    kvd = kv_decisions(checkpoint, gpu, gpus, engine, version, names, options)

    def explain_at_tp(n: int):
        # the tuner's other TP sizes keep the user's install options (e.g. FastLLM --moe_device)
        return explain(gpus=gpus, engine=engine, version=version, options=replace(options, tp=n))

    plan = make_plan(checkpoint, explanation, gpu, gpus=gpus, workload=workload, overrides=overrides,
                     calibration=calibration, kv_decisions=kvd, engine_memory=eng, explain_at_tp=explain_at_tp)
    return explanation, plan, kvd


def analyze(sel: Selection, *, options: InstallOptions | None = None, overrides: Overrides | None = None,
            gpu: GpuSpec | None = None, checkpoint: CheckpointInfo | None = None,
            calibration: Calibration | None = None, use_calibration: bool = True) -> Analysis:
    """Run inspect -> explain -> plan. ``gpu``/``checkpoint`` skip the lookups when given."""
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
    if calibration is None and use_calibration:
        from advisor.calibration import load_calibration

        calibration = load_calibration(gpu.id)
    explain = Explainer(checkpoint, gpu)
    try:
        explanation, plan, kvd = explain_plan_kv(
            checkpoint, gpu, gpus=sel.gpus, engine=sel.engine, version=sel.engine_version,
            workload=sel.workload, overrides=overrides, calibration=calibration, options=options, explainer=explain)
    except AdvisorError as err:
        # Keep what explain alone can still say (e.g. the plan failed on memory, not the path).
        try:
            explanation = explain(gpus=sel.gpus, engine=sel.engine, version=sel.engine_version, options=options)
            return Analysis(sel, gpu=gpu, checkpoint=checkpoint, explanation=explanation, options=options,
                            errors={"plan": str(err)})
        except AdvisorError as err2:
            return Analysis(sel, gpu=gpu, checkpoint=checkpoint, options=options, errors={"explain": str(err2)})
    return Analysis(sel, gpu=gpu, checkpoint=checkpoint, explanation=explanation, plan=plan, options=options,
                    kv_decisions=kvd)

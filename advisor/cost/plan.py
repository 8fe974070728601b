"""make_plan: predictions for the kernel path `explain` chose, plus tuned serve settings.

Used by the `plan` command, the TUI, reports and the launcher. Pure: every input is a frozen
record built at the edge; the result is a frozen Plan whose numbers carry their derivations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.checkpoint.model import CheckpointInfo
from advisor.cost import context as ctxmod
from advisor.cost.derived import Assumption, Derived
from advisor.cost.engine_profile import EngineMemory, load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.workload import Workload
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision
from advisor.tuner import Option, decode_context, effective_workload, tune

AGG_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class SpecPrediction:
    method: str | None
    note: str
    per_k: tuple[dict[str, float], ...]     # k, expected_tokens_per_step, speedup, step_seconds
    chosen_k: int
    batch: int


@dataclass(frozen=True)
class Predictions:
    decode_tok_s: float
    decode_aggregate_tok_s: dict[int, float]
    prefill_tok_s: float
    prefill_seconds: float
    kv_pool_tokens: dict[str, int]
    max_context_per_request: int
    max_concurrency_at_context: int
    bound: str
    crossover_batch: int | None
    speculative: SpecPrediction
    decode_context_tokens: int
    weights_gib_per_gpu: float


@dataclass(frozen=True)
class Recommendation:
    kv_cache_dtype: str
    max_batch: int
    draft_tokens: int
    memory_share: float
    chunked_prefill: int
    tp: int
    cuda_graphs: bool
    speculative_method: str | None
    flags: dict[str, str]                    # engine flag -> value


@dataclass(frozen=True)
class Plan:
    checkpoint: str
    checkpoint_label: str
    gpu_id: str
    gpu_name: str
    gpus: int
    engine: str
    engine_version: str
    workload: Workload
    predictions: Predictions
    recommendation: Recommendation
    tradeoffs: tuple[Option, ...]
    assumptions: tuple[Assumption, ...]
    warnings: tuple[str, ...]
    derivations: dict[str, Derived] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        p = self.predictions
        return {
            "checkpoint": self.checkpoint, "checkpoint_label": self.checkpoint_label,
            "gpu": {"id": self.gpu_id, "name": self.gpu_name, "count": self.gpus},
            "engine": {"name": self.engine, "version": self.engine_version},
            "workload": self.workload,
            "predictions": {
                "decode_tok_s": _r(p.decode_tok_s),
                "decode_aggregate_tok_s": {str(k): _r(v) for k, v in p.decode_aggregate_tok_s.items()},
                "prefill_tok_s": _r(p.prefill_tok_s),
                "prefill_seconds": _r(p.prefill_seconds),
                "kv_pool_tokens": p.kv_pool_tokens,
                "max_context_per_request": p.max_context_per_request,
                "max_concurrency_at_context": p.max_concurrency_at_context,
                "bound": p.bound,
                "crossover_batch": p.crossover_batch,
                "decode_context_tokens": p.decode_context_tokens,
                "weights_gib_per_gpu": _r(p.weights_gib_per_gpu),
                "speculative": {
                    "method": p.speculative.method, "note": p.speculative.note, "batch": p.speculative.batch,
                    "chosen_k": p.speculative.chosen_k,
                    "per_k": {str(int(d["k"])): {kk: _r(vv) for kk, vv in d.items() if kk != "k"}
                              for d in p.speculative.per_k},
                },
            },
            "recommendation": self.recommendation,
            "tradeoffs": self.tradeoffs,
            "assumptions": self.assumptions,
            "derivations": self.derivations,
            "warnings": list(self.warnings),
        }


def _r(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.5g}")


def _flags(eng: EngineMemory, rec_kv: str, share: float, batch: int, chunked: int, tp: int) -> dict[str, str]:
    tp_flag = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "fastllm": "--tp"}.get(eng.engine, "--tp")
    return {eng.kv_flag: rec_kv, eng.share_flag: f"{share:g}", eng.max_batch_flag: str(batch),
            eng.chunked_flag: str(chunked), tp_flag: str(tp)}


def make_plan(checkpoint: CheckpointInfo, explanation: Explanation, gpu: GpuSpec, *, gpus: int = 1,
              workload: Workload, overrides: Overrides = Overrides(), calibration=None,
              kv_decisions: dict[str, LayerDecision] | None = None,
              engine_memory: EngineMemory | None = None) -> Plan:
    """Cost ``explanation``'s kernel path for ``checkpoint`` on ``gpus`` x ``gpu`` and tune settings.

    ``kv_decisions``: explain's attention decision per KV dtype the engine offers (the tuner picks
    only dtypes whose decision runs); without it only the explanation's own KV dtype is eligible.
    ``engine_memory``: defaults to profiles/engine_memory.yaml for ``explanation.engine``.
    """
    eng = engine_memory or load_engine_memory(explanation.engine)
    ctx = ctxmod.build(checkpoint, explanation, gpu, gpus=gpus, engine=eng, overrides=overrides,
                       calibration=calibration, kv_decisions=kv_decisions)
    workload, capped = effective_workload(ctx, workload)
    t = tune(ctx, workload)
    s = t.settings
    c = decode_context(workload, ctx)
    single = ctx.decode(s, 1, c)
    budget = ctx.budget(s)
    max_conc = ctx.max_concurrency(s, workload.context_tokens)
    limit = max(1, min(s.max_batch, max_conc) if max_conc else 1)
    agg = {}
    for b in AGG_BATCHES:
        if b > limit and b != 1:
            break
        agg[b] = b / ctx.decode(s, b, c).seconds
    if limit not in agg:
        agg[limit] = limit / ctx.decode(s, limit, c).seconds
    pf = ctx.prefill(s, ctx.overrides.prompt_tokens or workload.prompt_tokens)
    pools = {}
    for kv in ctx.allowed_kv:
        pools[kv.name] = ctx.pool_tokens(s, kv)
    mcr = ctx.max_context(s, max(1, min(workload.concurrency, s.max_batch)))
    crossover = ctx.model.crossover_batch(c, s.kv, tp=s.tp)
    spec_b = max(1, min(workload.concurrency, s.max_batch))
    pts = ctx.spec_points(s, spec_b, c) if ctx.spec_method is not None else []
    spec = SpecPrediction(ctx.spec_method.name if ctx.spec_method else None, ctx.spec_note,
                          tuple({"k": p.k, "expected_tokens_per_step": p.expected_tokens, "speedup": p.speedup,
                                 "step_seconds": p.step_seconds} for p in pts), s.draft_tokens, spec_b)
    preds = Predictions(
        decode_tok_s=1.0 / single.seconds, decode_aggregate_tok_s=agg, prefill_tok_s=pf.tok_s,
        prefill_seconds=pf.seconds, kv_pool_tokens=pools, max_context_per_request=mcr,
        max_concurrency_at_context=max_conc, bound=single.bound if single.bound != "overhead" else (
            "bandwidth" if single.t_bytes >= single.t_compute else "compute"),
        crossover_batch=crossover, speculative=spec, decode_context_tokens=int(c),
        weights_gib_per_gpu=ctx.weight_bytes(s.tp) / 2**30)
    derivations = {
        "decode_tok_s": Derived(1.0 / single.seconds, "tok/s", "1 / t_step(B=1, C)",
                                {"t_step": single.seconds, **single.derived.inputs}, single.derived.source),
        "prefill_seconds": pf.derived,
        "kv_pool_bytes": budget.pool_bytes,
        "kv_reserve_bytes": budget.reserve_bytes,
        "kv_bytes_per_token": Derived(ctx.model.kv_layout(s.tp).bytes_per_token(s.kv), "B/token/GPU",
                                      "KV layers x 2 x kv_heads/N x head_dim x bits/8 (MLA: latent)",
                                      {"kv_layers": ctx.model.kv_layout(s.tp).full_layers,
                                       "bits": s.kv.bits, "N": s.tp}, s.kv.source or eng.kv_source),
        "memory_share": budget.share,
    }
    if pts:
        best = max(pts, key=lambda p: p.speedup)
        derivations["speculative_best"] = best.derived
    warnings = list(ctx.warnings) + ([capped] if capped else []) + list(t.notes)
    main_kv = next((d for d in explanation.decisions if d.layer_class == "attention_kv"), None)
    if main_kv is not None and not main_kv.runs:
        why = main_kv.error or "; ".join(main_kv.reasons)
        if s.kv.name in ctx.rejected_kv or not ctx.allowed_kv:
            warnings.append(f"the KV cache cannot run as configured ({why}); no KV dtype explain accepts "
                            "was found, so the KV costs assume it would run")
        else:
            warnings.append(f"the default KV cache ({main_kv.kv_cache_dtype}) does not run here ({why}); "
                            f"the recommendation sets {eng.kv_flag} {s.kv.name}")
    if budget.note:
        warnings.append(budget.note)
    if single.bound == "overhead":
        warnings.append("fixed per-step costs (kernel launches, host, all-reduce) exceed the GPU time of a "
                        "batch-1 step: weight-format differences shrink at batch 1 on this setup")
    if "nvfp4" in s.kv.kind or s.kv.kind in ("fp4_mx", "int4"):
        if eng.engine == "fastllm":
            # field-notes §2: measured on FastLLM, its FP4 KV is slower than FP8 KV under concurrency
            warnings.append("4-bit KV cache is unpacked on every attention read: on FastLLM it was measured "
                            "slower than FP8 KV under concurrency; it buys pool size, not speed")
        else:
            warnings.append("4-bit KV cache is unpacked to 16 bits on every attention read (counted in the "
                            "prediction as issue work); it is lossy: check accuracy against an 8-bit KV cache")
    rec = Recommendation(s.kv.name, s.max_batch, s.draft_tokens, s.memory_share, s.chunked_prefill, s.tp,
                         s.cuda_graphs, ctx.spec_method.name if ctx.spec_method and s.draft_tokens else None,
                         _flags(eng, s.kv.name, s.memory_share, s.max_batch, s.chunked_prefill, s.tp))
    return Plan(checkpoint.source, checkpoint.label, gpu.id, gpu.name, gpus, explanation.engine,
                explanation.engine_version or eng.version, workload, preds, rec, t.options,
                ctx.assumptions, tuple(dict.fromkeys(warnings)), derivations)

"""The settings a knob starts from, whether they hold the workload, and the objective they reach."""

from __future__ import annotations

from dataclasses import replace

from advisor.cost.context import PlanContext, Settings
from advisor.cost.kv import KvDtype
from advisor.cost.workload import Workload

SHARE_MAX = 0.95


def effective_workload(ctx: PlanContext, w: Workload) -> tuple[Workload, str]:
    """The workload with its context set by --context (what each request holds: it decides how many
    requests the pool holds, hence the batch cap) and capped at the model's maximum (the prompt with it)."""
    if ctx.overrides.context_tokens:
        w = replace(w, context_tokens=ctx.overrides.context_tokens)
    limit = ctx.checkpoint.arch.max_position_embeddings
    if not limit or w.context_tokens <= limit:
        return w, ""
    prompt = min(w.prompt_tokens, max(1, limit - w.output_tokens))
    return (replace(w, context_tokens=limit, prompt_tokens=prompt),
            f"the model's maximum context is {limit:,} tokens: the workload's {w.context_tokens:,}-token "
            f"context is capped to it")


def decode_context(w: Workload, ctx: PlanContext) -> int:
    """Context a decode step sees on average: the prompt plus half the output."""
    return ctx.overrides.context_tokens or (w.prompt_tokens + w.output_tokens // 2)


def fits(ctx: PlanContext, s: Settings, w: Workload) -> bool:
    """Latency/context workloads need context x concurrency; throughput needs one full context
    (the batch then grows as far as the pool allows)."""
    streams = 1 if w.objective == "throughput" else w.concurrency
    b = ctx.budget(s)     # SGLang: ``fits`` also needs the activations to fit outside the share
    return b.fits and b.pool_bytes.value > 0 and ctx.max_context(s, streams) >= w.context_tokens


def objective(ctx: PlanContext, s: Settings, w: Workload) -> float:
    c = decode_context(w, ctx)
    if w.objective == "throughput":
        b = max(1, min(w.concurrency, ctx.max_concurrency(s, w.context_tokens)))
        return b / ctx.decode(s, b, c).seconds
    return 1.0 / ctx.decode(s, max(1, w.concurrency), c).seconds


def objective_if_pool(ctx: PlanContext, s: Settings, w: Workload) -> float:
    """The objective, 0 when the settings leave no KV pool."""
    return objective(ctx, s, w) if ctx.budget(s).pool_bytes.value > 0 else 0.0


def fixed_kv(ctx: PlanContext) -> KvDtype | None:
    name = ctx.overrides.kv_cache_dtype
    return ctx.engine.kv_dtype(name) if name else None


def base_settings(ctx: PlanContext, w: Workload, tp: int, kv: KvDtype | None = None) -> Settings:
    """The engine defaults at TP, with what the user fixed."""
    o = ctx.overrides
    graphs = ctx.engine.cuda_graphs_default if o.cuda_graphs is None else o.cuda_graphs
    bd = ctx.batch_default()
    chunked = o.chunked_prefill or int(bd["chunked_prefill"])
    max_batch = o.max_batch or max(1, w.concurrency)
    share = o.memory_share or ctx.default_share(chunked, max_batch, tp, graphs).value
    kv = kv or fixed_kv(ctx) or ctx.default_kv
    return Settings(kv, max_batch, share, chunked, tp, o.draft_tokens or 0, graphs)


def sized(ctx: PlanContext, w: Workload, tp: int, kv: KvDtype | None = None) -> tuple[Settings, bool]:
    """base_settings, with the share raised to SHARE_MAX when the workload's context does not fit at the
    engine default and does at the raised share (vLLM's fixed default and SGLang's computed one alike);
    and whether it fits."""
    s = base_settings(ctx, w, tp, kv)
    if fits(ctx, s, w):
        return s, True
    if not ctx.overrides.memory_share and s.memory_share < SHARE_MAX:
        raised = replace(s, memory_share=SHARE_MAX)
        if fits(ctx, raised, w):
            return raised, True
    return s, False

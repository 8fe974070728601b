"""One function per serve setting the tuner chooses, each recording every option it weighed.

The knobs run in the order ``advisor.cost.tuning.tuner.tune`` calls them; each starts from the settings
the previous one left.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.cost import feasibility, spec_concurrency
from advisor.cost.context import PlanContext, Settings
from advisor.cost.speculative import choose
from advisor.cost.tuning.fit import (
    SHARE_MAX, base_settings, decode_context, fits, fixed_kv, objective_if_pool, sized,
)
from advisor.cost.tuning.notes import declared_kv_kind, fixed_draft_note, kv_note, raised_share_note
from advisor.cost.tuning.steps import BatchStep, DraftStep, KvStep, Option, Step
from advisor.cost.workload import Workload

TP_GAIN = 1.10
KV_SPEED_TOLERANCE = 0.03
CHUNK_TOLERANCE = 0.05
BATCH_TOLERANCE = 0.03
CHUNKS = (2048, 4096, 8192, 16384)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
CONTEXT_STEP = 1024


def tensor_parallel(ctx: PlanContext, w: Workload) -> Step:
    """The most GPUs that pay: a larger TP must beat the smaller one by TP_GAIN on the objective. The
    settings left are the chosen TP's, sized for the workload."""
    tps = [ctx.overrides.tp] if ctx.overrides.tp else feasibility.tp_candidates(ctx.gpus, ctx.checkpoint.arch)
    # a TP size whose path runs layers on the CPU (FastLLM's INT4 kernel is single-GPU only) is never
    # chosen while another runs on the GPU: its speed is not a GPU roofline at all
    on_cpu = {n: ctx.cpu_layers_at_tp.get(n, ()) for n in tps}
    gpu_tps = [n for n in tps if not on_cpu[n]]
    notes: list[str] = []
    best_tp, best_val = None, 0.0
    rows = []
    at = {tp: sized(ctx, w, tp) for tp in tps}
    for tp in tps:
        s, fit = at[tp]
        val = objective_if_pool(ctx, s, w)
        rows.append((tp, fit, val, ctx.max_context(s, w.concurrency)))
        if on_cpu[tp] and gpu_tps:
            notes.append(f"TP {tp} not chosen: {feasibility.cpu_reason(on_cpu[tp], tp)}")
            continue
        if val > 0 and (best_tp is None or (fit and not at[best_tp][1]) or val > best_val * TP_GAIN):
            best_tp, best_val = tp, val
    if best_tp is None:
        best_tp = (gpu_tps or tps)[-1]
        notes.append(feasibility.does_not_fit_note(ctx, lambda n: base_settings(ctx, w, n)))
    options = []
    for tp, fit, val, mc in rows:
        why = ("layers run on the CPU" if on_cpu[tp] else "") or ("" if fit else "context x concurrency does not fit")
        options.append(Option("tp", str(tp), {"objective_tok_s": round(val, 2), "max_context": mc,
                                             "fits_workload": fit}, tp == best_tp, why))
    return Step(at[best_tp][0], tuple(options), tuple(notes))


def kv_cache_dtype(ctx: PlanContext, w: Workload, tp: int) -> KvStep:
    """Only dtypes `explain` accepts; must fit the workload's context x concurrency; among those within
    KV_SPEED_TOLERANCE of the best objective: the checkpoint's own calibrated KV dtype, else the most bits."""
    notes: list[str] = []
    fixed = fixed_kv(ctx)
    if fixed is not None:
        candidates = [fixed]
        if fixed.name in ctx.rejected_kv:
            notes.append(f"--kv-cache-dtype {fixed.name} is rejected by the attention backend: "
                         f"{ctx.rejected_kv[fixed.name]}")
    else:
        tune_names = set(ctx.engine.kv_tune) | {ctx.default_kv.name}
        candidates = [dt for dt in ctx.allowed_kv if dt.name in tune_names
                      or (dt.kind in ("bf16", "fp16") and dt.name != "auto")] or list(ctx.allowed_kv)
    rows = []
    for kv in candidates:
        s, fit = sized(ctx, w, tp, kv)
        rows.append((kv, s, fit, objective_if_pool(ctx, s, w), ctx.max_context(s, w.concurrency),
                     ctx.pool_tokens(s)))
    fitting = [r for r in rows if r[2]]
    declared = declared_kv_kind(ctx)
    if fitting:
        top = max(r[3] for r in fitting)
        pool = [r for r in fitting if r[3] >= top * (1 - KV_SPEED_TOLERANCE)]
        # the checkpoint's calibrated KV dtype is what it was validated with and what 'auto' runs:
        # keep it when it is as fast as the rest; otherwise prefer more bits (quantized KV costs accuracy)
        own = [r for r in pool if declared is not None and r[0].kind == declared]
        chosen = max(own or pool, key=lambda r: (r[0].bits, r[3]))
        runs_own = [r for r in rows if declared is not None and r[0].kind == declared]
        if runs_own and not own:
            why = (f"{chosen[0].name} is more than {KV_SPEED_TOLERANCE:.0%} faster for this workload"
                   if any(r[2] for r in runs_own) else "it does not hold the workload's context here")
            notes.append(f"the checkpoint declares a calibrated {declared} KV cache ('auto' would use it); "
                         f"chose {chosen[0].name} instead: {why}")
    else:
        chosen = max(rows, key=lambda r: (r[4], r[3]))
        notes.append(f"no KV dtype holds {w.context_tokens} tokens for {w.concurrency} concurrent requests; "
                     f"chose the one holding the most ({chosen[4]} tokens per request)")
    options = [Option("kv_cache_dtype", kv.name,
                      {"kv_pool_tokens": pool_t, "max_context_per_request": mc,
                       "objective_tok_s": round(val, 2), "bits": kv.bits, "fits_workload": fit},
                      kv is chosen[0], kv_note(kv, declared))
               for kv, s, fit, val, mc, pool_t in rows]
    options += [Option("kv_cache_dtype", name, {}, False, f"rejected by explain: {why}")
                for name, why in ctx.rejected_kv.items()]
    return KvStep(chosen[1], tuple(options), tuple(notes), fits=chosen[2],
                  weighed={kv.name: kv for kv in candidates})


def follows_engine_share(ctx: PlanContext, w: Workload, s: Settings) -> bool:
    """The share is the engine's computed default (SGLang), to be recomputed as chunk and batch change:
    not fixed by the user, not raised for the context (later steps keep a raised share)."""
    o = ctx.overrides
    raised = not o.memory_share and s.memory_share != base_settings(ctx, w, s.tp, s.kv).memory_share
    return not o.memory_share and not raised and ctx.engine.share_default is None


def chunked_prefill(ctx: PlanContext, w: Workload, s: Settings, follow_default: bool, kv_fits: bool) -> Step:
    """The smallest chunk whose prefill time is within CHUNK_TOLERANCE of the fastest (a chunk stalls the
    other streams' decode while it runs and its activations come out of the KV pool)."""
    o = ctx.overrides
    chunks = [o.chunked_prefill] if o.chunked_prefill else sorted({s.chunked_prefill, *CHUNKS})
    rows = []
    for c in chunks:
        sc = replace(s, chunked_prefill=c)
        if follow_default:
            sc = replace(sc, memory_share=ctx.default_share(c, sc.max_batch, s.tp, sc.cuda_graphs).value)
        pf = ctx.prefill(sc, w.prompt_tokens)
        rows.append((c, sc, pf.seconds, fits(ctx, sc, w) or not kv_fits))
    ok = [r for r in rows if r[3]] or rows
    fastest = min(r[2] for r in ok)
    pick = min((r for r in ok if r[2] <= fastest * (1 + CHUNK_TOLERANCE)), key=lambda r: r[0])
    options = tuple(Option("chunked_prefill", str(c), {"prefill_seconds": round(secs, 4),
                                                       "kv_pool_tokens": ctx.pool_tokens(sc)},
                           c == pick[0], "" if fit else "activations do not fit outside the share"
                           if not ctx.budget(sc).fits else "KV pool too small for the workload")
                    for c, sc, secs, fit in rows)
    return Step(pick[1], options)


def max_batch(ctx: PlanContext, w: Workload, s: Settings, follow_default: bool) -> BatchStep:
    """Latency/context: the workload's concurrency; throughput: the smallest batch (at most the workload's
    concurrency) within BATCH_TOLERANCE of the best aggregate that keeps the per-stream floor, each batch at
    the draft count that pays there; never more requests than the pool holds."""
    o = ctx.overrides
    notes: list[str] = []
    options: list[Option] = []
    max_conc = max(1, ctx.max_concurrency(s, w.context_tokens))
    c = decode_context(w, ctx)
    if o.max_batch:
        batch = o.max_batch
        if batch > max_conc:
            held = "KV pool holds" if ctx.recurrent(s) is None else "pool holds with their KV and recurrent state"
            notes.append(f"--max-batch {batch} exceeds the {max_conc} requests of {w.context_tokens} tokens the "
                         f"{held}: requests will queue or be preempted")
    elif w.objective == "throughput":
        # the workload's concurrency is the most requests it ever has in flight: a larger batch buys nothing
        top_b = max(1, min(max_conc, w.concurrency, 1024))
        rows = []
        for b in sorted({b for b in BATCHES if b <= top_b} | {top_b}):
            st = ctx.decode(s, b, c)
            agg, per, k = b / st.seconds, 1.0 / st.seconds, 0
            drafted = _speculating_at(ctx, s, w, b, c)      # each batch at the k that pays there
            if drafted is not None:
                agg, per, k = drafted.aggregate, drafted.per_stream, drafted.k
            rows.append((b, agg, per, k, b / st.seconds))
        ok = [r for r in rows if r[2] >= w.min_stream_tok_s] or rows[:1]
        best = max(r[1] for r in ok)
        batch = min(r[0] for r in ok if r[1] >= best * (1 - BATCH_TOLERANCE))
        for b, agg, per, k, plain in rows:
            metrics: dict[str, float | int | str] = {"aggregate_tok_s": round(agg, 1),
                                                     "per_stream_tok_s": round(per, 2)}
            if ctx.spec_method is not None and w.speculative:
                metrics.update(draft_tokens=k, plain_aggregate_tok_s=round(plain, 1))
            options.append(Option("max_batch", str(b), metrics, b == batch,
                                  "" if per >= w.min_stream_tok_s else f"below the {w.min_stream_tok_s:g} tok/s floor"))
    else:
        batch = max(1, min(max_conc, w.concurrency))
        options.append(Option("max_batch", str(batch), {"max_concurrency_at_context": max_conc}, True,
                              "the workload's concurrency (capped by the KV pool)"))
    s = replace(s, max_batch=batch)
    if follow_default:
        s = replace(s, memory_share=ctx.default_share(s.chunked_prefill, batch, s.tp, s.cuda_graphs).value)
    if not o.max_batch:
        # the batch itself reserves memory (sampler logits, graphs): keep it within what then fits
        s = replace(s, max_batch=max(1, min(batch, ctx.max_concurrency(s, w.context_tokens))))
    return BatchStep(s, tuple(options), tuple(notes), batch=batch)


def memory_share(ctx: PlanContext, w: Workload, s: Settings) -> Step:
    """The engine default; raised (<= SHARE_MAX) only when the context would not fit otherwise (the raise
    itself was made with the KV dtype). Runs after chunk and batch: SGLang derives its default from both."""
    default_share = ctx.default_share(s.chunked_prefill, s.max_batch, s.tp, s.cuda_graphs).value
    if ctx.overrides.memory_share:
        return Step(s, (Option("memory_share", f"{s.memory_share:g}", {"max_context_per_request": ctx.max_context(
            s, w.concurrency)}, True, "fixed by --memory-share"),))
    options = [Option("memory_share", f"{default_share:g}", {"max_context_per_request": ctx.max_context(
        replace(s, memory_share=default_share), w.concurrency)}, s.memory_share == default_share,
        f"{ctx.engine.share_flag} default ({ctx.engine.share_source})")]
    if s.memory_share != default_share:
        options.append(Option("memory_share", f"{s.memory_share:g}",
                              {"max_context_per_request": ctx.max_context(s, w.concurrency)}, True,
                              "raised: the workload's context does not fit at the default"
                              + raised_share_note(ctx, s, default_share)))
    return Step(s, tuple(options))


def draft_tokens(ctx: PlanContext, w: Workload, s: Settings, batch: int) -> DraftStep:
    """The k with the best speedup at the chosen batch, each k costed as its speculative step at that batch;
    0 when none gains enough; for GDN/Mamba models only among the k whose extra state slots keep the
    workload's context fitting (the share may be raised to SHARE_MAX to hold them)."""
    o = ctx.overrides
    c = decode_context(w, ctx)
    if o.draft_tokens is not None:
        s = replace(s, draft_tokens=o.draft_tokens)
        notes: tuple[str, ...] = ()
        if o.draft_tokens and ctx.spec_method is not None:
            notes = fixed_draft_note(ctx, s, max(1, min(w.concurrency, batch)), c)
        return DraftStep(s, (), notes)
    if not w.speculative or ctx.spec_method is None:
        why = "the workload does not use speculation" if not w.speculative else "no draft method available"
        return DraftStep(s, (Option("draft_tokens", "0", {}, True, why),))
    options: list[Option] = []
    share_raised = False
    b = max(1, min(w.concurrency, batch))
    pts = spec_concurrency.spec_points(ctx, s, b, c)
    too_big = _state_crowded_k(ctx, s, w, [p.k for p in pts])
    if too_big and ctx.spec_auto and not o.memory_share and s.memory_share < SHARE_MAX:
        # drafting holds the draft's weights (and hybrid models' extra states): the raised share may
        # make room for the drafts the default share cannot hold
        up = replace(s, memory_share=SHARE_MAX)
        still = _state_crowded_k(ctx, up, w, [p.k for p in pts])
        if choose([p for p in pts if p.k not in still]) > choose([p for p in pts if p.k not in too_big]):
            default_share = s.memory_share
            s, too_big, share_raised = up, still, True
            options.append(Option("memory_share", f"{SHARE_MAX:g}",
                                  {"max_context_per_request": ctx.max_context(s, w.concurrency)}, True,
                                  "raised: the drafts do not fit at the default"
                                  + raised_share_note(ctx, s, default_share)))
    k = choose([p for p in pts if p.k not in too_big]) if ctx.spec_auto else 0
    for p in pts:
        options.append(Option("draft_tokens", str(p.k), {"expected_tokens_per_step": round(p.expected_tokens, 3),
                                                         "speedup": round(p.speedup, 3)}, p.k == k,
                              f"{ctx.spec_method.name} at batch {b}" + (
                                  "; the workload's context no longer fits: drafting holds the draft's "
                                  "weights, and hybrid models one more linear-attention state per draft token "
                                  "per request" if p.k in too_big else "")))
    if not ctx.spec_auto:
        options.append(Option("draft_tokens", "0", {}, True, ctx.spec_note))
    return DraftStep(replace(s, draft_tokens=k), tuple(options), share_raised=share_raised)


def batch_after_drafts(ctx: PlanContext, w: Workload, s: Settings) -> Step:
    """GDN/Mamba layers keep one more state per draft token: the chosen batch must still fit."""
    if not s.draft_tokens or ctx.overrides.max_batch or ctx.recurrent(s) is None:
        return Step(s)
    capped = max(1, min(s.max_batch, ctx.max_concurrency(s, w.context_tokens)))
    if capped >= s.max_batch:
        return Step(s)
    return Step(replace(s, max_batch=capped), (), (
        f"max batch lowered from {s.max_batch} to {capped}: with {s.draft_tokens} draft tokens "
        "each request holds more linear-attention states",))


def context_cap(ctx: PlanContext, w: Workload, s: Settings) -> Step:
    """max_model_len, after everything that changes the pool."""
    mml, one, why = max_model_len(ctx, s, w)
    if not mml:
        return Step(s)
    return Step(s, (Option("max_model_len", str(mml), {"max_context_one_request": one,
                                                       "model_max": ctx.checkpoint.arch.max_position_embeddings
                                                       or 0}, True, why),))


def max_model_len(ctx: PlanContext, s: Settings, w: Workload) -> tuple[int | None, int, str]:
    """The context cap to pass the engine (vLLM --max-model-len, SGLang --context-length, FastLLM
    --max_context_length), the largest context one request can hold, and why.

    None when the model's maximum context fits one request: the engine default (max_position_embeddings)
    then starts. Otherwise vLLM refuses to start (one request at max_model_len must fit the KV pool,
    vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory@0.33.0): the cap is the workload's context
    when it fits, else the largest context that fits rounded down to whole 1,024 (256) tokens."""
    if ctx.budget(s).pool_bytes.value <= 0:
        return None, 0, ""
    one = ctx.max_context(s, 1)
    limit = int(ctx.checkpoint.arch.max_position_embeddings or 0)
    if one <= 0 or (limit and one >= limit):
        return None, one, ""
    model = f"the model's {limit:,}-token maximum context" if limit else "the model's maximum context (unknown)"
    why = f"{model} does not fit: one request holds at most {one:,} tokens"
    if w.context_tokens <= one:
        return w.context_tokens, one, why + "; capped at the workload's context"
    step = CONTEXT_STEP if one >= 4 * CONTEXT_STEP else CONTEXT_STEP // 4 if one >= CONTEXT_STEP // 2 else 1
    n = one // step * step
    return n, one, why + f"; capped there (requests longer than {n:,} tokens are refused)"


def _speculating_at(ctx: PlanContext, s: Settings, w: Workload, batch: int, context: float):
    """The speculative step the batch would run (the fixed --draft-tokens, else the k that pays most at this
    batch, spec_concurrency.row); None when the batch decodes plainly."""
    o = ctx.overrides
    if not w.speculative or ctx.spec_method is None or o.draft_tokens == 0 or (o.draft_tokens is None
                                                                               and not ctx.spec_auto):
        return None
    if o.draft_tokens:
        return spec_concurrency.spec_step(ctx, s, batch, o.draft_tokens, context)
    return spec_concurrency.row(ctx, s, batch, context).chosen


def _state_crowded_k(ctx: PlanContext, s: Settings, w: Workload, ks: list[int]) -> set[int]:
    """Draft counts whose memory (the draft's weights; hybrid models' extra GDN/Mamba state slots, vLLM keeps
    one per draft token per request) push a workload that fits without drafts out of the pool."""
    if not fits(ctx, replace(s, draft_tokens=0), w):
        return set()
    return {k for k in ks if not fits(ctx, replace(s, draft_tokens=k), w)}

"""Serve-settings tuner: for a workload profile, choose TP, KV dtype, memory share, chunked-prefill
size, max batch and draft tokens from the cost model, and keep every option it weighed.

Rules (in this order, each recorded as a trade-off row):
  TP         the most GPUs that pay: a larger TP must beat the smaller one by 10 % on the objective
  KV dtype   only dtypes `explain` accepts; must fit the workload's context x concurrency; among
             those within 3 % of the best objective: the checkpoint's own calibrated KV dtype if it
             declares one (what it was validated with, and what 'auto' runs), else the most KV bits
             (quantized KV costs accuracy). 16-bit KV is FP16 on GPUs without BF16.
  share      the engine default; raised (<= 0.95) only when the context would not fit otherwise and
             does at the raised share (SGLang too: its activations must still fit outside the share)
  chunked    the smallest chunk whose prefill time is within 5 % of the fastest (a chunk stalls the
             other streams' decode while it runs and its activations come out of the KV pool)
  max batch  latency/context: the workload's concurrency; throughput: the smallest batch (at most the
             workload's concurrency) within 3 % of the best aggregate that keeps the per-stream floor and
             fits the context, each batch at the draft count that pays there (speculation under
             concurrency, advisor.cost.spec_concurrency: none once verifying b x (k+1) rows stops paying);
             never more requests than the pool holds with their KV and, for GDN/Mamba layers, their
             per-request recurrent state (rechecked after draft tokens add state slots)
  draft k    the k with the best speedup at the chosen batch, each k costed as its speculative step at
             that batch (verify at M = b x (k+1), the draft's pass over its rows, the state copy); 0 when
             none gains 5 %; for GDN/Mamba models only among the k whose extra state slots keep the
             workload's context fitting
  context    capped (max_model_len) only when one request at the model's maximum context does not fit:
             at the workload's context if it fits, else at the largest that does
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from advisor.cost import feasibility, spec_concurrency
from advisor.cost.context import PlanContext, Settings
from advisor.cost.speculative import choose
from advisor.cost.workload import Workload

TP_GAIN = 1.10
KV_SPEED_TOLERANCE = 0.03
CHUNK_TOLERANCE = 0.05
BATCH_TOLERANCE = 0.03
SHARE_MAX = 0.95
CHUNKS = (2048, 4096, 8192, 16384)
CONTEXT_STEP = 1024


@dataclass(frozen=True)
class Option:
    knob: str                    # tp | kv_cache_dtype | memory_share | chunked_prefill | max_batch | draft_tokens
    value: str
    metrics: dict[str, float | int | str]
    chosen: bool
    note: str = ""


@dataclass(frozen=True)
class Tuning:
    settings: Settings
    options: tuple[Option, ...]
    notes: tuple[str, ...]


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


def _fits(ctx: PlanContext, s: Settings, w: Workload) -> bool:
    """Latency/context workloads need context x concurrency; throughput needs one full context
    (the batch then grows as far as the pool allows)."""
    streams = 1 if w.objective == "throughput" else w.concurrency
    b = ctx.budget(s)     # SGLang: ``fits`` also needs the activations to fit outside the share
    return b.fits and b.pool_bytes.value > 0 and ctx.max_context(s, streams) >= w.context_tokens


def _objective(ctx: PlanContext, s: Settings, w: Workload) -> float:
    c = decode_context(w, ctx)
    if w.objective == "throughput":
        b = max(1, min(w.concurrency, ctx.max_concurrency(s, w.context_tokens)))
        return b / ctx.decode(s, b, c).seconds
    return 1.0 / ctx.decode(s, max(1, w.concurrency), c).seconds


def _base(ctx: PlanContext, w: Workload, tp: int, kv=None) -> Settings:
    o = ctx.overrides
    graphs = ctx.engine.cuda_graphs_default if o.cuda_graphs is None else o.cuda_graphs
    bd = ctx.batch_default()
    chunked = o.chunked_prefill or int(bd["chunked_prefill"])
    max_batch = o.max_batch or max(1, w.concurrency)
    share = o.memory_share or ctx.default_share(chunked, max_batch, tp, graphs).value
    kv = kv or _fixed_kv(ctx) or ctx.default_kv
    return Settings(kv, max_batch, share, chunked, tp, o.draft_tokens or 0, graphs)


def _sized(ctx: PlanContext, w: Workload, tp: int, kv=None) -> tuple[Settings, bool]:
    """_base, with the share raised to SHARE_MAX when the workload's context does not fit at the engine
    default and does at the raised share (vLLM's fixed default and SGLang's computed one alike); and
    whether it fits."""
    s = _base(ctx, w, tp, kv)
    if _fits(ctx, s, w):
        return s, True
    if not ctx.overrides.memory_share and s.memory_share < SHARE_MAX:
        raised = replace(s, memory_share=SHARE_MAX)
        if _fits(ctx, raised, w):
            return raised, True
    return s, False


def _fixed_kv(ctx: PlanContext):
    name = ctx.overrides.kv_cache_dtype
    return ctx.engine.kv_dtype(name) if name else None


def tune(ctx: PlanContext, w: Workload) -> Tuning:
    o = ctx.overrides
    options: list[Option] = []
    notes: list[str] = []

    # ---- TP
    if o.tp:
        tps = [o.tp]
    else:
        tps = feasibility.tp_candidates(ctx.gpus, ctx.checkpoint.arch)
    # a TP size whose path runs layers on the CPU (FastLLM's INT4 kernel is single-GPU only) is never
    # chosen while another runs on the GPU: its speed is not a GPU roofline at all
    on_cpu = {n: ctx.cpu_layers_at_tp.get(n, ()) for n in tps}
    gpu_tps = [n for n in tps if not on_cpu[n]]
    best_tp, best_val = None, 0.0
    tp_rows = []
    sized = {tp: _sized(ctx, w, tp) for tp in tps}
    for tp in tps:
        s, fits = sized[tp]
        val = _objective(ctx, s, w) if ctx.budget(s).pool_bytes.value > 0 else 0.0
        tp_rows.append((tp, fits, val, ctx.max_context(s, w.concurrency)))
        if on_cpu[tp] and gpu_tps:
            notes.append(f"TP {tp} not chosen: {feasibility.cpu_reason(on_cpu[tp], tp)}")
            continue
        if val > 0 and (best_tp is None or (fits and not sized[best_tp][1])
                        or val > best_val * TP_GAIN):
            best_tp, best_val = tp, val
    if best_tp is None:
        best_tp = (gpu_tps or tps)[-1]
        notes.append(feasibility.does_not_fit_note(ctx, lambda n: _base(ctx, w, n)))
    for tp, fits, val, mc in tp_rows:
        why = ("layers run on the CPU" if on_cpu[tp] else "") or ("" if fits else "context x concurrency does not fit")
        options.append(Option("tp", str(tp), {"objective_tok_s": round(val, 2), "max_context": mc,
                                             "fits_workload": fits}, tp == best_tp, why))
    tp = best_tp

    # ---- KV dtype
    fixed = _fixed_kv(ctx)
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
        s, fits = _sized(ctx, w, tp, kv)
        val = _objective(ctx, s, w) if ctx.budget(s).pool_bytes.value > 0 else 0.0
        rows.append((kv, s, fits, val, ctx.max_context(s, w.concurrency), ctx.pool_tokens(s)))
    fitting = [r for r in rows if r[2]] or []
    declared = _declared_kv_kind(ctx)
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
    for kv, s, fits, val, mc, pool_t in rows:
        options.append(Option("kv_cache_dtype", kv.name,
                              {"kv_pool_tokens": pool_t, "max_context_per_request": mc,
                               "objective_tok_s": round(val, 2), "bits": kv.bits, "fits_workload": fits},
                              kv is chosen[0], _kv_note(ctx, kv, declared)))
    for name, why in ctx.rejected_kv.items():
        options.append(Option("kv_cache_dtype", name, {}, False, f"rejected by explain: {why}"))
    s = chosen[1]
    # the share was raised for the context: later steps keep it (SGLang's default would drop it again)
    raised = not o.memory_share and s.memory_share != _base(ctx, w, tp, s.kv).memory_share
    follow_default = not o.memory_share and not raised and ctx.engine.share_default is None

    # ---- chunked prefill
    if o.chunked_prefill:
        chunks = [o.chunked_prefill]
    else:
        chunks = sorted({s.chunked_prefill, *CHUNKS})
    crow = []
    for c in chunks:
        sc = replace(s, chunked_prefill=c)
        if follow_default:
            sc = replace(sc, memory_share=ctx.default_share(c, sc.max_batch, tp, sc.cuda_graphs).value)
        pf = ctx.prefill(sc, w.prompt_tokens)
        crow.append((c, sc, pf.seconds, _fits(ctx, sc, w) or not chosen[2]))
    ok = [r for r in crow if r[3]] or crow
    fastest = min(r[2] for r in ok)
    pick = min((r for r in ok if r[2] <= fastest * (1 + CHUNK_TOLERANCE)), key=lambda r: r[0])
    for c, sc, secs, fits in crow:
        options.append(Option("chunked_prefill", str(c), {"prefill_seconds": round(secs, 4),
                                                          "kv_pool_tokens": ctx.pool_tokens(sc)},
                              c == pick[0], "" if fits else "activations do not fit outside the share"
                              if not ctx.budget(sc).fits else "KV pool too small for the workload"))
    s = pick[1]

    # ---- max batch
    ctx_tokens = w.context_tokens
    max_conc = max(1, ctx.max_concurrency(s, ctx_tokens))
    c = decode_context(w, ctx)
    if o.max_batch:
        batch = o.max_batch
        if batch > max_conc:
            held = "KV pool holds" if ctx.recurrent(s) is None else "pool holds with their KV and recurrent state"
            notes.append(f"--max-batch {batch} exceeds the {max_conc} requests of {ctx_tokens} tokens the {held}: "
                         "requests will queue or be preempted")
    elif w.objective == "throughput":
        # the workload's concurrency is the most requests it ever has in flight: a larger batch buys nothing
        top_b = max(1, min(max_conc, w.concurrency, 1024))
        cands = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if b <= top_b} | {top_b})
        brow = []
        for b in cands:
            st = ctx.decode(s, b, c)
            agg, per, k = b / st.seconds, 1.0 / st.seconds, 0
            drafted = _speculating_at(ctx, s, w, b, c)      # each batch at the k that pays there
            if drafted is not None:
                agg, per, k = drafted.aggregate, drafted.per_stream, drafted.k
            brow.append((b, agg, per, k, b / st.seconds))
        ok = [r for r in brow if r[2] >= w.min_stream_tok_s] or brow[:1]
        best = max(r[1] for r in ok)
        batch = min(r[0] for r in ok if r[1] >= best * (1 - BATCH_TOLERANCE))
        for b, agg, per, k, plain in brow:
            metrics = {"aggregate_tok_s": round(agg, 1), "per_stream_tok_s": round(per, 2)}
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
        s = replace(s, memory_share=ctx.default_share(s.chunked_prefill, batch, tp, s.cuda_graphs).value)
    if not o.max_batch:
        # the batch itself reserves memory (sampler logits, graphs): keep it within what then fits
        s = replace(s, max_batch=max(1, min(batch, ctx.max_concurrency(s, ctx_tokens))))

    # ---- memory share (after chunk and batch: SGLang derives its default from both)
    default_share = ctx.default_share(s.chunked_prefill, s.max_batch, tp, s.cuda_graphs).value
    if o.memory_share:
        options.append(Option("memory_share", f"{s.memory_share:g}", {"max_context_per_request": ctx.max_context(
            s, w.concurrency)}, True, "fixed by --memory-share"))
    else:
        options.append(Option("memory_share", f"{default_share:g}", {"max_context_per_request": ctx.max_context(
            replace(s, memory_share=default_share), w.concurrency)}, s.memory_share == default_share,
            f"{ctx.engine.share_flag} default ({ctx.engine.share_source})"))
        if s.memory_share != default_share:
            options.append(Option("memory_share", f"{s.memory_share:g}",
                                  {"max_context_per_request": ctx.max_context(s, w.concurrency)}, True,
                                  "raised: the workload's context does not fit at the default"
                                  + _raised_share_note(ctx, s, default_share)))

    # ---- draft tokens
    if o.draft_tokens is not None:
        s = replace(s, draft_tokens=o.draft_tokens)
        if o.draft_tokens and ctx.spec_method is not None:
            notes.extend(_fixed_draft_note(ctx, s, max(1, min(w.concurrency, batch)), c))
    elif w.speculative and ctx.spec_method is not None:
        b = max(1, min(w.concurrency, batch))
        pts = ctx.spec_points(s, b, c)
        too_big = _state_crowded_k(ctx, s, w, [p.k for p in pts])
        if too_big and ctx.spec_auto and not o.memory_share and s.memory_share < SHARE_MAX:
            # drafting holds the draft's weights (and hybrid models' extra states): the raised share may
            # make room for the drafts the default share cannot hold
            up = replace(s, memory_share=SHARE_MAX)
            still = _state_crowded_k(ctx, up, w, [p.k for p in pts])
            if choose([p for p in pts if p.k not in still]) > choose([p for p in pts if p.k not in too_big]):
                default_share = s.memory_share
                s, too_big = up, still
                options = [replace(op, chosen=False) if op.knob == "memory_share" else op for op in options]
                options.append(Option("memory_share", f"{SHARE_MAX:g}",
                                      {"max_context_per_request": ctx.max_context(s, w.concurrency)}, True,
                                      "raised: the drafts do not fit at the default"
                                      + _raised_share_note(ctx, s, default_share)))
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
        s = replace(s, draft_tokens=k)
    else:
        why = "the workload does not use speculation" if not w.speculative else "no draft method available"
        options.append(Option("draft_tokens", "0", {}, True, why))
    if s.draft_tokens and not o.max_batch and ctx.recurrent(s) is not None:
        # GDN/Mamba layers keep one more state per draft token: the chosen batch must still fit
        capped = max(1, min(s.max_batch, ctx.max_concurrency(s, ctx_tokens)))
        if capped < s.max_batch:
            notes.append(f"max batch lowered from {s.max_batch} to {capped}: with {s.draft_tokens} draft tokens "
                         "each request holds more linear-attention states")
            s = replace(s, max_batch=capped)

    options = _restate(ctx, s, w, options, {kv.name: kv for kv in candidates})

    # ---- context cap (after everything that changes the pool)
    mml, one, why = max_model_len(ctx, s, w)
    if mml:
        options.append(Option("max_model_len", str(mml), {"max_context_one_request": one,
                                                          "model_max": ctx.checkpoint.arch.max_position_embeddings
                                                          or 0}, True, why))
    return Tuning(s, tuple(options), tuple(notes))


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


def _restate(ctx: PlanContext, s: Settings, w: Workload, options: list[Option], kvs: dict) -> list[Option]:
    """The KV dtype, chunk and share rows' pool figures at the final settings (share, chunk, batch, draft
    tokens; each row changes only its own knob), so the chosen rows read as the Predictions do. The choice
    itself was made earlier, before draft tokens took their state slots."""
    streams = max(1, min(w.concurrency, s.max_batch))
    at = {"kv_cache_dtype": f"figures at share {s.memory_share:g}, chunk {s.chunked_prefill}, max batch "
                            f"{s.max_batch}, {s.draft_tokens} draft tokens (as recommended)",
          "chunked_prefill": "pool with the other settings as recommended",
          "memory_share": "context with the other settings as recommended"}
    follow = not ctx.overrides.memory_share and ctx.engine.share_default is None and \
        s.memory_share == ctx.default_share(s.chunked_prefill, s.max_batch, s.tp, s.cuda_graphs).value
    out = []
    for opt in options:
        m = dict(opt.metrics)
        if opt.knob == "kv_cache_dtype" and opt.value in kvs and m:
            sk = replace(s, kv=kvs[opt.value])
            val = _objective(ctx, sk, w) if ctx.budget(sk).pool_bytes.value > 0 else 0.0
            m.update(kv_pool_tokens=ctx.pool_tokens(s, sk.kv), max_context_per_request=ctx.max_context(sk, streams),
                     objective_tok_s=round(val, 2), fits_workload=_fits(ctx, sk, w))
        elif opt.knob == "chunked_prefill":
            sc = replace(s, chunked_prefill=int(opt.value))
            if follow:
                sc = replace(sc, memory_share=ctx.default_share(sc.chunked_prefill, s.max_batch, s.tp,
                                                                s.cuda_graphs).value)
            m.update(kv_pool_tokens=ctx.pool_tokens(sc))
        elif opt.knob == "memory_share":
            m.update(max_context_per_request=ctx.max_context(replace(s, memory_share=float(opt.value)), streams))
        else:
            out.append(opt)
            continue
        note = f"{opt.note}; {at[opt.knob]}" if opt.note else at[opt.knob]
        out.append(replace(opt, metrics=m, note=note))
    return out


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


def _fixed_draft_note(ctx: PlanContext, s: Settings, batch: int, context: float) -> tuple[str, ...]:
    """--draft-tokens that lose against plain decoding at the workload's batch: say so and what pays."""
    step = spec_concurrency.spec_step(ctx, s, batch, s.draft_tokens, context)
    if step.speedup >= 1.0:
        return ()
    best = spec_concurrency.row(ctx, s, batch, context)
    better = f"{best.chosen_k} draft tokens pay {best.chosen.speedup:.2f}x" if best.chosen else \
        "no draft count pays here"
    return (f"--draft-tokens {s.draft_tokens} at {batch} stream(s): {ctx.spec_method.name} runs at "
            f"{step.speedup:.2f}x plain decoding (the verify step scores {step.derived.inputs['M_verify']} rows); "
            f"{better}",)


def _raised_share_note(ctx: PlanContext, s: Settings, default_share: float) -> str:
    """SGLang keeps activations and CUDA graphs outside --mem-fraction-static: say how much of its own
    reserve a raised share leaves (the activation peak is checked to fit; graphs get what remains)."""
    if ctx.engine.share_covers != "weights_kv":
        return ""
    left = ctx.vram_bytes * (1 - s.memory_share) / 2**30
    own = ctx.vram_bytes * (1 - default_share) / 2**30
    return (f"; leaves {left:.1f} GiB outside the share where {ctx.engine.engine}'s default keeps {own:.1f} GiB "
            "for activations and CUDA graphs: if graph capture runs out of memory, lower --cuda-graph-max-bs-decode")


def _state_crowded_k(ctx: PlanContext, s: Settings, w: Workload, ks: list[int]) -> set[int]:
    """Draft counts whose memory (the draft's weights; hybrid models' extra GDN/Mamba state slots, vLLM keeps
    one per draft token per request) push a workload that fits without drafts out of the pool."""
    if not _fits(ctx, replace(s, draft_tokens=0), w):
        return set()
    return {k for k in ks if not _fits(ctx, replace(s, draft_tokens=k), w)}


def _declared_kv_kind(ctx: PlanContext) -> str | None:
    """The KV quantization the checkpoint declares (calibrated scales shipped with it), as a KvDtype kind."""
    q = ctx.checkpoint.kv_cache_quant
    return {"fp8": "fp8", "nvfp4": "nvfp4", "int8": "int8"}.get(q or "")


def _kv_note(ctx: PlanContext, kv, declared: str | None = None) -> str:
    if kv.kind in ("nvfp4", "fp4_mx", "int4"):
        note = "4-bit KV: the largest pool, unpacked to 16 bits on every read; lossy"
    elif kv.kind in ("fp8", "int8", "mxfp8"):
        note = "8-bit KV: twice the 16-bit pool; small accuracy cost"
    else:
        return "16-bit KV: exact, smallest pool"
    if kv.name.endswith("_per_token_head"):
        return note + " (scales computed per token and head at write time)"
    if declared == kv.kind:
        return note + " (the checkpoint ships calibrated KV scales for it)"
    if kv.kind == "fp8":
        # vLLM: FP8 KV scales come from the checkpoint or default to 1.0 (docs quantized_kvcache.md:24-37)
        return note + " (no KV scales in the checkpoint: uncalibrated, scale 1.0)"
    return note

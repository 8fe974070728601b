"""tune(): the knobs of advisor.cost.tuning.knobs in order, each from the settings the previous one left."""

from __future__ import annotations

from dataclasses import replace

from advisor.cost.context import PlanContext, Settings
from advisor.cost.kv import KvDtype
from advisor.cost.tuning import knobs
from advisor.cost.tuning.fit import fits, objective_if_pool
from advisor.cost.tuning.steps import Option, Tuning
from advisor.cost.workload import Workload


def tune(ctx: PlanContext, w: Workload) -> Tuning:
    tp = knobs.tensor_parallel(ctx, w)
    kv = knobs.kv_cache_dtype(ctx, w, tp.settings.tp)
    follow_default = knobs.follows_engine_share(ctx, w, kv.settings)
    chunk = knobs.chunked_prefill(ctx, w, kv.settings, follow_default, kv.fits)
    batch = knobs.max_batch(ctx, w, chunk.settings, follow_default)
    share = knobs.memory_share(ctx, w, batch.settings)
    draft = knobs.draft_tokens(ctx, w, share.settings, batch.batch)
    refit = knobs.batch_after_drafts(ctx, w, draft.settings)
    s = refit.settings

    options = [*tp.options, *kv.options, *chunk.options, *batch.options, *share.options]
    if draft.share_raised:
        options = [replace(op, chosen=False) if op.knob == "memory_share" else op for op in options]
    options = _restate(ctx, s, w, [*options, *draft.options], kv.weighed)
    cap = knobs.context_cap(ctx, w, s)
    notes = (*tp.notes, *kv.notes, *batch.notes, *draft.notes, *refit.notes)
    return Tuning(s, (*options, *cap.options), notes)


def _restate(ctx: PlanContext, s: Settings, w: Workload, options: list[Option],
             kvs: dict[str, KvDtype]) -> list[Option]:
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
            m.update(kv_pool_tokens=ctx.pool_tokens(s, sk.kv), max_context_per_request=ctx.max_context(sk, streams),
                     objective_tok_s=round(objective_if_pool(ctx, sk, w), 2), fits_workload=fits(ctx, sk, w))
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

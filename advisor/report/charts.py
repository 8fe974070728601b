"""The report's charts, computed from a Plan with the cost model's own functions.

- decode vs batch: aggregate and per-stream tok/s as concurrent streams grow (a second make_plan
  with the recommended settings fixed and the batch opened up, so the curve is the cost model's);
- KV pool vs context: how many requests of a given context the pool holds, per KV dtype the
  engine accepts on this path;
- roofline: attainable TFLOPS against arithmetic intensity for the MMA classes the plan used,
  with the batch-1 decode and the prefill operating points.
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.doc import Chart, Series

CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
CURVE_MAX_BATCH = 256


def decode_vs_batch(checkpoint, explanation, gpu, plan, *, calibration=None, overrides=None) -> Chart | None:
    from advisor.cost.overrides import Overrides
    from advisor.cost.plan import make_plan
    from advisor.errors import AdvisorError

    rec, wl = plan.recommendation, plan.workload
    context = plan.predictions.decode_context_tokens
    opened = replace(wl, concurrency=CURVE_MAX_BATCH, context_tokens=max(context, 1), objective="throughput",
                     speculative=False, min_stream_tok_s=0)
    # The plan's own what-ifs (a probed power limit, PCIe link) stay; its chosen settings are fixed.
    fixed = replace(overrides or Overrides(), kv_cache_dtype=rec.kv_cache_dtype, memory_share=rec.memory_share,
                    chunked_prefill=rec.chunked_prefill, tp=rec.tp, draft_tokens=0, max_batch=CURVE_MAX_BATCH,
                    cuda_graphs=rec.cuda_graphs, context_tokens=context)
    try:
        curve = make_plan(checkpoint, explanation, gpu, gpus=plan.gpus, workload=opened, overrides=fixed,
                          calibration=calibration).predictions.decode_aggregate_tok_s
    except (AdvisorError, ValueError, ArithmeticError):  # an extra: the plan itself already succeeded
        curve = plan.predictions.decode_aggregate_tok_s
    xs = tuple(sorted(curve))
    if not xs:
        return None
    agg = tuple(float(curve[b]) for b in xs)
    return Chart(
        title=f"Decode vs batch ({rec.kv_cache_dtype} KV, context {context:,} tokens, no speculation)",
        x_label="concurrent streams", y_label="tok/s",
        series=(Series("aggregate", tuple(float(b) for b in xs), agg),
                Series("per stream", tuple(float(b) for b in xs), tuple(a / b for a, b in zip(agg, xs)))),
        log_x=len(xs) > 2)


def kv_pool_vs_context(checkpoint, plan) -> Chart | None:
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.kv import layout

    pool = plan.derivations.get("kv_pool_bytes")
    if pool is None or pool.value <= 0:
        return None
    eng = load_engine_memory(plan.engine, plan.engine_version)
    lay = layout(checkpoint.arch, plan.recommendation.tp)
    limit = checkpoint.arch.max_position_embeddings or CONTEXTS[-1]
    xs = tuple(c for c in CONTEXTS if c <= limit) or (CONTEXTS[0],)
    series = []
    for name in plan.predictions.kv_pool_tokens:
        dt = eng.kv_dtype(name)
        if dt is None:
            continue
        ys = tuple(float(_requests_that_fit(lay, dt, pool.value, c, plan)) for c in xs)
        series.append(Series(f"{name} KV", tuple(float(c) for c in xs), ys))
    if not series:
        return None
    return Chart(title=f"KV pool vs context ({pool.value / 2**30:.1f} GiB pool per GPU)",
                 x_label="context per request (tokens)", y_label="requests that fit",
                 series=tuple(series), log_x=True, log_y=False)


def _requests_that_fit(lay, dt, pool: float, context: int, plan) -> int:
    """Requests of ``context`` tokens the pool holds; a hybrid model's recurrent state takes its share
    per request (shared pool: vLLM, FastLLM) or comes out of the pool up front with a cap on running
    requests (split pool: SGLang)."""
    st = plan.predictions.recurrent_state
    if st is None:
        return lay.max_concurrency(dt, pool, context)
    kv = lay.request_bytes(dt, context)
    if st.pool == "split":
        after = plan.derivations.get("kv_pool_bytes_after_state")
        kv_pool = after.value if after is not None else pool - st.state_pool_bytes
        n = int(kv_pool // kv) if kv > 0 else 0
        return max(0, min(n, st.max_requests if st.max_requests is not None else n))
    need = kv + st.bytes_per_request
    return int(pool // need) if need > 0 else 0


def _assumption(plan, key: str):
    return next((a.value for a in plan.assumptions if a.key == key), None)


def roofline(checkpoint, plan) -> Chart | None:
    """Roofs for the MMA classes the plan priced, and two operating points (approximate AI)."""
    bw = _assumption(plan, "dram_bandwidth")
    if not isinstance(bw, (int, float)) or bw <= 0:
        return None
    bw *= plan.gpus
    roofs = [(a.key.split(".", 1)[1], float(a.value) * plan.gpus) for a in plan.assumptions
             if a.key.startswith("mma_tflops.") and isinstance(a.value, (int, float)) and a.value > 0]
    if not roofs:
        return None
    roofs = list(dict((name, v) for name, v in sorted(roofs, key=lambda r: r[1])).items())
    ai = (0.5, 2.0 ** 14)
    series = []
    for name, peak in roofs:
        knee = peak * 1000.0 / bw                          # FLOP/byte where bandwidth meets the peak
        xs = (ai[0], knee, ai[1]) if ai[0] < knee < ai[1] else ai
        ys = tuple(min(peak, bw * x / 1000.0) for x in xs)
        series.append(Series(f"{name} roof", xs, ys))
    active = checkpoint.totals.active_params
    p = plan.predictions
    dec = plan.derivations.get("decode_tok_s")
    if active and dec is not None:
        nbytes = float(dec.inputs.get("bytes_read", 0) or 0) + float(dec.inputs.get("kv_bytes", 0) or 0)
        if nbytes > 0:
            flops = 2.0 * active
            series.append(Series("decode B=1", (flops / nbytes * plan.gpus,), (flops * p.decode_tok_s / 1e12,)))
    stored = checkpoint.totals.stored_bytes
    chunk = plan.recommendation.chunked_prefill
    if active and stored and chunk and p.prefill_tok_s:
        # A prefill chunk touches every weight once: AI ~ 2 x active x chunk / stored bytes.
        series.append(Series(f"prefill (chunk {chunk})", (2.0 * active * chunk / stored,),
                             (2.0 * active * p.prefill_tok_s / 1e12,)))
    return Chart(title="Roofline (attainable TFLOPS vs arithmetic intensity)", x_label="FLOP per byte",
                 y_label="TFLOPS", series=tuple(series), kind="line", log_x=True, log_y=True)


def plan_charts(checkpoint, explanation, gpu, plan, *, calibration=None, overrides=None) -> tuple[Chart, ...]:
    charts = (decode_vs_batch(checkpoint, explanation, gpu, plan, calibration=calibration, overrides=overrides),
              kv_pool_vs_context(checkpoint, plan), roofline(checkpoint, plan))
    return tuple(c for c in charts if c is not None and not all(math.isnan(y) for s in c.series for y in s.y))

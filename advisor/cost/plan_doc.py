"""A Plan as renderer-neutral blocks (CLI, TUI, reports)."""

from __future__ import annotations

from advisor.cost.plan import Plan
from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table, na


def _n(v: float | None, fmt: str = "{:,.1f}") -> str:
    return na(v, fmt=fmt)


def _val(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# Short labels for the trade-off metrics, so the table stays readable in an 80-column terminal.
_METRIC_LABELS = {
    "objective_tok_s": "objective tok/s", "max_context": "max ctx", "max_context_per_request": "ctx/request",
    "fits_workload": "fits", "kv_pool_tokens": "pool tokens", "bits": "bits", "prefill_seconds": "prefill s",
    "max_concurrency_at_context": "max requests", "aggregate_tok_s": "aggregate tok/s",
    "per_stream_tok_s": "per-stream tok/s", "expected_tokens_per_step": "tokens/step", "speedup": "speedup",
}


def _metric(k: str, v) -> str:
    if isinstance(v, bool):
        v = "yes" if v else "no"
    elif isinstance(v, int):
        v = f"{v:,}"
    return f"{_METRIC_LABELS.get(k, k)} {_val(v)}"


def _bound(p) -> str:
    if p.crossover_batch is None:
        return f"{p.bound} at every batch up to 65536"
    if p.crossover_batch <= 1:
        return f"{p.bound} at batch 1"
    # the scan reports where compute time first reaches memory time; KV reads can push it back later
    return f"{p.bound} at batch 1; compute time first reaches memory time at batch {p.crossover_batch}"


def to_doc(plan: Plan) -> Doc:
    p, r, w = plan.predictions, plan.recommendation, plan.workload
    gpus = f"{plan.gpus} x {plan.gpu_name}" if plan.gpus > 1 else plan.gpu_name
    blocks: list = [
        Heading(f"Plan: {plan.checkpoint} ({plan.checkpoint_label}) on {gpus}, {plan.engine} {plan.engine_version}"),
        Paragraph(f"workload '{w.name}': {w.description} — {w.concurrency} stream(s), "
                  f"{w.prompt_tokens:,}-token prompts, {w.output_tokens:,} output tokens, "
                  f"{w.context_tokens:,}-token context", "dim"),
        KeyValues((
            ("decode (1 stream)", f"{_n(p.decode_tok_s)} tok/s at {p.decode_context_tokens:,} tokens of context"),
            ("bound", _bound(p)),
            ("prefill", f"{_n(p.prefill_tok_s, '{:,.0f}')} tok/s — {_n(p.prefill_seconds, '{:.2f}')} s for "
                        f"{w.prompt_tokens:,} tokens"),
            ("KV pool", f"{p.kv_pool_tokens.get(r.kv_cache_dtype, 0):,} tokens ({r.kv_cache_dtype})"),
            ("max context / request", f"{p.max_context_per_request:,} tokens at batch "
                                      f"{max(1, min(w.concurrency, r.max_batch))}"),
            ("max concurrency", f"{p.max_concurrency_at_context:,} requests of {w.context_tokens:,} tokens"),
            ("weights per GPU", f"{p.weights_gib_per_gpu:.2f} GiB"),
        ), title="Predictions"),
        *((Bullets(plan.warnings, title="Warnings", style="warn"),) if plan.warnings else ()),
        Table(("batch", "aggregate tok/s", "per stream tok/s"),
              tuple((str(b), _n(v), _n(v / b)) for b, v in p.decode_aggregate_tok_s.items()),
              title="Decode under concurrency"),
        Table(("KV dtype", "pool tokens"), tuple((k, f"{v:,}") for k, v in p.kv_pool_tokens.items()),
              title="KV pool per dtype (recommended share)"),
    ]
    sp = p.speculative
    if sp.per_k:
        if sp.note:
            blocks.append(Paragraph(f"Speculative decoding: {sp.note}", "dim"))
        blocks.append(Table(("k", "tokens/step", "speedup"),
                            tuple((str(int(d["k"])), f"{d['expected_tokens_per_step']:.2f}", f"{d['speedup']:.2f}x")
                                  for d in sp.per_k),
                            title=f"Speculative decoding: {sp.method} at batch {sp.batch}",
                            row_styles=tuple("good" if int(d["k"]) == sp.chosen_k else "normal" for d in sp.per_k)))
    blocks.append(KeyValues((
        ("kv cache dtype", r.kv_cache_dtype), ("max batch", str(r.max_batch)),
        ("draft tokens", f"{r.draft_tokens}" + (f" ({r.speculative_method})" if r.speculative_method else "")),
        ("memory share", f"{r.memory_share:g}"), ("chunked prefill", str(r.chunked_prefill)),
        ("tensor parallel", str(r.tp)), ("CUDA graphs", "on" if r.cuda_graphs else "off"),
    ), title="Recommendation"))
    blocks.append(Paragraph("  ".join(f"{k} {v}" for k, v in r.flags.items() if k), "accent"))
    blocks.append(Table(("knob", "value", "metrics", "note"),
                        tuple((o.knob, o.value, "; ".join(_metric(k, v) for k, v in o.metrics.items()),
                               ("chosen. " if o.chosen else "") + o.note) for o in plan.tradeoffs),
                        title="Trade-offs considered",
                        row_styles=tuple("good" if o.chosen else "dim" for o in plan.tradeoffs)))
    blocks.append(Table(("quantity", "value", "formula", "source"),
                        tuple((k, f"{d.value:.4g} {d.unit}", d.formula, d.source) for k, d in plan.derivations.items()),
                        title="How the numbers were derived"))
    blocks.append(Table(("assumption", "value", "source"),
                        tuple((a.key, f"{_val(a.value)} {a.unit}".strip(), "calibrated: " + a.source if a.calibrated
                               else a.source) for a in plan.assumptions),
                        title="Assumptions"))
    return Doc(tuple(blocks))

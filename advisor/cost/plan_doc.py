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
    if p.bound is None:
        return _na(p, "bound")
    if p.crossover_batch is None:
        limit = getattr(p, "crossover_limit", None)
        if limit is None:
            return f"{p.bound} at every batch up to 65536"
        return f"{p.bound} at every batch the KV pool holds (up to {limit:,} requests at the workload's context)"
    if p.crossover_batch <= 1:
        return f"{p.bound} at batch 1"
    # the scan reports where compute time first reaches memory time; KV reads can push it back later
    return f"{p.bound} at batch 1; compute time first reaches memory time at batch {p.crossover_batch}"


def _na(p, figure: str) -> str:
    """Explicit N/A with its reason (like nvitop's N/A): never a number the model cannot stand behind."""
    na = getattr(p, "na", None) or {}
    why = na.get(figure)
    if not why:
        return "N/A"
    first = next(f for f in na if na[f] == why)     # a shared reason is written out once
    return f"N/A — {why}" if first == figure else "N/A (as above)"


def _speed(p, figure: str, text: str) -> str:
    if getattr(p, figure) is None:
        return _na(p, figure)
    return ("at most " + text) if getattr(p, "upper_bound", "") else text


def _flag_line(r) -> str:
    """flag value pairs; NAME=VALUE for environment settings (FastLLM's FASTLLM_CUDA_GRAPH=0)."""
    parts = []
    for k, v in r.flags.items():
        if not k:
            continue
        parts.append(f"{k}={v}" if not k.startswith("-") else (f"{k} {v}" if v != "" else k))
    return "  ".join(parts)


_KIND = {"gdn": "GDN", "kda": "KDA", "mamba2": "Mamba2", "mamba1": "Mamba"}


def _after_state(st, batch: int) -> str:
    if st is None:
        return ""
    if st.pool == "split":
        return f", after the {st.state_pool_bytes / 2**30:,.1f} GiB state pool"
    return f", after the recurrent state of {batch:,} request(s)"


def _state_rows(st) -> tuple[tuple[str, str], ...]:
    """The GDN/Mamba per-request state: what it costs in memory and in decode traffic."""
    if st is None:
        return ()
    mib = st.bytes_per_request / 2**20
    where = ("its own pool" + (f", at most {st.max_requests:,} running requests" if st.max_requests is not None
                               else "") if st.pool == "split" else "taken from the KV pool")
    rows = [("recurrent state", f"{mib:,.1f} MiB / request ({st.layers} {_KIND.get(st.kind, st.kind)} layers, conv "
                                f"{st.conv_dtype} + state {st.ssm_dtype}, {st.slots} slot(s); {where})"),
            ("state traffic", f"{st.step_bytes_per_request / 2**20:,.1f} MiB / request / decode step (load + store)")]
    if st.kv_block_tokens > 1:
        rows.append(("attention block", f"{st.kv_block_tokens:,} tokens (raised so one page holds a state)"))
    return tuple(rows)


def to_doc(plan: Plan) -> Doc:
    p, r, w = plan.predictions, plan.recommendation, plan.workload
    gpus = f"{plan.gpus} x {plan.gpu_name}" if plan.gpus > 1 else plan.gpu_name
    blocks: list = [
        Heading(f"Plan: {plan.checkpoint} ({plan.checkpoint_label}) on {gpus}, {plan.engine} {plan.engine_version}"),
        Paragraph(f"workload '{w.name}': {w.description} — {w.concurrency} stream(s), "
                  f"{w.prompt_tokens:,}-token prompts, {w.output_tokens:,} output tokens, "
                  f"{w.context_tokens:,}-token context", "dim"),
        KeyValues((
            ("decode (1 stream)", _speed(p, "decode_tok_s", f"{_n(p.decode_tok_s)} tok/s at "
                                                            f"{p.decode_context_tokens:,} tokens of context")),
            ("bound", _bound(p)),
            ("prefill", _speed(p, "prefill_tok_s", f"{_n(p.prefill_tok_s, '{:,.0f}')} tok/s — "
                                                   f"{_n(p.prefill_seconds, '{:.2f}')} s for {w.prompt_tokens:,} tokens")),
            ("KV pool", _na(p, "kv_pool_tokens") if "kv_pool_tokens" in (getattr(p, "na", None) or {}) else
             f"{p.kv_pool_tokens.get(r.kv_cache_dtype, 0):,} tokens ({r.kv_cache_dtype})"
             + _after_state(p.recurrent_state, r.max_batch)),
            ("max context / request", _na(p, "max_context_per_request") if "max_context_per_request" in
             (getattr(p, "na", None) or {}) else f"{p.max_context_per_request:,} tokens at batch "
                                                 f"{max(1, min(w.concurrency, r.max_batch))}"),
            ("max concurrency", _na(p, "max_concurrency_at_context") if "max_concurrency_at_context" in
             (getattr(p, "na", None) or {}) else f"{p.max_concurrency_at_context:,} requests of "
                                                 f"{w.context_tokens:,} tokens"),
            *_state_rows(p.recurrent_state),
            ("weights per GPU", f"{p.weights_gib_per_gpu:.2f} GiB"),
        ), title="Predictions"),
        *((Bullets(plan.warnings, title="Warnings", style="warn"),) if plan.warnings else ()),
        Table(("batch", "aggregate tok/s", "per stream tok/s"),
              tuple((str(b), _n(v), _n(v / b)) for b, v in p.decode_aggregate_tok_s.items())
              or (("-", _na(p, "decode_aggregate_tok_s"), "N/A"),),
              title="Decode under concurrency" + (" (upper bounds)" if getattr(p, "upper_bound", "") else "")),
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
    if getattr(r, "blocked", ""):
        what = "does not fit" if "max_context_per_request" in (getattr(p, "na", None) or {}) else "cannot run"
        blocks.append(Paragraph(f"{what} — no launch line: {r.blocked}", "warn"))
    else:
        blocks.append(Paragraph(_flag_line(r), "accent"))
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

"""A Plan as renderer-neutral blocks (CLI, TUI, reports)."""

from __future__ import annotations

from advisor.cost.plan_records import Plan, Predictions, Recommendation, StatePrediction
from advisor.cost.spec_concurrency import SpecCurve
from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table, na


def _n(v: float | None, fmt: str = "{:,.1f}") -> str:
    return na(v, fmt=fmt)


def _val(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def size_text(nbytes: float) -> str:
    """Bytes in the largest binary unit that keeps the figure >= 1: '9.57 GiB', '73.4 MiB', '512 B'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            v = nbytes / scale
            return f"{v:,.2f} {unit}" if v < 100 else f"{v:,.1f} {unit}" if v < 1000 else f"{v:,.0f} {unit}"
    return f"{nbytes:,.0f} B"


def duration_text(seconds: float) -> str:
    """Seconds in s / ms / µs so a short time never prints as 0.00 s."""
    if seconds >= 1:
        return f"{seconds:,.2f} s"
    for unit, scale in (("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            v = seconds / scale
            return f"{v:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns" if seconds > 0 else "0 s"


def _prefill_tokens(plan: Plan) -> int:
    """The prompt length the prefill figure was computed for (--prompt, capped to the model's maximum,
    or the workload's)."""
    d = plan.derivations.get("prefill_seconds")
    p = d.inputs.get("P") if d is not None else None
    return int(p) if isinstance(p, (int, float)) and p > 0 else plan.workload.prompt_tokens


def _kernel_rows(plan: Plan) -> tuple:
    """Per module group: the kernel charged at decode (batch 1) and at prefill (one chunk)."""
    dec = plan.derivations.get("decode_linear_layers")
    pre = plan.derivations.get("prefill_linear_layers")
    if dec is None:
        return ()
    at_prefill = {g["module"]: g for g in (pre.inputs.get("module_groups", ()) if pre is not None else ())}
    rows = []
    for g in dec.inputs.get("module_groups", ()):
        if not g.get("gemm", True):
            continue                  # norms, conv weights, the embedding gather: no kernel choice
        p = at_prefill.get(g["module"])
        read = g["weight_bytes"] + g["copy_bytes"]
        rows.append((g["module"].replace("model.language_model.", "").replace("model.", ""),
                     _kernel_cell(g), _kernel_cell(p) if p else "-", size_text(read)))
    return tuple(rows)


def _kernel_cell(g: dict) -> str:
    extra = f", {g['launches']} launches" if g.get("launches", 1) > 1 else ""
    return f"{g['kernel']} (M={g['rows_M']:g}{extra})"


# Short labels for the trade-off metrics, so the table stays readable in an 80-column terminal.
_METRIC_LABELS = {
    "objective_tok_s": "objective tok/s", "max_context": "max ctx", "max_context_per_request": "ctx/request",
    "fits_workload": "fits", "kv_pool_tokens": "pool tokens", "bits": "bits", "prefill_seconds": "prefill s",
    "max_concurrency_at_context": "max requests", "aggregate_tok_s": "aggregate tok/s",
    "per_stream_tok_s": "per-stream tok/s", "expected_tokens_per_step": "tokens/step", "speedup": "speedup",
}


def _metric(k: str, v: object) -> str:
    if isinstance(v, bool):
        v = "yes" if v else "no"
    elif isinstance(v, int):
        v = f"{v:,}"
    return f"{_METRIC_LABELS.get(k, k)} {_val(v)}"


def _bound(p: Predictions) -> str:
    if p.bound is None:
        return _na(p, "bound")
    if p.crossover_batch is None:
        limit = p.crossover_limit
        if limit is None:
            return f"{p.bound} at every batch up to 65536"
        return f"{p.bound} at every batch the KV pool holds (up to {limit:,} requests at the workload's context)"
    if p.crossover_batch <= 1:
        return f"{p.bound} at batch 1"
    # the scan reports where compute time first reaches memory time; KV reads can push it back later
    return f"{p.bound} at batch 1; compute time first reaches memory time at batch {p.crossover_batch}"


def _na(p: Predictions, figure: str) -> str:
    """Explicit N/A with its reason (like nvitop's N/A): never a number the model cannot stand behind."""
    na = p.na
    why = na.get(figure)
    if not why:
        return "N/A"
    first = next(f for f in na if na[f] == why)     # a shared reason is written out once
    return f"N/A — {why}" if first == figure else "N/A (as above)"


def _speed(p: Predictions, figure: str, text: str) -> str:
    if getattr(p, figure) is None:
        return _na(p, figure)
    return ("at most " + text) if p.upper_bound else text


def _flag_line(r: Recommendation) -> str:
    """flag value pairs; NAME=VALUE for environment settings (FastLLM's FASTLLM_CUDA_GRAPH=0)."""
    parts = []
    for k, v in r.flags.items():
        if not k:
            continue
        parts.append(f"{k}={v}" if not k.startswith("-") else (f"{k} {v}" if v != "" else k))
    return "  ".join(parts)


_KIND = {"gdn": "GDN", "kda": "KDA", "mamba2": "Mamba2", "mamba1": "Mamba"}


def _after_state(st: StatePrediction | None, batch: int) -> str:
    if st is None:
        return ""
    if st.pool == "split":
        return f", after the {size_text(st.state_pool_bytes)} state pool"
    return f", after the recurrent state of {batch:,} request(s)"


def _state_rows(st: StatePrediction | None) -> tuple[tuple[str, str], ...]:
    """The GDN/Mamba per-request state: what it costs in memory and in decode traffic."""
    if st is None:
        return ()
    where = ("its own pool" + (f", at most {st.max_requests:,} running requests" if st.max_requests is not None
                               else "") if st.pool == "split" else "taken from the KV pool")
    rows = [("recurrent state", f"{size_text(st.bytes_per_request)} / request ({st.layers} "
                                f"{_KIND.get(st.kind, st.kind)} layers, conv {st.conv_dtype} + state {st.ssm_dtype}, "
                                f"{st.slots} slot(s); {where})"),
            ("state traffic", f"{size_text(st.step_bytes_per_request)} / request / decode step (load + store)")]
    if st.kv_block_tokens > 1:
        rows.append(("attention block", f"{st.kv_block_tokens:,} tokens (raised so one page holds a state)"))
    return tuple(rows)


def _spec_curve_table(curve: SpecCurve, max_batch: int) -> Table:
    """Speculation under concurrency: per batch, plain decoding against the draft count that pays there
    (advisor.cost.spec_concurrency); the recommended max batch highlighted."""
    rows, styles = [], []
    for r in curve.rows:
        c = r.chosen or r.best          # no k pays: the best one, marked, so the loss is visible
        rows.append((str(r.batch), _n(r.plain_aggregate), _n(r.plain_aggregate / r.batch),
                     f"{c.k}" if r.chosen_k else f"{c.k} (loses)", _n(c.aggregate), _n(c.per_stream),
                     f"{c.speedup:.2f}x"))
        styles.append("good" if r.batch == max_batch else "dim" if not r.chosen_k else "normal")
    stop = (f"stops paying at batch {curve.stops_paying_at}" if curve.stops_paying_at
            else "pays at every batch shown")
    return Table(("batch", "plain tok/s", "plain / stream", "draft k", "spec tok/s", "spec / stream", "gain"),
                 tuple(rows), title=f"Speculation under concurrency: {curve.method} ({stop})", row_styles=tuple(styles))


def _ttft_rows(p: Predictions) -> tuple[tuple[str, str], ...]:
    """Time to first token alone and under the workload's load, and what the server then delivers."""
    sv = p.serving
    if sv is None:
        return (("time to first token", _na(p, "serving")),) if "serving" in p.na else ()
    rows = [("TTFT, alone", _speed(p, "serving", f"{duration_text(sv.ttft_isolated_s)} (request overhead + prefill)"))]
    if sv.concurrency > 1:
        rows.append((f"TTFT, {sv.concurrency} streams", _speed(
            p, "serving", f"{duration_text(sv.ttft_loaded_s)} (queued behind other prompts, prefilled in steps "
                          f"shared with {sv.concurrency - 1} running decodes); {_n(sv.output_tok_s)} tok/s output "
                          f"in all, {_n(sv.output_tok_s / sv.concurrency)} per stream")))
    return tuple(rows)


def _evidence(plan: Plan) -> str:
    """Which measured system the speed figures stand on (or that they are estimates), from the assumptions."""
    a = next((a for a in plan.assumptions if a.key == "measured_evidence"), None)
    if a is None:
        return "estimates (see the assumptions)"
    if a.value == "none":
        return f"estimates — {a.source.split(';')[0].split(': ', 1)[-1]} (each term labelled below)"
    relation = a.source.split(":")[0]
    how = "measured on this card" if relation == "same card" else f"{relation}, scaled to this card"
    return (f"measured operators of {a.value} ({how}; NVIDIA AIConfigurator operator tables): GEMMs, MoE "
            "layers, attention, all-reduce — each term's table is named below")


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
                                                   f"{duration_text(p.prefill_seconds or 0.0)} for "
                                                   f"{_prefill_tokens(plan):,} tokens")),
            *_ttft_rows(p),
            ("speeds from", _evidence(plan)),
            ("KV pool", _na(p, "kv_pool_tokens") if "kv_pool_tokens" in p.na else
             f"{p.kv_pool_tokens.get(r.kv_cache_dtype, 0):,} tokens ({r.kv_cache_dtype})"
             + _after_state(p.recurrent_state, r.max_batch)),
            ("max context / request", _na(p, "max_context_per_request") if "max_context_per_request" in
             p.na else f"{p.max_context_per_request:,} tokens at batch {max(1, min(w.concurrency, r.max_batch))}"),
            ("max concurrency", _na(p, "max_concurrency_at_context") if "max_concurrency_at_context" in
             p.na else f"{p.max_concurrency_at_context:,} requests of {w.context_tokens:,} tokens"),
            *_state_rows(p.recurrent_state),
            ("weights per GPU", size_text(p.weights_gib_per_gpu * 2**30)),
        ), title="Predictions"),
        *((Bullets(plan.warnings, title="Warnings", style="warn"),) if plan.warnings else ()),
        Table(("batch", "aggregate tok/s", "per stream tok/s"),
              tuple((str(b), _n(v), _n(v / b)) for b, v in p.decode_aggregate_tok_s.items())
              or (("-", _na(p, "decode_aggregate_tok_s"), "N/A"),),
              title="Decode under concurrency" + (" (upper bounds)" if p.upper_bound else "")),
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
    if sp.curve is not None:
        blocks.append(_spec_curve_table(sp.curve, r.max_batch))
    blocks.append(KeyValues((
        ("kv cache dtype", r.kv_cache_dtype), ("max batch", str(r.max_batch)),
        ("draft tokens", f"{r.draft_tokens}" + (f" ({r.speculative_method})" if r.speculative_method else "")),
        ("memory share", f"{r.memory_share:g}"), ("chunked prefill", str(r.chunked_prefill)),
        ("tensor parallel", str(r.tp)), ("CUDA graphs", "on" if r.cuda_graphs else "off"),
    ), title="Recommendation"))
    if r.blocked:
        what = "does not fit" if "max_context_per_request" in p.na else "cannot run"
        blocks.append(Paragraph(f"{what} — no launch line: {r.blocked}", "warn"))
    else:
        blocks.append(Paragraph(_flag_line(r), "accent"))
    blocks.append(Table(("knob", "value", "metrics", "note"),
                        tuple((o.knob, o.value, "; ".join(_metric(k, v) for k, v in o.metrics.items()),
                               ("chosen. " if o.chosen else "") + o.note) for o in plan.tradeoffs),
                        title="Trade-offs considered",
                        row_styles=tuple("good" if o.chosen else "dim" for o in plan.tradeoffs)))
    kernels = _kernel_rows(plan)
    if kernels:
        blocks.append(Table(("module group", "kernel at decode (batch 1)", "kernel at prefill (one chunk)",
                             "read / GPU / step"), kernels,
                            title="Kernels charged per module group (M = rows per call)"))
    blocks.append(Table(("quantity", "value", "formula", "source"),
                        tuple((k, f"{d.value:.4g} {d.unit}", d.formula, d.source) for k, d in plan.derivations.items()),
                        title="How the numbers were derived"))
    blocks.append(Table(("assumption", "value", "source"),
                        tuple((a.key, f"{_val(a.value)} {a.unit}".strip(), "calibrated: " + a.source if a.calibrated
                               else a.source) for a in plan.assumptions),
                        title="Assumptions"))
    return Doc(tuple(blocks))

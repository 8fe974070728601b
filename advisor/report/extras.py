"""Optional report sections from measurements: calibration, microbenchmarks, benchmark vs
prediction. Each returns an ``Extra`` (a Doc and its JSON data).

Verdicts are produced by launchers/ (which this core does not import): they are read here by
attribute, as launchers.verdict.Verdict defines them. The launch kernel check is rendered by
launchers.report.kernel_check_doc in the report command.
"""

from __future__ import annotations

from collections.abc import Mapping

from advisor.calibration import ENGINE_KERNEL_CLASSES
from advisor.checkpoint.model import Scheme
from advisor.doc import Block, Bullets, Doc, KeyValues, Paragraph, Table, na
from advisor.jsonout import to_jsonable
from advisor.report.build import Extra


def calibration_extra(cal) -> Extra:
    """What microbench measured on this GPU and plan used instead of table peaks (no UUID)."""
    pairs = [("GPU", f"{cal.name} ({cal.gpu_id})"), ("measured", cal.measured_at),
             ("copy bandwidth", f"{cal.bandwidth_gbs:.0f} GB/s"),
             ("read bandwidth", na(cal.read_bandwidth_gbs, "GB/s", "{:.0f}"))]
    if cal.shape:
        pairs.append(("shape (K x N)", f"{cal.shape[0]} x {cal.shape[1]}"))
    if cal.software:
        pairs.append(("software", ", ".join(f"{k} {v}" for k, v in sorted(cal.software.items()))))
    blocks: list[Block] = [KeyValues(tuple(pairs))]
    classes = sorted(set(cal.kernel_bandwidth_eff) | set(cal.dequant_overhead))
    if classes:
        blocks.append(Table(("kernel class", "bandwidth efficiency (M=1)", "dequant overhead (large M)", "plan"),
                            tuple((c, na(cal.kernel_bandwidth_eff.get(c), fmt="{:.1%}"),
                                   na(cal.dequant_overhead.get(c), fmt="{:+.1%}"),
                                   "applied (the engine's kernel: cuBLAS)" if c in ENGINE_KERNEL_CLASSES
                                   else "shown only (our Triton kernel, not the engine's)") for c in classes),
                            title="Per kernel class"))
    if cal.mma_tflops:
        blocks.append(Table(("MMA class", "measured TFLOPS"),
                            tuple((k, f"{v:.1f}") for k, v in sorted(cal.mma_tflops.items())),
                            title="Dense matmul throughput"))
    data = to_jsonable(cal)
    data.pop("uuid", None)
    return Extra("calibration", "Calibration (measured on this GPU)", Doc(tuple(blocks)), data)


def microbench_extra(payload: dict) -> Extra:
    """A `microbench --json` document: its suite rendered by the microbench module's own Doc."""
    from advisor.microbench.results import CaseResult, Stream, Suite, to_doc

    s = payload.get("suite") if isinstance(payload, dict) else None
    if not isinstance(s, dict):
        reason = payload.get("reason") if isinstance(payload, dict) else None
        return Extra("microbench", "Microbenchmarks",
                     Doc((Paragraph(f"No microbenchmark results ({reason or 'no suite in the file'}).", "warn"),)),
                     {"available": False, "reason": reason})
    fields = dict(s)
    fields["cc"] = tuple(fields.get("cc") or (0, 0))
    fields["streams"] = tuple(Stream(**x) for x in fields.get("streams") or ())
    fields["results"] = tuple(CaseResult(**x) for x in fields.get("results") or ())
    fields["notes"] = tuple(fields.get("notes") or ())
    fields["uuid"] = None
    suite = Suite(**fields)
    doc = to_doc(suite)
    data = to_jsonable(suite)
    data.pop("uuid", None)
    return Extra("microbench", "Microbenchmarks", Doc(doc.blocks[1:]) if doc.blocks else doc,
                 {"available": True, "suite": data})


def benchmark_extra(measured: dict, verdicts) -> Extra:
    """Measured numbers (a `bench --json` summary) and launchers.verdict.Verdict per metric."""
    pairs = tuple((k, v if isinstance(v, str) else na(v, fmt="{:.4g}")) for k, v in measured.items())
    blocks: list = [KeyValues(pairs, title="Measured")]
    rows, styles, data = [], [], []
    for v in verdicts:
        band = f"{v.band.low:.1f}-{v.band.high:.1f}" if v.band else "N/A"
        rows.append((v.metric, na(v.measured, fmt="{:.1f}"), band, na(v.ratio, fmt="{:.2f}x"), v.status))
        styles.append("good" if v.status == "within" else "bad" if v.status == "below" else "normal")
        data.append(to_jsonable(v))
    blocks.append(Table(("metric", "measured", "predicted band", "measured / predicted", "verdict"), tuple(rows),
                        title="Benchmark vs prediction", row_styles=tuple(styles)))
    for v in verdicts:
        if v.status == "below" and v.causes:
            blocks.append(Bullets(tuple(f"{c.text} — {c.evidence}" for c in v.causes),
                                  title=f"Likely causes ({v.metric} below prediction), ranked", style="warn"))
    return Extra("benchmark", "Benchmark vs prediction", Doc(tuple(blocks)),
                 {"measured": dict(measured), "verdicts": data})


def quality_extra(weights, outputs, scheme_shares: Mapping[Scheme, float]) -> Extra:
    """Measured quality (advisor.quality.evidence records read from `quality --json` and `bench
    --reference-url --json` files): evidence per format, the weight verdicts, the output agreement."""
    from advisor.quality.evidence import evidence_doc, per_format

    rows = per_format(scheme_shares, weights, outputs)
    blocks: list = list(evidence_doc(rows).blocks)
    for w in weights:
        blocks.append(Paragraph(f"weight error of {w.candidate} ({w.source}): {w.line}",
                                {"ok": "good", "degraded": "warn"}.get(w.status, "bad")))
        blocks.append(Table(("format", "tensors", "median SNR dB", "median dB vs round-to-nearest"),
                            tuple((f, str(n), f"{snr:.1f}", f"{ex:+.2f}") for f, (n, snr, ex) in w.by_family.items()),
                            title="Weight error per format"))
    for o in outputs:
        kl = "N/A (a server returned no logprobs)" if o.mean_kl is None else f"{o.mean_kl:.4g} nats"
        blocks.append(KeyValues((("candidate", o.candidate), ("greedy agreement", f"{o.agreement:.1%} (95 % "
                                                                                  f"{o.low:.1%}-{o.high:.1%})"),
                                 ("sample", f"{o.prompts} prompts, {o.tokens} tokens"), ("mean top-k KL", kl),
                                 ("acceptance canary", o.canary or "not measured"), ("from", o.source)),
                                title="Output agreement with the reference"))
    data = {"evidence": to_jsonable(rows), "weights": to_jsonable(weights), "agreement": to_jsonable(outputs)}
    return Extra("quality", "Quality (measured)", Doc(tuple(blocks)), data)

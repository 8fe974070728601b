"""Renderer-neutral document and JSON payload of a `quality` result."""

from __future__ import annotations

import math

from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table
from advisor.quality.results import QualityReport, TensorResult
from advisor.quality.verdict import group_text

STYLE = {"ok": "good", "degraded": "warn", "broken": "bad"}


def _db(x: float) -> str:
    return "inf" if x == math.inf else ("-inf" if x == -math.inf else f"{x:.1f}")


def _short(name: str) -> str:
    for p in ("model.language_model.", "model."):
        if name.startswith(p):
            return name[len(p):]
    return name


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %" if x else "0"


def tensor_row(t: TensorResult, fmt: bool) -> tuple[str, ...]:
    return ((_short(t.name),) + ((t.family,) if fmt else ()) +
            (_db(t.snr_db), f"{t.excess_db:+.2f}", f"{t.rel_error:.3f}", f"{t.cosine:.4f}", f"{t.max_abs_error:.3g}",
             f"{_pct(t.saturated_share)} / {_pct(t.zero_share)}", str(t.broken_groups)))


def tensor_columns(fmt: bool) -> tuple[str, ...]:
    return (("tensor",) + (("format",) if fmt else ()) +
            ("SNR dB", "vs RTN", "rel err", "cosine", "max err", "sat / zero", "broken"))


def quality_doc(rep: QualityReport, *, all_tensors: bool = False) -> Doc:
    v = rep.verdict
    blocks: list = [
        Heading(f"Quality: {rep.candidate} against {rep.reference}"),
        Paragraph(v.line, STYLE[v.status]),
        KeyValues((
            ("formats", ", ".join(rep.formats)),
            ("tensors compared", f"{len(rep.tensors)} quantized; {rep.kept['identical']} unquantized matrices "
                                 f"byte-identical to the reference"),
            ("method", "dequantized with our own math, compared with the BF16 reference; 'RTN' is round-to-nearest "
                       "in the same format on the same weights"),
            ("time", f"{rep.seconds:.1f} s"),
        )),
        Table(("layer class", "format", "n", "median SNR dB", "min SNR dB", "vs RTN dB", "max rel err"),
              tuple((_short(c.layer_class), c.family, str(c.tensors), _db(c.median_snr_db), _db(c.min_snr_db),
                     f"{c.median_excess_db:+.2f}", f"{c.max_rel_error:.3f}") for c in rep.classes),
              title="Per layer class (SNR: higher is better; vs RTN: dB below round-to-nearest)"),
    ]
    shown = rep.tensors if all_tensors else rep.worst(10)
    fmt = len(rep.formats) > 1
    blocks.append(Table(tensor_columns(fmt), tuple(tensor_row(t, fmt) for t in shown),
                        title="Every tensor" if all_tensors else f"Worst {len(shown)} tensors",
                        row_styles=tuple("bad" if t.broken_groups or t.nonfinite else "normal" for t in shown)))
    broken = [t for t in rep.tensors if t.broken]
    if broken:
        blocks.append(Bullets(tuple(group_text(t, i) for t in broken for i in range(len(t.broken)))[:20],
                              title="Broken scale groups", style="bad"))
    if rep.scale_groups:
        blocks.append(Table(("fused group", "members", "global scales (amax/2688)", "shared"),
                            tuple((c.rule, ", ".join(_short(m) for m in c.members),
                                   ", ".join(f"{s:.6g}" for s in c.scales), "yes" if c.shared else "NO")
                                  for c in rep.scale_groups),
                            title="Fused projections and their global scale",
                            row_styles=tuple("normal" if c.shared else "bad" for c in rep.scale_groups)))
    if rep.findings:
        blocks.append(Bullets(tuple(f"{f.severity}: {f.text}" for f in rep.findings), title="Findings",
                              style="warn" if v.status != "broken" else "bad"))
    blocks.append(Table(("threshold", "why"), v.thresholds, title="Thresholds"))
    if rep.notes:
        blocks.append(Bullets(rep.notes, title="Notes", style="dim"))
    return Doc(tuple(blocks))


def tensor_payload(t: TensorResult) -> dict:
    return {"tensor": t.name, "module": t.module, "layer_class": t.layer_class, "role": t.role, "format": t.format,
            "family": t.family, "shape": list(t.shape), "reference_match": t.reference, "rel_error": t.rel_error,
            "snr_db": t.snr_db, "rtn_snr_db": t.rtn_snr_db, "excess_db": t.excess_db, "cosine": t.cosine,
            "max_abs_error": t.max_abs_error, "ref_amax": t.ref_amax, "group_size": t.group_size,
            "groups": t.groups, "saturated_groups": t.saturated_groups, "zero_groups": t.zero_groups,
            "nonfinite": t.nonfinite, "broken_groups": t.broken_groups,
            "broken": [{"row": g.row, "col": g.col, "factor": g.factor, "max_error": g.error,
                        "ref_amax": g.ref_amax} for g in t.broken], "notes": list(t.notes)}


def quality_payload(rep: QualityReport) -> dict:
    return {
        "reference": rep.reference, "candidate": rep.candidate, "formats": list(rep.formats),
        "verdict": {"status": rep.verdict.status, "line": rep.verdict.line,
                    "thresholds": [{"threshold": a, "why": b} for a, b in rep.verdict.thresholds]},
        "tensors": [tensor_payload(t) for t in rep.tensors],
        "worst": [t.name for t in rep.worst(10)],
        "layer_classes": rep.classes,
        "scale_groups": rep.scale_groups,
        "kept": rep.kept,
        "findings": rep.findings,
        "notes": list(rep.notes),
        "seconds": rep.seconds,
    }


# ------------------------------------------------------------------ output agreement (bench --reference-url)

def _ci(iv) -> str:
    return "" if iv is None else f"{100 * iv.low:.1f}-{100 * iv.high:.1f} %"


def agreement_doc(ag) -> Doc:
    """Blocks for an advisor.quality.agreement_stats.AgreementReport."""
    from advisor.quality.canary import CanaryResult

    all_ = ag.overall
    ident = all_.identical if all_ else 0
    style = "good" if all_ and all_.agreement == 1.0 else "warn"
    blocks: list = [
        Heading("Output agreement with the reference", 2),
        Paragraph(f"{all_.agreement:.1%} of greedy tokens agree (95 % interval {_ci(all_.agreement_ci)}); "
                  f"{ident}/{all_.prompts} outputs identical" +
                  (f"; mean top-{5} KL {all_.mean_kl:.4g} nats" if all_.mean_kl is not None else ""), style),
        KeyValues((("candidate", f"{ag.candidate_url} ({ag.candidate_model})"),
                   ("reference", f"{ag.reference_url} ({ag.reference_model})"),
                   ("prompts", f"{len(ag.prompts)} from {ag.prompt_source}, temperature 0, up to {ag.max_tokens} "
                               "tokens each"),
                   ("compared on", ag.token_basis))),
        Table(("kind", "prompts", "tokens", "agreement", "95 % interval", "identical", "first divergence (median)",
               "mean KL", "KL 95 % interval"),
              tuple((k.kind, str(k.prompts), str(k.tokens), f"{k.agreement:.1%}", _ci(k.agreement_ci),
                     f"{k.identical}/{k.prompts}",
                     "-" if k.median_first_divergence is None else f"token {k.median_first_divergence:g}",
                     "N/A" if k.mean_kl is None else f"{k.mean_kl:.4g}",
                     "" if k.kl_ci is None else f"{k.kl_ci.low:.3g}-{k.kl_ci.high:.3g}") for k in ag.kinds),
              title="Per prompt kind (interval: the wider of a bootstrap over prompts and a Wilson interval "
                    "over tokens)"),
    ]
    diverged = [c for c in ag.prompts if not c.identical][:3]
    if diverged:
        items = []
        for c in diverged:
            items.append(f"{c.kind}: {c.prompt[:60]!r} diverges at token {c.first_divergence}")
        blocks.append(Bullets(tuple(items), title="First divergences", style="dim"))
    notes = ([ag.kl_note] if ag.kl_note else []) + list(ag.notes) + [f"failed: {f}" for f in ag.failures]
    if notes:
        blocks.append(Bullets(tuple(notes), title="Notes", style="dim"))
    if isinstance(ag.canary, CanaryResult):
        blocks += canary_blocks(ag.canary)
    return Doc(tuple(blocks))


def canary_blocks(c) -> list:
    rows = tuple((str(d.position), f"{d.reference:.1%}", f"{d.candidate:.1%}",
                  "N/A" if d.z is None else f"{d.z:.1f}", "drop" if d.significant else "")
                 for d in c.positions)
    blocks: list = [Table(("draft position", "reference", "candidate", "z", ""), rows,
                          title="Speculative acceptance, same prompts on both servers",
                          row_styles=tuple("bad" if d.significant else "normal" for d in c.positions))]
    blocks.append(Paragraph(c.finding, "bad") if c.finding else
                  Paragraph("acceptance matches the reference within noise", "good"))
    blocks.append(Paragraph(c.method, "dim"))
    return blocks

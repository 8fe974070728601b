"""Renderer-neutral documents (advisor.doc) for launch, kernel check, failures and benchmarks."""

from __future__ import annotations

from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph, Table, na
from advisor.untrusted import printable


def command_doc(cmd) -> Doc:
    blocks: list[Block] = [Heading(f"Launch: {cmd.engine}" + (f" {cmd.version}" if cmd.version else "")),
              Paragraph(cmd.display_multiline(), "code")]
    if cmd.version_note:
        blocks.append(Paragraph(cmd.version_note, "dim"))
    if cmd.steps:
        blocks.append(Heading("Run first (multi-node, Ray)", 2))
        for step, line in zip(cmd.steps, cmd.display_steps()):
            blocks.append(Paragraph(f"# {step.where}: {step.purpose}", "dim"))
            blocks.append(Paragraph(line, "code"))
    for f in cmd.files:
        blocks.append(Paragraph(f"{f.path} ({f.purpose}):\n{f.content.rstrip()}"))
    if cmd.warnings:
        blocks.append(Bullets(tuple(cmd.warnings), title="Warnings", style="warn"))
    if cmd.notes:
        blocks.append(Bullets(tuple(cmd.notes), title="Notes", style="dim"))
    return Doc(tuple(blocks))


def findings_doc(findings, title: str = "Diagnosis") -> Doc:
    if not findings:
        return Doc()
    rows = tuple((f.kind, f.cause, f.remedy or "—", f.line[:160] if f.line else "—") for f in findings)
    styles = tuple("bad" if f.fatal else "warn" for f in findings)
    return Doc((Table(("kind", "cause", "remedy", "log line"), rows, title=title, row_styles=styles),))


def failure_doc(err) -> Doc:
    blocks: list[Block] = [Paragraph(str(err), "bad")]
    doc = Doc(tuple(blocks)) + findings_doc(getattr(err, "findings", ()))
    tail = getattr(err, "tail", ())
    if tail:
        doc = doc + Doc((Bullets(tuple(tail[-12:]), title="Log tail", style="dim"),))
    return doc


def kernel_check_doc(kc) -> Doc:
    rows = tuple((r.mark, r.layer_class, na(r.predicted), ", ".join(r.observed) or "not logged") for r in kc.rows)
    styles = tuple({"match": "good", "mismatch": "bad"}.get(r.status, "dim") for r in kc.rows)
    blocks: list[Block] = [Heading("Kernel check", 2)]
    if rows:
        blocks.append(Table(("", "layer class", "predicted (explain)", "engine logged"), rows, row_styles=styles))
    else:
        blocks.append(Paragraph("the engine logged no kernel or backend choices", "dim"))
    kv = kc.kv
    if kv.predicted_tokens is None and kv.observed_tokens is None:
        blocks.append(Paragraph("KV pool: no plan prediction to compare and the engine logged no pool size", "dim"))
        return Doc(tuple(blocks))
    pairs = [("KV pool (plan)", na(kv.predicted_tokens, "tokens", "{:,}") if kv.predicted_tokens is not None
              else "no prediction (launched without a plan for this engine)"),
             ("KV pool (engine)", na(kv.observed_tokens, "tokens", "{:,}") if kv.observed_tokens is not None
              else "not logged")]
    if kv.error_pct is not None:
        pairs.append(("error", f"{kv.error_pct:+.1f} %"))
    blocks.append(KeyValues(tuple(pairs)))
    return Doc(tuple(blocks))


def _s(v, unit="s", fmt="{:.3f}"):
    return na(v, unit, fmt)


def bench_doc(rep, verdicts=(), watch=()) -> Doc:
    blocks: list[Block] = [Heading(f"Benchmark: {rep.model} at {rep.url}"),
              Paragraph(f"settings: {rep.config.settings}; temperature 0, medians; deadlines: "
                        f"{rep.config.deadlines}", "dim")]
    if rep.excluded_text:
        blocks.append(Paragraph(f"{rep.excluded_text}: the figures below are over the rest", "warn"))
    blocks.append(Table(("prompt", "TTFT", "decode tok/s", "tokens", "failed"),
                        tuple((k.kind, _s(k.ttft_s), na(k.decode_tps, "", "{:.1f}"), na(k.tokens, "", "{:.0f}"),
                               str(k.failed)) for k in rep.kinds), title="Single stream"))
    blocks.append(KeyValues((
        ("TTFT median", _s(rep.ttft_s)),
        ("ITL mean / p50 / p99", " / ".join(na(v * 1000 if v is not None else None, "ms", "{:.2f}")
                                            for v in (rep.itl_s.mean, rep.itl_s.p50, rep.itl_s.p99))),
        ("decode tok/s per stream", na(rep.decode_tps, "", "{:.1f}")),
    )))
    c = rep.concurrency
    if c:
        blocks.append(KeyValues((
            ("streams", f"{c.streams} ({c.failed} failed)"),
            ("aggregate tok/s", na(c.aggregate_tps, "", "{:.1f}")),
            ("per-stream tok/s p50 / p99",
             f"{na(c.per_stream_tps.p50, '', '{:.1f}')} / {na(c.per_stream_tps.p99, '', '{:.1f}')}"),
            ("TTFT p50 / p99", f"{_s(c.ttft_s.p50)} / {_s(c.ttft_s.p99)}"),
        ), title="Concurrent streams"))
    if rep.prefill:
        p = rep.prefill
        pairs = [("long prompt", f"{na(p.prompt_tokens, 'tokens', '{:,}')} ({p.prompt_words} words)"),
                 ("prefill (TTFT)", _s(p.prefill_s))]
        if rep.interference:
            i = rep.interference
            pairs += [("short TTFT idle", _s(i.short_ttft_idle_s)),
                      ("short TTFT during prefill", _s(i.short_ttft_during_prefill_s)),
                      ("slowdown", na(i.slowdown, "x", "{:.1f}"))]
        blocks.append(KeyValues(tuple(pairs), title="Prefill"))
    if rep.spec:
        blocks.append(KeyValues(tuple((f"position {i}", f"{r:.1%}") for i, r in enumerate(rep.spec.per_position))
                                + (("mean accepted length", f"{rep.spec.mean_accepted_length:.2f}"),),
                                title="Speculative acceptance (/metrics)"))
    for v in verdicts:
        style = {"within": "good", "above": "good", "below": "bad"}.get(v.status, "dim")
        band = f"{v.band.low:.1f}–{v.band.high:.1f}" if v.band else "N/A"
        caveat = f" ({rep.excluded_text})" if rep.excluded_text else ""
        blocks.append(Paragraph(f"{v.metric}: measured {na(v.measured, '', '{:.1f}')} vs predicted {band} → {v.status}"
                                f"{caveat}", style))
        if v.causes:
            blocks.append(Table(("#", "likely cause", "evidence"),
                                tuple((str(n), c.text, c.evidence) for n, c in enumerate(v.causes, 1)),
                                row_styles=tuple("bad" if c.checked and not c.evidence.startswith("not") else "dim"
                                                 for c in v.causes)))
    if watch:
        blocks.append(Bullets(tuple(f"{w.text} ({w.evidence})" for w in watch), title="Watchdog", style="warn"))
    if rep.notes:
        blocks.append(Bullets(rep.notes, title="Notes", style="dim"))
    if rep.failures:
        blocks.append(Bullets(rep.failures[:10], title="Failed or excluded requests", style="bad"))
    return Doc(tuple(blocks))


def plain(doc: Doc) -> str:
    """Plain-text rendering for progress output while a command is still running (no Rich here)."""
    out = []
    for b in doc.blocks:
        if isinstance(b, Heading):
            out.append(b.text)
        elif isinstance(b, Paragraph):
            out.append(b.text)
        elif isinstance(b, KeyValues):
            if b.title:
                out.append(b.title)
            out += [f"  {k}: {v}" for k, v in b.pairs]
        elif isinstance(b, Table):
            if b.title:
                out.append(b.title)
            widths = [max(len(str(x)) for x in col) for col in zip(b.columns, *b.rows)] if b.rows else []
            for row in (b.columns, *b.rows):
                out.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        elif isinstance(b, Bullets):
            if b.title:
                out.append(b.title)
            out += [f"  - {i}" for i in b.items]
    return printable("\n".join(out), multiline=True)

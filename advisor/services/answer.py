"""The short answer to "what runs on my card, and how fast": runs as · decode · KV pool · max context.

One builder for the places a user meets first — the TUI's start screen, the piped output and the
top of a report — so they print the same four lines. The numbers are the plan's own rows (the
Predictions block of `plan`), never recomputed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.doc import Block, Doc, KeyValues, Paragraph

if TYPE_CHECKING:
    from advisor.services.analysis import Analysis

# The plan's Predictions rows that make the answer, with the label the answer gives them.
_PLAN_ROWS = (("decode (1 stream)", "decode (1 stream)"), ("KV pool", "KV pool"),
              ("max context / request", "max context"))


def runs_as(a: Analysis) -> str:
    """What the weight-moving layers really run as: scheme, kernel, tensor cores."""
    from advisor.kernel_path.summary import MMA_WORDS
    from advisor.report.matrix import primary_decision

    ex = a.explanation
    d = primary_decision(ex, a.checkpoint)
    if d is None:
        return "N/A — explain found no layer to run"
    if not d.runs:
        return f"does not run: {d.error or '; '.join(d.reasons) or 'no kernel passes its gates'}"
    text = f"{d.effective_scheme} via {d.kernel or 'N/A'} on {MMA_WORDS.get(d.mma, d.mma)}"
    if d.checkpoint_scheme != d.effective_scheme:
        text += f"; declared {d.checkpoint_scheme}"
    return text


def answer_pairs(a: Analysis | None) -> tuple[tuple[str, str], ...]:
    """The four lines; () before explain has answered."""
    if a is None or a.explanation is None:
        return ()
    pairs = [("runs as", runs_as(a))]
    if a.plan is None:
        why = a.errors.get("plan", "no plan")
        return tuple(pairs + [(label, f"N/A — {why}") for _, label in _PLAN_ROWS])
    from advisor.cost.plan_doc import to_doc

    rows = next((dict(b.pairs) for b in to_doc(a.plan).blocks
                 if isinstance(b, KeyValues) and b.title == "Predictions"), {})
    pairs += [(label, rows.get(key, "N/A")) for key, label in _PLAN_ROWS]
    return tuple(pairs)


def answer_title(a: Analysis) -> str:
    sel = a.selection
    gpu = a.gpu.name if a.gpu is not None else sel.gpu_id
    engine = f"{a.explanation.engine} {a.explanation.engine_version}" if a.explanation is not None else sel.engine
    count = f"{sel.gpus} × " if sel.gpus > 1 else ""
    return f"{sel.checkpoint} on {count}{gpu} with {engine}"


def answer_doc(a: Analysis | None) -> Doc:
    """The answer block, with the verdict (will not run / does not fit) right under it."""
    pairs = answer_pairs(a)
    if a is None or not pairs:
        return Doc(())
    blocks: list[Block] = [KeyValues(pairs, title=answer_title(a))]
    if a.verdict:
        blocks.append(Paragraph(f"Verdict: {a.verdict} — {a.verdict_reason}", "bad"))
    return Doc(tuple(blocks))

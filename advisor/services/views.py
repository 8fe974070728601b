"""Analysis -> the Docs each TUI tab shows: the same builders the CLI commands use.

Pure: no Textual, no Rich. The TUI calls these and renders the blocks; tests read them directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph
from advisor.gpu_table import WHAT_IF_GPU as DEFAULT_GPU  # one what-if card for the TUI, the piped answer, plan

if TYPE_CHECKING:
    from advisor.probe.model import ProbeResult
    from advisor.services.analysis import Analysis, Selection


def gpu_choices() -> tuple[tuple[str, str], ...]:
    """(label, id) for every table GPU, oldest architecture first."""
    from advisor.gpu_table import load_gpu_table

    specs = sorted(load_gpu_table(), key=lambda s: (s.cc, s.memory_gb or 0, s.name))

    def label(s) -> str:      # short enough for the 80-column toolbar
        name = s.name.removeprefix("NVIDIA ").removeprefix("GeForce ")
        return f"{name} · sm_{s.sm}" + (f" · {s.memory_gb:g} GB" if s.memory_gb else "")

    return tuple((label(s), s.id) for s in specs)


def default_gpu_id(choices: tuple[tuple[str, str], ...]) -> str:
    ids = [v for _, v in choices]
    return DEFAULT_GPU if DEFAULT_GPU in ids else ids[0]


def default_probe() -> ProbeResult:
    from advisor.probe import probe

    return probe()


def probed_gpu_id(probe_result: ProbeResult | None) -> str | None:
    """The table id of the most common probed card, or None (no GPU / unknown card)."""
    from advisor.errors import AdvisorError
    from advisor.probe import resolve_gpus

    if probe_result is None or not getattr(probe_result, "devices", ()):
        return None
    try:
        sel = resolve_gpus(probe_result, "auto", None)
    except AdvisorError:
        return None
    return None if sel.spec.derived else sel.spec.id


def engine_choices(engines: tuple[str, ...] | None = None) -> tuple[tuple[str, str], ...]:
    """(label, "engine@version") for every engine rule file shipped in profiles/engines/ (default: the
    registry's tuned engines)."""
    from advisor import engines as registry
    from advisor.kernel_path.rule_versions import available_versions  # file names: no pydantic

    return tuple((f"{e} {v}", f"{e}@{v}") for e in engines or registry.tuned() for v in reversed(available_versions(e)))


def demo_names() -> tuple[str, ...]:
    from advisor.checkpoint.demo import list_demos

    return tuple(list_demos())


def workload_names() -> tuple[str, ...]:
    from advisor.cost.workload import load_workloads

    return tuple(load_workloads())


def _error(stage: str, message: str) -> Doc:
    return Doc((Heading(f"{stage} failed"), Paragraph(message, "bad")))


def hardware_doc(probe_result: ProbeResult | None, gpu_id: str | None, gpus: int, *, plain: bool = False) -> Doc:
    """The probe (or the no-GPU statement) plus the planning set in plain capability words.
    ``plain``: worded for printed output (no card picker above it)."""
    from advisor.errors import AdvisorError
    from advisor.probe import resolve_gpus
    from advisor.probe.report import probe_doc

    if probe_result is None:
        return Doc((Paragraph("Probing GPUs…", "dim"),))
    try:
        selection = resolve_gpus(probe_result, gpu_id, gpus) if gpu_id else None
    except AdvisorError as err:
        return probe_doc(probe_result) + Doc((Paragraph(str(err), "bad"),))
    doc = probe_doc(probe_result, selection)
    if probe_result.status != "ok" and selection is not None:
        other = "Pass --gpu ID to explain/plan for another card" if plain else "Pick another card above"
        doc = Doc((Paragraph(f"No GPU here — planning for {gpus} × {selection.spec.name}. "
                             f"{other} (what-if).", "accent"),)) + doc
    return doc


def checkpoint_doc(a: Analysis | None) -> Doc:
    from advisor.checkpoint.report import to_doc

    if a is None:
        return Doc((Paragraph("Pick a demo or enter a checkpoint.", "dim"),))
    if "inspect" in a.errors:
        return _error("inspect", a.errors["inspect"])
    if a.checkpoint is None:
        return _error("analysis", "; ".join(a.errors.values()))
    return to_doc(a.checkpoint)


def explain_doc(a: Analysis | None) -> Doc:
    """explain's Doc led by its answer (the plain-language summary); what the answer assumes is
    installed moves to the end, under its own heading."""
    from advisor.kernel_path.options import InstallOptions
    from advisor.kernel_path.render import explanation_doc

    if a is None or a.checkpoint is None:
        return Doc((Paragraph("Load a checkpoint first.", "dim"),))
    if a.explanation is None or a.gpu is None:
        return _error("explain", a.errors.get("explain", "no explanation"))
    doc = explanation_doc(a.explanation, a.gpu, a.checkpoint, a.options or InstallOptions())
    blocks = list(doc.blocks)
    summary = next((b for b in blocks if isinstance(b, Paragraph) and b.text == a.explanation.summary), None)
    about = next((b for b in blocks if isinstance(b, KeyValues) and b.title is None), None)
    install = tuple(p for p in about.pairs if p[0] == "install") if about is not None else ()
    if summary is not None and about is not None:
        blocks.remove(summary)
        at = blocks.index(about)
        blocks[at] = KeyValues(tuple(p for p in about.pairs if p[0] != "install"))
        blocks.insert(at, summary)
    note = plan_kv_note(a)
    if note:
        blocks.insert(1 + (summary is not None), Paragraph(note, "warn"))
    if install:
        blocks += [Heading("Installed engine parts this answer assumes", 2), KeyValues(install)]
    return Doc(tuple(blocks))


def plan_kv_note(a: Analysis | None) -> str:
    """When the plan (Cost, Launch) stores the KV cache in another dtype than the explained default:
    what attention runs on with the plan's choice ('' when they agree or nothing is known)."""
    if a is None or a.explanation is None or a.plan is None:
        return ""
    name = a.plan.recommendation.kv_cache_dtype
    explained = next((d for d in a.explanation.decisions if d.layer_class == "attention_kv"), None)
    d = (getattr(a, "kv_decisions", None) or {}).get(name)
    if explained is None or d is None or d.kv_cache_dtype == explained.kv_cache_dtype:
        return ""
    if not d.runs:
        return (f"With the plan's KV cache dtype {name} (Cost and Launch use it), attention does not run: "
                f"{d.error or '; '.join(d.reasons) or 'no kernel'}.")
    return (f"With the plan's KV cache dtype {name} (Cost and Launch use it), attention runs on {d.kernel} "
            f"with the KV cache stored as {d.kv_cache_dtype}; below is the engine default "
            f"({explained.kv_cache_dtype}).")


def cost_doc(a: Analysis | None) -> Doc:
    """The plan with its derivations, then the charts (decode vs batch, KV pool vs context, roofline)."""
    from advisor.cost.plan_doc import to_doc
    from advisor.report.charts import plan_charts

    if a is None or a.checkpoint is None:
        return Doc((Paragraph("Load a checkpoint first.", "dim"),))
    first = verdict_doc(a)
    if a.plan is None:
        return first + _error("plan", a.errors.get("plan") or a.errors.get("explain", "no plan"))
    charts = plan_charts(a.checkpoint, a.explanation, a.gpu, a.plan)
    return first + to_doc(a.plan) + Doc(tuple(charts))


def verdict_doc(a: Analysis | None) -> Doc:
    """The verdict ("will not run", "does not fit") as the first thing to read; empty when none."""
    if a is None or not a.verdict:
        return Doc(())
    return Doc((Heading(f"Verdict: {a.verdict}"), Paragraph(a.verdict_reason, "bad")))


def summary_doc(a: Analysis | None) -> Doc:
    """One screen: the answer (runs as · decode · KV pool · max context), the explanation and the
    engine's warnings decoded (the status line's long form)."""
    from advisor.services.answer import answer_pairs, answer_title

    if a is None or a.explanation is None:
        return Doc(())
    blocks: list[Block] = [KeyValues(answer_pairs(a), title=answer_title(a)), Paragraph(a.explanation.summary)]
    warnings = {w.text: w.meaning for d in a.explanation.decisions for w in d.warnings}
    if warnings:      # the summary promises them "below"
        blocks.append(Bullets(tuple(f"{text} — {meaning}" for text, meaning in warnings.items()),
                              title="Engine warnings and what they mean", style="warn"))
    if a.verdict:
        blocks.append(Paragraph(a.verdict_reason, "bad"))
    if a.errors:
        blocks.append(Bullets(tuple(f"{k}: {v}" for k, v in a.errors.items()), style="bad"))
    return Doc(tuple(blocks))


START_HINT = "F4 why · F5 cost and tuning · F6 launch command · Ctrl+P every action"


def start_doc(probe_result: ProbeResult | None, a: Analysis | None, current: Selection | None, gpu_id: str | None,
              gpus: int) -> Doc:
    """The first screen: the answer for the current choice (``current``: the Selection on screen),
    where to go next, then the hardware. An analysis of an earlier choice is never shown as the answer."""
    from advisor.services.answer import answer_doc

    if a is None or current is None or a.selection != current:
        lead = Doc((Paragraph("Working out the answer…", "dim"),)) if current is not None else Doc(())
    elif a.explanation is None:
        lead = Doc((Paragraph(f"No answer: {'; '.join(a.errors.values())}", "bad"),))
    else:
        lead = answer_doc(a) + Doc((Paragraph(START_HINT, "dim"),))
    return lead + hardware_doc(probe_result, gpu_id, gpus)


def plain_doc(probe_result: ProbeResult | None, a: Analysis | None) -> Doc:
    """The answer printed when the TUI cannot start (output is not a terminal): the hardware, the
    summary with its warnings, and the commands to go further."""
    gpu_id = a.selection.gpu_id if a is not None else None
    return hardware_doc(probe_result, gpu_id, 1, plain=True) + summary_doc(a) + Doc((Paragraph(
        "Not a terminal, so no TUI. Try: nvfp4-advisor explain|plan CHECKPOINT --gpu ID, or run "
        "nvfp4-advisor in a terminal.", "dim"),))

"""Analysis -> the Docs each TUI tab shows: the same builders the CLI commands use.

Pure: no Textual, no Rich. The TUI calls these and renders the blocks; tests read them directly.
"""

from __future__ import annotations

from typing import Any

from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph

DEFAULT_GPU = "rtx-3090"


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


def default_probe() -> Any:
    from advisor.probe import probe

    return probe()


def probed_gpu_id(probe_result: Any) -> str | None:
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


def engine_choices(engines=("vllm", "sglang", "fastllm")) -> tuple[tuple[str, str], ...]:
    """(label, "engine@version") for every engine rule file shipped in profiles/engines/."""
    from advisor.kernel_path.rules import available_versions

    return tuple((f"{e} {v}", f"{e}@{v}") for e in engines for v in reversed(available_versions(e)))


def demo_names() -> tuple[str, ...]:
    from advisor.checkpoint.demo import list_demos

    return tuple(list_demos())


def workload_names() -> tuple[str, ...]:
    from advisor.cost.workload import load_workloads

    return tuple(load_workloads())


def _error(stage: str, message: str) -> Doc:
    return Doc((Heading(f"{stage} failed"), Paragraph(message, "bad")))


def hardware_doc(probe_result: Any, gpu_id: str | None, gpus: int, *, plain: bool = False) -> Doc:
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
    if probe_result.status != "ok":
        other = "Pass --gpu ID to explain/plan for another card" if plain else "Pick another card above"
        doc = Doc((Paragraph(f"No GPU here — planning for {gpus} × {selection.spec.name}. "
                             f"{other} (what-if).", "accent"),)) + doc
    return doc


def checkpoint_doc(a: Any) -> Doc:
    from advisor.checkpoint.report import to_doc

    if a is None:
        return Doc((Paragraph("Pick a demo or enter a checkpoint.", "dim"),))
    if "inspect" in a.errors:
        return _error("inspect", a.errors["inspect"])
    if a.checkpoint is None:
        return _error("analysis", "; ".join(a.errors.values()))
    return to_doc(a.checkpoint)


def explain_doc(a: Any) -> Doc:
    from advisor.kernel_path.options import InstallOptions
    from advisor.kernel_path.render import explanation_doc

    if a is None or a.checkpoint is None:
        return Doc((Paragraph("Load a checkpoint first.", "dim"),))
    if a.explanation is None:
        return _error("explain", a.errors.get("explain", "no explanation"))
    doc = explanation_doc(a.explanation, a.gpu, a.checkpoint, a.options or InstallOptions())
    note = plan_kv_note(a)
    return Doc((Paragraph(note, "warn"),)) + doc if note else doc


def plan_kv_note(a: Any) -> str:
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


def cost_doc(a: Any) -> Doc:
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


def verdict_doc(a: Any) -> Doc:
    """The verdict ("will not run", "does not fit") as the first thing to read; empty when none."""
    verdict = getattr(a, "verdict", "") if a is not None else ""
    if not verdict:
        return Doc(())
    return Doc((Heading(f"Verdict: {verdict}"), Paragraph(a.verdict_reason, "bad")))


def summary_doc(a: Any) -> Doc:
    """One screen: what runs, how fast, what to launch (the status line's long form)."""
    if a is None or a.explanation is None:
        return Doc(())
    pairs = [("checkpoint", f"{a.checkpoint.label} — {a.checkpoint.source}"),
             ("GPU", f"{a.selection.gpus} × {a.gpu.name}"), ("engine", a.explanation.engine)]
    if a.plan is not None:
        p = a.plan.to_json().get("predictions", {})
        if p.get("decode_tok_s") is not None:
            pairs.append(("decode", f"{p['decode_tok_s']:.1f} tok/s (1 stream)"))
    blocks = [KeyValues(tuple(pairs)), Paragraph(a.explanation.summary)]
    warnings = {w.text: w.meaning for d in a.explanation.decisions for w in d.warnings}
    if warnings:      # the summary promises them "below"
        blocks.append(Bullets(tuple(f"{text} — {meaning}" for text, meaning in warnings.items()),
                              title="Engine warnings and what they mean", style="warn"))
    if getattr(a, "verdict", ""):
        blocks.append(Paragraph(a.verdict_reason, "bad"))
    if a.errors:
        blocks.append(Bullets(tuple(f"{k}: {v}" for k, v in a.errors.items()), style="bad"))
    return Doc(tuple(blocks))


def plain_doc(probe_result: Any, a: Any) -> Doc:
    """The answer printed when the TUI cannot start (output is not a terminal): the hardware, the
    summary with its warnings, and the commands to go further."""
    gpu_id = a.selection.gpu_id if a is not None else None
    return hardware_doc(probe_result, gpu_id, 1, plain=True) + summary_doc(a) + Doc((Paragraph(
        "Not a terminal, so no TUI. Try: nvfp4-advisor explain|plan CHECKPOINT --gpu ID, or run "
        "nvfp4-advisor in a terminal.", "dim"),))

"""build_report: one analysis (+ optional matrix, launch, measurements) -> Report(doc, data).

The Doc is what Markdown and HTML render; ``data`` is the JSON report (validated against
report.schema.json). Both come from the same records, and both go through the same scrubber
(secrets, host paths) before they leave this module. Launch commands, kernel checks and benchmark
verdicts come from launchers/, which this core does not import: the caller passes them in as
``Extra`` sections (a Doc and its JSON data) and command lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph, Table, na
from advisor.jsonout import document, to_jsonable
from advisor.report.privacy import Scrubber

KIND = "report"
# Optional sections the caller may attach, in report order.
EXTRA_KEYS = ("kernel_check", "benchmark", "quality", "calibration", "microbench")


@dataclass(frozen=True)
class Header:
    tool_version: str
    generated_at: str                 # ISO-8601 UTC
    command: str                      # the command line that reproduces the report (already shell-quoted)


@dataclass(frozen=True)
class Hardware:
    """The planning set: probed cards (fingerprint) or a what-if from the GPU table."""

    selection: Any                    # advisor.probe.GpuSelection
    probe: Any = None                 # advisor.probe.ProbeResult (None: not probed)


@dataclass(frozen=True)
class LaunchCommand:
    engine: str
    command_line: str                 # shell line, secrets already redacted by the generator
    steps: tuple[str, ...] = ()       # other nodes / preparation, in order
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Extra:
    key: str                          # one of EXTRA_KEYS
    title: str
    doc: Doc
    data: dict


@dataclass(frozen=True)
class Report:
    doc: Doc
    data: dict                        # the JSON document (schema_version, kind "report", ...)
    title: str
    folded: tuple[str, ...] = ()      # level-2 sections HTML shows collapsed (the evidence behind the answer)
    answer: str | None = None         # the title of the answer block (HTML sets it in larger type)


@dataclass(frozen=True)
class ReportInputs:
    analysis: Any                     # advisor.services.analysis.Analysis
    header: Header
    answer: Doc                       # the answer block first (advisor.services.answer.answer_doc)
    hardware: Hardware | None = None
    matrix: Any = None                # advisor.report.matrix.Matrix
    charts: tuple = ()                # advisor.doc.Chart for the main plan
    launch: tuple[LaunchCommand, ...] = ()
    extras: tuple[Extra, ...] = ()
    engines_assumed: tuple[tuple[str, str], ...] = ()   # (engine, version + note) for the matrix engines
    options: Any = None               # advisor.kernel_path.options.InstallOptions used by explain
    scrubber: Scrubber = field(default_factory=Scrubber)


# Sections a reader opens when they want the evidence (HTML renders them collapsed).
FOLDED = ("Kernel path", "Derivations", "Hardware", "Checkpoint", "About this report")


def build_report(inputs: ReportInputs) -> Report:
    """The answer and the numbers first (what runs, how fast, the command), then the matrix and the
    predictions, then the evidence: kernel path, derivations, hardware, checkpoint, provenance."""
    a = inputs.analysis
    title = _title(a, inputs.hardware)
    blocks: list[Block] = [Heading(title)]
    answer = inputs.answer.blocks
    blocks += answer
    if a.explanation is not None and a.explanation.summary:
        blocks.append(Paragraph(a.explanation.summary, style="accent"))
    if a.errors:
        blocks.append(Bullets(tuple(f"{stage}: {msg}" for stage, msg in a.errors.items()),
                              title="Could not be computed", style="bad"))
    blocks += launch_blocks(inputs.launch)
    for key in EXTRA_KEYS:
        for extra in inputs.extras:
            if extra.key == key:
                blocks += [Heading(extra.title, level=2), *nest(extra.doc, 2).blocks]
    if inputs.matrix is not None:
        from advisor.report.matrix import matrix_blocks

        blocks += [Heading("Compatibility matrix", level=2),
                   Paragraph("Each row: the same checkpoint, explained and costed for that GPU and engine "
                             f"(workload {inputs.matrix.workload}, {inputs.matrix.gpus} card(s) per row). "
                             "'runs' means every layer class has a working kernel; decode is one stream. "
                             "Rows use the GPU table's figures (no probed power limit or calibration), "
                             "so they compare like with like.",
                             style="dim"),
                   *matrix_blocks(inputs.matrix)]
    if a.plan is not None:
        blocks += prediction_blocks(a.plan, inputs.charts)
    if a.explanation is not None and a.checkpoint is not None and a.gpu is not None:
        blocks += kernel_path_blocks(a.explanation, a.gpu, a.checkpoint, inputs.options or getattr(a, "options", None))
    if a.plan is not None:
        blocks += derivation_blocks(a.plan)
    blocks += _hardware_blocks(inputs.hardware, a.gpu)
    if a.checkpoint is not None:
        from advisor.checkpoint.report import to_doc

        blocks += nest(to_doc(a.checkpoint)).blocks
    blocks += [Heading("About this report", level=2), *_header_blocks(inputs)]
    s = inputs.scrubber
    data = s.tree(document(KIND, _payload(inputs)))
    doc = s.doc(Doc(tuple(blocks)))
    folded = tuple(b.text for b in doc.blocks if isinstance(b, Heading) and b.level == 2 and b.text.startswith(FOLDED))
    shown = next((b.title for b in doc.blocks[1:1 + len(answer)] if isinstance(b, KeyValues)), None)
    return Report(doc=doc, data=data, title=s.text(title), folded=folded, answer=shown)


def nest(doc: Doc, by: int = 1) -> Doc:
    """Headings pushed down ``by`` levels, to embed a command's Doc as a report section."""
    return Doc(tuple(Heading(b.text, min(6, b.level + by)) if isinstance(b, Heading) else b for b in doc.blocks))


def _title(a, hardware: Hardware | None) -> str:
    label = a.checkpoint.label if a.checkpoint is not None else "checkpoint"
    where = (hardware.selection.label if hardware is not None
             else a.gpu.name if a.gpu is not None else a.selection.gpu_id)
    return f"nvfp4-advisor report: {label} on {where} ({a.selection.engine})"


# ---------------------------------------------------------------- header
def _engine_lines(inputs: ReportInputs) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    e = inputs.analysis.explanation
    if e is not None:
        out[e.engine] = e.engine_version + (f" ({e.version_note})" if e.version_note else "")
    for engine, text in inputs.engines_assumed:
        out.setdefault(engine, text)
    return tuple(out.items())


def _header_blocks(inputs: ReportInputs) -> list[Block]:
    h, sel = inputs.header, inputs.analysis.selection
    pairs = [("tool", f"nvfp4-advisor {h.tool_version}"), ("generated", h.generated_at),
             ("reproduce with", h.command), ("checkpoint", sel.checkpoint), ("workload", sel.workload)]
    pairs += [(f"{engine} rules", text) for engine, text in _engine_lines(inputs)]
    return [KeyValues(tuple(pairs), title="About this report")]


# ---------------------------------------------------------------- hardware
def _gib(b) -> str:
    return na(None if b is None else b / 2**30, "GiB", "{:.1f}")


def device_fingerprint(d) -> dict:
    """What identifies the card's performance, without host identifiers (UUID, bus id, processes)."""
    n = d.nvml
    return {
        "index": d.index, "name": n.name or d.spec.name, "gpu_id": d.spec.id, "match": d.match,
        "compute_capability": f"{n.cc[0]}.{n.cc[1]}" if n.cc else None,
        "memory_total_bytes": n.memory_total_bytes,
        "bandwidth_gbs": d.bandwidth.gbs if d.bandwidth else d.spec.bandwidth_gbs,
        "memory_bus_width_bits": n.memory_bus_width_bits, "max_mem_clock_mhz": n.max_mem_clock_mhz,
        "max_sm_clock_mhz": n.max_sm_clock_mhz, "sm_count": n.sm_count or d.spec.sm_count,
        "power_limit_w": n.power_limit_w, "default_power_limit_w": n.default_power_limit_w,
        "pcie": {"max_gen": n.pcie_max_gen, "max_width": n.pcie_max_width,
                 "current_gen": n.pcie_curr_gen, "current_width": n.pcie_curr_width},
        "mig": n.mig_current,
        "overrides": [{"field": o.field, "table": to_jsonable(o.table_value), "probed": to_jsonable(o.probed_value),
                       "reason": o.reason} for o in d.overrides],
    }


def hardware_payload(hw: Hardware | None, gpu) -> dict | None:
    if hw is None and gpu is None:
        return None
    from advisor.probe.report import capability_statements, spec_json

    spec = hw.selection.spec if hw is not None else gpu
    sel = hw.selection if hw is not None else None
    probe = hw.probe if hw is not None else None
    used = set(sel.devices) if sel is not None else set()
    devices = [device_fingerprint(d) for d in (probe.devices if probe is not None else ()) if d.index in used]
    topo = [{"a": link.a, "b": link.b, "link": link.description}
            for link in (probe.topology if probe is not None else ())
            if link.a in used and link.b in used]
    keep = ("id", "name", "arch", "cc", "sm_count", "boost_clock_mhz", "memory_gb", "memory_type", "bandwidth_gbs",
            "l2_mb", "tdp_w", "nvlink_gbs", "peaks", "pcie_gen", "pcie_lanes", "confidence", "derived")
    sj = spec_json(spec)
    return {
        "mode": "probed" if sel is not None and sel.source == "probed" else "what-if",
        "note": sel.note if sel is not None else "what-if: GPU table entry",
        "count": sel.count if sel is not None else 1,
        "gpu": {k: sj.get(k) for k in keep},
        "capabilities": dict(capability_statements(spec)),
        "driver_version": probe.driver_version if probe is not None and devices else None,
        "cuda_driver_version": probe.cuda_driver_version if probe is not None and devices else None,
        "devices": devices,
        "topology": topo,
    }


def _hardware_blocks(hw: Hardware | None, gpu) -> list[Block]:
    data = hardware_payload(hw, gpu)
    if data is None:
        return []
    from advisor.probe.report import capability_statements

    spec = hw.selection.spec if hw is not None else gpu
    blocks: list[Block] = [Heading("Hardware", level=2)]
    if data["mode"] == "what-if":
        note = data["note"].removeprefix("what-if: ")
        blocks.append(Paragraph(f"What-if, not probed: {note}. Figures are the GPU table's.", style="warn"))
    else:
        blocks.append(Paragraph(data["note"], style="good"))
    pairs = [("GPU", f"{data['count']} x {spec.name}" if data["count"] > 1 else spec.name),
             ("table id", spec.id), ("compute capability", f"{spec.cc_str} (sm_{spec.sm}, {spec.arch})"),
             ("memory", na(spec.memory_gb, "GB", "{:g}") + (f" {spec.memory_type}" if spec.memory_type else "")),
             ("bandwidth", na(spec.bandwidth_gbs, "GB/s", "{:g}")),
             ("SMs", na(spec.sm_count)), ("boost clock", na(spec.boost_clock_mhz, "MHz", "{:g}")),
             ("TDP", na(spec.tdp_w, "W", "{:g}"))]
    if data["driver_version"]:
        pairs.append(("driver", f"{data['driver_version']} (CUDA {na(data['cuda_driver_version'])})"))
    pairs += list(capability_statements(spec))
    blocks.append(KeyValues(tuple(pairs), title="Planning set"))
    if data["devices"]:
        rows = []
        for d in data["devices"]:
            pcie = d["pcie"]
            rows.append((str(d["index"]), d["name"], na(d["compute_capability"]), _gib(d["memory_total_bytes"]),
                         na(d["bandwidth_gbs"], "GB/s", "{:.0f}"), na(d["max_sm_clock_mhz"], "MHz"),
                         na(d["power_limit_w"], "W", "{:.0f}") + (f" / {d['default_power_limit_w']:.0f} W default"
                                                               if d["default_power_limit_w"] else ""),
                         f"gen {na(pcie['current_gen'])} x{na(pcie['current_width'])} "
                         f"(max gen {na(pcie['max_gen'])} x{na(pcie['max_width'])})"))
        blocks.append(Table(("#", "name", "cc", "memory", "bandwidth", "SM clock max", "power limit", "PCIe"),
                            tuple(rows), title="Probed cards (fingerprint)"))
        notes = [o["reason"] for d in data["devices"] for o in d["overrides"]]
        if notes:
            blocks.append(Bullets(tuple(notes), title="Table values replaced by what the card reports", style="warn"))
    if data["topology"]:
        blocks.append(Table(("GPUs", "link"), tuple((f"{t['a']} <-> {t['b']}", t["link"]) for t in data["topology"]),
                            title="Topology"))
    return blocks


# ---------------------------------------------------------------- kernel path
_CLASS_WORDS = {"dense_linear": "dense linear", "moe_experts": "MoE experts", "attention_kv": "attention / KV",
                "lm_head_embed": "lm_head / embeddings"}


def kernel_path_blocks(e, gpu, checkpoint, options=None) -> list[Block]:
    """An overview row per layer class, then explain's own Doc, then the warnings with sources."""
    from advisor.kernel_path.options import InstallOptions
    from advisor.kernel_path.render import explanation_doc

    rows, styles = [], []
    for d in e.decisions:
        rows.append((_CLASS_WORDS.get(d.layer_class, d.layer_class), ", ".join(d.roles), d.checkpoint_scheme,
                     d.effective_scheme if d.runs else "does not run", na(d.kernel), d.mma, d.activation_dtype,
                     d.dequant, "yes" if d.runs else "no"))
        styles.append("bad" if not d.runs else "warn" if d.checkpoint_scheme != d.effective_scheme
                      and d.layer_class != "attention_kv" else "normal")
    blocks: list[Block] = [
        Heading(f"Kernel path ({e.engine} {e.engine_version})", level=2),
        Table(("layer class", "roles", "declared", "runs as", "kernel", "MMA", "activations", "dequant", "runs"),
              tuple(rows), title="Per layer class", row_styles=tuple(styles)),
    ]
    detail = explanation_doc(e, gpu, checkpoint, options or InstallOptions())
    # Its title repeats the section heading and its summary opens the report.
    blocks += nest(Doc(tuple(b for b in detail.blocks[1:]
                             if not (isinstance(b, Paragraph) and b.text == e.summary))), 1).blocks
    warns = tuple(dict.fromkeys((w.text, w.meaning, w.source or "N/A") for d in e.decisions for w in d.warnings))
    if warns:
        blocks.append(Table(("the engine prints", "what it means", "source"), warns,
                            title="Engine warnings, decoded (with sources)"))
    return blocks


# ---------------------------------------------------------------- predictions
def prediction_blocks(plan, charts=()) -> list[Block]:
    """plan's own Doc up to its trade-offs (predictions, recommendation, flag line) and the charts."""
    from advisor.cost.plan_doc import to_doc

    head, _ = _split_plan_doc(to_doc(plan))
    blocks: list[Block] = [Heading("Predictions and recommended settings", level=2)]
    blocks += nest(Doc(head), 1).blocks
    if charts:
        blocks += [Heading("Charts", level=3), *charts]
    return blocks


def derivation_blocks(plan) -> list[Block]:
    """How the plan got its numbers: trade-offs, kernels charged, formulas, assumptions, inputs."""
    from advisor.cost.plan_doc import to_doc

    _, tail = _split_plan_doc(to_doc(plan))
    blocks: list[Block] = [Heading("Derivations", level=2), *tail]
    if plan.derivations:
        rows = tuple((name, ", ".join(f"{k}={_fmt_input(v)}" for k, v in d.inputs.items()) or "none")
                     for name, d in plan.derivations.items())
        blocks.append(Table(("quantity", "inputs plugged into the formula"), rows, title="Derivation inputs"))
    return blocks


def _split_plan_doc(doc: Doc) -> tuple[tuple[Block, ...], tuple[Block, ...]]:
    """(the answer part, the derivation part) of plan's Doc, cut at its first table of trade-offs,
    kernels or formulas; the heading (the report has its own) is dropped."""
    blocks = doc.blocks[1:]
    cut = next((i for i, b in enumerate(blocks)
                if isinstance(b, Table) and (b.title or "").startswith(_DERIVATION_TABLES)), len(blocks))
    return blocks[:cut], blocks[cut:]


_DERIVATION_TABLES = ("Trade-offs", "Kernels charged", "How the numbers were derived", "Assumptions")


def launch_blocks(launch) -> list[Block]:
    if not launch:
        return []
    blocks: list[Block] = [Heading("Launch command", level=2)]
    for cmd in launch:
        blocks.append(Paragraph(f"{cmd.engine}:", style="normal"))
        for step in cmd.steps:
            blocks.append(Paragraph(step, style="code"))
        blocks.append(Paragraph(cmd.command_line, style="code"))
        if cmd.notes:
            blocks.append(Bullets(cmd.notes, style="dim"))
    return blocks


def _fmt_input(v) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) or (v == int(v) and abs(v) < 1e15):
        return f"{int(v):,}"
    return f"{v:.4g}"


# ---------------------------------------------------------------- JSON
def _payload(inputs: ReportInputs) -> dict:
    a, h = inputs.analysis, inputs.header
    e = a.explanation
    engines = [{"engine": e.engine, "version": e.engine_version, "requested_version": e.requested_version,
                "note": e.version_note}] if e is not None else []
    seen = {x["engine"] for x in engines}
    engines += [{"engine": eng, "version": text, "requested_version": None, "note": None}
                for eng, text in inputs.engines_assumed if eng not in seen]
    extras = {key: None for key in EXTRA_KEYS}
    for x in inputs.extras:
        extras[x.key] = to_jsonable(x.data)
    checkpoint = None
    if a.checkpoint is not None:
        checkpoint = to_jsonable(a.checkpoint)
        checkpoint.pop("raw_quant_config", None)
    return {
        "header": {"tool": "nvfp4-advisor", "version": h.tool_version, "generated_at": h.generated_at,
                   "command": h.command, "engines": engines},
        "selection": to_jsonable(a.selection),
        "hardware": hardware_payload(inputs.hardware, a.gpu),
        "checkpoint": checkpoint,
        "kernel_path": to_jsonable(e) if e is not None else None,
        "plan": to_jsonable(a.plan) if a.plan is not None else None,
        "launch": [to_jsonable(c) for c in inputs.launch],
        **extras,
        "matrix": inputs.matrix.to_json() if inputs.matrix is not None else None,
        "errors": dict(a.errors),
    }

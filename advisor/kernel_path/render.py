"""Explanations as renderer-neutral documents (advisor.doc) and JSON-ready option records."""

from __future__ import annotations

from typing import Iterable

from advisor.checkpoint.model import CheckpointInfo
from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph, Table, na
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision
from advisor.kernel_path.options import DEPENDENCY_FACTS, InstallOptions
from advisor.kernel_path.summary import MMA_WORDS

CLASS_TITLES = {"dense_linear": "Dense linear layers", "moe_experts": "MoE experts",
                "attention_kv": "Attention / KV cache", "lm_head_embed": "lm_head / embeddings"}
_DEQUANT = {"none": "none (inputs are already MMA inputs)", "registers": "in registers, per tile",
            "memory": "to 16 bits in memory before the GEMM", "cpu": "on the CPU"}


def options_payload(options: InstallOptions) -> dict:
    defaults = InstallOptions()
    out = {"facts": {f: getattr(options, f) for f in DEPENDENCY_FACTS},
           "changed_facts": [f for f in DEPENDENCY_FACTS if getattr(options, f) != getattr(defaults, f)],
           "flags": dict(options.flags), "env": dict(options.env),
           "kv_cache_dtype": options.kv_cache_dtype, "tp": options.tp, "ep": options.ep}
    return out


def _install_line(options: InstallOptions, exp: Explanation) -> str:
    """What the answer assumes is installed: this engine's own optional dependencies (from its rule
    file, not another engine's), present or absent under these options."""
    from advisor.kernel_path.rule_files import load_rules

    try:
        rules = load_rules(exp.engine, exp.engine_version)[0]
    except Exception:   # rules loaded from another folder (tests): the line is informative only
        rules = None
    deps = rules.dependencies if rules else {}
    if rules is not None:
        from advisor.kernel_path.default_install import resolve_install

        options = resolve_install(rules, options)
    present = [d.label for d in deps.values() if all(options.fact(f) for f in d.installed)]
    absent = [d.label for d in deps.values() if not all(options.fact(f) for f in d.installed)]
    parts = []
    if present:
        parts.append("with " + ", ".join(present))
    if absent:
        parts.append("without " + ", ".join(absent))
    facts = {f for d in deps.values() for f in d.installed + d.usable_if_any}
    changed = [lb for lb in options.labels if lb.split()[-1] in facts]   # "without flashinfer"
    line = "; ".join(parts) or "the engine as installed"
    line += f" (you set: {', '.join(changed)})" if changed else ""
    return line + (f". Default: {rules.default_install_note}" if rules and rules.default_install_note else "")


def _mma_words(mma: str) -> str:
    return "CUDA cores (no MMA)" if mma == "none" else f"{MMA_WORDS.get(mma, mma)} [{mma}]"


def modules_line(d: LayerDecision, limit: int = 6) -> str:
    """'layers.*.mlp.down_proj 5120x8704, ...': the module groups a decision covers and their N x K on one GPU."""
    parts = [c.name + (f" {c.shape[0]}x{c.shape[1]}" if c.shape else "") for c in d.modules]
    more = f" (+{len(parts) - limit} more)" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more + " (N x K per GPU)"


def decision_blocks(d: LayerDecision) -> tuple:
    title = CLASS_TITLES.get(d.layer_class, d.layer_class)
    roles = ", ".join(d.roles)
    blocks: list = [Heading(f"{title} ({roles})" if roles else title, level=2)]
    by_m = len(d.m_ranges) > 1
    mma = ("; ".join(f"{r.label}: {_mma_words(r.mma)}" for r in d.m_ranges) if by_m
           else f"{MMA_WORDS.get(d.mma, d.mma)} [{d.mma}]")
    deq = ("; ".join(f"{r.label}: {_DEQUANT.get(r.dequant, r.dequant)}" for r in d.m_ranges) if by_m
           else _DEQUANT.get(d.dequant, d.dequant))
    pairs = [("checkpoint", d.checkpoint_scheme), ("runs as", d.effective_scheme if d.runs else "does not run"),
             ("kernel", na(d.kernel)), ("tensor cores", mma),
             ("activations", d.activation_dtype), ("dequantization", deq)]
    if d.kv_cache_dtype is not None:
        pairs.append(("KV cache", d.kv_cache_dtype))
    if d.modules:
        pairs.append(("modules", modules_line(d)))
    if d.source:
        pairs.append(("source", d.source))
    blocks.append(KeyValues(tuple(pairs)))
    if len(d.m_ranges) > 1:
        blocks.append(Table(("rows M", "kernel", "tensor cores", "dequantization", "source"),
                            tuple((r.label, r.kernel, _mma_words(r.mma), _DEQUANT.get(r.dequant, r.dequant), r.source)
                                  for r in d.m_ranges),
                            title="Kernel by rows per call (M: batch at decode, chunk at prefill)"))
    if d.error:
        blocks.append(Paragraph(f"Error: {d.error}", style="bad"))
    if d.reasons:
        blocks.append(Bullets(tuple(d.reasons), title="Why"))
    if d.rejected:
        blocks.append(Table(("rejected candidate", "reason"), tuple((r.kernel, r.reason) for r in d.rejected),
                            title="Rejected candidates (in the engine's order)"))
    if d.warnings:
        blocks.append(Bullets(tuple(f"\u201c{w.text}\u201d \u2014 {w.meaning}" for w in d.warnings),
                              title="What the engine prints, and what it means", style="warn"))
    return tuple(blocks)


def explanation_doc(exp: Explanation, gpu: GpuSpec, info: CheckpointInfo, options: InstallOptions) -> Doc:
    engine = f"{exp.engine} {exp.engine_version} rules"
    if exp.version_note:
        engine += f" ({exp.version_note})"
    head: list[Block] = [Heading(f"Kernel path: {info.label} checkpoint on {gpu.name} (sm_{gpu.sm})"),
            KeyValues((("checkpoint", info.source), ("engine", engine),
                       ("GPUs", f"{exp.gpus} x {gpu.name}"), ("install", _install_line(options, exp)))),
            Paragraph(exp.summary, style="normal" if exp.runs else "warn")]
    blocks = list(head) + load_blocks(exp)
    for d in exp.decisions:
        blocks += decision_blocks(d)
    return Doc(tuple(blocks))


_OUTCOMES = {"loads": "loads", "refused": "refused: the model does not start",
             "unquantized": "built unquantized: the quantized weights do not load (or load wrong)"}


def load_blocks(exp: Explanation) -> list:
    """The engine's config-loading stage: the file it reads, the method it resolves, the outcome."""
    load = exp.load
    if load is None:
        return []
    method = f"{load.method} ({load.config_class})" if load.method and load.config_class else (load.method or "none")
    pairs = [("reads", load.config_file or "no quantization config"), ("declares", load.declared_method or "-"),
             ("method", method), ("outcome", _OUTCOMES.get(load.outcome, load.outcome))]
    blocks: list = [Heading("Quantization config, as the engine reads it", level=2), KeyValues(tuple(pairs))]
    if load.error:
        blocks.append(Paragraph(f"\u201c{load.error}\u201d \u2014 {load.meaning}", style="bad"))
    blocks.append(Bullets(load.steps, title="How the method was resolved"))
    return blocks


_KERNEL_SUFFIXES = ("ScaledMMLinearKernel", "LinearKernel", "LinearMethod")


def _short_kernel(kernel: str) -> str:
    """A kernel name short enough for a table cell: 'MarlinNvFp4LinearKernel' -> 'MarlinNvFp4'."""
    k = kernel.split(" (")[0]
    for suffix in _KERNEL_SUFFIXES:
        if k.endswith(suffix) and len(k) > len(suffix):
            return k[: -len(suffix)]
    return k


def _cell(exp: Explanation, cls: str, notes: dict[str, int], gpu_name: str = "") -> str:
    ds = [d for d in exp.decisions if d.layer_class == cls]
    quantized = [d for d in ds if d.checkpoint_scheme not in ("BF16", "FP16")]
    ds = quantized or ds          # the table shows what the quantized layers do
    if not ds:
        return "-"
    parts = []
    for d in ds:
        if d.runs:
            what = d.effective_scheme.removeprefix("KV ") if cls == "attention_kv" else d.effective_scheme
            parts.append(f"{what} {_short_kernel(d.kernel or '')}")
        else:
            err = d.error or "does not run"
            if gpu_name:      # one note for every card of an arch, not one per card
                err = err.replace(gpu_name, "this GPU")
            n = notes.setdefault(err, len(notes) + 1)
            parts.append(f"fails [{n}]")
    return "; ".join(parts)


def all_gpus_doc(exps: Iterable[Explanation], table: Iterable[GpuSpec], info: CheckpointInfo) -> Doc:
    by_id = {g.id: g for g in table}
    rows, styles = [], []
    exps = tuple(exps)
    moe = any(d.layer_class == "moe_experts" for e in exps for d in e.decisions)
    notes: dict[str, int] = {}
    for e in exps:
        g = by_id.get(e.gpu_id)
        name = g.name if g else ""
        row = [e.gpu_id, f"sm_{g.sm}" if g else "?", "yes" if e.runs else "no",
               _cell(e, "dense_linear", notes, name)]
        if moe:
            row.append(_cell(e, "moe_experts", notes, name))
        row += [_cell(e, "attention_kv", notes, name), str(len({w.text for d in e.decisions for w in d.warnings}))]
        rows.append(tuple(row))
        styles.append("normal" if e.runs else "bad")
    title = (f"{info.label} checkpoint on every GPU ({exps[0].engine} {exps[0].engine_version} rules)" if exps
             else "no GPUs")
    cols = ("GPU", "arch", "runs", "dense linear") + (("MoE experts",) if moe else ()) + ("attention", "warn")
    blocks: list = [Heading(title), Table(cols, tuple(rows), row_styles=tuple(styles))]
    if notes:
        blocks.append(Bullets(tuple(f"[{n}] {err}" for err, n in notes.items()), title="Why it fails"))
    blocks.append(Paragraph("Cells: the scheme that really runs and the kernel; 'explain --gpu ID' gives "
                            "the reasons, rejected candidates and the engine's warnings.", "dim"))
    return Doc(tuple(blocks))

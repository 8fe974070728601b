"""CheckpointInfo -> renderer-neutral Doc (CLI, TUI, reports) and the JSON payload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.checkpoint.model import ActQuant, CheckpointInfo, ModuleGroup, WeightQuant

if TYPE_CHECKING:       # advisor.doc is imported where a document is built: `inspect --json` builds none
    from advisor.doc import Doc, Table


def human_bytes(n: int | float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def human_count(n: int) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(n)


def weight_text(w: WeightQuant) -> str:
    return w.format


def granularity_text(w: WeightQuant) -> str:
    g = w.granularity
    if g == "nvfp4":
        return f"{w.group_size or 16}-blk e4m3+f32"
    if g == "mxfp4":
        return f"{w.group_size or 32}-blk e8m0"
    if g == "group":
        from advisor.doc import na

        return f"group {na(w.group_size)}"
    if g == "block" and w.block:
        return f"block {w.block[0]}x{w.block[1]}"
    return g


def act_text(a: ActQuant) -> str:
    if a.format == "none":
        return "16-bit"
    mode = "dyn" if a.dynamic else "static" if a.dynamic is False else ""
    gran = {"token": "token", "tensor": "tensor", "group": f"g{a.group_size}"}.get(a.granularity or "", "")
    return " ".join(p for p in (a.format.replace("_e4m3", ""), mode, gran) if p)


def _layers_text(g: ModuleGroup) -> str:
    """Where a group repeats: its layers, and "xN" when a layer holds N of it (experts)."""
    ls = g.layers
    if not ls:
        return f"x{g.count}" if g.count > 1 else ""
    if len(ls) > 2 and ls[-1] - ls[0] + 1 == len(ls):
        text = f"{ls[0]}-{ls[-1]}"
    elif len(ls) <= 4:
        text = ",".join(map(str, ls))
    else:
        text = f"{len(ls)} layers"
    per_layer = g.count // len(ls)
    return text + (f" x{per_layer}" if per_layer > 1 else "")


def compact_bytes(n: int | float) -> str:
    """Three significant digits: '972 MiB', '81.0 MiB', '1.16 GiB' (a table cell, not a total)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1000 or unit == "TiB":
            if unit == "B":
                return f"{n:.0f} B"
            return f"{n:.3g} {unit}" if abs(n) >= 100 else f"{n:#.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def _schemes_table(info: CheckpointInfo, total: int) -> Table:
    """One row per distinct (scheme, weight format, scales, activations), with its bytes."""
    from advisor.doc import Table

    acc: dict[tuple[str, str, str, str], int] = {}
    for g in info.modules:
        key = (g.scheme, weight_text(g.weight), granularity_text(g.weight), act_text(g.act))
        acc[key] = acc.get(key, 0) + g.stored_bytes
    rows = sorted(acc.items(), key=lambda kv: -kv[1])
    return Table(("scheme", "weights", "scales", "activations", "bytes", "of total"),
                 tuple((*k, compact_bytes(b), f"{b / total:.1%}") for k, b in rows), title="Schemes",
                 row_styles=tuple("dim" if k[0] in ("BF16", "FP16") else "normal" for k, _ in rows))


def to_doc(info: CheckpointInfo) -> Doc:
    from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table

    a, t = info.arch, info.totals
    share = ", ".join(f"{k} {v:.1%}" for k, v in info.scheme_shares.items()) if info.label == "MIXED" else ""
    unknown = t.sizes_from == "unknown"
    pairs = [
        ("checkpoint", info.source),
        ("scheme", headline(info) + (f"  (of the quantized linear bytes: {share})" if share else "")),
        ("producer", info.producer + (f" ({info.quant_method})" if info.quant_method
                                      and info.quant_method != info.producer else "")),
        ("kv cache", (info.kv_cache_detail or info.kv_cache_quant) if info.kv_cache_quant
         else "not quantized (16-bit)"),
        ("architecture", _arch_text(info)),
        ("parameters", "N/A (sizes unknown, see the doctor's warnings)" if unknown else
         f"{human_count(t.params)} total, {human_count(t.active_params)} active per token"),
        ("stored", "N/A (sizes unknown)" if unknown else human_bytes(t.stored_bytes) + (
            "  (computed from config, no weights present)" if t.sizes_from == "config" else "")),
        ("read per token", "N/A" if unknown else human_bytes(t.bytes_per_token) + " of weights"),
        ("kv layers", "N/A (layer types unknown without a usable config.json)" if not a.hidden_size else
         f"{a.kv_layers} full-attention"
         + (f", {a.sliding_window_layers} sliding ({a.sliding_window})" if a.sliding_window_layers else "")
         + (f", {a.linear_attention_layers} linear/GDN/Mamba" if a.linear_attention_layers else "")),
    ]
    if a.mla:
        pairs.append(("mla", f"kv_lora_rank {a.mla.kv_lora_rank}, rope dim {a.mla.qk_rope_head_dim}"))
    blocks: list = [Heading(f"Checkpoint: {headline(info)}"), KeyValues(tuple(pairs))]
    total = t.stored_bytes or 1
    blocks.append(_schemes_table(info, total))
    # Per module: what it is and what it costs. The format details live in the Schemes table
    # above, so the table fits an 80-column terminal (names are the widest column).
    rows, styles = [], []
    for g in info.modules:
        rows.append((_display_name(g), g.role, g.scheme, _layers_text(g), compact_bytes(g.stored_bytes)))
        styles.append("dim" if g.scheme in ("BF16", "FP16") else "normal")
    blocks.append(Table(("module", "role", "scheme", "layers", "bytes"), tuple(rows),
                        title="Modules", row_styles=tuple(styles)))
    if info.kept_bf16:
        kept_total = sum(g.stored_bytes for g in info.kept_bf16)
        big = [g for g in info.kept_bf16 if g.stored_bytes >= 0.001 * total]
        small = [g for g in info.kept_bf16 if g.stored_bytes < 0.001 * total]
        items = [f"{_short(g.name)} ({g.role}): {human_bytes(g.stored_bytes)}" for g in big]
        if small:   # the rest, so the items add up to the title
            roles = ", ".join(dict.fromkeys(g.role for g in small))
            items.append(f"{len(small)} small group(s) ({roles}): {human_bytes(sum(g.stored_bytes for g in small))}")
        blocks.append(Bullets(tuple(items),
                              title=f"Kept in 16-bit: {human_bytes(kept_total)} ({kept_total / total:.1%})"))
    if info.findings:
        sev = {"error": "bad", "warn": "warn", "info": "dim"}
        for level in ("error", "warn", "info"):
            said = tuple(f.message + (f" [{f.detail}]" if f.detail else "") for f in info.findings
                         if f.severity == level)
            if said:
                blocks.append(Bullets(said, title=f"Doctor ({level})", style=sev[level]))
    if info.producer == "unknown" and info.raw_quant_config:
        import json

        blocks.append(Paragraph("unknown quantization config: " + json.dumps(info.raw_quant_config)[:400], "warn"))
    return Doc(tuple(blocks))


def headline(info: CheckpointInfo) -> str:
    """The scheme label, with the format in words where the label alone does not say it (EXL2 4.25 bpw)."""
    note = info.format_note
    if not note:
        return info.label
    return note if note.upper().startswith(info.label) else f"{info.label} ({note})"


def _display_name(g: ModuleGroup) -> str:
    """Short name for the Modules table: without the model prefix, and without the layer path
    when the layers column says where the group repeats."""
    name = _short(g.name)
    if g.layers and name.startswith("layers.*."):
        return name[len("layers.*."):]
    return name


def _short(name: str) -> str:
    """Display name: the common ``model.`` / ``model.language_model.`` prefix adds nothing on screen."""
    for p in ("model.language_model.", "model."):
        if name.startswith(p):
            return name[len(p):]
    return name


def _arch_text(info: CheckpointInfo) -> str:
    a = info.arch
    if a.model_type is None and not a.hidden_size:   # a lone .safetensors file: layers from tensor names
        return f"unknown (no config.json), {a.num_layers} layers seen in tensor names"
    parts = [str(a.model_type or "unknown"), f"{a.num_layers} layers", f"hidden {a.hidden_size or 'N/A'}"]
    if a.num_attention_heads:
        parts.append(f"{a.num_attention_heads} heads / {a.num_kv_heads} kv x {a.head_dim}")
    if a.moe:
        parts.append(f"MoE {a.moe.num_experts} experts top-{a.moe.top_k}"
                     + (f" + {a.moe.num_shared_experts} shared" if a.moe.num_shared_experts else ""))
    if a.mla:
        parts.append("MLA")
    if a.mtp_layers:
        parts.append(f"{a.mtp_layers} MTP")
    if a.has_vision:
        parts.append("vision tower")
    if a.tie_word_embeddings:
        parts.append("tied embeddings")
    return ", ".join(parts)


def to_payload(info: CheckpointInfo) -> dict:
    from advisor.jsonout import to_jsonable

    return {"checkpoint": to_jsonable(info)}

"""Classify a checkpoint per module from its configs and safetensors headers: the public entry point.

    inspect_checkpoint("path/or/org/name@rev/or/demo:NAME") -> CheckpointInfo

Pipeline: sources (files, headers) -> quant_config (what the config declares per module) ->
tensors (what the headers show) or synth (modules from the architecture when no weights are
present) -> merge, group repeated modules, totals, doctor findings.
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from dataclasses import replace

from advisor.checkpoint import doctor
from advisor.checkpoint.arch import arch_info
from advisor.checkpoint.config_types import check_config_types
from advisor.checkpoint.declared import declared_quant
from advisor.checkpoint.model import ArchInfo, CheckpointInfo, Finding, ModuleGroup, Role, Scheme, Totals, WeightQuant
from advisor.checkpoint.modules import (ModuleRow, experts_per_layer, group_modules, modules_from_config,
                                        modules_from_headers, sort_naturally, unquantized_format)
from advisor.checkpoint.name_columns import natural_order
from advisor.checkpoint.quant_config import build_plan
from advisor.checkpoint.quant_plan import QuantPlan
from advisor.checkpoint.schemes import NO_ACT, is_quantized, scheme_label
from advisor.checkpoint.sources import CheckpointFiles, load
from advisor.errors import BadInput


def inspect_checkpoint(source: str) -> CheckpointInfo:
    """Classify ``source`` (folder, .safetensors file, hub id ``org/name[@rev]``, ``demo:NAME``)."""
    # Headers become ~10 objects per tensor and none are cyclic garbage: collections during the parse
    # only re-scan them, which makes a 100k-tensor checkpoint superlinear (benchmarks/inspect_speed.py).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _inspect(source)
    finally:
        if collecting:
            gc.enable()


def _inspect(source: str) -> CheckpointInfo:
    files = load(source)
    try:
        return replace(classify(files), declared=declared_quant(files.config, files.hf_quant_config))
    except (TypeError, KeyError, AttributeError, IndexError, ValueError, ZeroDivisionError, RecursionError) as err:
        # A config whose values have the wrong types or shapes: one line naming the file, never a traceback.
        raise BadInput(f"cannot interpret the configuration ({type(err).__name__}: {str(err)[:100]})",
                       path=_config_label(files)) from None


def _config_label(files: CheckpointFiles) -> str:
    src = files.source
    return f"{src}/config.json" if not src.endswith(".safetensors") else src


def classify(files: CheckpointFiles) -> CheckpointInfo:
    check_config_types(files.config, _config_label(files))      # a value of the wrong type: one line, exit 3
    config = files.config or {}
    plan = build_plan(files.config, files.hf_quant_config, files.quantize_config)
    if files.gguf and not files.headers:
        return _gguf(files, plan)
    arch = arch_info(config) if files.config else ArchInfo()
    notes: list[Finding] = [Finding(c, s, m) for c, s, m in files.notes]
    if files.headers:
        mods, header_findings = modules_from_headers(files, plan, arch)
        notes += header_findings
        if not files.config or not arch.num_layers:     # config absent or in unknown terms: count from names
            arch = replace(arch, num_layers=1 + max((m.layer for m in mods if m.layer is not None), default=-1))
        sizes_from = "headers"
    else:
        mods, unfaithful = modules_from_config(config, plan, arch, files)
        sizes_from = "config"
        missing = _missing_sizes(config, arch)
        if missing or unfaithful or not mods:
            # nothing faithful to size the modules from: the scheme is still answered, sizes are N/A
            why = unfaithful or [f"no weights, and the config has no usable {missing} (model_type "
                                 f"{config.get('model_type')!r}): the sizes cannot be computed"]
            notes += [Finding("sizes-unknown", "warn", w) for w in why]
            return _scheme_only(files, plan, arch, notes)
        sort_naturally(mods)            # modules_from_headers' rows come in this order
    groups = group_modules(mods)
    quantized = [g for g in groups if is_quantized(g.weight)]
    label, shares = _label(groups, quantized)
    kept = tuple(g for g in groups if not is_quantized(g.weight)) if quantized else ()
    experts = experts_per_layer(mods)
    totals = _totals(groups, arch, sizes_from, experts)
    kv = plan.kv_cache
    findings = notes + doctor.findings(files, plan, arch, mods, groups, label, shares, experts)
    if any(g.weight.format == "unknown" for g in groups) and sizes_from == "config":
        findings.append(Finding("sizes-upper-bound", "warn", "the quantized format is unknown: its layers are "
                                "sized at 16 bits per weight, so stored bytes are an upper bound"))
    return CheckpointInfo(
        source=files.source,
        producer=plan.producer if (plan.producer != "none" or not quantized) else "unknown",
        label=label,
        scheme_shares=shares,
        modules=tuple(groups),
        arch=arch,
        totals=totals,
        kv_cache_quant=kv,
        kept_bf16=kept,
        findings=tuple(_dedupe(findings)),
        quant_method=plan.quant_method,
        raw_quant_config=plan.raw if plan.producer == "unknown" else None,
        format_note=plan.format_note if any(is_quantized(g.weight) for g in groups) else "",
        kv_cache_detail=plan.kv_detail,
    )


_GGUF_TYPE = re.compile(r"(?i)(?:^|[-_.])((?:I?Q\d(?:_[0-9A-Z]+)*)|BF16|F16|F32)(?=[-_.]|$)")


def _gguf(files: CheckpointFiles, plan: QuantPlan) -> CheckpointInfo:
    """A GGUF folder: the format and bits from the files (their size over the config's parameters), the
    weights sized as the files are. The quant type is read from the file name (llama.cpp's naming)."""
    total = sum(size for _, size in files.gguf)
    kinds = sorted({m.group(1).upper() for n, _ in files.gguf for m in [_GGUF_TYPE.search(n[:-5])] if m})
    what = f"GGUF {'/'.join(kinds) or 'quant type not in the file name'}"
    notes = [Finding(c, s, m) for c, s, m in files.notes if c != "no-weights"]
    if not files.config:
        info = _scheme_only(files, plan, ArchInfo(), notes + [Finding(
            "sizes-unknown", "warn", "GGUF files without config.json: the architecture is not read from the GGUF "
                                     "header, so only the stored size is known")])
        return replace(info, label="GGUF", scheme_shares={"GGUF": 1.0}, producer="gguf", quant_method="gguf",
                       format_note=f"{what}, {human_gib(total)} in {len(files.gguf)} file(s)",
                       totals=Totals(stored_bytes=total, sizes_from="gguf"))
    arch = arch_info(files.config)
    mods, unfaithful = modules_from_config(files.config, plan, arch, files)
    params = sum(m.params for m in mods if m.shape) or 1
    bpw = total * 8 / params
    w = WeightQuant("gguf", max(1, round(bpw)), "group", bpw=round(bpw, 3))
    mods = [ModuleRow(m.name, m.role, w, NO_ACT, m.count, m.params, int(m.params * bpw / 8), m.shape, m.layer)
            if m.shape else m for m in mods]
    mods.sort(key=lambda m: natural_order(m.name))
    groups = group_modules(mods)
    totals = _totals(groups, arch, "gguf", experts_per_layer(mods))
    findings = notes + [Finding("gguf-average-bits", "info", f"GGUF: {len(files.gguf)} file(s), {total:,} bytes "
                                f"over {params:,} matrix parameters = {bpw:.2f} bits per weight on average "
                                "(per-tensor types are not read)")] + [Finding("sizes-unknown", "warn", u)
                                                                        for u in unfaithful]
    return CheckpointInfo(source=files.source, producer="gguf", label="GGUF", scheme_shares={"GGUF": 1.0},
                          modules=tuple(groups), arch=arch, totals=totals, findings=tuple(_dedupe(findings)),
                          quant_method="gguf", format_note=f"{what}, {bpw:.2f} bits per weight")


def human_gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _missing_sizes(config: dict, arch: ArchInfo) -> str:
    need = [("num_hidden_layers", arch.num_layers), ("hidden_size", arch.hidden_size)]
    return " / ".join(k for k, v in need if v <= 0)


# Probe names of the linear layers a declared scheme is read from when nothing can be sized.
_PROBES: tuple[tuple[str, Role], ...] = (
    ("model.layers.0.self_attn.q_proj", "attn_qkv"), ("model.layers.0.self_attn.o_proj", "attn_o"),
    ("model.layers.0.mlp.gate_proj", "mlp_gate_up"), ("model.layers.0.mlp.down_proj", "mlp_down"))


def _scheme_only(files: CheckpointFiles, plan: QuantPlan, arch: ArchInfo, notes: list[Finding]) -> CheckpointInfo:
    """A config-only checkpoint whose sizes are unknown: the declared scheme, no module sizes (exit 0)."""
    schemes: list[Scheme] = []
    for name, role in _PROBES:
        spec = plan.spec_for(name, role)
        label = scheme_label(spec.weight, spec.act) if spec else _unquantized_label(files.config or {})
        if label not in schemes:
            schemes.append(label)
    label = schemes[0] if len(schemes) == 1 else "MIXED"
    findings = [f for f in notes if f.code != "no-weights"]        # "sizes from the config": not here
    findings += [Finding(c, doctor.note_severity(c), m) for c, m in plan.notes if c != "producer"]
    findings += doctor.arch_number_checks(files.config)
    return CheckpointInfo(
        source=files.source, producer=plan.producer, label=label,
        scheme_shares={label: 1.0} if label != "MIXED" else {},
        modules=(), arch=arch, totals=Totals(sizes_from="unknown"), kv_cache_quant=plan.kv_cache,
        findings=tuple(_dedupe(findings)), quant_method=plan.quant_method,
        raw_quant_config=plan.raw if plan.producer == "unknown" else None,
        format_note=plan.format_note, kv_cache_detail=plan.kv_detail)


def _unquantized_label(config: dict) -> Scheme:
    return "FP16" if unquantized_format(config).format == "fp16" else "BF16"


# ------------------------------------------------------------------ label, totals

def _label(groups: list[ModuleGroup], quantized: list[ModuleGroup]) -> tuple[Scheme, dict[Scheme, float]]:
    if not quantized:
        by_fmt: dict[Scheme, int] = defaultdict(int)
        for g in groups:
            by_fmt[g.scheme] += g.stored_bytes
        label: Scheme = "FP16" if by_fmt.get("FP16", 0) > by_fmt.get("BF16", 0) else "BF16"
        return label, {label: 1.0}
    by_scheme: dict[Scheme, int] = defaultdict(int)
    for g in quantized:
        by_scheme[g.scheme] += g.stored_bytes
    total = sum(by_scheme.values()) or 1
    shares = {s: round(b / total, 6) for s, b in sorted(by_scheme.items(), key=lambda kv: -kv[1])}
    label = next(iter(shares)) if len(shares) == 1 else "MIXED"
    return label, shares


# Weights a decoded token reads: the decoder layers (routed experts at top_k / E), final norm and
# lm_head. Not read per token: the embedding table (one row per token), the vision tower (prefill
# of images only) and MTP heads (only with speculative decoding).
_NOT_PER_TOKEN = ("embed", "vision", "mtp")


def _totals(groups: list[ModuleGroup], arch: ArchInfo, sizes_from: str, experts: int) -> Totals:
    """``experts``: experts_per_layer() of the module rows (0: none seen, the config's count is used)."""
    params = sum(g.params for g in groups)
    stored = sum(g.stored_bytes for g in groups)
    experts_total = experts or (arch.moe.num_experts if arch.moe else 0)
    k = arch.moe.top_k if arch.moe else 0
    frac = min(1.0, k / experts_total) if experts_total and k else 1.0
    active = 0.0
    per_tok = 0.0
    for g in groups:
        if g.role in _NOT_PER_TOKEN:
            if g.role == "embed" and arch.tie_word_embeddings:
                active += g.params
                per_tok += g.stored_bytes
            continue
        f = frac if g.role == "expert" else 1.0
        active += g.params * f
        per_tok += g.stored_bytes * f
    return Totals(params=params, stored_bytes=stored, active_params=int(round(active)),
                  bytes_per_token=int(round(per_tok)), sizes_from=sizes_from)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.code, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


__all__ = ["inspect_checkpoint", "classify"]

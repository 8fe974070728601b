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
from dataclasses import dataclass, replace
from functools import lru_cache

from advisor.checkpoint import doctor
from advisor.checkpoint.arch import arch_info, text_config
from advisor.checkpoint.model import (ActQuant, ArchInfo, CheckpointInfo, Finding, ModuleGroup, Totals, WeightQuant)
from advisor.checkpoint.quant_config import QuantPlan, build_plan
from advisor.checkpoint.roles import group_name, layer_index, role_of
from advisor.checkpoint.config_types import check_config_types
from advisor.checkpoint.declared import declared_quant
from advisor.checkpoint.schemes import (BF16, NO_ACT, is_quantized, scheme_label, stored_bytes)
from advisor.checkpoint.sources import CheckpointFiles, load
from advisor.checkpoint.tensors import HeaderModule, Observed, group_tensors, observe
from advisor.errors import BadInput


@dataclass
class Mod:
    """One module (or one stack of experts) before grouping."""

    name: str
    role: str
    weight: WeightQuant
    act: ActQuant
    count: int
    params: int
    stored_bytes: int
    shape: tuple[int, int] | None
    layer: int | None
    header: HeaderModule | None = None

    @property
    def scheme(self) -> str:
        return scheme_label(self.weight, self.act)


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
        mods, header_findings = _modules_from_headers(files, plan, arch)
        notes += header_findings
        if not files.config or not arch.num_layers:     # config absent or in unknown terms: count from names
            arch = replace(arch, num_layers=1 + max((m.layer for m in mods if m.layer is not None), default=-1))
        sizes_from = "headers"
    else:
        mods, unfaithful = _modules_from_config(config, plan, arch, files)
        sizes_from = "config"
        missing = _missing_sizes(config, arch)
        if missing or unfaithful or not mods:
            # nothing faithful to size the modules from: the scheme is still answered, sizes are N/A
            why = unfaithful or [f"no weights, and the config has no usable {missing} (model_type "
                                 f"{config.get('model_type')!r}): the sizes cannot be computed"]
            notes += [Finding("sizes-unknown", "warn", w) for w in why]
            return _scheme_only(files, plan, arch, notes)
    mods.sort(key=lambda m: _natural(m.name))
    groups = _group(mods)
    quantized = [g for g in groups if is_quantized(g.weight)]
    label, shares = _label(groups, quantized)
    kept = tuple(g for g in groups if not is_quantized(g.weight)) if quantized else ()
    totals = _totals(groups, arch, sizes_from, mods)
    kv = plan.kv_cache
    findings = notes + doctor.findings(files, plan, arch, mods, groups, label, shares)
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
    mods, unfaithful = _modules_from_config(files.config, plan, arch, files)
    params = sum(m.params for m in mods if m.shape) or 1
    bpw = total * 8 / params
    w = WeightQuant("gguf", max(1, round(bpw)), "group", bpw=round(bpw, 3))
    mods = [Mod(m.name, m.role, w, NO_ACT, m.count, m.params, int(m.params * bpw / 8), m.shape, m.layer)
            if m.shape else m for m in mods]
    mods.sort(key=lambda m: _natural(m.name))
    groups = _group(mods)
    totals = _totals(groups, arch, "gguf", mods)
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
_PROBES = (("model.layers.0.self_attn.q_proj", "attn_qkv"), ("model.layers.0.self_attn.o_proj", "attn_o"),
           ("model.layers.0.mlp.gate_proj", "mlp_gate_up"), ("model.layers.0.mlp.down_proj", "mlp_down"))


def _scheme_only(files: CheckpointFiles, plan: QuantPlan, arch: ArchInfo, notes: list[Finding]) -> CheckpointInfo:
    """A config-only checkpoint whose sizes are unknown: the declared scheme, no module sizes (exit 0)."""
    schemes = []
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


def _unquantized_label(config: dict) -> str:
    return "FP16" if _unquantized_format(config).format == "fp16" else "BF16"


# ------------------------------------------------------------------ modules from headers

def _modules_from_headers(files: CheckpointFiles, plan: QuantPlan, arch: ArchInfo) -> tuple[list[Mod], list[Finding]]:
    entries = [(t, h.path) for h in files.headers for t in h.tensors.values()]
    hmods = group_tensors(entries)
    findings: list[Finding] = []
    mods: list[Mod] = []
    bad_bf16, ignored_q, mismatch, unscaled, act_conflict = [], [], [], [], []
    # A 100k-tensor MoE repeats a few module shapes thousands of times: roles are decided per name
    # pattern (role_of reads no index but the layer's) and observations per tensor layout.
    roles: dict[tuple, str] = {}
    seen: dict[tuple, Observed | None] = {}
    n_layers = arch.num_layers or None
    for name, hm in hmods.items():
        layer = layer_index(name)
        rkey = (group_name(name), bool(n_layers and layer is not None and layer >= n_layers))
        role = roles.get(rkey)
        if role is None:
            role = roles[rkey] = role_of(name, n_layers)
        spec = plan.spec_for(name, role)
        bits = _packed_bits(spec)
        okey = (bits, *((k, t.dtype, t.shape) for k, t in hm.tensors.items()))
        if okey in seen:
            obs = seen[okey]
        else:
            obs = seen[okey] = observe(hm, int_bits=bits)
        if obs is None:
            # no matrix weight (A_log, dt_bias, k/v scales alone): count bytes, BF16-kept
            params = sum(t.numel for t in hm.tensors.values())
            mods.append(Mod(name, role, BF16, NO_ACT, 1, params, hm.stored_bytes, None, layer, hm))
            continue
        w, a = obs.weight, obs.act
        if not is_quantized(w):
            if spec is not None and is_quantized(spec.weight):
                bad_bf16.append(name)
            a = NO_ACT
        else:
            if not obs.has_scale:
                unscaled.append(name)
            if spec is None:
                if plan.producer not in ("none", "unknown"):
                    ignored_q.append(name)
                a = a if a is not None else NO_ACT
            else:
                if _family(spec.weight) != _family(w):
                    mismatch.append(f"{name}: config {spec.weight.format}, tensors {w.format}")
                    a = a if a is not None else NO_ACT
                else:
                    w = _merge_weight(spec.weight, w)
                    if a is not None and a.format != "none" and spec.act.format == "none":
                        act_conflict.append(name)
                    a = spec.act
        count, shape = obs.count, obs.shape
        if role == "conv":
            # a conv1d weight [channels, 1, kernel] is one module, not `channels` stacked experts
            count, shape = 1, None
        mods.append(Mod(name, role, w, a, count, obs.params, hm.stored_bytes, shape, layer, hm))
    sev_list = (
        ("config-quantized-but-bf16", "warn", bad_bf16,
         "the config declares {n} module(s) quantized but their tensors are 16-bit (no scales)"),
        ("ignored-but-quantized", "warn", ignored_q,
         "{n} module(s) are excluded/ignored in the config but their tensors are quantized"),
        ("config-tensor-mismatch", "error", mismatch,
         "{n} module(s) store a different weight format than the config declares"),
        ("quantized-without-scales", "error", unscaled,
         "{n} module(s) have low-precision weights but no scale tensors"),
        ("static-input-scale-on-weight-only", "info", act_conflict,
         "{n} module(s) carry static input scales although the config declares weight-only"),
    )
    for code, sev, names, msg in sev_list:
        if names:
            findings.append(Finding(code, sev, msg.format(n=len(names)), detail="; ".join(names[:5]),
                                    modules=tuple(names[:50])))
    return mods, findings


def _packed_bits(spec) -> int | None:
    """Bit width of int weights packed into int32 words: only the config knows it."""
    if spec is None:
        return None
    w = spec.weight
    if w.bits < 8 or (w.packing or "").startswith("int32"):
        return w.bits
    return None


def _family(w: WeightQuant) -> str:
    f = w.format
    if f.startswith("fp8"):
        return "fp8"
    if f in ("int4", "uint4", "nf4", "fp4") or (f.startswith(("int", "uint")) and w.bits < 8):
        return "int4"
    if f in ("int8", "uint8"):
        return "int8"
    return f


@lru_cache(maxsize=256)
def _merge_weight(declared: WeightQuant, seen: WeightQuant) -> WeightQuant:
    """The config's description; the tensors fill in what it leaves open (a tiny tensor with one
    block or one group looks per-tensor in its header, so the declaration wins where it speaks)."""
    if declared.granularity in ("unknown", "none", ""):
        return replace(declared, granularity=seen.granularity, group_size=seen.group_size, block=seen.block)
    return replace(declared, packing=declared.packing or seen.packing)


# ------------------------------------------------------------------ modules from config

def _modules_from_config(config: dict, plan: QuantPlan, arch: ArchInfo,
                         files: CheckpointFiles) -> tuple[list[Mod], list[str]]:
    """Modules synthesized from the architecture, and what could not be synthesized faithfully."""
    from advisor.checkpoint.synth import synthesize

    import json

    raw = json.dumps(plan.raw)[:200_000] if plan.raw else ""
    unq = _unquantized_format(config)
    mods = []
    syn = synthesize(config, quant_text=raw)
    for sm in syn.modules:
        role = role_of(sm.name, arch.num_layers or None)
        spec = plan.spec_for(sm.name, role) if sm.in_f > 1 else None
        if spec is not None and (role in ("norm", "conv") or (role == "embed" and plan.producer != "mlx")):
            spec = None            # mlx-lm quantizes the embedding too (nn.Embedding has to_quantized)
        w, a = (spec.weight, spec.act) if spec else (unq, NO_ACT)
        one = stored_bytes(w, sm.out_f, sm.in_f)
        shape = (sm.out_f, sm.in_f) if sm.in_f > 1 else None
        mods.append(Mod(sm.name, role, w, a, sm.count, sm.out_f * sm.in_f * sm.count, one * sm.count, shape,
                        layer_index(sm.name)))
    return mods, syn.notes


def _unquantized_format(config: dict) -> WeightQuant:
    dt = str(config.get("torch_dtype") or config.get("dtype") or text_config(config).get("torch_dtype")
             or text_config(config).get("dtype") or "bfloat16")
    if dt in ("float16", "half", "torch.float16"):
        return WeightQuant("fp16", 16)
    if dt in ("float32", "torch.float32"):
        return WeightQuant("fp32", 32)
    return BF16


# ------------------------------------------------------------------ grouping, label, totals

_NUM = re.compile(r"(\d+)")


def _natural(name: str):
    head = 0 if "embed" in name else (2 if name.startswith(("lm_head", "mtp")) else 1)
    return (head, [int(p) if p.isdigit() else p for p in _NUM.split(name)])


def _group(mods: list[Mod]) -> list[ModuleGroup]:
    acc: dict[tuple, dict] = {}
    for m in mods:
        key = (group_name(m.name), m.role, m.scheme, m.weight, m.act, m.shape)
        g = acc.get(key)
        if g is None:
            g = acc[key] = {"count": 0, "params": 0, "bytes": 0, "layers": set()}
        g["count"] += m.count
        g["params"] += m.params
        g["bytes"] += m.stored_bytes
        if m.layer is not None:
            g["layers"].add(m.layer)
    out = []
    for (name, role, scheme, w, a, shape), g in acc.items():
        out.append(ModuleGroup(name=name, role=role, scheme=scheme, weight=w, act=a, count=g["count"],
                               params=g["params"], stored_bytes=g["bytes"], shape=shape,
                               layers=tuple(sorted(g["layers"]))))
    return out


def _label(groups: list[ModuleGroup], quantized: list[ModuleGroup]) -> tuple[str, dict[str, float]]:
    if not quantized:
        by_fmt: dict[str, int] = defaultdict(int)
        for g in groups:
            by_fmt[g.scheme] += g.stored_bytes
        label = "FP16" if by_fmt.get("FP16", 0) > by_fmt.get("BF16", 0) else "BF16"
        return label, {label: 1.0}
    by_scheme: dict[str, int] = defaultdict(int)
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


def _totals(groups: list[ModuleGroup], arch: ArchInfo, sizes_from: str, mods: list[Mod]) -> Totals:
    params = sum(g.params for g in groups)
    stored = sum(g.stored_bytes for g in groups)
    experts_total = _experts_per_layer(mods) or (arch.moe.num_experts if arch.moe else 0)
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


_EXPERT_INDEX = re.compile(r"experts\.(\d+)\.")


def _experts_per_layer(mods: list[Mod]) -> int:
    """Experts actually present per MoE layer (expert-pruned checkpoints hold fewer than the config says)."""
    per_layer: dict[int, set] = defaultdict(set)
    stacked = 0
    for m in mods:
        if m.role != "expert" or m.layer is None:
            continue
        idx = _EXPERT_INDEX.search(m.name)
        if m.count > 1:
            stacked = max(stacked, m.count)
        elif idx:
            per_layer[m.layer].add(int(idx.group(1)))
    return max([stacked] + [len(s) for s in per_layer.values()])


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.code, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


__all__ = ["inspect_checkpoint", "classify"]

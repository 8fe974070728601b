"""The checkpoint's modules, one row each, before they are grouped and summed.

From the safetensors headers (what the tensors show, merged with what the config declares) or, when
no weights are present, synthesized from the architecture; then grouped by name pattern and scheme.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from functools import lru_cache

from advisor.checkpoint.arch import text_config
from advisor.checkpoint.model import ActQuant, ArchInfo, Finding, ModuleGroup, WeightQuant
from advisor.checkpoint.quant_plan import QuantPlan
from advisor.checkpoint.roles import group_name, layer_index, role_of
from advisor.checkpoint.schemes import BF16, NO_ACT, is_quantized, scheme_label, stored_bytes
from advisor.checkpoint.sources import CheckpointFiles
from advisor.checkpoint.tensors import HeaderModule, Observed, group_tensors, observe


@dataclass
class ModuleRow:
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


# ------------------------------------------------------------------ modules from headers

def modules_from_headers(files: CheckpointFiles, plan: QuantPlan,
                         arch: ArchInfo) -> tuple[list[ModuleRow], list[Finding]]:
    entries = [(t, h.path) for h in files.headers for t in h.tensors.values()]
    hmods = group_tensors(entries)
    findings: list[Finding] = []
    mods: list[ModuleRow] = []
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
            mods.append(ModuleRow(name, role, BF16, NO_ACT, 1, params, hm.stored_bytes, None, layer, hm))
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
        mods.append(ModuleRow(name, role, w, a, count, obs.params, hm.stored_bytes, shape, layer, hm))
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

def modules_from_config(config: dict, plan: QuantPlan, arch: ArchInfo,
                         files: CheckpointFiles) -> tuple[list[ModuleRow], list[str]]:
    """Modules synthesized from the architecture, and what could not be synthesized faithfully."""
    import json

    from advisor.checkpoint.synth import synthesize

    raw = json.dumps(plan.raw)[:200_000] if plan.raw else ""
    unq = unquantized_format(config)
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
        mods.append(ModuleRow(sm.name, role, w, a, sm.count, sm.out_f * sm.in_f * sm.count, one * sm.count, shape,
                        layer_index(sm.name)))
    return mods, syn.notes


def unquantized_format(config: dict) -> WeightQuant:
    dt = str(config.get("torch_dtype") or config.get("dtype") or text_config(config).get("torch_dtype")
             or text_config(config).get("dtype") or "bfloat16")
    if dt in ("float16", "half", "torch.float16"):
        return WeightQuant("fp16", 16)
    if dt in ("float32", "torch.float32"):
        return WeightQuant("fp32", 32)
    return BF16


# ------------------------------------------------------------------ grouping, label, totals

_NUM = re.compile(r"(\d+)")


def natural_order(name: str):
    head = 0 if "embed" in name else (2 if name.startswith(("lm_head", "mtp")) else 1)
    return (head, [int(p) if p.isdigit() else p for p in _NUM.split(name)])


def group_modules(mods: list[ModuleRow]) -> list[ModuleGroup]:
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


_EXPERT_INDEX = re.compile(r"experts\.(\d+)\.")


def experts_per_layer(mods: list[ModuleRow]) -> int:
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

"""NVIDIA ModelOpt: ``quant_algo`` / ``quantized_layers`` in hf_quant_config.json or config.json, and
the KV-cache dtype in words (shared/research/checkpoint-formats.md §2).

The precision comes from ``quant_algo`` / ``quantized_layers``, never from the ``config_groups``
ModelOpt also writes: real exports contradict themselves there (§2.3, §6 E5b).
"""

from __future__ import annotations

import re

from typing import Any

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.quant_foreign import unknown_plan
from advisor.checkpoint.quant_plan import (FP8_STATIC_ACT, FP8_TENSOR, MXFP4_ACT, MXFP4_WEIGHT, NVFP4_ACT, QuantPlan,
                                           Spec, Where, by_pattern, glob_pattern, group_size_of, nvfp4_weight,
                                           str_list)
from advisor.checkpoint.roles import LINEAR_ROLES

_NVFP4_ALGOS = ("NVFP4", "NVFP4_AWQ", "NVFP4_SVD", "NVFP4_STATIC", "W4A16_NVFP4", "W4A8_NVFP4_FP8")
_INT4_ALGOS = ("W4A16_AWQ", "INT4_AWQ", "W4A8_AWQ")


def modelopt_algo_spec(algo: str, entry: dict, where: Where | None = None) -> tuple[WeightQuant, ActQuant] | None:
    """ModelOpt quant_algo -> formats (quant_utils.py:704-768 and the §5 mapping)."""
    a = algo.upper()
    if a in _NVFP4_ALGOS:
        assumed = "the advisor assumed 16 as ModelOpt writes"
    elif a in _INT4_ALGOS:
        assumed = "the advisor assumed 128, ModelOpt's INT4 AWQ default"
    else:
        assumed = f"ignored ({a or 'this algorithm'} has no group size)"
    gs = group_size_of(entry, where, assumed)
    if a == "FP8":
        return FP8_TENSOR, FP8_STATIC_ACT
    if a == "FP8_PER_CHANNEL_PER_TOKEN":
        return WeightQuant("fp8_e4m3", 8, "channel"), ActQuant("fp8_e4m3", dynamic=True, granularity="token")
    if a in ("FP8_PB_WO", "FP8_PB_REAL"):
        return WeightQuant("fp8_e4m3", 8, "block", block=(128, 128)), ActQuant()
    if a == "MXFP8":
        return (WeightQuant("fp8_e4m3", 8, "group", group_size=32),
                ActQuant("fp8_e4m3", dynamic=True, granularity="group", group_size=32))
    if a in ("W8A16", "INT8_WO"):
        return WeightQuant("int8", 8, "channel", symmetric=True), ActQuant()
    if a in ("W8A8_SQ_PER_CHANNEL", "INT8", "INT8_SQ", "W8A8"):
        return WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=False, granularity="tensor")
    if a in ("NVFP4", "NVFP4_AWQ", "NVFP4_SVD", "NVFP4_STATIC"):
        return nvfp4_weight(gs or 16), NVFP4_ACT
    if a == "W4A16_NVFP4":
        return nvfp4_weight(gs or 16), ActQuant()
    if a == "W4A8_NVFP4_FP8":
        return nvfp4_weight(gs or 16), FP8_STATIC_ACT
    if a == "MXFP4":
        return MXFP4_WEIGHT, MXFP4_ACT
    if a == "W4A8_MXFP4_FP8":
        return MXFP4_WEIGHT, FP8_STATIC_ACT
    if a in ("W4A16_AWQ", "INT4_AWQ"):
        return (WeightQuant("int4", 4, "group", group_size=gs or 128, symmetric=not entry.get("has_zero_point"),
                            packing="uint8-2-per-byte-dim0"), ActQuant())
    if a == "W4A8_AWQ":
        return (WeightQuant("int4", 4, "group", group_size=gs or 128, symmetric=not entry.get("has_zero_point"),
                            packing="uint8-2-per-byte-dim0"), FP8_STATIC_ACT)
    return None


def _excluder(patterns):
    """ModelOpt exclude_modules / ignore: is a module name excluded (fnmatch, or the name or a parent of it;
    vllm modelopt.py is_layer_excluded). Prepared once per list, asked per module (a MoE checkpoint lists
    one pattern per layer): a pattern without a wildcard only matches itself, so only wildcards need a regex."""
    strs = [p for p in patterns if isinstance(p, str)]
    exact = frozenset(strs)
    prefixes = tuple(p + "." for p in strs)
    globs = tuple(glob_pattern(p) for p in strs if any(c in p for c in "*?["))
    # one alternation instead of a match per glob (fnmatch.translate anchors each with \Z and scopes its
    # flags, its group names are unique): a call per module of a 100k-tensor checkpoint
    either = re.compile("|".join(f"(?:{g.pattern})" for g in globs)).match if globs else None

    def excluded(name: str) -> bool:
        return name in exact or name.startswith(prefixes) or (either is not None and either(name) is not None)
    return excluded


def modelopt_plan(qcfg: dict, hf_quant: dict | None, notes: list, qc_key: str) -> QuantPlan:
    if hf_quant is not None:
        nested = isinstance(hf_quant.get("quantization"), dict)
        q = hf_quant["quantization"] if nested else hf_quant
        where = Where(notes, "hf_quant_config.json", "quantization" if nested else "")
        producer = hf_quant.get("producer")
        producer_version = producer.get("version") if isinstance(producer, dict) else None
    else:
        q = qcfg
        where = Where(notes, "config.json", qc_key)
        producer = qcfg.get("producer")
        producer_version = producer.get("version") if isinstance(producer, dict) else None
    algo = str(q.get("quant_algo") or qcfg.get("quant_algo") or "").upper()
    excludes = str_list(q.get("exclude_modules") or qcfg.get("ignore") or qcfg.get("exclude_modules"))
    is_excluded = _excluder(excludes)
    kv = q.get("kv_cache_quant_algo")
    if kv is None:
        kv = qcfg.get("kv_cache_quant_algo")
    if kv is None and isinstance(qcfg.get("kv_cache_scheme"), (dict, str)):
        kv = qcfg["kv_cache_scheme"]
    plan = QuantPlan(producer="modelopt", quant_method=algo or "modelopt", raw=hf_quant or qcfg,
                     kv_cache_raw=kv, notes=notes)
    if producer_version:
        plan.notes.append(("producer", f"modelopt {producer_version}"))
    layers = q.get("quantized_layers") or qcfg.get("quantized_layers")
    layers = layers if isinstance(layers, dict) else None
    plan.declared_layers = tuple(layers or ())
    if algo == "MIXED_PRECISION" or layers:
        table: dict[str, tuple[WeightQuant, ActQuant, str]] = {}
        for lname, entry in (layers or {}).items():
            if not isinstance(entry, dict):
                continue
            sub = str(entry.get("quant_algo") or "")
            spec = modelopt_algo_spec(sub, entry, where.sub(f"quantized_layers[{lname!r}]"))
            if spec is None:
                plan.notes.append(("unknown-quant-algo", f"quantized_layers[{lname!r}]: unknown quant_algo {sub!r}"))
                continue
            table[lname] = (spec[0], spec[1], sub.upper())
        _check_modelopt_groups(qcfg, table, plan)

        def resolve(name: str, role: str) -> Spec | None:
            hit = table.get(name)
            if hit is None:
                parts = name.split(".")
                for i in range(len(parts) - 1, 0, -1):   # container keys, e.g. "...mlp.experts"
                    hit = table.get(".".join(parts[:i]))
                    if hit is not None:
                        break
            if hit is None or is_excluded(name):
                return None
            return Spec(hit[0], hit[1], f"quantized_layers {hit[2]}")

        plan._resolver = resolve
        return plan
    spec = modelopt_algo_spec(algo, q if isinstance(q, dict) else {}, where)
    if spec is None:
        unknown = unknown_plan(q if isinstance(q, dict) else {}, algo or None,
                                f"ModelOpt quant_algo {algo or None!r}")
        plan.producer, plan._resolver, plan.format_note = "unknown", unknown._resolver, unknown.format_note
        plan.notes.append(("unknown-quant-algo", f"ModelOpt quant_algo {algo or None!r} is not known: the linear "
                                                 "layers are UNKNOWN; sizes assume 16-bit weights, an upper bound"))
        return plan

    uniform = Spec(spec[0], spec[1], f"quant_algo {algo}")      # frozen: one for every module

    def resolve_uniform(name: str, role: str) -> Spec | None:
        if role not in LINEAR_ROLES and role not in ("mtp", "vision", "other"):
            return None
        if is_excluded(name):
            return None
        return uniform

    plan._resolver = by_pattern(resolve_uniform, *excludes)
    return plan


def _check_modelopt_groups(qcfg: dict, table: dict, plan: QuantPlan) -> None:
    """Flag config_groups that disagree with quantized_layers (nvidia/Qwen3.6-35B-A3B-NVFP4, §6 E5b)."""
    groups = qcfg.get("config_groups")
    if not isinstance(groups, dict):
        return
    for gname, g in groups.items():
        if not isinstance(g, dict):
            continue
        ia = g.get("input_activations")
        declared_a4 = isinstance(ia, dict) and ia.get("num_bits") == 4
        targets = g.get("targets")
        for t in targets if isinstance(targets, list) else []:
            hit = table.get(t) if isinstance(t, str) else None
            if hit and declared_a4 and hit[1].format == "none":
                plan.notes.append((
                    "modelopt-config-groups-contradict",
                    f"config.json {gname} declares 4-bit activations for {t} but quantized_layers says {hit[2]};"
                    " quantized_layers is used"))
                return


_KV_DTYPES = {  # spelling -> (dtype name, words); ModelOpt kv_cache_quant_algo (quant_utils.py:438-462),
    # compressed-tensors kv_cache_scheme, HF fp8 / Quark spellings
    "fp8": ("fp8", "FP8 E4M3"), "fp8_e4m3": ("fp8", "FP8 E4M3"), "float8_e4m3fn": ("fp8", "FP8 E4M3"),
    "fp8_e5m2": ("fp8", "FP8 E5M2"), "static": ("fp8", "FP8 E4M3"),
    "int8": ("int8", "INT8"), "nvfp4": ("nvfp4", "NVFP4 (E2M1 + E4M3 scale per 16)"),
    "nvfp4_affine": ("nvfp4", "NVFP4 affine (E2M1 + E4M3 scale per 16, with a bias)"),
}


def kv_words(kv) -> tuple[str | None, str]:
    """(dtype name, words) of a KV-cache declaration in any producer's spelling."""
    if kv is None:
        return None, ""
    if isinstance(kv, str):
        hit = _KV_DTYPES.get(kv.strip().lower())
        if hit is None:
            return kv.lower(), f"{kv} (a spelling the advisor does not know)"
        spelled = f" (declared as {kv!r})" if kv.strip().lower() == "static" else ""
        return hit[0], f"{hit[1]}, static per-tensor scales (k_scale / v_scale){spelled}"
    if isinstance(kv, dict):
        name = _kv_name(kv)
        bits, typ = kv.get("num_bits"), kv.get("type")
        known: dict[tuple[str | None, Any], str] = {("fp8", "float"): "FP8 E4M3", ("int8", "int"): "INT8"}
        what = known.get((name, typ), f"{typ} {bits}-bit")
        if name == "nvfp4":
            what = "NVFP4 (E2M1 + E4M3 scale per 16)"
        gran = {"tensor": "per-tensor", "channel": "per-channel", "attn_head": "per-head", "head": "per-head",
                "group": "per-group", "token": "per-token"}.get(str(kv.get("strategy") or "tensor"), "per-tensor")
        mode = "dynamic" if kv.get("dynamic") is True else "static"
        return name, f"{what}, {mode} {gran} scales"
    return str(kv), str(kv)


def _kv_name(kv) -> str | None:
    if kv is None:
        return None
    if isinstance(kv, str):
        return kv.lower()
    if isinstance(kv, dict):
        bits, typ = kv.get("num_bits"), kv.get("type")
        if bits == 8:
            return "int8" if typ == "int" else "fp8"
        if bits == 4:
            return "nvfp4" if typ == "float" else "int4"
        return f"{typ}{bits}"
    return str(kv)

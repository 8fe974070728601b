"""Formats the kernel rules do not serve (EXL2/EXL3, MLX, HQQ, AQLM, BitNet, GGUF-style methods,
torchao) and quant methods the advisor does not know: named and sized, never taken for BF16."""

from __future__ import annotations

from typing import TypeGuard

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.quant_plan import (DECODER_LINEAR, MXFP4_WEIGHT, QuantPlan, Spec, int_or, not_converted,
                                           nvfp4_weight, str_list)
from advisor.checkpoint.roles import LINEAR_ROLES


def _skip_list(qcfg: dict, *keys: str) -> list[str]:
    return [x for k in keys for x in str_list(qcfg.get(k))]


def _weight_only_plan(producer: str, method: str, qcfg: dict, w: WeightQuant, note: str, *,
                      skip: list[str], act: ActQuant = ActQuant(), head: WeightQuant | None = None,
                      roles: frozenset = DECODER_LINEAR | frozenset({"expert"})) -> QuantPlan:
    """Every linear layer of the decoder in one format (lm_head too when ``head`` is given)."""
    plan = QuantPlan(producer=producer, quant_method=method, raw=qcfg, format_note=note)

    def resolve(name: str, role: str) -> Spec | None:
        if role == "lm_head" and head is not None and not not_converted(name, skip):
            return Spec(head, ActQuant(), f"quant_method {method} (head)")
        if role not in roles or not_converted(name, skip):
            return None
        return Spec(w, act, f"quant_method {method}")

    plan._resolver = resolve
    return plan


def _bits_text(b) -> str:
    return f"{b:g}" if isinstance(b, (int, float)) and not isinstance(b, bool) else "?"


def _exl_plan(qcfg: dict, method: str) -> QuantPlan:
    """ExLlamaV2 (exl2) / ExLlamaV3 (exl3): a target average of `bits` per weight across the decoder
    (scales included) and `head_bits` for lm_head (exllamav2 conversion/compile.py writes
    quantization_config {quant_method, version, bits, head_bits, calibration})."""
    bits, head = qcfg.get("bits"), qcfg.get("head_bits")
    bpw = float(bits) if _is_num(bits) and 0 < bits <= 16 else 16.0
    hbw = float(head) if _is_num(head) and 0 < head <= 16 else None
    fmt = method.lower()
    w = WeightQuant(fmt, max(1, round(bpw)), "group", bpw=bpw)
    h = WeightQuant(fmt, max(1, round(hbw)), "group", bpw=hbw) if hbw else None
    note = f"{method.upper()}, {_bits_text(bits)} bits per weight" + (f" (lm_head {_bits_text(head)} bits)" if hbw
                                                                     else "")
    return _weight_only_plan(fmt, fmt, qcfg, w, note, skip=[], head=h)


def _is_num(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def mlx_plan(q: dict, key: str) -> QuantPlan:
    """MLX (mlx-lm convert): `quantization: {group_size, bits[, mode]}` (older) or the same under
    quantization_config (newer); per-module entries override (a dict) or exclude (false) a module
    (mlx_lm/utils.py quantize_model / class_predicate)."""
    bits = int_or(q.get("bits")) or 4
    gs = int_or(q.get("group_size")) or 64
    mode = str(q.get("mode") or "affine")
    per = {k: v for k, v in q.items() if isinstance(v, (dict, bool)) and "." in k}
    w = _mlx_weight(mode, bits, gs)
    note = f"MLX {mode} {bits}-bit, group {gs}" + (f", {len(per)} per-module overrides" if per else "")
    plan = QuantPlan(producer="mlx", quant_method=f"mlx {mode}", raw=q, format_note=note)

    def resolve(name: str, role: str) -> Spec | None:
        if role in ("norm", "conv", "router"):
            return None
        o = per.get(name)
        if o is False:
            return None
        if isinstance(o, dict):
            return Spec(_mlx_weight(str(o.get("mode") or mode), int_or(o.get("bits")) or bits,
                                    int_or(o.get("group_size")) or gs), ActQuant(),
                        f"{key}[{name!r}]")
        if role not in LINEAR_ROLES | {"embed", "mtp", "other"}:
            return None
        return Spec(w, ActQuant(), key)           # mlx quantizes the embedding and lm_head too

    plan._resolver = resolve
    return plan


def _mlx_weight(mode: str, bits: int, gs: int) -> WeightQuant:
    if mode == "mxfp4":
        return MXFP4_WEIGHT
    if mode == "nvfp4":
        return nvfp4_weight(16)
    return WeightQuant("mlx_affine", bits, "group", group_size=gs, symmetric=False)


def foreign_plan(method: str, qcfg: dict) -> QuantPlan | None:
    """Producers whose formats the engines' kernel rules do not cover, or cover under another name."""
    if method in ("exl2", "exl3"):
        return _exl_plan(qcfg, method)
    if method == "bitnet":
        # transformers integrations/bitnet.py: ternary weights packed 4 per uint8 + a weight_scale,
        # activations quantized to int8 per token
        w = WeightQuant("ternary", 2, "tensor", symmetric=True, packing="uint8-4-per-byte", bpw=None)
        return _weight_only_plan("bitnet", "bitnet", qcfg, w, "BitNet ternary weights (1.58 bits, stored 2-bit), "
                                 "int8 activations", skip=_skip_list(qcfg, "modules_to_not_convert"),
                                 act=ActQuant("int8", dynamic=True, granularity="token"))
    if method == "hqq":
        wq = (qcfg.get("quant_config") or {}).get("weight_quant_params") if isinstance(
            qcfg.get("quant_config"), dict) else None
        wq = wq if isinstance(wq, dict) else qcfg
        bits = int_or(wq.get("nbits")) or 4
        gs = int_or(wq.get("group_size")) or 64
        w = WeightQuant("hqq", bits, "group", group_size=gs, symmetric=False)
        return _weight_only_plan("hqq", "hqq", qcfg, w, f"HQQ {bits}-bit, group {gs}",
                                 skip=_skip_list(qcfg, "skip_modules", "modules_to_not_convert"))
    if method == "aqlm":
        ig = int_or(qcfg.get("in_group_size")) or 8
        og = int_or(qcfg.get("out_group_size")) or 1
        nc = int_or(qcfg.get("num_codebooks")) or 1
        nb = int_or(qcfg.get("nbits_per_codebook")) or 16
        bpw = nc * nb / (ig * og)
        w = WeightQuant("aqlm", max(1, round(bpw)), "group", group_size=ig * og, block=(nc, nb))
        return _weight_only_plan("aqlm", "aqlm", qcfg, w, f"AQLM {nc}x{nb} codebooks over {ig}x{og} groups "
                                 f"({bpw:g} bits per weight + codebooks)",
                                 skip=_skip_list(qcfg, "linear_weights_not_to_quantize"))
    if method == "eetq":
        # EETQ: int8 weights per output channel, fp16 activations (transformers integrations/eetq.py)
        w = WeightQuant("int8", 8, "channel", symmetric=True)
        return _weight_only_plan("eetq", "eetq", qcfg, w, "EETQ int8 weight-only",
                                 skip=_skip_list(qcfg, "modules_to_not_convert"))
    if method == "fbgemm_fp8":
        # transformers integrations/fbgemm_fp8.py: FP8 weights per channel, activations per token (dynamic)
        w = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True)
        return _weight_only_plan("fbgemm_fp8", "fbgemm_fp8", qcfg, w, "FBGEMM FP8, per-channel weights, "
                                 "dynamic per-token activations", skip=_skip_list(qcfg, "modules_to_not_convert"),
                                 act=ActQuant("fp8_e4m3", dynamic=True, granularity="token"))
    if method == "smooth_quant":
        # LMDeploy `lite smooth_quant`: int8 weights per channel, int8 activations per token
        w = WeightQuant("int8", 8, "channel", symmetric=True)
        return _weight_only_plan("smooth_quant", "smooth_quant", qcfg, w, "LMDeploy SmoothQuant W8A8 int8",
                                 skip=_skip_list(qcfg, "modules_to_not_convert", "ignore"),
                                 act=ActQuant("int8", dynamic=True, granularity="token"))
    if method == "torchao":
        return _torchao_plan(qcfg)
    return None


def _torchao_plan(qcfg: dict) -> QuantPlan | None:
    """transformers TorchAoConfig: quant_type a string (older) or {"default": {"_type": ...Config, "_data": {..}}}."""
    qt = qcfg.get("quant_type")
    kind: str = ""
    data: dict = {}
    if isinstance(qt, str):
        kind, kwargs = qt, qcfg.get("quant_type_kwargs")
        data = kwargs if isinstance(kwargs, dict) else {}
    elif isinstance(qt, dict):
        default = qt.get("default")
        entry = default if isinstance(default, dict) else next((v for v in qt.values() if isinstance(v, dict)), {})
        kind, given = str(entry.get("_type") or ""), entry.get("_data")
        data = given if isinstance(given, dict) else {}
    k = kind.lower().replace("_", "")
    gs = int_or(data.get("group_size")) or 128
    if "int4weightonly" in k or "int4wo" in k:
        w, a, what = WeightQuant("int4", 4, "group", group_size=gs, symmetric=False), ActQuant(), "int4 weight-only"
    elif "int8weightonly" in k:
        w, a, what = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant(), "int8 weight-only"
    elif "int8dynamicactivationint8weight" in k:
        w, a = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=True, granularity="token")
        what = "int8 dynamic activations, int8 weights"
    elif "float8" in k and "weightonly" in k:
        w, a, what = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True), ActQuant(), "float8 weight-only"
    elif "float8" in k:
        w, a = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True), ActQuant("fp8_e4m3", dynamic=True,
                                                                             granularity="token")
        what = "float8 dynamic activations, float8 weights"
    else:
        return None
    return _weight_only_plan("torchao", "torchao", qcfg, w, f"torchao {what} ({kind})",
                             skip=_skip_list(qcfg, "modules_to_not_convert"), act=a)


def unknown_plan(qcfg: dict, method: str | None, found: str) -> QuantPlan:
    """Quantization keys the advisor cannot read: the linear layers are UNKNOWN, never a confident 16-bit."""
    w = WeightQuant("unknown", 16, "unknown")
    plan = _weight_only_plan("unknown", method or "unknown", qcfg, w, f"UNKNOWN ({found})", skip=[])
    plan.producer = "unknown"
    return plan

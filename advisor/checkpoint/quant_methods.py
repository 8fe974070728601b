"""The transformers-native quantization methods: fp8 (block or tensor), GPTQ / AWQ / AutoRound,
bitsandbytes, gpt-oss mxfp4 and w8a8_int8."""

from __future__ import annotations

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.quant_plan import (DECODER_LINEAR, MXFP4_WEIGHT, QuantPlan, Spec, Where, by_pattern, int_or,
                                           not_converted, str_list)
from advisor.checkpoint.roles import LINEAR_ROLES


def fp8_plan(qcfg: dict, notes: list, qc_key: str) -> QuantPlan:
    block = qcfg.get("weight_block_size")
    scheme = str(qcfg.get("activation_scheme") or "dynamic")
    valid_block = isinstance(block, list) and len(block) == 2 and all(int_or(b, 0) > 0 for b in block)
    if block is not None and not valid_block:
        Where(notes, "config.json", qc_key).bad(
            "weight_block_size", block, "not a pair of positive block sizes [rows, cols]",
            "the advisor assumed per-tensor FP8 scales (the tensor headers show the real ones)")
    if valid_block and isinstance(block, list):
        w = WeightQuant("fp8_e4m3", 8, "block", block=(int(block[0]), int(block[1])), symmetric=True)
        a = ActQuant("fp8_e4m3", dynamic=scheme != "static",
                     granularity="group" if scheme != "static" else "tensor",
                     group_size=int(block[1]) if scheme != "static" else None)
    else:
        w = WeightQuant("fp8_e4m3", 8, "tensor", symmetric=True)
        a = ActQuant("fp8_e4m3", dynamic=scheme != "static", granularity="token" if scheme != "static" else "tensor")
    skip = str_list(qcfg.get("modules_to_not_convert"))
    plan = QuantPlan(producer="fp8", quant_method="fp8", raw=qcfg, kv_cache_raw=qcfg.get("kv_cache_scheme"),
                     notes=notes)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in DECODER_LINEAR | {"mtp", "other"} or not_converted(name, skip):
            return None
        return Spec(w, a, "quant_method fp8")

    plan._resolver = by_pattern(resolve, *skip)
    return plan


def gptq_awq_plan(qcfg: dict, method: str, notes: list, where: tuple[str, str]) -> QuantPlan:
    w_at = Where(notes, *where)
    bkey = "bits" if "bits" in qcfg else "w_bit"
    bits = qcfg.get(bkey, 4)
    if int_or(bits, 0) not in range(1, 9):
        w_at.bad(bkey, bits, "not a bit width of 1..8", "the advisor assumed 4")
        bits = 4
    gkey = "group_size" if "group_size" in qcfg else "q_group_size"
    gs = qcfg.get(gkey, 128)
    if int_or(gs) is None or not (gs > 0 or gs == -1):
        # -1 means per output channel (GPTQ/AWQ); 0 and other negatives are nothing a quantizer writes
        w_at.bad(gkey, gs, "not a valid group size (a positive size, or -1 for per channel)",
                 "the advisor assumed 128")
        gs = 128
    if method.startswith("awq"):
        sym = not qcfg.get("zero_point", True)
        packing = "int32-8-per-word-awq-order"
    else:
        sym = bool(qcfg.get("sym", True))
        packing = f"int32-{32 // bits}-per-word" if bits in (2, 4, 8) else "int32-packed"
    fmt = f"int{bits}" if sym else f"uint{bits}"
    w = WeightQuant(fmt, bits, "channel" if gs in (-1, 0) else "group", group_size=None if gs in (-1, 0) else gs,
                    symmetric=sym, packing=packing,
                    act_order=bool(qcfg.get("desc_act")) if not method.startswith("awq") else None)
    skip = str_list(qcfg.get("modules_to_not_convert"))
    inside = qcfg.get("modules_in_block_to_quantize")
    flat_inside = None
    if isinstance(inside, list):
        flat_inside = [x for grp in inside for x in (grp if isinstance(grp, list) else [grp]) if isinstance(x, str)]
    plan = QuantPlan(producer="gptq" if method.startswith("gptq") else "awq", quant_method=method, raw=qcfg,
                     notes=notes)

    def resolve(name: str, role: str) -> Spec | None:
        # GPTQ/AWQ quantize the Linear layers inside decoder blocks; routers and lm_head stay 16-bit.
        if role not in DECODER_LINEAR or not_converted(name, skip):
            return None
        if flat_inside is not None and not any(name.endswith("." + x) or ("." + x + ".") in name for x in flat_inside):
            return None
        return Spec(w, ActQuant(), f"quant_method {method}")

    plan._resolver = by_pattern(resolve, *skip, *(flat_inside or ()))
    return plan


def bnb_plan(qcfg: dict) -> QuantPlan:
    skip = str_list(qcfg.get("llm_int8_skip_modules")) + ["lm_head"]
    if qcfg.get("load_in_8bit") and not qcfg.get("load_in_4bit"):
        # LLM.int8 multiplies int8 x int8 (activations quantized per row, outliers kept in fp16).
        w, a = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=True, granularity="token")
    else:
        qt = str(qcfg.get("bnb_4bit_quant_type") or "fp4")
        w = WeightQuant("nf4" if qt == "nf4" else "fp4", 4, "group", group_size=64, packing="uint8-2-per-byte")
        a = ActQuant()
    plan = QuantPlan(producer="bitsandbytes", quant_method="bitsandbytes", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in LINEAR_ROLES | {"other", "mtp"} or not_converted(name, skip):
            return None
        return Spec(w, a, "quant_method bitsandbytes")

    plan._resolver = by_pattern(resolve, *skip)
    return plan


def mxfp4_plan(qcfg: dict) -> QuantPlan:
    skip = str_list(qcfg.get("modules_to_not_convert"))
    plan = QuantPlan(producer="mxfp4", quant_method="mxfp4", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        # gpt-oss: only the MoE experts are MXFP4 (transformers integrations/mxfp4.py).
        if role != "expert" or not_converted(name, skip):
            return None
        return Spec(MXFP4_WEIGHT, ActQuant(), "quant_method mxfp4")

    plan._resolver = by_pattern(resolve, *skip)
    return plan


def w8a8_int8_plan(qcfg: dict) -> QuantPlan:
    """SGLang's own `w8a8_int8` format: INT8 weights per output channel (symmetric, static) and INT8
    activations per token (dynamic) for every linear and MoE layer not in `ignore`
    (sglang/srt/layers/quantization/w8a8_int8.py:64-119@0.5.23)."""
    w = WeightQuant("int8", 8, "channel", symmetric=True)
    a = ActQuant("int8", dynamic=True, granularity="token")
    skip = str_list(qcfg.get("ignore"))
    plan = QuantPlan(producer="w8a8_int8", quant_method="w8a8_int8", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in DECODER_LINEAR | {"expert"} or not_converted(name, skip):
            return None
        return Spec(w, a, "quant_method w8a8_int8")

    plan._resolver = by_pattern(resolve, *skip)
    return plan

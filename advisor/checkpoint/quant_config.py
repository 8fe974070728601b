"""What a checkpoint's quantization config declares, per module.

One :class:`QuantPlan` per checkpoint answers ``spec_for(name, role)``: the declared weight and
activation format of a module, or None when the module is left unquantized (ignored, excluded,
outside the quantized set). Sources and rules: shared/research/checkpoint-formats.md §2-§5.
This module picks the reader (quant_modelopt, quant_compressed_tensors, quant_methods,
quant_foreign) the way the engines do; quant_plan holds what they build.

For ModelOpt the precision comes from ``quant_algo`` / ``quantized_layers``, never from the
``config_groups`` it also writes: real exports contradict themselves there (§2.3, §6 E5b).
"""

from __future__ import annotations

from advisor.checkpoint.model import ActQuant
from advisor.checkpoint.quant_compressed_tensors import ct_plan
from advisor.checkpoint.quant_foreign import foreign_plan, mlx_plan, unknown_plan
from advisor.checkpoint.quant_methods import bnb_plan, fp8_plan, gptq_awq_plan, mxfp4_plan, w8a8_int8_plan
from advisor.checkpoint.quant_modelopt import kv_words, modelopt_plan
from advisor.checkpoint.quant_plan import (CONFLICT, INVALID, MXFP4_WEIGHT, NVFP4_ACT, QuantPlan, Spec, not_converted,
                                           nvfp4_weight, show_value, str_list)


def build_plan(config: dict | None, hf_quant: dict | None, quantize_config: dict | None = None) -> QuantPlan:
    """The plan of a checkpoint (see _build_plan), with its KV-cache quantization in words."""
    plan = _build_plan(config, hf_quant, quantize_config)
    plan = _deepseek_v4(config, plan)
    plan.kv_cache, plan.kv_detail = kv_words(plan.kv_cache_raw)
    return plan


def _build_plan(config: dict | None, hf_quant: dict | None, quantize_config: dict | None = None) -> QuantPlan:
    """The plan from config.json (top level or nested text_config), hf_quant_config.json and
    quantize_config.json (older GPTQ repos).

    Precedence follows the engines: vLLM builds the quantization config from config.json's
    ``quantization_config`` and opens the method's own file (hf_quant_config.json for ModelOpt,
    quantize_config.json for GPTQ) only when config.json has none (vllm
    model_executor/model_loader/weight_utils.py get_quant_config). ModelOpt's hf_quant_config.json
    still supplies the per-layer detail when both files agree on the algorithm.
    """
    notes: list[tuple[str, str]] = []
    qcfg, qc_key = None, "quantization_config"
    if isinstance(config, dict):
        qcfg = config.get("quantization_config")
        if qcfg is not None and not isinstance(qcfg, dict):
            notes.append((INVALID, f"config.json: quantization_config is {show_value(qcfg)}, not an object: ignored; "
                                   "module formats come from the tensor headers (16-bit where they show none)"))
            qcfg = None
        if qcfg is None:
            for key in ("text_config", "language_config", "llm_config"):
                sub = config.get(key)
                if isinstance(sub, dict) and isinstance(sub.get("quantization_config"), dict):
                    qcfg, qc_key = sub["quantization_config"], f"{key}.quantization_config"
                    break
    if hf_quant is not None and not isinstance(hf_quant, dict):
        hf_quant = None
    if isinstance(config, dict) and qcfg is None and isinstance(config.get("quantization"), dict) and (
            "bits" in config["quantization"] or "group_size" in config["quantization"]):
        return mlx_plan(config["quantization"], "quantization")          # older mlx-lm: top-level quantization
    if qcfg is not None and "quant_method" not in qcfg and not {"config_groups", "quant_algo", "producer"} & set(
            qcfg) and ("bits" in qcfg and "group_size" in qcfg) and quantize_config is None:
        return mlx_plan(qcfg, qc_key)                                      # newer mlx-lm: no quant_method
    method = str((qcfg or {}).get("quant_method") or "").lower()
    producer = (qcfg or {}).get("producer")
    # ModelOpt 0.31 wrote no quant_method into config.json, only quant_algo and producer (§6 E2)
    is_modelopt = method.startswith("modelopt") or (not method and qcfg is not None and (
        "quant_algo" in qcfg or (isinstance(producer, dict) and producer.get("name") == "modelopt")))
    if hf_quant is not None and qcfg is not None:
        hf_algo = _hf_quant_algo(hf_quant)
        # a ModelOpt quant_algo in config.json is compared as such, whatever quant_method says
        # (nvidia/DeepSeek-V4-Flash-NVFP4 writes quant_method "fp8" next to quant_algo MIXED_PRECISION)
        cfg_algo = str(qcfg.get("quant_algo") or "").upper()
        if (cfg_algo and hf_algo and cfg_algo != hf_algo) or (not cfg_algo and method and not is_modelopt):
            notes.append((CONFLICT,
                          f"config.json {qc_key} declares {cfg_algo or 'quant_method ' + method} "
                          f"but hf_quant_config.json declares quant_algo {hf_algo or None}: engines read config.json "
                          "(vLLM opens hf_quant_config.json only when config.json has no quantization_config), "
                          "so the advisor follows config.json"))
            hf_quant = None
    if quantize_config is not None and (qcfg is not None or hf_quant is not None):
        qc_method = str(quantize_config.get("quant_method") or "gptq").lower()
        if qcfg is None or qc_method != method or any(
                k in quantize_config and k in qcfg and quantize_config[k] != qcfg[k] for k in ("bits", "group_size")):
            declared = (f"{qc_key} ({method or qcfg.get('quant_algo') or 'no quant_method'})" if qcfg is not None
                        else f"hf_quant_config.json quant_algo {_hf_quant_algo(hf_quant) or None}")
            src = "config.json" if qcfg is not None else "hf_quant_config.json"
            notes.append((CONFLICT,
                          f"quantize_config.json declares {qc_method} {_brief(quantize_config)} but {src} declares "
                          f"{declared}: engines read {src} and ignore quantize_config.json, so the advisor does too"))
    if hf_quant is not None or is_modelopt:
        return modelopt_plan(qcfg or {}, hf_quant, notes, qc_key)
    gptq_where = ("config.json", qc_key)
    if qcfg is None and isinstance(quantize_config, dict):
        qcfg, method = quantize_config, str(quantize_config.get("quant_method") or "gptq").lower()
        gptq_where = ("quantize_config.json", "")
    if qcfg is None:
        return QuantPlan(producer="none", notes=notes)
    if method == "compressed-tensors" or (not method and "config_groups" in qcfg):
        return ct_plan(qcfg, notes, qc_key)
    if method == "fp8":
        return fp8_plan(qcfg, notes, qc_key)
    if method in ("gptq", "gptq_marlin", "awq", "awq_marlin", "auto-round", "autoround"):
        return gptq_awq_plan(qcfg, method, notes, gptq_where)
    if method == "bitsandbytes":
        plan = bnb_plan(qcfg)
    elif method == "mxfp4":
        plan = mxfp4_plan(qcfg)
    elif method == "w8a8_int8":
        plan = w8a8_int8_plan(qcfg)
    else:
        foreign = foreign_plan(method, qcfg)
        if foreign is None:
            keys = ", ".join(sorted(str(k) for k in qcfg)[:6])
            found = f"quant_method {method!r}" if method else f"quantization_config keys {keys}"
            foreign = unknown_plan(qcfg, method or None, found)
            foreign.notes.append(("unknown-quant-method",
                                  f"quantization_config declares {found}, a format the advisor does not know: the "
                                  "linear layers are UNKNOWN (tensor headers decide when present); sizes assume "
                                  "16-bit weights, an upper bound"))
        plan = foreign
    plan.notes[:0] = notes
    return plan


def _deepseek_v4(config: dict | None, plan: QuantPlan) -> QuantPlan:
    """DeepSeek V4 `quant_method: fp8` checkpoints: FP8 block linears; routed experts per `expert_dtype`
    (default "fp4": MXFP4 weights, MXFP8 dynamic activations) unless `moe_quant_algo: NVFP4` makes them
    ModelOpt NVFP4 (vllm models/deepseek_v4/quant_config.py:59-70, 118-127, 214-232@0.33.0)."""
    if not isinstance(config, dict) or str(config.get("model_type") or "") != "deepseek_v4":
        return plan
    qcfg = config.get("quantization_config")
    if not isinstance(qcfg, dict) or str(qcfg.get("quant_method") or "").lower() != "fp8":
        return plan
    base = fp8_plan(qcfg, plan.notes, "quantization_config")
    base.kv_cache_raw = plan.kv_cache_raw
    moe_algo = str(qcfg.get("moe_quant_algo") or "").upper()
    expert = str(config.get("expert_dtype") or "fp4")
    if moe_algo == "NVFP4":
        exp = Spec(nvfp4_weight(16), NVFP4_ACT, "moe_quant_algo NVFP4 (ModelOpt NVFP4 experts)")
    elif expert == "fp4":
        exp = Spec(MXFP4_WEIGHT, ActQuant("fp8_e4m3", dynamic=True, granularity="group", group_size=32),
                   "expert_dtype fp4 (MXFP4 experts, MXFP8 activations)")
    else:
        return base
    skip = str_list(qcfg.get("modules_to_not_convert"))
    base_resolve = base._resolver

    def resolve(name: str, role: str) -> Spec | None:
        if role == "expert":
            return None if not_converted(name, skip) else exp
        return base_resolve(name, role) if base_resolve is not None else None

    base._resolver = resolve
    base.quant_method = f"fp8 + {'NVFP4' if moe_algo == 'NVFP4' else 'MXFP4'} experts"
    return base


def _hf_quant_algo(hf_quant: dict | None) -> str:
    q = (hf_quant or {}).get("quantization")
    return str((q if isinstance(q, dict) else hf_quant or {}).get("quant_algo") or "").upper()


def _brief(qc: dict) -> str:
    parts = [f"{k} {qc[k]}" for k in ("bits", "group_size") if k in qc]
    return f"({', '.join(parts)})" if parts else ""

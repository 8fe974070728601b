"""Compare what SGLang chose (one cached row: sglang_cache.py) with what `explain --engine sglang --json` says.

SGLang reports classes, flags and bound functions; the advisor names kernels. ``engine_kernel`` translates
one into the other: each branch below is read off SGLang 0.5.23's source (the class or function that
decides) and names the advisor kernel (profiles/engines/sglang-0.5.23.yaml) for that choice. A choice the
table does not know comes back as ``unmapped: ...`` and counts as a disagreement, so a new SGLang behaviour
cannot pass unnoticed.

A comparison row is (config, GPU, install, layer): the model level (does SGLang start the model, and with
which message when not), each dense and MoE layer SGLang built, and the attention backend.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

# sm -> the families SGLang's platform probes use
_FP8_BLOCK_FUNCS = {
    "deepgemm_w8a8_block_fp8_linear_with_fallback": "DeepGEMM block FP8 (JIT)",
    "flashinfer_gemm_w8a8_block_fp8_linear_with_fallback": "FlashInfer block FP8 GEMM",
    "cutlass_w8a8_block_fp8_linear_with_fallback": "CUTLASS block FP8 (sm_120)",
}
_FP4_BACKENDS = {          # fp4_utils.py Fp4GemmRunnerBackend values -> advisor kernels (ModelOpt W4A4 dense)
    "marlin": "Marlin FP4 (W4A16)",
    "flashinfer_cutedsl": "flashinfer_cutedsl (NVFP4 W4A4)",
    "flashinfer_cutlass": "flashinfer_cutlass (NVFP4 W4A4)",
}


@dataclass(frozen=True)
class Row:
    config: str
    sm: int
    mode: str
    layer: str            # "model", "attention", or the layer prefix SGLang built
    engine: str           # what SGLang did, in advisor words
    advisor: str          # what explain says
    agree: bool
    detail: str = ""


def engine_kernel(layer: dict, sm: int) -> str:
    """The advisor kernel name for one layer SGLang built (see module doc)."""
    if layer.get("error"):
        return f"refused: {layer['error']}"
    method, facts = layer.get("method", ""), layer.get("method_facts") or {}
    scheme, sfacts = layer.get("scheme", ""), layer.get("scheme_facts") or {}
    if layer["kind"] == "dense":
        return _dense(method, facts, scheme, sfacts, sm, layer)
    return _moe(method, facts, scheme, layer, sm)


# Fp8LinearMethod's MXFP8 dense backend (resolve_mxfp8_dense_gemm_backend, fp8_utils.py:834-889@0.5.23) and the
# function dispatch_w8a8_mxfp8_linear binds for it (fp8_utils.py:1008-1025); "unsupported" binds
# _unsupported_mxfp8_linear, which raises whenever it is called (fp8_utils.py:892-897).
_MXFP8_BACKENDS = {"flashinfer_cutedsl": "FlashInfer CuTe DSL mm_mxfp8 (MXFP8)",
                   "flashinfer_cutlass": "FlashInfer CUTLASS mm_mxfp8 (MXFP8)",
                   "deep_gemm": "DeepGEMM MXFP8 GEMM (JIT)", "unsupported": "no MXFP8 dense GEMM"}
_MXFP8_UNSUPPORTED = ("RuntimeError: No MXFP8 dense GEMM kernel is available on this device. MXFP8 dense linear "
                      "requires Blackwell (SM100/SM103/SM110/SM120) with FlashInfer, Hopper (SM90) with DeepGEMM, "
                      "or ROCm gfx95.")


def _dense(method, facts, scheme, sfacts, sm, layer) -> str:
    if method == "UnquantizedLinearMethod":
        return "UnquantizedLinearMethod (cuBLAS)"
    if method == "Fp8LinearMethod":                      # layers/quantization/fp8.py:505-552
        if facts.get("use_marlin"):
            return "Marlin FP8 (W8A16)"
        if facts.get("use_mxfp8") and not facts.get("convert_mxfp8_to_block"):   # fp8.py:539-541, 1327-1400
            backend = facts.get("mxfp8_dense_backend") or ""                      # fp8_utils.py:834-889
            return _MXFP8_BACKENDS.get(backend, f"unmapped: MXFP8 dense backend {backend!r}")
        if facts.get("block_quant"):
            fn = facts.get("w8a8_block_fp8_linear") or ""
            if fn in _FP8_BLOCK_FUNCS:
                return _FP8_BLOCK_FUNCS[fn]
            if fn == "triton_w8a8_block_fp8_linear":
                return "Triton w8a8_block_fp8_matmul (sm_11x)" if sm // 10 == 11 else "Triton w8a8_block_fp8_matmul"
            return f"unmapped: Fp8LinearMethod block function {fn!r}"
        return "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)" if facts.get("cutlass_fp8_supported") else \
            "unmapped: Fp8LinearMethod per-tensor without CUTLASS"
    if method == "ModelOptFp8LinearMethod":               # modelopt_quant.py:546-557, 644-688
        if facts.get("use_marlin"):
            return "Marlin FP8 (W8A16)"
        if facts.get("enable_flashinfer_bmm"):
            return "FlashInfer bmm_fp8 (per-tensor FP8)"
        return "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)" if facts.get("cutlass_fp8_supported") else \
            "unmapped: ModelOptFp8LinearMethod without CUTLASS"
    if method == "ModelOptFp4LinearMethod":               # the FP4 GEMM backend set at scheduler start
        return _FP4_BACKENDS.get(layer.get("_fp4_backend", ""), f"unmapped: FP4 backend {layer.get('_fp4_backend')!r}")
    if method == "ModelOptNvFp4A16LinearMethod":
        return "Marlin FP4 (W4A16)"
    if method in ("GPTQMarlinLinearMethod", "AWQMarlinLinearMethod"):
        return "gptq_marlin / awq_marlin"
    if method == "AWQLinearMethod":
        return "AWQ (awq_dequantize + torch.matmul)"
    if method == "W8A8Int8LinearMethod":
        return "sgl-kernel int8_scaled_mm (CUTLASS Sm75 branch, INT8 W8A8)" if sm < 80 else \
            "sgl-kernel int8_scaled_mm (CUTLASS, INT8 W8A8)"
    if method == "CompressedTensorsLinearMethod":
        return {
            "CompressedTensorsW8A16Fp8": "Marlin FP8 (CompressedTensorsW8A16Fp8)",
            "CompressedTensorsW4A16Fp4": "Marlin FP4 (CompressedTensorsW4A16Fp4)",
            "CompressedTensorsWNA16": "Marlin WNA16 (CompressedTensorsWNA16)",
            "CompressedTensorsW8A8Int8": "sgl-kernel int8_scaled_mm (CUTLASS, INT8 W8A8)",
            "CompressedTensorsW8A8Fp8": "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)",
        }.get(scheme) or (_FP4_BACKENDS.get(layer.get("_fp4_backend", ""), "unmapped")
                          if scheme == "CompressedTensorsW4A4Fp4"
                          else f"unmapped: compressed-tensors scheme {scheme!r}")
    return f"unmapped: linear method {method!r}"


def _moe(method, facts, scheme, layer, sm) -> str:
    runner = layer.get("runner_backend") or facts.get("_moe_runner_backend") or ""
    if method == "UnquantizedFusedMoEMethod":
        return {"triton": "triton fused_moe", "flashinfer_trtllm": "flashinfer_trtllm (BF16 MoE)",
                "flashinfer_cutlass": "flashinfer_cutlass (BF16 MoE)"}.get(
            runner, f"unmapped: unquantized MoE runner {runner!r}")
    if method == "ModelOptFp8MoEMethod":
        return {"triton": "triton fused_moe (FP8)", "flashinfer_trtllm": "flashinfer_trtllm (FP8 MoE)",
                "flashinfer_cutlass": "flashinfer_cutlass (FP8 MoE)"}.get(
            runner, f"unmapped: ModelOpt FP8 MoE runner {runner!r}")
    if method == "Fp8MoEMethod" or scheme == "CompressedTensorsW8A8Fp8MoE":
        if runner == "triton":
            return "triton fused_moe (FP8)"
        if runner == "flashinfer_trtllm":
            return "flashinfer_trtllm (FP8 MoE)"
        return f"unmapped: FP8 MoE runner {runner!r}"
    if method == "ModelOptNvFp4FusedMoEMethod":
        return {"marlin": "Marlin MoE (NVFP4 W4A16)", "flashinfer_trtllm": "flashinfer_trtllm (NVFP4 MoE)",
                "flashinfer_trtllm_routed": "flashinfer_trtllm_routed (NVFP4 MoE)",
                "flashinfer_cutlass": "flashinfer_cutlass (NVFP4 MoE)"}.get(
            runner, f"unmapped: NVFP4 MoE runner {runner!r}")
    if method == "Mxfp4MoEMethod":
        if runner == "triton_kernel":
            return "triton_kernels matmul_ogs (MXFP4 x BF16)"
        if runner == "flashinfer_mxfp4":
            return {10: "FlashInfer TRT-LLM-gen MXFP4 MoE (trtllm_fp4_block_scale_moe, MXFP8 activations)",
                    12: "FlashInfer CUTLASS MXFP4 MoE (cutlass_fused_moe, MXFP8 x MXFP4)"}.get(
                sm // 10, "FlashInfer CUTLASS MXFP4 x BF16 MoE (sm_90 mixed-input)")
        if runner in ("triton", "auto", ""):
            return "triton fused_moe on BF16 experts (MXFP4 upcast at load)"
        if runner == "marlin":
            return "Marlin MoE (MXFP4 W4A16)"
        return f"unmapped: MXFP4 MoE runner {runner!r}"
    if method == "Mxfp4FlashinferTrtllmMoEMethod":     # fp8.py:468-472@0.5.23 (FP4 experts of an fp8 config)
        return "FlashInfer TRT-LLM-gen MXFP4 MoE (trtllm_fp4_block_scale_moe, MXFP8 activations)"
    if method == "Mxfp4FlashinferCutlassMoEMethod":    # fp8.py:461-466; mxfp4_flashinfer_cutlass_moe.py:41-47@0.5.23
        return ("FlashInfer CUTLASS MXFP4 MoE (cutlass_fused_moe, MXFP8 x MXFP4)" if sm // 10 == 12
                else "FlashInfer CUTLASS MXFP4 x BF16 MoE (sm_90 mixed-input)")
    if scheme == "CompressedTensorsMxInt4MoE" and runner == "flashinfer_trtllm":
        # compressed_tensors.py:913-918, schemes/compressed_tensors_w4a4_mxint4_moe.py:341@0.5.23
        return "flashinfer_trtllm MxInt4 MoE (trtllm_mxint4_block_scale_moe, W4A16)"
    if scheme == "CompressedTensorsWNA16TritonMoE":
        return "Triton WNA16 MoE (CompressedTensorsWNA16TritonMoE)"
    if method in ("GPTQMarlinMoEMethod", "AWQMarlinMoEMethod") or scheme == "CompressedTensorsWNA16MoE":
        return "Marlin MoE (WNA16)"
    if method == "MoeWNA16Method":
        return "moe_wna16 (triton)"
    if method == "W8A8Int8MoEMethod":
        return "triton fused_moe (INT8 W8A8, per-channel)"
    return f"unmapped: MoE method {method!r} ({scheme or '-'}) runner {runner!r}"


def engine_runs(layer: dict) -> tuple[bool, str]:
    """Does the layer run: False with the message when SGLang refused it or its Triton kernel did not compile."""
    if layer.get("error"):
        return False, layer["error"]
    compiled = layer.get("triton_fp8_compile")
    if compiled and compiled != "ok":
        return False, compiled
    facts = layer.get("method_facts") or {}
    if layer.get("method") == "Fp8LinearMethod" and facts.get("use_mxfp8") and not facts.get("use_marlin") \
            and facts.get("mxfp8_dense_backend") == "unsupported":
        return False, _MXFP8_UNSUPPORTED      # the bound GEMM raises at the first forward (fp8_utils.py:892-897)
    return True, ""


_ATTN = {b: b for b in ("fa3", "fa4", "flashinfer", "triton", "trtllm_mha", "trtllm_mla", "dsa", "dsv4")}


def engine_attention(row: dict) -> str:
    sa = row.get("server_args") or {}
    # decode is where the KV cache is read every token: a model override that sets only the decode
    # backend (Kimi-K3, large-Hopper Qwen3-VL) names the kernel the advisor costs
    backend = sa.get("decode_attention_backend") or sa.get("attention_backend") or ""
    return _ATTN.get(backend, f"unmapped: attention backend {backend!r}")


def _norm_error(text: str) -> str:
    """A refusal's message without the exception class and the parts that name the GPU."""
    text = re.sub(r"^[A-Za-z_.]*(Error|Exception): ", "", (text or "").strip())
    return re.sub(r"\s+", " ", text)


def same_refusal(engine: str, advisor: str) -> bool:
    """The advisor quotes the engine's message (up to the list SGLang appends, which it shortens to [...])."""
    e, a = _norm_error(engine), _norm_error(advisor)
    head = e.split(" Must be one of")[0]
    return bool(head) and a.startswith(head[:80])


def _decision_for(decisions: list[dict], layer_class: str, module: str, scheme: str) -> dict | None:
    """The decision covering MODULE in SCHEME (one name can hold two groups: a quantized and a 16-bit one)."""
    for d in decisions:
        if d["layer_class"] == layer_class and d["checkpoint_scheme"] == scheme \
                and any(m.get("name") == module for m in d.get("modules") or ()):
            return d
    for d in decisions:   # a model-level outcome names every layer in the engine's view
        if d["layer_class"] == layer_class and any(m.get("name") == module for m in d.get("modules") or ()):
            return d
    return None


def compare(config: str, sm: int, mode: str, row: dict, explanation: dict, specs: dict[str, dict]) -> list[Row]:
    """Rows for one (config, GPU, install): the model level, each built layer, the attention backend."""
    out: list[Row] = []
    res = row["result"]
    decisions = explanation["decisions"]
    load = explanation.get("load") or {}
    stage = res.get("stage")
    same_error = all(d.get("error") == decisions[0].get("error") for d in decisions)
    advisor_refused = bool(load.get("refused")) or (bool(decisions) and all(not d["runs"] for d in decisions)
                                                    and same_error)
    adv_error = load.get("error") or (decisions[0].get("error") if decisions else "") or ""
    if stage in ("server_args", "model_config", "quant_config", "scheduler"):
        ok = advisor_refused and same_refusal(res.get("error", ""), adv_error)
        out.append(Row(config, sm, mode, "model", f"refused at {stage}: {res.get('error')}",
                       f"refused: {adv_error}" if advisor_refused else "starts", ok))
        return out
    if stage == "harness":
        out.append(Row(config, sm, mode, "model", f"harness error: {res.get('error')}", "-", False,
                       "the harness could not run SGLang's chain for this config"))
        return out
    out.append(Row(config, sm, mode, "model", "starts", f"refused: {adv_error}" if load.get("refused") else "starts",
                   not load.get("refused")))
    fp4 = (res.get("scheduler") or {}).get("fp4_gemm_backend", "")
    for layer in res.get("layers", []):
        spec = specs.get(layer["prefix"])
        if spec is None:
            continue
        layer = {**layer, "_fp4_backend": fp4}
        cls = "dense_linear" if layer["kind"] == "dense" else "moe_experts"
        d = _decision_for(decisions, cls, spec["module"], spec.get("scheme", ""))
        kernel = engine_kernel(layer, sm)
        runs, why = engine_runs(layer)
        if d is None:
            out.append(Row(config, sm, mode, layer["prefix"], kernel, "no decision covers " + spec["module"], False))
            continue
        if kernel.startswith("refused: "):
            ok = not d["runs"] and same_refusal(kernel[len("refused: "):], d.get("error") or "")
            out.append(Row(config, sm, mode, layer["prefix"], kernel, f"{d['kernel']} runs={d['runs']} "
                           f"error={d.get('error')}", ok))
            continue
        adv_crash = " ".join(w.get("text", "") for w in d.get("warnings") or ())
        ok = d["kernel"] == kernel and d["runs"] == runs and (runs or _norm_error(why) in adv_crash)
        out.append(Row(config, sm, mode, layer["prefix"], f"{kernel} runs={runs}" + (f" ({why})" if why else ""),
                       f"{d['kernel']} runs={d['runs']}", ok))
    attn = next((d for d in decisions if d["layer_class"] == "attention_kv"), None)
    if attn is not None:
        want = engine_attention(res)
        got = attn.get("kernel") or ""
        base = got.split(" (")[0]
        out.append(Row(config, sm, mode, "attention", want, got, base == want))
    return out


@dataclass(frozen=True)
class Accepted:
    """A listed difference: accepted (with the SGLang line that explains it) or open (an advisor rule still
    wrong, with what is known about the fix)."""

    config: tuple[str, ...]  # fnmatch patterns over config names (any one)
    sms: tuple[int, ...]     # () = every GPU
    mode: str                # "*" = both installs
    layer: str               # fnmatch pattern over the row's layer ("model", "attention", a prefix)
    reason: str
    source: str
    engine: str = "*"        # fnmatch pattern over what SGLang did (Row.engine)
    advisor: str = "*"       # fnmatch pattern over what explain says (Row.advisor)

    @classmethod
    def from_yaml(cls, e: dict) -> "Accepted":
        cfg = e["config"]
        return cls(config=tuple(cfg) if isinstance(cfg, list) else (cfg,), sms=tuple(e.get("gpus") or ()),
                   mode=e.get("install", "*"), layer=e.get("layer", "*"), reason=e["reason"],
                   source=e.get("source", ""), engine=e.get("engine", "*"), advisor=e.get("advisor", "*"))

    def covers(self, r: Row) -> bool:
        return (any(fnmatch.fnmatch(r.config, c) for c in self.config) and (not self.sms or r.sm in self.sms)
                and self.mode in ("*", r.mode) and fnmatch.fnmatch(r.layer, self.layer)
                and fnmatch.fnmatch(r.engine, self.engine) and fnmatch.fnmatch(r.advisor, self.advisor))

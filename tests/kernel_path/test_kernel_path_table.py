"""Table-driven kernel choices: scheme x arch x engine x install options.

Every expected kernel comes from reading the engine source at the encoded version (see the
`source` of each rule in profiles/engines/ and /work/shared/research/vllm-kernel-selection.md §1.4,
§3.4, §4; engines-launch.md §1.2, §2.3).
"""

from __future__ import annotations

import pytest

from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

from kernel_path_builders import checkpoint, gpu

NO_FI = InstallOptions(flashinfer=False)
FI_NO_CUBIN = InstallOptions(flashinfer_cubin=False, nvcc_ninja=False)
FI_JIT = InstallOptions(flashinfer_cubin=False, nvcc_ninja=True)
NO_HUMMING = InstallOptions(humming=False)
NO_DEEPGEMM = InstallOptions(deepgemm=False)
D = InstallOptions()


def kv(dtype: str, **kw) -> InstallOptions:
    return InstallOptions(kv_cache_dtype=dtype, **kw)


# (engine, preset, gpu, options, layer_class, kernel (None: does not run), effective scheme, extra)
# extra: {"moe": True} builds an MoE checkpoint; "warn": substring of a printed warning;
#        "act": activation dtype; "mma": MMA class; "error": substring of the error.
CASES = [
    # ---- vLLM NVFP4 W4A16 (NVFP4A16)
    ("vllm", "nvfp4-a16", "rtx-5090", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4",
     {"warn": "does not have native support for FP4", "mma": "hmma_bf16"}),
    ("vllm", "nvfp4-a16", "gb10", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "b200", D, "dense_linear", "FlashInferCuteDslNvFp4W4A16LinearKernel", "W4A16-NVFP4",
     {"mma": "tcgen05_bf16", "act": "bf16"}),
    ("vllm", "nvfp4-a16", "b300", D, "dense_linear", "FlashInferCuteDslNvFp4W4A16LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "b200", NO_FI, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "b200", FI_NO_CUBIN, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4",
     {"warn": "FlashInfer kernels are disabled"}),
    ("vllm", "nvfp4-a16", "b200", FI_JIT, "dense_linear", "FlashInferCuteDslNvFp4W4A16LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "h100", D, "dense_linear", "HummingNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "h100", NO_HUMMING, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "rtx-3090", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-a16", "thor", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    # ---- vLLM NVFP4 W4A4
    ("vllm", "nvfp4-w4a4", "rtx-3090", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4",
     {"warn": "does not have native support for FP4", "act": "bf16", "mma": "hmma_bf16"}),
    ("vllm", "nvfp4-w4a4", "t4", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4",
     {"act": "fp16", "mma": "hmma_f16"}),
    ("vllm", "nvfp4-w4a4", "rtx-4090", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-w4a4", "rtx-5090", D, "dense_linear", "FlashInferCutlassNvFp4LinearKernel", "W4A4-NVFP4",
     {"mma": "mma_sync_fp4_block_scaled", "act": "nvfp4"}),
    ("vllm", "nvfp4-w4a4", "rtx-5090", NO_FI, "dense_linear", "CutlassNvFp4LinearKernel", "W4A4-NVFP4", {}),
    ("vllm", "nvfp4-w4a4", "rtx-5090", FI_NO_CUBIN, "dense_linear", "CutlassNvFp4LinearKernel", "W4A4-NVFP4",
     {"warn": "FlashInfer kernels are disabled"}),
    ("vllm", "nvfp4-w4a4", "b200", D, "dense_linear", "FlashInferCuteDslNvFp4LinearKernel", "W4A4-NVFP4",
     {"mma": "tcgen05_fp4_block_scaled"}),
    ("vllm", "nvfp4-w4a4", "b200", NO_FI, "dense_linear", "CutlassNvFp4LinearKernel", "W4A4-NVFP4", {}),
    ("vllm", "nvfp4-w4a4", "thor", D, "dense_linear", "FlashInferCutlassNvFp4LinearKernel", "W4A4-NVFP4", {}),
    ("vllm", "nvfp4-w4a4", "thor", NO_FI, "dense_linear", "CutlassNvFp4LinearKernel", "W4A4-NVFP4", {}),
    # Humming rejects FP8 activations for 16-wide NVFP4 groups and falls back to BF16
    # (humming/schema/humming.py:591@humming-kernels-0.1.19; see test_kernel_path_vllm_verified.py)
    ("vllm", "nvfp4-w4a4", "h100", D, "dense_linear", "HummingNvFp4LinearKernel", "W4A16-NVFP4",
     {"act": "bf16", "mma": "wgmma_bf16"}),
    ("vllm", "nvfp4-w4a4", "h100", NO_HUMMING, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    ("vllm", "nvfp4-w4a4-ct", "rtx-3090", D, "dense_linear", "MarlinNvFp4LinearKernel", "W4A16-NVFP4", {}),
    # ModelOptNvFp4Config's minimum capability (75) refuses the model before the missing sm_70 build matters
    ("vllm", "nvfp4-w4a4", "v100", D, "dense_linear", None, "W4A4-NVFP4", {"error": "Minimum capability: 75"}),
    ("vllm", "int8-w8a8", "v100", D, "dense_linear", None, "W8A8-INT8", {"error": "no kernel image"}),
    # ---- vLLM FP8
    ("vllm", "fp8-ct-dynamic", "rtx-3090", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8",
     {"act": "bf16"}),
    ("vllm", "fp8-ct-dynamic", "rtx-3090", NO_HUMMING, "dense_linear", "MarlinFP8ScaledMMLinearKernel",
     "W8A16-FP8", {"warn": "does not have native support for FP8"}),
    ("vllm", "fp8-ct-dynamic", "rtx-4090", D, "dense_linear", "CutlassFP8ScaledMMLinearKernel", "W8A8-FP8",
     {"mma": "qmma_e4m3", "act": "fp8_e4m3"}),
    ("vllm", "fp8-ct-dynamic", "l40s", D, "dense_linear", "CutlassFP8ScaledMMLinearKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-ct-dynamic", "h100", D, "dense_linear", "CutlassFP8ScaledMMLinearKernel", "W8A8-FP8",
     {"mma": "wgmma_e4m3"}),
    ("vllm", "fp8-ct-dynamic", "b200", D, "dense_linear", "CutlassFP8ScaledMMLinearKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-ct-static", "b200", D, "dense_linear", "FlashInferFP8ScaledMMLinearKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-ct-static", "b200", NO_FI, "dense_linear", "CutlassFP8ScaledMMLinearKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-modelopt", "rtx-3090", D, "dense_linear", "MarlinFP8ScaledMMLinearKernel", "W8A16-FP8",
     {"warn": "does not have native support for FP8"}),
    ("vllm", "fp8-modelopt", "t4", D, "dense_linear", None, "W8A8-FP8", {"error": "Minimum capability: 80"}),
    ("vllm", "fp8-dynamic", "a100", D, "dense_linear", "MarlinFP8ScaledMMLinearKernel", "W8A16-FP8", {}),
    ("vllm", "fp8-w8a16", "rtx-5090", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8", {}),
    # block FP8: Ada runs Marlin W8A16 and prints "no native FP8"
    ("vllm", "fp8-block", "rtx-4090", D, "dense_linear", "MarlinFP8ScaledMMLinearKernel", "W8A16-FP8",
     {"warn": "does not have native support for FP8", "act": "bf16"}),
    ("vllm", "fp8-block", "h100", D, "dense_linear", "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
     "W8A8-FP8", {}),
    ("vllm", "fp8-block", "h100", NO_FI, "dense_linear", "DeepGemmFp8BlockScaledMMKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-block", "h100", InstallOptions(flashinfer=False, deepgemm=False), "dense_linear",
     "CutlassFp8BlockScaledMMKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-block", "b200", D, "dense_linear", "DeepGemmFp8BlockScaledMMKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-block", "rtx-5090", InstallOptions(env=(("VLLM_USE_DEEP_GEMM", "0"),)), "dense_linear",
     "CutlassFp8BlockScaledMMKernel", "W8A8-FP8", {}),
    ("vllm", "fp8-block", "thor", D, "dense_linear", "CutlassFp8BlockScaledMMKernel", "W8A8-FP8", {}),
    # ---- vLLM INT8 W8A8: crash on Blackwell, fine before, workaround via VLLM_DISABLED_KERNELS
    ("vllm", "int8-w8a8", "rtx-5090", D, "dense_linear", None, "W8A8-INT8",
     {"error": "Int8 not supported on SM120", "crash_kernel": "CutlassInt8ScaledMMLinearKernel"}),
    ("vllm", "int8-w8a8", "b200", D, "dense_linear", None, "W8A8-INT8", {"error": "Int8 not supported on SM100"}),
    ("vllm", "int8-w8a8", "rtx-5090",
     InstallOptions(env=(("VLLM_DISABLED_KERNELS", "CutlassInt8ScaledMMLinearKernel"),)), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", {}),
    ("vllm", "int8-w8a8", "rtx-5090", InstallOptions(flags=(("linear_backend", "triton"),)),
     "dense_linear", "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", {}),
    ("vllm", "int8-w8a8", "rtx-3090", D, "dense_linear", "CutlassInt8ScaledMMLinearKernel", "W8A8-INT8",
     {"mma": "imma_int8"}),
    ("vllm", "int8-w8a8", "h100", D, "dense_linear", "CutlassInt8ScaledMMLinearKernel", "W8A8-INT8",
     {"mma": "wgmma_int8"}),
    # ---- vLLM INT4 weight-only incl. Machete gates
    ("vllm", "gptq-int4", "h100", D, "dense_linear", "MacheteLinearKernel", "W4A16-INT4", {}),
    ("vllm", "gptq-int4-g32", "h100", D, "dense_linear", "HummingLinearKernel", "W4A16-INT4", {}),
    ("vllm", "gptq-int4-g32", "h100", NO_HUMMING, "dense_linear", "MarlinLinearKernel", "W4A16-INT4", {}),
    ("vllm", "gptq-int4", "rtx-3090", D, "dense_linear", "MarlinLinearKernel", "W4A16-INT4", {}),
    ("vllm", "gptq-int4", "t4", D, "dense_linear", "MarlinLinearKernel", "W4A16-INT4", {"mma": "hmma_f16"}),
    ("vllm", "awq-int4", "b200", D, "dense_linear", "MarlinLinearKernel", "W4A16-INT4", {}),
    ("vllm", "gptq-int4", "rtx-3090", InstallOptions(flags=(("linear_backend", "machete"),)), "dense_linear",
     None, "W4A16-INT4", {"error": "Failed to find a kernel"}),
    # ---- vLLM W4A8 and MXFP4
    ("vllm", "w4a8-fp8", "h100", D, "dense_linear", "CutlassW4A8LinearKernel", "W4A8-FP8", {"mma": "wgmma_e4m3"}),
    ("vllm", "w4a8-fp8", "rtx-4090", D, "dense_linear", None, "W4A8-FP8", {"error": "No compressed-tensors"}),
    ("vllm", "mxfp4-w4a4", "rtx-3090", D, "dense_linear", "MarlinMxFp4LinearKernel", "W4A16-MXFP4",
     {"warn": "weight-only (A16) kernel"}),
    ("vllm", "mxfp4-w4a4", "b200", D, "dense_linear", "FlashInferMxFp4LinearKernel", "W4A4-MXFP4", {}),
    ("vllm", "mxfp4-w4a4", "t4", D, "dense_linear", None, "W4A4-MXFP4", {"error": "Min capability: 80"}),
    # ---- vLLM MoE
    ("vllm", "nvfp4-w4a4", "rtx-3090", D, "moe_experts", "MARLIN (MarlinExperts)", "W4A16-NVFP4",
     {"moe": True, "warn": "FP4"}),
    ("vllm", "nvfp4-w4a4", "h100", D, "moe_experts", "HUMMING (HummingIndexedExperts)", "W4A16-NVFP4", {"moe": True}),
    ("vllm", "nvfp4-w4a4", "b200", D, "moe_experts", "FLASHINFER_TRTLLM (TrtLlmNvFp4ExpertsMonolithic)", "W4A4-NVFP4",
     {"moe": True}),
    ("vllm", "nvfp4-w4a4", "b200", NO_FI, "moe_experts", "VLLM_CUTLASS (CutlassExpertsFp4)", "W4A4-NVFP4",
     {"moe": True}),
    ("vllm", "nvfp4-w4a4", "rtx-5090", D, "moe_experts", "FLASHINFER_CUTLASS (FlashInferExperts)", "W4A4-NVFP4",
     {"moe": True}),
    ("vllm", "nvfp4-w4a4", "thor", D, "moe_experts", "VLLM_CUTLASS (CutlassExpertsFp4)", "W4A4-NVFP4",
     {"moe": True}),
    ("vllm", "nvfp4-w4a4", "rtx-3090", InstallOptions(flags=(("moe_backend", "flashinfer_cutlass"),)),
     "moe_experts", None, "W4A4-NVFP4", {"moe": True, "error": "No NVFP4 MoE backend"}),
    ("vllm", "nvfp4-a16", "rtx-5090", D, "moe_experts", "MARLIN (MarlinExperts)", "W4A16-NVFP4", {"moe": True}),
    ("vllm", "fp8-block", "rtx-3090", D, "moe_experts", "MARLIN (MarlinExperts)", "W8A16-FP8", {"moe": True}),
    ("vllm", "fp8-block", "rtx-4090", D, "moe_experts", "TRITON (TritonExperts)", "W8A8-FP8", {"moe": True}),
    ("vllm", "fp8-block", "h100", D, "moe_experts", "TRITON (TritonExperts, sm_90 block-FP8 priority)", "W8A8-FP8",
     {"moe": True}),
    ("vllm", "fp8-block", "b200", D, "moe_experts", "FLASHINFER_TRTLLM (TrtLlmFp8ExpertsMonolithic)", "W8A8-FP8",
     {"moe": True}),
    ("vllm", "fp8-block", "rtx-5090", D, "moe_experts", "DEEPGEMM (TritonOrDeepGemmExperts)", "W8A8-FP8",
     {"moe": True}),
    ("vllm", "fp8-ct-dynamic", "h100", D, "moe_experts", "VLLM_CUTLASS (CutlassExpertsFp8)", "W8A8-FP8", {"moe": True}),
    ("vllm", "fp8-ct-dynamic", "rtx-5090", D, "moe_experts", "TRITON (TritonExperts)", "W8A8-FP8", {"moe": True}),
    ("vllm", "fp8-modelopt", "h100", D, "moe_experts", "FLASHINFER_CUTLASS (FlashInferExperts)", "W8A8-FP8",
     {"moe": True}),
    ("vllm", "gptq-int4", "h100", D, "moe_experts", "HUMMING (HummingIndexedExperts)", "W4A16-INT4", {"moe": True}),
    ("vllm", "gptq-int4", "b200", D, "moe_experts", "MARLIN (MarlinExperts)", "W4A16-INT4", {"moe": True}),
    # ---- vLLM attention / KV
    ("vllm", "bf16", "rtx-5090", kv("fp8"), "attention_kv", "FLASHINFER", "KV fp8_e4m3", {}),
    ("vllm", "bf16", "rtx-5090", kv("fp8", flashinfer=False), "attention_kv", "TRITON_ATTN", "KV fp8_e4m3", {}),
    ("vllm", "bf16", "rtx-3090", kv("fp8"), "attention_kv", "FLASHINFER", "KV fp8_e4m3", {}),
    ("vllm", "bf16", "rtx-3090", kv("fp8", flashinfer=False), "attention_kv", None, "KV fp8_e4m3",
     {"error": "FP8 KV cache is not supported by the Triton attention backend on GeForce RTX 3090"}),
    ("vllm", "bf16", "t4", kv("fp8"), "attention_kv", None, "KV fp8_e4m3",
     {"error": "Re-run with --kv-cache-dtype float16", "remedy": True}),
    ("vllm", "bf16", "t4", D, "attention_kv", "TRITON_ATTN", "KV fp16", {}),
    # triton_attn.py:525-532: a bfloat16 KV cache needs sm_80
    ("vllm", "bf16", "t4", kv("bfloat16"), "attention_kv", None, "KV bf16", {"error": "requires SM80+"}),
    ("vllm", "bf16", "t4", kv("float16"), "attention_kv", "TRITON_ATTN", "KV fp16", {}),
    ("vllm", "bf16", "h100", kv("fp8"), "attention_kv", "FLASH_ATTN", "KV fp8_e4m3", {"mma": "wgmma_e4m3"}),
    ("vllm", "bf16", "b200", kv("fp8"), "attention_kv", "FLASHINFER", "KV fp8_e4m3", {}),
    # per-token-head INT8/INT4 KV is a Triton-attention-only dtype (cache.py:44-67, triton_attn.py:326-336)
    ("vllm", "bf16", "t4", kv("int8_per_token_head"), "attention_kv", "TRITON_ATTN", "KV int8_per_token_head", {}),
    ("vllm", "bf16", "h100", kv("int4_per_token_head"), "attention_kv", "TRITON_ATTN", "KV int4_per_token_head",
     {"mma": "wgmma_bf16"}),
    ("vllm", "bf16", "rtx-3090", D, "attention_kv", "FLASH_ATTN", "KV bf16", {}),
    ("vllm", "bf16", "rtx-5090", kv("nvfp4"), "attention_kv", "FLASHINFER (FA2 path)", "KV nvfp4", {}),
    ("vllm", "bf16", "b200", kv("nvfp4"), "attention_kv", "FLASHINFER (TRT-LLM attention)", "KV nvfp4", {}),
    ("vllm", "bf16", "t4", kv("nvfp4"), "attention_kv", None, "KV nvfp4", {"error": "nvfp4"}),
    ("vllm", "bf16", "rtx-3090", kv("fp8", flags=(("attention_backend", "FLASH_ATTN"),)), "attention_kv", None,
     "KV fp8_e4m3", {}),
    # ---- SGLang 0.5.23
    ("sglang", "nvfp4-w4a4", "rtx-3090", D, "dense_linear", "Marlin FP4 (W4A16)", "W4A16-NVFP4", {}),
    ("sglang", "nvfp4-w4a4", "h100", D, "dense_linear", "Marlin FP4 (W4A16)", "W4A16-NVFP4", {}),
    ("sglang", "nvfp4-w4a4", "b200", D, "dense_linear", "flashinfer_cutedsl (NVFP4 W4A4)", "W4A4-NVFP4", {}),
    ("sglang", "nvfp4-w4a4", "rtx-5090", D, "dense_linear", "flashinfer_cutlass (NVFP4 W4A4)", "W4A4-NVFP4", {}),
    ("sglang", "nvfp4-w4a4", "t4", D, "dense_linear", None, "W4A4-NVFP4", {"error": "Minimum capability: 80"}),
    ("sglang", "nvfp4-w4a4", "rtx-3090", InstallOptions(flags=(("fp4_gemm_backend", "flashinfer_cutlass"),)),
     "dense_linear", None, "W4A4-NVFP4", {"error": "require SM100+"}),
    ("sglang", "nvfp4-w4a4-ct", "rtx-3090", D, "dense_linear", "Marlin FP4 (CompressedTensorsW4A16Fp4)",
     "W4A16-NVFP4", {"warn": "NVFP4 w4a4 requires compute capability >= 10.0"}),
    ("sglang", "fp8-dynamic", "rtx-3090", D, "dense_linear", "Marlin FP8 (W8A16)", "W8A16-FP8",
     {"warn": "does not have native support for FP8"}),
    ("sglang", "fp8-dynamic", "rtx-4090", D, "dense_linear", "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)", "W8A8-FP8", {}),
    ("sglang", "fp8-dynamic", "t4", D, "dense_linear", None, "W8A8-FP8", {"error": "Minimum capability: 80"}),
    ("sglang", "fp8-modelopt", "rtx-3090", D, "dense_linear", None, "W8A8-FP8", {"error": "Minimum capability: 89"}),
    ("sglang", "fp8-modelopt", "rtx-4090", D, "dense_linear", "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)", "W8A8-FP8", {}),
    ("sglang", "fp8-ct-dynamic", "rtx-3090", D, "dense_linear", "Marlin FP8 (CompressedTensorsW8A16Fp8)",
     "W8A16-FP8", {}),
    ("sglang", "fp8-block", "rtx-4090", D, "dense_linear", "Triton w8a8_block_fp8_matmul", "W8A8-FP8",
     {"mma": "qmma_e4m3", "act": "fp8_e4m3"}),
    ("sglang", "fp8-block", "rtx-3090", D, "dense_linear", "Marlin FP8 (W8A16)", "W8A16-FP8", {}),
    ("sglang", "fp8-block", "h100", D, "dense_linear", "DeepGEMM block FP8 (JIT)", "W8A8-FP8", {}),
    ("sglang", "fp8-block", "b200", NO_DEEPGEMM, "dense_linear", "FlashInfer block FP8 GEMM", "W8A8-FP8", {}),
    ("sglang", "bf16", "h100", D, "attention_kv", "fa3", "KV bf16", {}),
    ("sglang", "bf16", "h100", kv("fp8_e5m2"), "attention_kv", "triton (fa3 fp8_e5m2 fallback)", "KV fp8_e5m2",
     {"warn": "FlashAttention3 only supports fp8_e4m3"}),
    ("sglang", "bf16", "b200", D, "attention_kv", "trtllm_mha", "KV bf16", {}),
    ("sglang", "bf16", "rtx-5090", D, "attention_kv", "flashinfer", "KV bf16", {}),
    # Triton is selected and does not compile an E4M3 cache below sm_89 (issue 26: Triton 3.9's message)
    ("sglang", "bf16", "t4", kv("fp8_e4m3", flashinfer=False), "attention_kv", None, "KV fp8_e4m3",
     {"crash_kernel": "triton", "error": "fp8e4nv not supported"}),
    ("sglang", "bf16", "rtx-3090", kv("fp8_e5m2", flashinfer=False), "attention_kv", "triton", "KV fp8_e5m2", {}),
    ("sglang", "nvfp4-w4a4", "a100", D, "moe_experts", "Marlin MoE (NVFP4 W4A16)", "W4A16-NVFP4", {"moe": True}),
    # SGLang has no Marlin FP8 MoE: its Triton FP8 fused MoE does not compile below sm_89 (issue 26 point 1)
    ("sglang", "fp8-dynamic", "a100", D, "moe_experts", None, "W8A8-FP8",
     {"moe": True, "crash_kernel": "triton fused_moe (FP8)", "error": "fp8e4nv not supported"}),
    # ---- FastLLM 1.9
    ("fastllm", "nvfp4-w4a4", "t4", D, "dense_linear", "NVFP4 Marlin (W4A16)", "W4A16-NVFP4",
     {"act": "fp16", "mma": "hmma_f16"}),
    ("fastllm", "nvfp4-a16", "rtx-5090", D, "dense_linear", "NVFP4 Marlin (W4A16)", "W4A16-NVFP4", {}),
    ("fastllm", "nvfp4-w4a4", "t4", InstallOptions(env=(("FASTLLM_CUDA_NVFP4_MARLIN", "off"),)), "dense_linear",
     "NVFP4 GEMV (batch < 32) / dequant + cublasGemmEx (batch >= 32)", "W4A16-NVFP4", {}),
    ("fastllm", "nvfp4-w4a4", "v100", D, "dense_linear",
     "NVFP4 GEMV (batch < 32) / dequant + cublasGemmEx (batch >= 32)", "W4A16-NVFP4", {}),
    ("fastllm", "gptq-int4", "rtx-3090", D, "dense_linear", "INT4 group Marlin (W4A16)", "W4A16-INT4", {}),
    ("fastllm", "gptq-int4", "rtx-3090", InstallOptions(tp=2), "dense_linear",
     "CPU INT4 linear (tensor-parallel fallback)", "W4A16-INT4", {"warn": "nothing", "mma": "none"}),
    # per-tensor FP8: FastLLM's FP8 Marlin takes only 128x128 block scales (fastllm-linear-fp8-marlin.cu:303-308)
    # and its sm_120 CUTLASS kernel block-128 only (cudadevice.cpp:2110-2123): the native GEMV / cuBLAS path runs
    ("fastllm", "fp8-dynamic", "t4", D, "dense_linear",
     "FP8 GEMV (batch < 32) / dequant + cuBLAS (batch >= 32)", "W8A16-FP8", {}),
    ("fastllm", "fp8-dynamic", "rtx-5090", D, "dense_linear",
     "FP8 GEMV (batch < 32) / dequant + cuBLAS (batch >= 32)", "W8A16-FP8", {}),
    ("fastllm", "fp8-block", "t4", D, "dense_linear", "FP8 Marlin (W8A16)", "W8A16-FP8", {}),
    ("fastllm", "fp8-block", "rtx-5090", D, "dense_linear", "CUTLASS FP8 block-128 (W8A8, sm_120/121)", "W8A8-FP8", {}),
    ("fastllm", "fp8-dynamic", "rtx-4090", D, "dense_linear", "CUTLASS FP8 per-channel (W8A8, sm_89)", "W8A8-FP8", {}),
    ("fastllm", "bf16", "rtx-3090", InstallOptions(flags=(("dtype", "fp8_e4m3"),)), "dense_linear",
     "FP16 cuBLAS (--dtype fp8 ignored)", "FP16", {"warn": "nothing"}),
    ("fastllm", "nvfp4-w4a4", "rtx-3090", D, "moe_experts", "CPU experts (default --moe_device cpu)", "W4A16-NVFP4",
     {"moe": True}),
    ("fastllm", "nvfp4-w4a4", "rtx-3090", InstallOptions(flags=(("moe_device", "cuda"),)), "moe_experts",
     "NVFP4 Marlin (W4A16)", "W4A16-NVFP4", {"moe": True}),
]


def _id(case) -> str:
    engine, preset, g, opts, cls, *_ = case
    extra = "+".join(opts.labels) or ""
    changed = [k for k in ("flashinfer", "flashinfer_cubin", "nvcc_ninja", "humming", "deepgemm")
               if getattr(opts, k) != getattr(InstallOptions(), k)]
    tags = changed + [f"{k}={v}" for k, v in opts.flags + opts.env]
    tags += [f"kv={opts.kv_cache_dtype}"] if opts.kv_cache_dtype else []
    tags += [f"tp={opts.tp}"] if opts.tp else []
    return "-".join([engine, preset, g, cls] + tags + ([extra] if extra else []))


def test_table_has_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_kernel_choice(case):
    engine, preset, g, opts, cls, kernel, effective, extra = case
    ck = checkpoint(preset, moe=extra.get("moe", False))
    exp = explain(ck, gpu(g), engine=engine, options=opts)
    ds = [d for d in exp.decisions if d.layer_class == cls]
    assert ds, f"no {cls} decision"
    d = ds[0] if cls != "dense_linear" else next(x for x in ds if x.checkpoint_scheme != "BF16" or preset == "bf16")
    if kernel is None:
        assert not d.runs
        assert d.error
        if "crash_kernel" in extra:
            assert d.kernel == extra["crash_kernel"]
    else:
        assert d.runs, d.error
        assert d.kernel == kernel
    assert d.effective_scheme == effective
    if "warn" in extra:
        assert any(extra["warn"] in w.text for w in d.warnings), [w.text for w in d.warnings]
        assert all(w.meaning for w in d.warnings)
    for key, attr in (("act", "activation_dtype"), ("mma", "mma")):
        if key in extra:
            assert getattr(d, attr) == extra[key]
    if "error" in extra:
        assert extra["error"] in d.error
    if extra.get("remedy"):
        assert any("Remedy:" in r for r in d.reasons)
    assert all(r.reason for r in d.rejected)
    assert d.reasons


@pytest.mark.parametrize("g, model_type, kernel", [
    ("b200", "qwen3_moe", "FLASHINFER_TRTLLM (TrtLlmBf16ExpertsMonolithic)"),
    ("rtx-5090", "qwen3_moe", "FLASHINFER_CUTLASS (FlashInferExperts)"),
    ("h100", "qwen3_moe", "TRITON (TritonExperts)"),          # FlashInfer moved behind Triton on sm_90
    ("thor", "qwen3_moe", "TRITON (TritonExperts)"),          # sm_110 excluded from FlashInfer CUTLASS MoE
    ("b200", "gpt_oss", "TRITON (TritonExperts)"),            # SWIGLUOAI routed to Triton
    ("rtx-3090", "qwen3_moe", "TRITON (TritonExperts)"),
])
def test_unquantized_moe_backend(g, model_type, kernel):
    exp = explain(checkpoint("bf16", moe=True, model_type=model_type), gpu(g))
    d = next(d for d in exp.decisions if d.layer_class == "moe_experts")
    assert d.kernel == kernel


@pytest.mark.parametrize("engine,declared,expected", [
    ("vllm", "fp8", "fp8_e4m3"),        # torch_utils.py:443-514: modelopt kv_cache_quant_algo
    ("sglang", "fp8", "fp8_e4m3"),      # kv_cache_dtype.py:49-57: auto + FP8 -> fp8_e4m3
    ("sglang", "nvfp4", "bf16"),        # SGLang's auto only picks up FP8: model dtype otherwise
])
def test_auto_kv_follows_a_declared_modelopt_kv_cache(engine, declared, expected):
    exp = explain(checkpoint("nvfp4-w4a4", kv=declared), gpu("h100"), engine=engine, options=D)
    d = next(d for d in exp.decisions if d.layer_class == "attention_kv")
    assert d.kv_cache_dtype == expected


@pytest.mark.parametrize("raw,moe,runs", [
    ({"quant_method": "gptq", "desc_act": True, "group_size": 128}, False, False),
    ({"quant_method": "gptq", "desc_act": True, "group_size": 128}, True, False),
    ({"quant_method": "gptq", "desc_act": True, "group_size": -1}, False, True),   # ordering is a no-op
    ({"quant_method": "gptq", "desc_act": False, "group_size": 128}, False, True),
])
def test_vllm_refuses_gptq_group_act_order(raw, moe, runs):
    """utils/gptq_utils.py:23-37@0.33.0: desc_act=True with groups raises before any weight loads."""
    from dataclasses import replace

    ck = checkpoint("gptq-int4", moe=moe)
    grouped = raw["group_size"] != -1
    mods = tuple(replace(m, weight=replace(m.weight, act_order=raw["desc_act"],
                                           granularity="group" if grouped else "channel"))
                 if m.scheme == "W4A16-INT4" else m for m in ck.modules)
    ck = replace(ck, modules=mods)
    for g in ("rtx-3090", "h100"):
        exp = explain(ck, gpu(g), engine="vllm", options=D)
        cls = "moe_experts" if moe else "dense_linear"
        d = next(d for d in exp.decisions if d.layer_class == cls and d.checkpoint_scheme == "W4A16-INT4")
        assert d.runs is runs
        if not runs:
            assert "desc_act=True" in d.error and not exp.runs
    # the other engines load act-order GPTQ
    exp = explain(ck, gpu("rtx-3090"), engine="sglang", options=D)
    assert all(d.runs for d in exp.decisions if d.checkpoint_scheme == "W4A16-INT4")

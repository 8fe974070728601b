"""Nemotron-H's routed experts (non-gated ReLU²: SGLang builds them with is_gated=False,
sglang/srt/models/nemotron_h.py:276-289@0.5.23; vLLM with activation relu2_no_mul,
vllm/model_executor/models/nemotron_h.py:244@0.33.0) on the B200 (sm_100) and the H200 (sm_90), in BF16,
ModelOpt FP8 and ModelOpt NVFP4, on the real Nemotron-3-Nano configs (benchmarks/validation_configs/).

The conformance suites run both engines' selection code for the BF16 and NVFP4 configs (their corpus has
no Nano FP8), and SGLang's harness builds a bare, gated experts layer. What each engine runs was read off
its source for the non-gated layer:

SGLang 0.5.23
- BF16, sm_100: the Nemotron-H override sets flashinfer_trtllm (model_overrides/nemotron_h.py:99-106);
  FusedMoE hands it to UnquantizedFusedMoEMethod (layers/moe/fused_moe_triton/layer.py:434-437, 500-505),
  which builds the FLASHINFER_TRTLLM runner (quantization/unquant.py:1173-1178) and calls FlashInfer's
  trtllm_bf16_moe with ActivationType.Relu2 (moe_runner/flashinfer_trtllm.py:717-731, 1714-1728).
- BF16, sm_90: the override's last branch sets flashinfer_cutlass (nemotron_h.py:116-121); the CUTLASS
  runner takes Relu2 (moe_runner/flashinfer_cutlass.py:184-205).
- FP8, sm_100: flashinfer_trtllm kept because the model passes RoutingMethodType.DeepSeekV3
  (modelopt_quant.py:1356-1363; nemotron_h.py:288), TRT-LLM per-tensor FP8 with Relu2
  (modelopt_quant.py:1387-1430). sm_90: flashinfer_cutlass (modelopt_quant.py:1433-1456).
- NVFP4, sm_100: flashinfer_trtllm (Relu2 in flashinfer_trtllm.py:1450); sm_90: marlin
  (nemotron_h.py:107-115).

vLLM 0.33.0
- BF16: TrtLlmBf16ExpertsMonolithic on sm_100 (takes RELU2_NO_MUL: experts/trtllm_bf16_moe.py:105-120);
  sm_90 moves both FlashInfer backends behind Triton (oracle/unquantized.py:76-80).
- FP8 per-tensor: TrtLlmFp8ExpertsMonolithic on sm_100 (RELU2_NO_MUL: experts/trtllm_fp8_moe.py:175-186,
  536-565); FlashInferExperts on sm_90 (RELU2_NO_MUL: experts/flashinfer_cutlass_moe.py:142-143, 184-190).
- NVFP4: TrtLlmNvFp4ExpertsMonolithic on sm_100, HummingIndexedExperts on sm_90 (both in the vLLM
  conformance cache for this config).

What FlashInfer does with the non-gated call (read in the wheels the engines pin: vLLM 0.33.0 requires
flashinfer-python==0.7.2.post1, SGLang 0.5.23 flashinfer_python[cu13]==0.7.2; the rule notes carry the
path:line@version citations). Our rules agree with what runs; nothing refuses or falls back:
- FP8 per-tensor, TRT-LLM, sm_100: the only check on a non-gated activation is in trtllm_get_valid_moe_configs
  ("FP8 per-tensor currently supports gated activations only", trtllm_fused_moe_kernel_launcher.cu:6137-6141
  @0.7.2, :6375-6379@0.7.2.post1), which only the autotuner calls; MoERunner.get_valid_tactics catches it and
  returns [] (fused_moe/backends/trtllm/sm100_runner.py:231-240), the autotuner then keeps tactic -1
  (autotuner/autotuner.py:2598-2609), and the launch (trtllm_fp8_per_tensor_scale_moe, launcher.cu:5305-5408
  @0.7.2) checks dtypes only, takes the default tile and config and builds a ReLU2-epilogue GEMM1
  (trtllm_fused_moe_runner.cu:130-141, 195-220@0.7.2). The kernel the rules name runs, with an untuned tactic:
  upstream removed this check as a silent perf bug (flashinfer#2882) and #3153 restored it before 0.7.2.
- BF16 and NVFP4, TRT-LLM, sm_100: no activation check in either launcher or tactic list beyond SwiGLU-only
  alpha/beta/clamp parameters (BF16) and SwigluStep (FP4, 0.7.2.post1), which the engines do not use here.
- FlashInfer CUTLASS, sm_90 (FP8 both engines, BF16 SGLang): Relu2 is in the activation-kernel table
  (cutlass_fused_moe_kernels.cuh:2707-2710); only ClampedRelu2 is refused off SM10x.
The Relu2 E4M3 cubin list (flashinferMetaInfo.h) is a downloaded artifact, not in the wheel: not read.

Older SGLang ran other paths for the same checkpoints (see the validation points set apart for it):
0.5.6.post2-0.5.10 override only ModelOpt checkpoints, to flashinfer_cutlass on every GPU, and leave BF16
at auto, i.e. Triton fused_moe (server_args.py:1250-1267@0.5.6.post2, :1919-1940@0.5.10).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "validation_configs"

EXPECTED = [
    # (format, gpu, engine, kernel, tensor-core instruction)
    ("bf16", "b200", "sglang", "flashinfer_trtllm (BF16 MoE)", "tcgen05_bf16"),
    ("bf16", "h200-sxm", "sglang", "flashinfer_cutlass (BF16 MoE)", "wgmma_bf16"),
    ("fp8", "b200", "sglang", "flashinfer_trtllm (FP8 MoE)", "tcgen05_e4m3"),
    ("fp8", "h200-sxm", "sglang", "flashinfer_cutlass (FP8 MoE)", "wgmma_e4m3"),
    ("nvfp4", "b200", "sglang", "flashinfer_trtllm (NVFP4 MoE)", None),
    ("nvfp4", "h200-sxm", "sglang", "Marlin MoE (NVFP4 W4A16)", None),
    ("bf16", "b200", "vllm", "FLASHINFER_TRTLLM (TrtLlmBf16ExpertsMonolithic)", "tcgen05_bf16"),
    ("bf16", "h200-sxm", "vllm", "TRITON (TritonExperts)", None),
    ("fp8", "b200", "vllm", "FLASHINFER_TRTLLM (TrtLlmFp8ExpertsMonolithic)", "tcgen05_e4m3"),
    ("fp8", "h200-sxm", "vllm", "FLASHINFER_CUTLASS (FlashInferExperts)", "wgmma_e4m3"),
    ("nvfp4", "b200", "vllm", "FLASHINFER_TRTLLM (TrtLlmNvFp4ExpertsMonolithic)", None),
    ("nvfp4", "h200-sxm", "vllm", "HUMMING (HummingIndexedExperts)", None),
]


def _experts(fmt: str, gpu: str, engine: str):
    folder = CONFIGS / f"nemotron-3-nano-30b-a3b-{fmt}"
    if not folder.is_dir():
        pytest.skip(f"{folder} missing")
    exp = explain(inspect_checkpoint(str(folder)), get_gpu(gpu), engine=engine)
    return [d for d in exp.decisions if d.layer_class == "moe_experts"]


@pytest.mark.parametrize("fmt,gpu,engine,kernel,mma", EXPECTED)
def test_nemotron_h_non_gated_experts_run_the_engines_kernel(fmt, gpu, engine, kernel, mma):
    experts = _experts(fmt, gpu, engine)
    assert experts, "no routed-experts decision"
    for d in experts:
        assert d.kernel == kernel and d.runs
        if mma is not None:
            assert d.mma == mma


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_fp8_trtllm_experts_cite_flashinfers_untuned_non_gated_path(engine):
    """The FP8 sm_100 choice rests on FlashInfer running non-gated per-tensor FP8 although its tactic list
    refuses it; the decision says so, with the FlashInfer line the engine's wheel has."""
    line = {"sglang": "trtllm_fused_moe_kernel_launcher.cu:6130-6141@flashinfer-python-0.7.2",
            "vllm": "trtllm_fused_moe_kernel_launcher.cu:6368-6379@flashinfer-python-0.7.2.post1"}[engine]
    for d in _experts("fp8", "b200", engine):
        text = " ".join(d.reasons)
        assert line in text and "untuned" in text, d.reasons

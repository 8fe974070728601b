"""SGLang 0.5.23 rules for corpus configs the conformance suite (tests/conformance/sglang/) found wrong: per-model
overrides (Qwen3-MoE mixed W4A16 experts, Kimi-Linear attention, Kimi-K2.5 INT4 and Kimi-K3 MXFP4 experts,
DeepSeek-V4 MXFP4 experts, MiniMax-M3), ModelOpt MXFP8 dense layers, and the order of start-up refusals.
Real configs from the checkpoint corpus, read by the advisor's inspector; the expected values are SGLang's own
answers for the same configs (tests/conformance/sglang/sglang_results.json) and the lines cited in
profiles/engines/sglang-0.5.23.yaml."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
from corpus_files import corpus_entries, require  # noqa: E402  (real configs from their PyPI package)

CORPUS = dict(require(corpus_entries))
NO_FI = InstallOptions(flashinfer=False, deepgemm=False)     # the conformance suite's second install


def _exp(name: str, gid: str, options: InstallOptions = InstallOptions()):
    return explain(inspect_checkpoint(str(CORPUS[name])), get_gpu(gid), engine="sglang", options=options)


def _layer(exp, layer_class: str, scheme: str | None = None):
    return next(d for d in exp.decisions if d.layer_class == layer_class
                and (scheme is None or d.checkpoint_scheme == scheme))


# ---------------------------------------------------------------- per-model overrides

@pytest.mark.parametrize("gid,kernel", [("b200", "Marlin MoE (NVFP4 W4A16)"), ("b300", "Marlin MoE (NVFP4 W4A16)"),
                                        ("h100-sxm", "Marlin MoE (NVFP4 W4A16)")])
def test_qwen3_family_mixed_w4a16_experts_run_on_marlin(gid, kernel):
    """qwen3_moe.py:51-77: W4A16_NVFP4 experts in a modelopt_mixed config set marlin on sm_10x (trtllm-gen has
    no W4A16 NVFP4 MoE); on Hopper auto already resolves to Marlin."""
    d = _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", gid), "moe_experts")
    assert d.kernel == kernel and d.runs


W4A16_REFUSAL = "ValueError: W4A16_NVFP4 MoE layers require --moe-runner-backend=marlin"


@pytest.mark.parametrize("gid", ["b200", "b300"])
@pytest.mark.parametrize("backend", ["flashinfer_cutlass", "flashinfer_trtllm", "triton", "flashinfer_cutedsl"])
def test_qwen3_family_mixed_w4a16_experts_refuse_other_runners_on_sm10x(gid, backend):
    """qwen3_moe.py:55-71: on sm_10x the same override raises for any requested runner but marlin (or
    flashinfer_cutedsl with SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16=1) while resolving the server arguments. SGLang's
    own ServerArgs (tests/conformance/sglang/sglang_probe.py, sm_100 and sm_103) raises exactly this for all four;
    the rules used to run flashinfer_cutlass on FP4 tensor cores (the SGLang cookbook's Qwen3.6 NVFP4 recipe)."""
    opts = InstallOptions(flags=(("moe_runner_backend", backend),))
    d = _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", gid, opts), "moe_experts")
    assert not d.runs and d.kernel is None and d.error.startswith(W4A16_REFUSAL)
    if backend == "flashinfer_cutedsl":     # the opt-in the override accepts (qwen3_moe.py:57-62): not refused
        env = replace(opts, env=(("SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16", "1"),))
        assert not _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", gid, env), "moe_experts").error.startswith(
            W4A16_REFUSAL)
    marlin = InstallOptions(flags=(("moe_runner_backend", "marlin"),))
    assert _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", gid, marlin), "moe_experts").kernel \
        == "Marlin MoE (NVFP4 W4A16)"


def test_qwen3_family_mixed_w4a16_experts_requested_runner_builds_off_sm10x():
    """The override runs on is_sm100 only (qwen3_moe.py:41): on an RTX 5090 SGLang builds the requested
    flashinfer_cutlass runner (sglang_probe.py on sm_120), which quantizes the BF16 activations to NVFP4 (W4A4)."""
    opts = InstallOptions(flags=(("moe_runner_backend", "flashinfer_cutlass"),))
    d = _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", "rtx-5090", opts), "moe_experts")
    assert d.runs and d.kernel == "flashinfer_cutlass (NVFP4 MoE, requested)" and d.activation_dtype == "nvfp4"


@pytest.mark.parametrize("gid", ["b200", "rtx-5090"])
def test_requested_marlin_runs_nvfp4_experts_on_blackwell(gid):
    """The remedy above works beyond the Qwen3 family: a requested marlin runner passes the NVFP4 MoE method's
    platform check on every GPU (modelopt_quant.py:2377-2387) and runs the experts weight-only; SGLang's own
    layer build gives the MARLIN runner for this W4A4 config on sm_100 and sm_120 (sglang_probe.py). The rules
    used to refuse it ('Current platform does not support NVFP4 ...')."""
    opts = InstallOptions(flags=(("moe_runner_backend", "marlin"),))
    d = _layer(_exp("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", gid, opts), "moe_experts")
    assert d.runs and d.kernel == "Marlin MoE (NVFP4 W4A16)" and d.mma == "hmma_bf16"
    assert d.effective_scheme == "W4A16-NVFP4"


@pytest.mark.parametrize("gid", ["b200", "rtx-5090"])
def test_vllm_refuses_flashinfer_cutlass_for_w4a16_nvfp4_experts_too(gid):
    """The same question under vLLM 0.33: an explicit FLASHINFER_CUTLASS NvFp4 MoE backend with a weight-only
    (A16) checkpoint is not a supported configuration and raises
    (model_executor/layers/fused_moe/oracle/nvfp4.py:258-301@0.33.0); the default is Marlin."""
    ck = inspect_checkpoint(str(CORPUS["nvidia--Qwen3.6-35B-A3B-NVFP4"]))
    opts = InstallOptions(flags=(("moe_backend", "flashinfer_cutlass"),))
    d = _layer(explain(ck, get_gpu(gid), engine="vllm", options=opts), "moe_experts")
    assert not d.runs and d.kernel is None
    assert _layer(explain(ck, get_gpu(gid), engine="vllm"), "moe_experts").mma == "hmma_bf16"


@pytest.mark.parametrize("gid", ["b200", "b300"])
def test_kimi_linear_keeps_the_mla_default_on_sm10x(gid):
    """KimiLinearForCausalLM is in neither the DeepSeek-family nor the Kimi-K3 override list."""
    d = _layer(_exp("llmviz--kimi_linear", gid), "attention_kv")
    assert d.kernel.split(" (")[0] == "flashinfer"
    # its sibling Kimi-K2 (DeepseekV3ForCausalLM) keeps the trtllm_mla override
    assert _layer(_exp("moonshotai--Kimi-K2-Instruct", gid), "attention_kv").kernel.startswith("trtllm_mla")


def test_kimi_k25_int4_experts_run_flashinfer_mxint4_on_sm10x():
    """overrides.py:777-831 sets flashinfer_trtllm for the Kimi K2/K2.5 thinking INT4 recipe on sm_10x, and
    get_moe_scheme then builds CompressedTensorsMxInt4MoE (compressed_tensors.py:913-918)."""
    d = _layer(_exp("moonshotai--Kimi-K2.5", "b200"), "moe_experts")
    assert d.kernel == "flashinfer_trtllm MxInt4 MoE (trtllm_mxint4_block_scale_moe, W4A16)" and d.runs
    # elsewhere the WNA16 rules stand: Marlin on Hopper
    assert _layer(_exp("moonshotai--Kimi-K2.5", "h100-sxm"), "moe_experts").kernel == "Marlin MoE (WNA16)"


def test_kimi_k3_mxfp4_experts_run_trtllm_gen_on_sm100_sm103_only():
    """kimi_k3.py:172-190: flashinfer_mxfp4 on device_sm 100/103/107; other GPUs upcast to BF16."""
    for gid in ("b200", "b300"):
        d = _layer(_exp("moonshotai--Kimi-K3", gid), "moe_experts")
        assert d.kernel == "FlashInfer TRT-LLM-gen MXFP4 MoE (trtllm_fp4_block_scale_moe, MXFP8 activations)"
        assert any("Kimi-K3 on SM100/SM103/SM107" in w.text for w in d.warnings)
    assert _layer(_exp("moonshotai--Kimi-K3", "rtx-5090"), "moe_experts").kernel \
        == "triton fused_moe on BF16 experts (MXFP4 upcast at load)"


@pytest.mark.parametrize("gid,kernel,runs", [
    ("h100-sxm", "FlashInfer CUTLASS MXFP4 x BF16 MoE (sm_90 mixed-input)", True),
    ("b200", "FlashInfer TRT-LLM-gen MXFP4 MoE (trtllm_fp4_block_scale_moe, MXFP8 activations)", True),
    ("rtx-5090", "FlashInfer CUTLASS MXFP4 MoE (cutlass_fused_moe, MXFP8 x MXFP4)", True),
    ("dgx-spark-gb10", "FlashInfer CUTLASS MXFP4 MoE (cutlass_fused_moe, MXFP8 x MXFP4)", True),
    ("l40s", "triton fused_moe (FP8)", False),
    ("jetson-agx-thor", "triton fused_moe (FP8)", False),
])
def test_deepseek_v4_mxfp4_experts(gid, kernel, runs):
    """deepseek_v4.py:66-88 sets flashinfer_mxfp4 on sm_90/10x/12x; Fp8Config maps it to the CUTLASS or TRT-LLM
    wrapper (fp8.py:459-472). Elsewhere the plain Fp8MoEMethod's Triton runner gets the packed MXFP4 weights."""
    d = _layer(_exp("deepseek-ai--DeepSeek-V4-Flash", gid), "moe_experts")
    assert d.kernel == kernel and d.runs is runs
    if not runs:
        assert d.error == "AssertionError: Hidden size mismatch"


@pytest.mark.parametrize("gid", ["h100-sxm", "rtx-5090"])
def test_deepseek_v4_cutlass_mxfp4_refuses_without_flashinfer(gid):
    d = _layer(_exp("deepseek-ai--DeepSeek-V4-Flash", gid, NO_FI), "moe_experts")
    assert not d.runs and d.error == "RuntimeError: Mxfp4FlashinferCutlassMoEMethod requires FlashInfer."


def test_deepseek_v4_without_flashinfer_on_sm10x_stops_at_start():
    exp = _exp("deepseek-ai--DeepSeek-V4-Flash", "b200", NO_FI)
    assert not exp.runs
    assert {d.error for d in exp.decisions} == {"ModuleNotFoundError: No module named 'flashinfer.gemm'; "
                                                "'flashinfer' is not a package"}


# ---------------------------------------------------------------- MiniMax-M3 (ModelOpt mixed: MXFP8 + NVFP4)

@pytest.mark.parametrize("gid,options,kernel,runs", [
    ("rtx-3090", InstallOptions(), "Marlin FP8 (W8A16)", True),
    ("l40s", InstallOptions(), "no MXFP8 dense GEMM", False),
    ("h100-sxm", InstallOptions(), "DeepGEMM MXFP8 GEMM (JIT)", True),
    ("h100-sxm", NO_FI, "no MXFP8 dense GEMM", False),
    ("b200", InstallOptions(), "FlashInfer CuTe DSL mm_mxfp8 (MXFP8)", True),
    ("jetson-agx-thor", InstallOptions(), "FlashInfer CUTLASS mm_mxfp8 (MXFP8)", True),
    ("rtx-5090", InstallOptions(), "FlashInfer CUTLASS mm_mxfp8 (MXFP8)", True),
    ("rtx-5090", NO_FI, "no MXFP8 dense GEMM", False),
])
def test_minimax_m3_mxfp8_dense_layers(gid, options, kernel, runs):
    """ModelOptMixedPrecisionConfig builds MXFP8 layers with Fp8LinearMethod(use_mxfp8) (modelopt_quant.py:
    1057-1058); the backend comes from resolve_mxfp8_dense_gemm_backend (fp8_utils.py:834-897)."""
    d = _layer(_exp("nvidia--MiniMax-M3-NVFP4", gid, options), "dense_linear", "W8A8-FP8")
    assert d.kernel == kernel and d.runs is runs
    if not runs:
        assert d.error.startswith("RuntimeError: No MXFP8 dense GEMM kernel is available on this device.")


def test_per_tensor_modelopt_mixed_fp8_keeps_its_rule():
    """The MXFP8 path keys on group-32 scales: a mixed config's per-tensor FP8 layers still get ModelOpt FP8."""
    d = _layer(_exp("nvidia--Qwen3.6-35B-A3B-NVFP4", "h100-sxm"), "dense_linear", "W8A8-FP8")
    assert "mxfp8" not in d.kernel.lower() and "MXFP8" not in d.kernel


def test_minimax_m3_override_on_sm10x():
    """minimax_m3.py:147-172: fa4 with a 16-bit KV cache, flashinfer_trtllm_routed for modelopt_mixed experts."""
    exp = _exp("nvidia--MiniMax-M3-NVFP4", "b200")
    assert _layer(exp, "attention_kv").kernel == "fa4 (model override, sm_10x)"
    assert _layer(exp, "moe_experts").kernel == "flashinfer_trtllm_routed (NVFP4 MoE)"
    fp8_kv = _exp("nvidia--MiniMax-M3-NVFP4", "b200", InstallOptions(kv_cache_dtype="fp8_e4m3"))
    assert not _layer(fp8_kv, "attention_kv").kernel.startswith("fa4")


# ---------------------------------------------------------------- order of refusals

@pytest.mark.parametrize("name", ["llmviz--falcon7b", "stepfun-ai--Step-3.7-Flash",
                                  "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"])
def test_scheduler_start_refusal_comes_before_loader_refusals(name):
    """The scheduler builds the model config, then its GEMM set-up (which imports flashinfer.gemm on sm_10x),
    then the model worker whose loader raises (managers/scheduler.py:531, 558, 568)."""
    exp = _exp(name, "b200", NO_FI)
    assert exp.load is not None and exp.load.refused
    assert exp.load.error == "ModuleNotFoundError: No module named 'flashinfer.gemm'; 'flashinfer' is not a package"
    # with FlashInfer, or on a GPU without the start-up refusal, the loader's own refusal stands
    for gid, options in (("b200", InstallOptions()), ("rtx-5090", NO_FI)):
        other = _exp(name, gid, options)
        assert other.load.refused and "flashinfer.gemm" not in other.load.error


def test_a_model_config_refusal_still_comes_first():
    """Refusals raised while the model config is built (before the scheduler's GEMM set-up) keep their place:
    GPTQ that Marlin cannot take is 'Unknown quantization method' even without FlashInfer on sm_10x."""
    import json
    import tempfile

    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "llama-3.1-8b-gptq-int4" / "config.json"
    cfg = json.loads(demo.read_text())
    cfg["quantization_config"]["sym"] = False
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(cfg))
        exp = explain(inspect_checkpoint(tmp), get_gpu("b200"), engine="sglang", options=NO_FI)
    assert exp.load.error.startswith("ValueError: Unknown quantization method: gptq.")

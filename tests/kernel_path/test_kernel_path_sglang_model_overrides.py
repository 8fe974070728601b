"""SGLang 0.5.23's per-model overrides (sglang/srt/arg_groups/model_overrides/, issue 26 point 2).

Each family module rewrites --moe-runner-backend or --attention-backend for its architectures when they
are left at auto; the advisor gates the same candidates on the architecture (MoE layers) or the model type
(attention). Expected values are read off the override modules cited in profiles/engines/sglang-0.5.23.yaml.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

from kernel_path_builders import checkpoint, gpu


def _ck(preset: str, arch: str, model_type: str, *, moe: bool = True, mla: bool = False):
    ck = checkpoint(preset, moe=moe, mla=mla, model_type=model_type)
    return replace(ck, arch=replace(ck.arch, architectures=(arch,)))


def _kernel(ck, gid, layer_class, options=InstallOptions()):
    d = next(d for d in explain(ck, gpu(gid), engine="sglang", options=options).decisions
             if d.layer_class == layer_class and (d.checkpoint_scheme != "BF16" or layer_class != "dense_linear"))
    return d


# ---------------------------------------------------------------- MoE runner overrides

@pytest.mark.parametrize("gid,kernel", [("b200", "flashinfer_trtllm (BF16 MoE)"),
                                        ("b300", "flashinfer_trtllm (BF16 MoE)"),
                                        ("h100", "triton fused_moe"), ("rtx-5090", "triton fused_moe")])
def test_qwen3_moe_bf16_experts_on_sm10x_are_trtllm(gid, kernel):
    d = _kernel(_ck("bf16", "Qwen3MoeForCausalLM", "qwen3_moe"), gid, "moe_experts")
    assert d.kernel == kernel and d.runs


@pytest.mark.parametrize("gid", ["b200", "b300"])
def test_qwen3_5_moe_block_fp8_experts_on_sm10x_are_trtllm_by_default(gid):
    """Qwen3.5/3.6 MoE (Qwen3_5MoeForConditionalGeneration) is in the same override list: block FP8 experts get
    flashinfer_trtllm on sm_10x with --moe-runner-backend auto (qwen3_moe.py:29-37, 78-90@0.5.23), which
    Fp8MoEMethod.create_moe_runner then takes as given (fp8.py:2960-2996@0.5.23); SGLang's own ServerArgs and
    layer build agree (sglang_probe.py on the Qwen3.6-35B-A3B-FP8 config, sm_100). Its auto-to-Triton branch
    is reached only where no override replaced auto (Hopper here)."""
    ck = _ck("fp8-block", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe")
    d = _kernel(ck, gid, "moe_experts")
    assert d.kernel == "flashinfer_trtllm (FP8 MoE)" and d.mma == "tcgen05_e4m3"
    assert _kernel(ck, "h100", "moe_experts").kernel == "triton fused_moe (FP8)"


def test_qwen3_moe_fp8_experts_on_sm10x_are_trtllm_but_not_for_compressed_tensors():
    fp8 = _kernel(_ck("fp8-block", "Qwen3MoeForCausalLM", "qwen3_moe"), "b200", "moe_experts")
    assert fp8.kernel == "flashinfer_trtllm (FP8 MoE)" and fp8.mma == "tcgen05_e4m3"
    ct = _kernel(_ck("fp8-ct-dynamic", "Qwen3MoeForCausalLM", "qwen3_moe"), "b200", "moe_experts")
    assert ct.kernel == "triton fused_moe (FP8)"           # the override keys on quant_method fp8
    assert _kernel(_ck("fp8-block", "Qwen3MoeForCausalLM", "qwen3_moe"), "h100", "moe_experts").kernel \
        == "triton fused_moe (FP8)"


@pytest.mark.parametrize("gid,kernel", [("b200", "flashinfer_trtllm (BF16 MoE)"),
                                        ("rtx-3090", "flashinfer_cutlass (BF16 MoE)"),
                                        ("rtx-5090", "flashinfer_cutlass (BF16 MoE)")])
def test_nemotron_h_bf16_experts(gid, kernel):
    assert _kernel(_ck("bf16", "NemotronHForCausalLM", "nemotron_h"), gid, "moe_experts").kernel == kernel


def test_nemotron_h_nvfp4_experts_on_sm12x_are_flashinfer_cutlass():
    d = _kernel(_ck("nvfp4-w4a4", "NemotronHForCausalLM", "nemotron_h"), "rtx-5090", "moe_experts")
    assert d.kernel == "flashinfer_cutlass (NVFP4 MoE)" and d.runs


def test_minimax_m2_nvfp4_experts_on_sm10x_are_trtllm_routed():
    d = _kernel(_ck("nvfp4-w4a4", "MiniMaxM2ForCausalLM", "minimax_m2"), "b200", "moe_experts")
    assert d.kernel == "flashinfer_trtllm_routed (NVFP4 MoE)"


def test_deepseek_v4_nvfp4_experts_refused_below_blackwell():
    d = _kernel(_ck("nvfp4-w4a4", "DeepseekV4ForCausalLM", "deepseek_v4"), "h100", "moe_experts")
    assert d.kernel == "flashinfer_trtllm_routed (NVFP4 MoE)" and not d.runs
    assert d.error.startswith("ValueError: Current platform does not support NVFP4 quantization")
    assert _kernel(_ck("nvfp4-w4a4", "DeepseekV4ForCausalLM", "deepseek_v4"), "b200", "moe_experts").runs


def test_requested_backend_beats_the_override():
    opts = InstallOptions(flags=(("moe_runner_backend", "triton"),))
    d = _kernel(_ck("bf16", "Qwen3MoeForCausalLM", "qwen3_moe"), "b200", "moe_experts", opts)
    assert d.kernel == "triton fused_moe"


# ---------------------------------------------------------------- attention backend overrides

@pytest.mark.parametrize("model_type,gid,kernel", [
    ("llama4", "rtx-3090", "triton (model override)"),
    ("llama4", "h100", "fa3"),
    ("llama4", "b200", "trtllm_mha (model override, sm_10x)"),
    ("gemma4", "rtx-5090", "triton (model override)"),
    ("gemma4", "b200", "trtllm_mha (model override, sm_10x)"),
    ("olmo2", "a100", "fa3 (model override)"),
    ("olmo2", "t4", "triton (model override)"),
    ("lfm2", "b200", "flashinfer (model override, sm_10x)"),
    ("mimo_v2_flash", "b200", "fa4 (model override, sm_10x)"),
    ("deepseek_v4", "h100", "dsv4 (DeepSeek-V4 attention)"),
    ("qwen3_5", "b200", "triton (model override, sm_10x)"),     # qwen3_5.py:24-49 (found by the conformance suite)
    ("qwen3_next", "b300", "triton (model override, sm_10x)"),
    ("qwen3_5_moe", "h100", "fa3"),
    ("qwen3", "rtx-3090", "flashinfer"),                        # no override: the default choice
])
def test_attention_overrides(model_type, gid, kernel):
    d = _kernel(checkpoint("bf16", model_type=model_type), gid, "attention_kv")
    assert d.kernel == kernel and d.runs, (d.kernel, d.error)


@pytest.mark.parametrize("model_type,gid,kernel", [
    ("deepseek_v3", "b200", "trtllm_mla (model override, sm_10x)"),
    ("kimi_k25", "b300", "trtllm_mla (model override, sm_10x)"),
    ("deepseek_v3", "h100", "fa3 (MLA)"),
    ("deepseek_v32", "h100", "dsa (DeepSeek sparse attention)"),
    ("glm_moe_dsa", "rtx-3090", "dsa (DeepSeek sparse attention)"),
])
def test_mla_attention_overrides(model_type, gid, kernel):
    d = _kernel(checkpoint("bf16", model_type=model_type, mla=True), gid, "attention_kv")
    assert d.kernel == kernel, (d.kernel, d.error)


# ---------------------------------------------------------------- the DeepSeek-family post-process

@pytest.mark.parametrize("arch,model_type", [("DeepseekV3ForCausalLM", "deepseek_v3"),
                                             ("GlmMoeDsaForCausalLM", "glm_moe_dsa"),
                                             ("KimiK25ForConditionalGeneration", "kimi_k25")])
def test_deepseek_family_fp8_experts_on_sm10x_are_trtllm(arch, model_type):
    """overrides.py:744-830@0.5.23 (_deepseek_moe_quant_resolution); found by tests/conformance/sglang."""
    ck = _ck("fp8-block", arch, model_type)
    assert _kernel(ck, "b200", "moe_experts").kernel == "flashinfer_trtllm (FP8 MoE)"
    assert _kernel(ck, "b300", "moe_experts").kernel == "flashinfer_trtllm (FP8 MoE)"
    assert _kernel(ck, "h100", "moe_experts").kernel == "triton fused_moe (FP8)"
    assert _kernel(ck, "rtx-5090", "moe_experts").kernel == "triton fused_moe (FP8)"


def test_deepseek_family_bf16_experts_on_sm10x_are_trtllm():
    ck = _ck("bf16", "GlmMoeDsaForCausalLM", "glm_moe_dsa")
    assert _kernel(ck, "b200", "moe_experts").kernel == "flashinfer_trtllm (BF16 MoE)"
    assert _kernel(ck, "h100", "moe_experts").kernel == "triton fused_moe"


def test_deepseek_family_override_yields_to_a_requested_backend():
    ck = _ck("fp8-block", "DeepseekV3ForCausalLM", "deepseek_v3")
    opts = InstallOptions(flags=(("moe_runner_backend", "triton"),))
    assert _kernel(ck, "b200", "moe_experts", opts).kernel == "triton fused_moe (FP8)"


# ---------------------------------------------------------------- W4A16 NVFP4 experts (Nemotron-H override)

W4A16 = {"quant_algo": "W4A16_NVFP4", "group_size": 16}


def _nemotron_h_w4a16_mixed(folder):
    """Nemotron-3-Nano's architecture (benchmarks/validation_configs) with a ModelOpt MIXED_PRECISION block: FP8
    Mamba projections, W4A16_NVFP4 routed experts keyed per expert ('.experts.' in the key, as the override tests)."""
    root = Path(__file__).resolve().parents[2]
    cfg = json.loads((root / "benchmarks/validation_configs/nemotron-3-nano-30b-a3b-bf16/config.json").read_text())
    layers: dict[str, dict] = {}
    for i, kind in enumerate(cfg["hybrid_override_pattern"]):
        if kind == "E":
            for e in range(cfg["n_routed_experts"]):
                for p in ("up_proj", "down_proj"):
                    layers[f"backbone.layers.{i}.mixer.experts.{e}.{p}"] = W4A16
        elif kind == "M":
            for p in ("in_proj", "out_proj"):
                layers[f"backbone.layers.{i}.mixer.{p}"] = {"quant_algo": "FP8"}
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                                  "producer": {"name": "modelopt"}, "quantized_layers": layers, "ignore": ["lm_head"]}
    (folder / "config.json").write_text(json.dumps(cfg))
    return inspect_checkpoint(str(folder))


@pytest.mark.parametrize("gid", ["a100", "h100", "b200", "rtx-5090"])
def test_nemotron_h_mixed_w4a16_experts_run_marlin_and_refuse_other_runners(tmp_path, gid):
    """nemotron_h.py:64-86@0.5.23: W4A16_NVFP4 experts in a modelopt_mixed Nemotron-H config set marlin for auto on
    every GPU and raise for any other requested runner. SGLang's own ServerArgs agrees on sm_90, sm_100 and sm_120
    (tests/conformance/sglang/sglang_probe.py on this config); the rules used to give flashinfer_trtllm (sm_10x) and
    flashinfer_cutlass (sm_12x) for auto and run a requested flashinfer_cutlass."""
    ck = _nemotron_h_w4a16_mixed(tmp_path)
    d = _kernel(ck, gid, "moe_experts")
    assert d.checkpoint_scheme == "W4A16-NVFP4" and d.kernel == "Marlin MoE (NVFP4 W4A16)" and d.runs
    cutlass = InstallOptions(flags=(("moe_runner_backend", "flashinfer_cutlass"),))
    d = _kernel(ck, gid, "moe_experts", cutlass)
    assert not d.runs and d.error == "ValueError: W4A16_NVFP4 MoE layers require --moe-runner-backend=marlin."

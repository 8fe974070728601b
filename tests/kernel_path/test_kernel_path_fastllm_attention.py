"""FastLLM 1.9 attention and KV cache as its code runs (issue 26 point 6).

Attention on compute capability 7.5+ is FastLLM's bundled FlashInfer, its own kernel only the fallback
(fastllm-attention.cu / fastllm-cuda.cu@d3aea32; the 1.9.0 library prints the same switch). The FP4 KV cache
exists for Qwen3.5 and DeepSeek-V4.1 only, and FastLLM's message for other models says so. The "INT4 + TP
runs on the CPU" rule is a field observation the sources contradict: it is labelled as such.
"""

from __future__ import annotations

import pytest

from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_files import load_rules

from kernel_path_builders import checkpoint, gpu


def _attn(gid: str, options=InstallOptions(), model_type: str = "llama", head_dim: int = 128):
    exp = explain(checkpoint("bf16", model_type=model_type, head_dim=head_dim), gpu(gid), engine="fastllm",
                  options=options)
    return next(d for d in exp.decisions if d.layer_class == "attention_kv")


@pytest.mark.parametrize("gid", ["t4", "rtx-3090", "h100", "b200", "rtx-5090"])
def test_attention_is_the_bundled_flashinfer_from_sm75(gid):
    d = _attn(gid)
    assert d.runs and d.kernel == "FlashInfer (bundled with FastLLM)"
    assert "fastllm-attention.cu" in d.source
    assert any("head size are 128" in r for r in d.reasons)        # prefill needs head_dim 128


def test_attention_below_sm75_is_fastllm_own_kernel():
    d = _attn("v100")
    assert d.runs and d.kernel == "FastLLM CUDA attention (native)"
    assert any(r.kernel == "FlashInfer (bundled with FastLLM)" and "sm_75" in r.reason for r in d.rejected)


@pytest.mark.parametrize("value,kernel", [("1", "FastLLM CUDA attention (native)"),
                                          ("on", "FastLLM CUDA attention (native)"),
                                          ("0", "FlashInfer (bundled with FastLLM)"),
                                          ("off", "FlashInfer (bundled with FastLLM)")])
def test_force_native_attention_env(value, kernel):
    d = _attn("rtx-3090", InstallOptions(env=(("FASTLLM_FORCE_NATIVE_ATTN", value),)))
    assert d.kernel == kernel


def test_fp8_kv_cache_is_read_by_flashinfer_decode():
    d = _attn("rtx-3090", InstallOptions(kv_cache_dtype="fp8_e4m3"))
    assert d.runs and d.kernel == "FlashInfer (bundled with FastLLM)"
    assert d.kv_cache_dtype == "fp8_e4m3"


@pytest.mark.parametrize("model_type", ["qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
                                        "deepseek_v41", "deepseek_v41_text"])
def test_fp4_kv_cache_models(model_type):
    d = _attn("rtx-3090", InstallOptions(kv_cache_dtype="fp4"), model_type=model_type, head_dim=256)
    assert d.runs and d.kernel == "FastLLM CUDA attention (FP4 KV)"


@pytest.mark.parametrize("model_type", ["llama", "qwen3", "deepseek_v4"])
def test_fp4_kv_cache_refused_elsewhere_with_fastllm_message(model_type):
    d = _attn("rtx-3090", InstallOptions(kv_cache_dtype="fp4"), model_type=model_type)
    assert not d.runs
    assert d.error == ("FastLLM Error: FP4 KV cache currently supports the Qwen3.5 CUDA paged attention path "
                       "and DeepSeek-V4.1 only.")
    # the old text listed fp4 among the accepted dtypes: it is FastLLM's message for an unknown dtype name
    assert "should be auto" not in d.error
    assert any("qwen3_5" in r and "deepseek_v41" in r for r in d.reasons)


def test_int4_tp_cpu_rule_is_labelled_an_observation():
    rules, _ = load_rules("fastllm")
    cand = next(c for p in rules.paths if p.id == "dense-int4" for c in p.candidates
                if c.kernel == "CPU INT4 linear (tensor-parallel fallback)")
    assert cand.note.startswith("[observed]")
    assert "field notes" in cand.source and "observed" in cand.source
    # the Marlin gate lines hold no tensor-parallel term: they are not cited as the cause any more
    assert "int4group.cu:877-890" not in cand.source
    assert all("int4group.cu:877-890" not in w.source for w in cand.warnings)
    exp = explain(checkpoint("gptq-int4"), gpu("rtx-3090"), engine="fastllm", options=InstallOptions(tp=2))
    d = next(d for d in exp.decisions if d.layer_class == "dense_linear" and d.checkpoint_scheme == "W4A16-INT4")
    assert d.kernel == "CPU INT4 linear (tensor-parallel fallback)"
    assert any(r.startswith("[observed]") for r in d.reasons)

"""Attention sinks (gpt-oss): which attention backend vLLM 0.33 and SGLang 0.5.23 pick per GPU and KV dtype.

Expected kernels come from the engine source cited in profiles/engines/vllm-0.33.yaml and
sglang-0.5.23.yaml:
  vLLM: a backend whose supports_sink() is False is skipped (v1/attention/backend.py:319-320@0.33.0);
    FlashAttention serves sinks only as FA3/FA4 (fa_utils.py:98-107, 319-322; flash_attn.py:452-455,
    474-475), FlashInfer only on sm_90, sm_10x and sm_12x through TRT-LLM kernels (flashinfer.py:706-726),
    Triton always (triton_attn.py:387-388) but stores FP8 KV only from sm_89 (triton_attn.py:510-524);
    an NVFP4 cache is FlashInfer-only and its FA2 path refuses sinks (flashinfer.py:114-115, 676-690).
  SGLang: the gpt-oss override sets fa3 on sm_9x, trtllm_mha on sm_10x, triton elsewhere
    (arg_groups/model_overrides/gpt_oss.py:29-44@0.5.23), and the NVFP4 prefill resolver accepts only
    flashinfer / trtllm_mha (arg_groups/kv_cache_hook.py:25-63), before the architecture check.
The demo checkpoints are the bundled config-only gpt-oss-20b and Qwen3-8B NVFP4 (ModelOpt, FP8 KV).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from advisor.checkpoint.demo import demo_path
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_versions import engines_dir
from advisor.yamlio import load_yaml_file
from kernel_path_builders import gpu

GPUS = ("rtx-3090", "rtx-4090", "h100", "b200", "rtx-5090")
NO_FI = {"flashinfer": False}


@pytest.fixture(scope="module")
def gpt_oss():
    ck = inspect_checkpoint(str(demo_path("gpt-oss-20b-mxfp4")))
    assert ck.arch.model_type == "gpt_oss" and ck.arch.head_dim == 64 and not ck.kv_cache_quant
    return ck


@pytest.fixture(scope="module")
def qwen3():
    ck = inspect_checkpoint(str(demo_path("qwen3-8b-nvfp4")))
    assert ck.arch.model_type == "qwen3" and ck.kv_cache_quant == "fp8"
    return ck


def _attn(ck, gid, engine, kv=None, **opts):
    exp = explain(ck, gpu(gid), engine=engine, options=InstallOptions(kv_cache_dtype=kv, **opts))
    return exp, next(d for d in exp.decisions if d.layer_class == "attention_kv")


def _rejection(d, kernel):
    return next(r.reason for r in d.rejected if r.kernel == kernel)


# ---------------------------------------------------------------- vLLM 0.33, gpt-oss

# (gpu, --kv-cache-dtype, install options, kernel (None: does not run), mma, stored KV, error substring)
VLLM = [
    ("rtx-3090", None, {}, "TRITON_ATTN", "hmma_bf16", "bf16", None),
    ("rtx-3090", "fp8", {}, None, "none", "fp8_e4m3", "native FP8 (fp8e4nv) requires SM89+"),
    ("rtx-3090", "nvfp4", {}, None, "none", "nvfp4", "No valid attention backend found for kv_cache_dtype=nvfp4"),
    ("rtx-4090", None, {}, "TRITON_ATTN", "hmma_bf16", "bf16", None),
    ("rtx-4090", "fp8", {}, "TRITON_ATTN", "hmma_bf16", "fp8_e4m3", None),
    ("rtx-4090", "nvfp4", {}, None, "none", "nvfp4", "No valid attention backend found for kv_cache_dtype=nvfp4"),
    ("h100", None, {}, "FLASH_ATTN", "wgmma_bf16", "bf16", None),                 # FA3 serves sinks
    ("h100", "fp8", {}, "FLASH_ATTN", "wgmma_e4m3", "fp8_e4m3", None),
    ("h100", "nvfp4", {}, None, "none", "nvfp4", "No valid attention backend found for kv_cache_dtype=nvfp4"),
    ("b200", None, {}, "FLASHINFER", "tcgen05_bf16", "bf16", None),               # TRT-LLM-gen serves sinks
    ("b200", "fp8", {}, "FLASHINFER", "tcgen05_e4m3", "fp8_e4m3", None),
    ("b200", "nvfp4", {}, "FLASHINFER (TRT-LLM attention)", "tcgen05_bf16", "nvfp4", None),
    ("b200", None, NO_FI, "FLASH_ATTN (FA4)", "tcgen05_bf16", "bf16", None),     # FA4 serves sinks
    ("rtx-5090", None, {}, "FLASHINFER", "hmma_bf16", "bf16", None),             # XQA decode + sink prefill
    ("rtx-5090", "fp8", {}, "FLASHINFER", "hmma_bf16", "fp8_e4m3", None),
    ("rtx-5090", "nvfp4", {}, None, "none", "nvfp4", "No valid attention backend found for kv_cache_dtype=nvfp4"),
    ("rtx-5090", None, NO_FI, "TRITON_ATTN", "hmma_bf16", "bf16", None),
    ("rtx-5090", "fp8", NO_FI, "TRITON_ATTN", "hmma_bf16", "fp8_e4m3", None),
    ("thor", None, {}, "TRITON_ATTN", "tcgen05_bf16", "bf16", None),              # sm_11x: FA2, no TRT-LLM sinks
]


@pytest.mark.parametrize("gid, kv, opts, kernel, mma, stored, error", VLLM)
def test_vllm_gpt_oss_attention(gpt_oss, gid, kv, opts, kernel, mma, stored, error):
    _, d = _attn(gpt_oss, gid, "vllm", kv, **opts)
    assert d.kernel == kernel and d.runs == (error is None), (d.kernel, d.error)
    assert d.mma == mma and d.kv_cache_dtype == stored
    if error:
        assert error in d.error
    assert d.reasons and all(r.reason.strip() for r in d.rejected)


@pytest.mark.parametrize("gid", ["rtx-3090", "rtx-4090", "rtx-5090", "thor"])
def test_vllm_fa2_and_flashinfer_say_why_they_skip_sinks(gpt_oss, gid):
    _, d = _attn(gpt_oss, gid, "vllm", None, **NO_FI)
    fa = _rejection(d, "FLASH_ATTN")
    assert "attention sinks" in fa and ("FA3 or FA4" in fa)
    assert "fa_utils.py:319-322" in fa
    _, d = _attn(gpt_oss, gid, "vllm")
    if gpu(gid).sm < 120:
        fi = _rejection(d, "FLASHINFER")
        assert "attention sinks" in fi and "flashinfer.py:706-726" in fi


def test_vllm_nvfp4_kv_gives_the_first_reason_vllm_gives(gpt_oss):
    """supports_combination checks head size 64 before sinks (flashinfer.py:676-690); gpt-oss has both."""
    _, d = _attn(gpt_oss, "rtx-5090", "vllm", "nvfp4")
    assert "fa2 prefill misreads an NVFP4 KV cache at head_size 64" in _rejection(d, "FLASHINFER (FA2 path)")


def test_vllm_forced_flash_attn_fails_for_gpt_oss_below_fa3(gpt_oss):
    _, d = _attn(gpt_oss, "rtx-4090", "vllm", flags=(("attention_backend", "FLASH_ATTN"),))
    assert not d.runs and d.kernel is None and "No valid attention backend" in d.error
    _, d = _attn(gpt_oss, "h100", "vllm", flags=(("attention_backend", "FLASH_ATTN"),))
    assert d.runs and d.kernel == "FLASH_ATTN"


# ---------------------------------------------------------------- SGLang 0.5.23, gpt-oss

# (gpu, --kv-cache-dtype, kernel (None: refused before kernel choice), mma, error substring)
SGLANG = [
    ("rtx-3090", None, "triton", "hmma_bf16", None),
    # selected, then fails: Triton 3.9 refuses fp8e4nv below sm_89 (issue 26: its real message is quoted)
    ("rtx-3090", "fp8_e4m3", "triton", "none", "fp8e4nv not supported in this architecture"),
    ("rtx-3090", "nvfp4", None, "none", "backend 'triton' provides neither"),
    ("rtx-4090", None, "triton", "hmma_bf16", None),
    ("rtx-4090", "fp8_e4m3", "triton", "hmma_bf16", None),
    ("rtx-4090", "nvfp4", None, "none", "backend 'triton' provides neither"),
    ("h100", None, "fa3", "wgmma_bf16", None),
    ("h100", "fp8_e4m3", "fa3", "wgmma_bf16", None),
    ("h100", "nvfp4", None, "none", "backend 'fa3' provides neither"),
    ("b200", None, "trtllm_mha", "tcgen05_bf16", None),
    ("b200", "fp8_e4m3", "trtllm_mha", "tcgen05_bf16", None),
    ("b200", "nvfp4", "trtllm_mha (NVFP4 KV, native prefill)", "tcgen05_bf16", None),
    ("rtx-5090", None, "triton", "hmma_bf16", None),
    ("rtx-5090", "fp8_e4m3", "triton", "hmma_bf16", None),
    ("rtx-5090", "nvfp4", None, "none", "backend 'triton' provides neither"),
    ("gb10", "nvfp4", None, "none", "backend 'triton' provides neither"),
]


@pytest.mark.parametrize("gid, kv, kernel, mma, error", SGLANG)
def test_sglang_gpt_oss_attention(gpt_oss, gid, kv, kernel, mma, error):
    _, d = _attn(gpt_oss, gid, "sglang", kv)
    assert d.kernel == kernel and d.runs == (error is None), (d.kernel, d.error)
    assert d.mma == mma
    if error:
        assert error in d.error


@pytest.mark.parametrize("gid", ["rtx-5090", "gb10"])
def test_sglang_nvfp4_kv_on_sm12x_is_refused_for_gpt_oss_only(gpt_oss, qwen3, gid):
    exp, d = _attn(gpt_oss, gid, "sglang", "nvfp4")
    assert not exp.runs and any("refused before kernel choice" in r for r in d.reasons)
    assert "Remedy: --kv-cache-dtype fp8_e4m3" in " ".join(d.reasons)
    _, q = _attn(qwen3, gid, "sglang", "nvfp4")           # no sinks, no override: the FP8-workspace path
    assert q.runs and q.kernel.startswith("trtllm_mha decode + flashinfer prefill")


# ---------------------------------------------------------------- a model without sinks keeps its path

# Qwen3-8B NVFP4 (ModelOpt, declares FP8 KV: vLLM's auto resolves to fp8, SGLang's to fp8_e4m3).
QWEN3 = {
    ("vllm", None): {"rtx-3090": "FLASHINFER", "rtx-4090": "FLASHINFER", "h100": "FLASH_ATTN",
                     "b200": "FLASHINFER", "rtx-5090": "FLASHINFER"},
    ("vllm", "bfloat16"): {"rtx-3090": "FLASH_ATTN", "rtx-4090": "FLASH_ATTN", "h100": "FLASH_ATTN",
                           "b200": "FLASHINFER", "rtx-5090": "FLASH_ATTN"},
    ("vllm", "nvfp4"): {"rtx-3090": "FLASHINFER (FA2 path)", "rtx-4090": "FLASHINFER (FA2 path)",
                        "h100": "FLASHINFER (FA2 path)", "b200": "FLASHINFER (TRT-LLM attention)",
                        "rtx-5090": "FLASHINFER (FA2 path)"},
    ("sglang", None): {"rtx-3090": "flashinfer", "rtx-4090": "flashinfer", "h100": "fa3",
                       "b200": "trtllm_mha", "rtx-5090": "flashinfer"},
    ("sglang", "nvfp4"): {"rtx-3090": None, "rtx-4090": None, "h100": None,
                          "b200": "trtllm_mha (NVFP4 KV, native prefill)",
                          "rtx-5090": "trtllm_mha decode + flashinfer prefill (NVFP4 KV via an FP8 workspace)"},
}


@pytest.mark.parametrize("engine, kv, gid", [(e, kv, g) for (e, kv) in QWEN3 for g in GPUS])
def test_a_model_without_sinks_keeps_its_attention_backend(qwen3, engine, kv, gid):
    _, d = _attn(qwen3, gid, engine, kv)
    assert d.kernel == QWEN3[(engine, kv)][gid]
    assert d.runs == (d.kernel is not None)
    assert not any("attention sinks (this model has them)" in r.reason for r in d.rejected)


def _strip_sink_rules(node):
    """The rule data minus every attention_sinks gate and every refusal keyed on gpt-oss."""
    if isinstance(node, dict):
        return {k: _strip_sink_rules(v) for k, v in node.items()}
    if isinstance(node, list):
        out = []
        for v in node:
            if isinstance(v, dict) and "attention_sinks" in v:
                continue
            if isinstance(v, dict) and "unless" in v and "gpt_oss" in repr(v["unless"]):
                continue
            out.append(_strip_sink_rules(v))
        return out
    return node


@pytest.mark.parametrize("engine, version", [("vllm", "0.33"), ("sglang", "0.5.23")])
def test_sink_rules_are_inert_for_a_model_without_sinks(qwen3, tmp_path, engine, version):
    """Removing every sink gate and gpt-oss refusal changes nothing for Qwen3, on every GPU and KV dtype."""
    raw = load_yaml_file(engines_dir() / f"{engine}-{version}.yaml", "rule file")
    stripped = _strip_sink_rules(raw)
    assert repr(stripped) != repr(raw)                        # there were sink rules to remove
    (tmp_path / f"{engine}-{version}.yaml").write_text(yaml.safe_dump(stripped, sort_keys=False))
    kvs = {"vllm": (None, "bfloat16", "fp8", "nvfp4"), "sglang": (None, "bf16", "fp8_e4m3", "nvfp4")}[engine]
    for gid in GPUS + ("thor", "gb10", "a100"):
        for kv in kvs:
            for opts in ({}, NO_FI):
                o = InstallOptions(kv_cache_dtype=kv, **opts)
                real = explain(qwen3, gpu(gid), engine=engine, version=version, options=o)
                bare = explain(qwen3, gpu(gid), engine=engine, version=version, options=o, rules_dir=tmp_path)
                assert _unlisted_sink_gate(real) == bare, (gid, kv, opts)


def _unlisted_sink_gate(exp):
    """A passed `attention_sinks: false` gate is listed among the winner's gates; the stripped file has none."""
    ds = tuple(replace(d, reasons=tuple(r.replace("; attention sinks False", "") for r in d.reasons))
               for d in exp.decisions)
    return replace(exp, decisions=ds)


# ---------------------------------------------------------------- the failing KV cache is named by its dtype

@pytest.mark.parametrize("engine, gid, kv, label", [
    ("vllm", "rtx-3090", "nvfp4", "KV nvfp4"),
    ("vllm", "rtx-3090", "fp8", "KV fp8_e4m3"),
    ("sglang", "rtx-5090", "nvfp4", "KV nvfp4"),
])
def test_a_kv_cache_that_cannot_run_is_named_by_the_requested_dtype(gpt_oss, engine, gid, kv, label):
    exp, d = _attn(gpt_oss, gid, engine, kv)
    assert not d.runs and d.checkpoint_scheme == label
    assert f"the attention ({label}) cannot run" in exp.summary
    assert "(KV bf16) cannot run" not in exp.summary


def test_a_kv_cache_that_runs_keeps_the_checkpoint_label(gpt_oss, qwen3):
    _, d = _attn(gpt_oss, "rtx-4090", "vllm", "fp8")
    assert d.runs and d.checkpoint_scheme == "KV bf16" and d.effective_scheme == "KV fp8_e4m3"
    _, d = _attn(qwen3, "rtx-4090", "vllm", "nvfp4")
    assert d.runs and d.checkpoint_scheme == "KV fp8" and d.effective_scheme == "KV nvfp4"

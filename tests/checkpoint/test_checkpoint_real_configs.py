"""The real config examples (checkpoint-formats.md §6 and the same source folder) as config-only checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from corpus_files import real_configs_dir, require

DATA = require(real_configs_dir)

# name -> (label, producer, declared kv cache quant)
EXPECTED = {
    "MiniMaxAI--MiniMax-M2.5": ("W8A8-FP8", "fp8", None),
    "Qwen--Qwen3-8B": ("BF16", "none", None),
    "Qwen--Qwen3-30B-A3B-FP8": ("W8A8-FP8", "fp8", None),
    "Qwen--Qwen3-32B-FP8": ("W8A8-FP8", "fp8", None),
    "Qwen--Qwen3-32B-FP8-Static-PerTensor": ("W8A8-FP8", "modelopt", "fp8"),     # E2: ModelOpt 0.31 layout
    "Qwen--Qwen3.5-27B": ("BF16", "none", None),
    "deepseek-ai--DeepSeek-V3": ("W8A8-FP8", "fp8", None),
    "deepseek-ai--DeepSeek-V3.2": ("W8A8-FP8", "fp8", None),                      # E6 (scale_fmt ue8m0)
    "meta-llama--Meta-Llama-3.1-8B": ("BF16", "none", None),
    "moonshotai--Kimi-K2.5": ("W4A16-INT4", "compressed-tensors", None),          # E8, nested text_config
    "moonshotai--Kimi-K3": ("W4A16-MXFP4", "compressed-tensors", None),           # E9
    "nvidia--DeepSeek-V3.1-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--DeepSeek-V4-Flash-NVFP4": ("MIXED", "fp8", None),   # FP8-block linears + NVFP4 experts (vLLM dsv4)
    "nvidia--GLM-5-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--Gemma-4-31B-IT-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),            # E4
    "nvidia--Kimi-K2.6-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--Llama-3.1-70B-Instruct-FP8": ("W8A8-FP8", "modelopt", "fp8"),        # E1: old layout
    "nvidia--MiniMax-M2.5-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8": ("W8A8-FP8", "modelopt", "fp8"),
    "nvidia--Qwen3-235B-A22B-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),           # E3
    "nvidia--Qwen3.5-122B-A10B-NVFP4": ("W4A4-NVFP4", "modelopt", "fp8"),
    "nvidia--Qwen3.6-27B-NVFP4": ("MIXED", "modelopt", "fp8"),                    # E5
    "nvidia--Qwen3.6-35B-A3B-NVFP4": ("MIXED", "modelopt", "fp8"),                # E5b
    "openai--gpt-oss-120b": ("W4A16-MXFP4", "mxfp4", None),                       # E7
    "openai--gpt-oss-20b": ("W4A16-MXFP4", "mxfp4", None),
    "stepfun-ai--Step-3.7-Flash-FP8": ("W8A8-FP8", "fp8", None),
    "zai-org--GLM-5-FP8": ("W8A8-FP8", "fp8", None),
}


def _folder(tmp_path: Path, name: str) -> str:
    d = tmp_path / name
    d.mkdir()
    shutil.copy(DATA / f"{name}_config.json", d / "config.json")
    hq = DATA / f"{name}_hf_quant_config.json"
    if hq.exists():
        shutil.copy(hq, d / "hf_quant_config.json")
    return str(d)


def _text(cfg: dict) -> dict:
    return cfg.get("text_config", cfg)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_config_label(tmp_path, name):
    label, producer, kv = EXPECTED[name]
    info = inspect_checkpoint(_folder(tmp_path, name))
    assert (info.label, info.producer, info.kv_cache_quant) == (label, producer, kv)
    assert info.totals.sizes_from == "config"
    cfg = _text(json.loads((DATA / f"{name}_config.json").read_text()))
    assert info.arch.num_layers == cfg.get("num_hidden_layers", info.arch.num_layers)
    assert info.arch.hidden_size == cfg["hidden_size"]
    if label != "BF16":
        assert info.totals.stored_bytes < 2 * info.totals.params    # quantized: below 16 bits per weight


def test_all_real_configs_classify(tmp_path):
    """Every stored real config classifies without error into a known scheme."""
    from advisor.checkpoint.model import SCHEMES

    names = sorted({p.name.rsplit("_", 1)[0] for p in DATA.glob("*_config.json")})
    names = [n for n in names if not n.endswith("_hf_quant")]
    assert len(names) >= 60
    for n in names:
        info = inspect_checkpoint(_folder(tmp_path, n))
        assert info.label in SCHEMES, n
        assert info.totals.params > 0 and info.arch.num_layers > 0, n


def test_mixed_qwen36_27b_modules(tmp_path):
    info = inspect_checkpoint(_folder(tmp_path, "nvidia--Qwen3.6-27B-NVFP4"))
    hq = json.loads((DATA / "nvidia--Qwen3.6-27B-NVFP4_hf_quant_config.json").read_text())
    layers = hq["quantization"]["quantized_layers"]
    fp8 = [k for k, v in layers.items() if v["quant_algo"] == "FP8"]
    by_name = {g.name: g for g in info.modules}
    # every FP8 entry of quantized_layers is an FP8 group with the matching count
    for suffix in ("linear_attn.in_proj_qkv", "linear_attn.out_proj", "self_attn.q_proj"):
        g = by_name[f"model.language_model.layers.*.{suffix}"]
        assert g.scheme == "W8A8-FP8"
        assert g.count == sum(1 for k in fp8 if k.endswith(suffix))
    assert by_name["model.language_model.layers.*.mlp.gate_proj"].scheme == "W4A16-NVFP4"
    assert by_name["lm_head"].scheme == "W4A16-NVFP4"
    # in_proj_a/b are not in quantized_layers: kept 16-bit; MTP is excluded
    kept = {g.name for g in info.kept_bf16}
    assert "model.language_model.layers.*.linear_attn.in_proj_a" in kept
    assert any(n.startswith("mtp.") for n in kept)
    cfg = _text(json.loads((DATA / "nvidia--Qwen3.6-27B-NVFP4_config.json").read_text()))
    assert info.arch.kv_layers == cfg["layer_types"].count("full_attention")
    assert info.arch.linear_attention_layers == cfg["layer_types"].count("linear_attention")
    assert info.arch.has_vision and info.arch.mtp_layers == 1
    assert set(info.scheme_shares) == {"W8A8-FP8", "W4A16-NVFP4"}


def test_e5b_contradiction_and_moe(tmp_path):
    info = inspect_checkpoint(_folder(tmp_path, "nvidia--Qwen3.6-35B-A3B-NVFP4"))
    assert any(f.code == "modelopt-config-groups-contradict" for f in info.findings)
    experts = info.modules_with_role("expert")
    assert experts and all(g.scheme == "W4A16-NVFP4" for g in experts)   # quantized_layers, not config_groups
    cfg = _text(json.loads((DATA / "nvidia--Qwen3.6-35B-A3B-NVFP4_config.json").read_text()))
    assert info.arch.moe.num_experts == cfg["num_experts"] and info.arch.moe.top_k == cfg["num_experts_per_tok"]
    assert info.totals.active_params < info.totals.params / 5


def test_deepseek_mla_and_mtp(tmp_path):
    info = inspect_checkpoint(_folder(tmp_path, "deepseek-ai--DeepSeek-V3"))
    cfg = json.loads((DATA / "deepseek-ai--DeepSeek-V3_config.json").read_text())
    a = info.arch
    assert a.mla.kv_lora_rank == cfg["kv_lora_rank"] and a.mla.qk_rope_head_dim == cfg["qk_rope_head_dim"]
    assert a.moe.moe_layers == cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    assert a.moe.num_shared_experts == cfg["n_shared_experts"] and a.mtp_layers == 1
    # block FP8 with ue8m0-free scales: ~1 byte per weight
    q = next(g for g in info.modules if g.name.endswith("kv_b_proj"))
    assert q.weight.block == (128, 128) and q.scheme == "W8A8-FP8"
    mtp = info.modules_with_role("mtp")
    assert mtp and all(g.layers == (cfg["num_hidden_layers"],) for g in mtp if g.layers)
    # 671B + MTP ~ 685B parameters, ~37B active
    assert 6.7e11 < info.totals.params < 7.0e11 and 3.3e10 < info.totals.active_params < 4.0e10


def test_hybrid_mamba_and_sliding(tmp_path):
    info = inspect_checkpoint(_folder(tmp_path, "nvidia--Nemotron-H-56B-Base-8K"))
    pat = json.loads((DATA / "nvidia--Nemotron-H-56B-Base-8K_config.json").read_text())["hybrid_override_pattern"]
    assert info.arch.kv_layers == pat.count("*") and info.arch.linear_attention_layers == pat.count("M")
    info = inspect_checkpoint(_folder(tmp_path, "openai--gpt-oss-20b"))
    lt = json.loads((DATA / "openai--gpt-oss-20b_config.json").read_text())["layer_types"]
    assert info.arch.sliding_window_layers == lt.count("sliding_attention") and info.arch.sliding_window == 128
    assert info.arch.kv_layers == lt.count("full_attention")

"""Per-layer architectures synthesized as their checkpoints are: Nemotron-NAS / DeciLM block_configs,
Gemma 4 MoE beside its dense MLP with a vision tower, and KV per layer with each layer's own KV heads and
head size (sliding layers capped at the window)."""

from __future__ import annotations

import json
import shutil

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost.kv import KvDtype, layout
from corpus_files import real_configs_dir, require

DATA = require(real_configs_dir)
BF16_KV = KvDtype("bf16", "bf16", 16)


def _folder(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    shutil.copy(DATA / f"{name}_config.json", d / "config.json")
    if (DATA / f"{name}_hf_quant_config.json").exists():
        shutil.copy(DATA / f"{name}_hf_quant_config.json", d / "hf_quant_config.json")
    return str(d)


def _nas_expected(cfg):
    """Parameters of a DeciLM model from its block_configs, as vLLM's nemotron_nas.py builds the layers."""
    H, heads, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"]
    hd = H // heads
    total = V * H * (1 if cfg.get("tie_word_embeddings") else 2) + H
    kv_per_layer = []
    for b in cfg["block_configs"]:
        att, ffn = b["attention"], b["ffn"]
        if not att["no_op"]:
            kv = heads // att["n_heads_in_group"]
            total += 2 * heads * hd * H + 2 * kv * hd * H + H       # q, o, k, v and the input norm
            kv_per_layer.append(kv)
        if not ffn["no_op"]:
            inter = int(2 * ffn["ffn_mult"] * H / 3)
            inter += (256 - inter % 256) % 256
            total += 3 * inter * H + H
    return total, kv_per_layer


def test_nemotron_nas_blocks(tmp_path):
    name = "nvidia--Llama-3_3-Nemotron-Super-49B-v1"
    cfg = json.loads((DATA / f"{name}_config.json").read_text())
    assert cfg["intermediate_size"] is None and cfg["num_key_value_heads"] is None
    info = inspect_checkpoint(_folder(tmp_path, name))
    params, kv = _nas_expected(cfg)
    assert abs(info.totals.params / params - 1) < 0.001
    assert info.modules_with_role("mlp_down") and info.modules_with_role("mlp_gate_up")     # the MLPs exist
    assert info.arch.kv_layers == len(kv) and info.arch.num_kv_heads == max(set(kv), key=kv.count)
    # KV per token: the attention layers only, each with its own KV heads
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    want = sum(2 * k * hd * 2 for k in kv)
    assert layout(info.arch).bytes_per_token(BF16_KV) == pytest.approx(want)


def test_gemma4_moe_and_vision_named_as_the_checkpoint(tmp_path):
    """ModelOpt's exclude list (layers.N.mlp*, router*, self_attn*, vision_tower*) must leave exactly the
    experts NVFP4: with names as transformers' Gemma 4 model (no checkpoint renaming) holds them."""
    info = inspect_checkpoint(_folder(tmp_path, "nvidia--Gemma-4-26B-A4B-NVFP4"))
    by_role = {}
    for g in info.modules:
        by_role.setdefault(g.role, set()).add(g.scheme)
    assert by_role["expert"] == {"W4A4-NVFP4"}
    assert by_role["vision"] == {"BF16"} and by_role["mlp_gate_up"] == {"BF16"} and by_role["attn_qkv"] == {"BF16"}
    names = {g.name for g in info.modules}
    assert "model.language_model.layers.*.experts.gate_up_proj" in names
    assert "model.language_model.layers.*.router.proj" in names
    assert any(n.startswith("model.vision_tower.encoder.layers.*.") for n in names)


def test_gemma4_parameters_match_transformers_model(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForImageTextToText

    raw = json.loads((DATA / "google--gemma-4-26B-A4B_config.json").read_text())
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(AutoConfig.for_model(
            raw["model_type"], **{k: v for k, v in raw.items() if k != "model_type"}))
    names = {k for k in model.state_dict() if ".language_model.layers.0." in k}
    theirs = sum(p.numel() for n, p in model.named_parameters() if "audio" not in n)
    info = inspect_checkpoint(_folder(tmp_path, "google--gemma-4-26B-A4B"))
    assert abs(info.totals.params / theirs - 1) < 0.01
    # per-layer attention: full layers have no v_proj (attention_k_eq_v) and their own head size
    assert "model.language_model.layers.0.self_attn.v_proj.weight" in names     # layer 0 is sliding
    full = raw["text_config"]["layer_types"].index("full_attention")
    assert not any(f"language_model.layers.{full}.self_attn.v_proj" in k for k in model.state_dict())


def test_gemma4_kv_per_layer_type(tmp_path):
    info = inspect_checkpoint(_folder(tmp_path, "google--gemma-4-26B-A4B"))
    tc = json.loads((DATA / "google--gemma-4-26B-A4B_config.json").read_text())["text_config"]
    types = tc["layer_types"]
    full, slid = types.count("full_attention"), types.count("sliding_attention")
    per_full = 2 * tc["num_global_key_value_heads"] * tc["global_head_dim"] * 2      # K and V, bf16
    per_slid = 2 * tc["num_key_value_heads"] * tc["head_dim"] * 2
    kv = layout(info.arch)
    ctx, win = 32768, tc["sliding_window"]
    assert kv.request_bytes(BF16_KV, ctx) == pytest.approx(full * per_full * ctx + slid * per_slid * win)
    assert kv.request_bytes(BF16_KV, 100) == pytest.approx((full * per_full + slid * per_slid) * 100)

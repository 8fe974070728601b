"""Config-only module names of the MiniMax / Mixtral-style MoE families and the sparse-attention indexers, and the
doctor finding for a ``quantized_layers`` entry that names no module (it would otherwise stay 16-bit silently).

Names follow what the checkpoints publish: experts ``block_sparse_moe.experts.N.w1/w3/w2`` (transformers
conversion_mapping.py@5.24.0 renames from them; vLLM 0.33 loads them as ckpt names w1/w2/w3), MiniMax-M3's
``self_attn.index_q_proj/index_k_proj`` on its sparse layers and DeepSeek-V3.2 / GLM-5's ``self_attn.indexer.*``.
"""

from __future__ import annotations

import json
import re

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.synth import modules_from_config
from ckpt_builders import L, LLAMA_CONFIG, llama_tensors
from corpus_files import MANIFEST, entry_folder, require

ENTRIES = {e["id"]: e for e in MANIFEST["entries"]}

# A MiniMax-M3 VL config in the shape of nvidia/MiniMax-M3-NVFP4's config.json, scaled down: 1 dense layer then
# 2 MoE layers, sparse attention (with the indexer) on the MoE layers, a 2-layer CLIP-style vision tower.
H, HEADS, KVH, HD, E, INTER, DENSE, IDX_H, IDX_D, V = 64, 4, 2, 16, 4, 32, 128, 2, 16, 256
M3_TEXT = {
    "hidden_size": H, "intermediate_size": INTER, "num_hidden_layers": 3, "num_attention_heads": HEADS,
    "num_key_value_heads": KVH, "head_dim": HD, "vocab_size": V, "max_position_embeddings": 4096,
    "use_qk_norm": True, "qk_norm_type": "per_head", "hidden_act": "swigluoai", "tie_word_embeddings": False,
    "dense_intermediate_size": DENSE, "shared_intermediate_size": INTER, "num_local_experts": E,
    "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_layer_freq": [0, 1, 1], "num_mtp_modules": 1,
    "sparse_attention_config": {"use_sparse_attention": True, "sparse_index_dim": IDX_D,
                                "sparse_num_index_heads": IDX_H, "sparse_disable_index_value": [0, 1, 1],
                                "sparse_attention_freq": [0, 1, 1]},
    "architectures": ["MiniMaxM3SparseForCausalLM"], "dtype": "bfloat16",
}
M3_VL = {
    "architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3_vl",
    "text_config": M3_TEXT, "torch_dtype": "bfloat16", "projector_hidden_size": H,
    "vision_config": {"hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 64,
                      "patch_size": 14, "num_channels": 3, "model_type": "clip_vision_model",
                      "img_token_compression_config": {"spatial_merge_size": 2, "temporal_patch_size": 2}},
}
LM = "language_model.model.layers"


def _m3_release_layers() -> dict:
    """quantized_layers as the NVIDIA release writes them: routed experts NVFP4, everything else MXFP8."""
    out = {}
    for i in range(3):
        for n in ("q_proj", "k_proj", "v_proj", "o_proj") + (("index_q_proj", "index_k_proj") if i else ()):
            out[f"{LM}.{i}.self_attn.{n}"] = {"quant_algo": "MXFP8"}
        mlp = "mlp" if i == 0 else "block_sparse_moe.shared_experts"
        for n in ("gate_proj", "up_proj", "down_proj"):
            out[f"{LM}.{i}.{mlp}.{n}"] = {"quant_algo": "MXFP8"}
        for e in range(E if i else 0):
            for w in ("w1", "w2", "w3"):
                out[f"{LM}.{i}.block_sparse_moe.experts.{e}.{w}"] = {"quant_algo": "NVFP4", "group_size": 16}
    return out


def _m3_folder(tmp_path, layers: dict):
    qc = {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None, "quant_method": "modelopt",
          "exclude_modules": ["lm_head", "model.embed_tokens", "vision_tower", "multi_modal_projector",
                              "patch_merge_mlp"] + [f"{LM}.{i}.block_sparse_moe.gate" for i in (1, 2)],
          "quantized_layers": layers}
    (tmp_path / "config.json").write_text(json.dumps({**M3_VL, "quantization_config": qc}))
    return str(tmp_path)


def _group(info, suffix: str):
    return next(g for g in info.modules if g.name.endswith(suffix))


def test_minimax_m3_release_is_mixed_with_nvfp4_experts(tmp_path):
    """Every quantized_layers entry lands: experts NVFP4, attention / indexer / shared / dense MXFP8 (was W8A8-FP8
    with 16-bit experts, because the experts were named gate_proj/up_proj/down_proj and the indexer was missing)."""
    info = inspect_checkpoint(_m3_folder(tmp_path, _m3_release_layers()))
    assert info.label == "MIXED" and 0 < info.scheme_shares["W4A4-NVFP4"] < 1
    for w in ("w1", "w2", "w3"):
        g = _group(info, f"block_sparse_moe.experts.*.{w}")
        assert (g.weight.format, g.count) == ("nvfp4", 2 * E)
    q = _group(info, "self_attn.q_proj")
    for n in ("index_q_proj", "index_k_proj"):
        g = _group(info, f"self_attn.{n}")
        assert (g.scheme, g.count, g.role) == (q.scheme, 2, "attn_qkv") and q.weight.format != "bf16"
    assert not any(f.code == "quantized-layers-unmatched" for f in info.findings)


def test_minimax_m3_modules_follow_the_checkpoint():
    """Without a quantization config to borrow names from: language_model.model.* / language_model.lm_head, dense
    MLP at dense_intermediate_size, experts w1/w3/w2, the indexer on sparse layers only, per-head q/k norms, and the
    vision tower under vision_tower.vision_model (the exclude list's names)."""
    mods = {m.name: m for m in modules_from_config(M3_VL)}
    assert {"language_model.model.embed_tokens", "language_model.lm_head", "language_model.model.norm"} <= set(mods)
    assert mods[f"{LM}.0.mlp.gate_proj"].out_f == DENSE
    w1, w3, w2 = (mods[f"{LM}.1.block_sparse_moe.experts.0.{w}"] for w in ("w1", "w3", "w2"))
    assert (w1.out_f, w1.in_f, w1.count, w3.out_f, w2.out_f, w2.in_f) == (INTER, H, E, INTER, H, INTER)
    assert mods[f"{LM}.1.block_sparse_moe.shared_experts.gate_proj"].out_f == INTER
    assert not any("gate_proj" in n and ".experts." in n for n in mods)
    assert f"{LM}.0.self_attn.index_q_proj" not in mods
    iq, ik = mods[f"{LM}.1.self_attn.index_q_proj"], mods[f"{LM}.2.self_attn.index_k_proj"]
    assert (iq.out_f, iq.in_f, ik.out_f) == (IDX_H * IDX_D, H, IDX_D)
    assert mods[f"{LM}.0.self_attn.q_norm"].out_f == HD
    vis = [n for n in mods if "vision" in n or n.startswith(("multi_modal_projector", "patch_merge_mlp"))]
    assert all(n.startswith(("vision_tower.vision_model.", "multi_modal_projector.", "patch_merge_mlp.")) for n in vis)
    assert mods["patch_merge_mlp.linear_1"].in_f == H * 2 * 2
    assert mods["vision_tower.vision_model.encoder.layers.1.mlp.fc1"].out_f == 64


def test_minimax_m3_mtp_layer_is_sparse_moe():
    """MTP blocks force sparse attention and MoE (vllm minimax_m3/nvidia/mtp.py:58-64) under model.mtp.layers.N."""
    cfg = {**M3_TEXT, "model_type": "minimax_m3", "num_nextn_predict_layers": 1}
    names = {m.name for m in modules_from_config(cfg)}
    mtp = {n for n in names if n.startswith("model.mtp.layers.0.")}
    want = {"enorm", "hnorm", "eh_proj", "final_layernorm", "self_attn.index_q_proj",
            "block_sparse_moe.experts.0.w1", "block_sparse_moe.shared_experts.down_proj"}
    assert {"model.mtp.layers.0." + n for n in want} <= mtp


@pytest.mark.parametrize("model_type,container", [
    ("mixtral", "block_sparse_moe"), ("minimax_m2", "block_sparse_moe"), ("phimoe", "block_sparse_moe"),
    ("minimax", "block_sparse_moe"), ("minimax_m3", "block_sparse_moe")])
def test_mixtral_style_experts_are_w1_w3_w2(model_type, container):
    cfg = {"model_type": model_type, "hidden_size": 64, "intermediate_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, "num_local_experts": 4,
           "num_experts_per_tok": 2, "hidden_act": "silu"}
    names = {re.sub(r"\.\d+\.", ".*.", m.name) for m in modules_from_config(cfg)}
    moe = {n for n in names if ".experts." in n or n.endswith(".gate")}
    assert moe == {f"model.layers.*.{container}.{n}" for n in ("gate", "experts.*.w1", "experts.*.w3", "experts.*.w2")}


def test_fp8_not_convert_gate_keeps_minimax_m2_experts_fp8():
    """MiniMax-M2.5's modules_to_not_convert ["gate", ...] matches the router only; experts named gate_proj were
    kept 16-bit by it (305 GB config-only instead of ~230 GB for a 229B-parameter FP8 model)."""
    info = inspect_checkpoint(str(require(entry_folder, ENTRIES["MiniMaxAI--MiniMax-M2.5"])))
    experts = [g for g in info.modules if g.role == "expert"]
    assert {g.name.rsplit(".", 1)[-1] for g in experts} == {"w1", "w2", "w3"}
    assert {g.weight.format for g in experts} == {"fp8_e4m3"}
    assert _group(info, "block_sparse_moe.gate").weight.format == "bf16"
    assert info.totals.stored_bytes < 1.03 * info.totals.params       # ~1 byte a weight


def test_real_minimax_m3_nvfp4_release():
    """nvidia/MiniMax-M3-NVFP4: MIXED, experts NVFP4, and the model size the card states (Total Parameters: 428B,
    huggingface.co/nvidia/MiniMax-M3-NVFP4 model card, release 2026-06-23) within 1 %."""
    info = inspect_checkpoint(str(require(entry_folder, ENTRIES["nvidia--MiniMax-M3-NVFP4"])))
    assert info.label == "MIXED" and info.scheme_shares["W4A4-NVFP4"] > 0.9
    assert {g.weight.format for g in info.modules if g.role == "expert"} == {"nvfp4"}
    assert abs(info.totals.params / 428e9 - 1) < 0.01
    assert not any(f.code == "quantized-layers-unmatched" for f in info.findings)


def _declared(folder) -> dict:
    for name in ("hf_quant_config.json", "config.json"):
        p = folder / name
        if p.is_file():
            d = json.loads(p.read_text())
            q = d.get("quantization") if isinstance(d.get("quantization"), dict) else d.get("quantization_config")
            if isinstance(q, dict) and isinstance(q.get("quantized_layers"), dict):
                return q["quantized_layers"]
    return {}


def test_every_declared_layer_of_the_corpus_is_synthesized():
    """Per-layer configs of the corpus (ModelOpt quantized_layers): every entry names a synthesized module."""
    from advisor.checkpoint.synth import names_absent

    checked, misses = 0, []
    for e in MANIFEST["entries"]:
        if not e["real"] or "duplicate_of" in e:
            continue
        folder = require(entry_folder, e)
        declared = _declared(folder)
        if not declared:
            continue
        checked += 1
        cfg = json.loads((folder / "config.json").read_text())
        text = "".join(p.read_text()[:200_000] for p in sorted(folder.iterdir()) if p.name != "config.json")
        mods = modules_from_config(cfg, quant_text=text or json.dumps(cfg.get("quantization_config"))[:200_000])
        absent = names_absent(declared, ((m.name, m.count) for m in mods))
        if absent:
            misses.append(f"{e['id']}: {len(absent)} of {len(declared)} name no module, e.g. {absent[:2]}")
    print(f"quantized_layers: {checked - len(misses)}/{checked} per-layer configs fully synthesized")
    assert checked >= 5 and not misses, "\n".join(misses)


def test_glm5_indexer_only_where_the_layer_computes_its_own():
    """GLM-5.3's IndexCache (index_topk_freq 4, offset 3): indexer modules exactly on the layers its indexer_types
    marks "full" (vllm deepseek_v2.py:1144-1168), and on the MTP layer."""
    cfg = json.loads((require(entry_folder, ENTRIES["zai-org--GLM-5.3"]) / "config.json").read_text())
    layers = {int(m.group(1)) for n in (x.name for x in modules_from_config(cfg))
              for m in [re.match(r"model\.layers\.(\d+)\.self_attn\.indexer\.wq_b$", n)] if m}
    full = {i for i, t in enumerate(cfg["indexer_types"]) if t == "full"}
    assert layers == full | {cfg["num_hidden_layers"]}


def test_deepseek_v32_indexer_sizes():
    cfg = json.loads((require(entry_folder, ENTRIES["deepseek-ai--DeepSeek-V3.2"]) / "config.json").read_text())
    mods = {m.name: m for m in modules_from_config(cfg)}
    n, d, qr, h = cfg["index_n_heads"], cfg["index_head_dim"], cfg["q_lora_rank"], cfg["hidden_size"]
    x = "model.layers.5.self_attn.indexer."
    shapes = [(mods[x + k].out_f, mods[x + k].in_f) for k in ("wq_b", "wk", "weights_proj")]
    assert shapes == [(n * d, qr), (d, h), (n, h)]
    assert sum(1 for k in mods if k.endswith("indexer.wq_b")) == cfg["num_hidden_layers"] + 1


# ------------------------------------------------------------------ the doctor finding

def test_unmatched_quantized_layer_is_a_finding_config_only(tmp_path):
    """A quantized_layers entry naming no synthesized module is reported, never silently 16-bit."""
    layers = _m3_release_layers()
    layers[f"{LM}.1.self_attn.index_v_proj"] = {"quant_algo": "MXFP8"}          # not built (index value disabled)
    layers[f"{LM}.1.block_sparse_moe.experts.{E}.w1"] = {"quant_algo": "NVFP4", "group_size": 16}   # one too many
    info = inspect_checkpoint(_m3_folder(tmp_path, layers))
    f = next(f for f in info.findings if f.code == "quantized-layers-unmatched")
    assert f.severity == "warn" and f.message.startswith(f"2 of {len(layers)} quantized_layers entries")
    assert "config.json" in f.message and "self_attn.index_v_proj" in f.message
    assert set(f.modules) == {f"{LM}.1.self_attn.index_v_proj", f"{LM}.1.block_sparse_moe.experts.{E}.w1"}


def test_unmatched_quantized_layer_is_a_finding_with_weights(build):
    """With safetensors files: an entry naming no tensor module is reported the same way."""
    layers = {f"model.layers.{i}.{m}.{n}": {"quant_algo": "FP8"} for i in range(L)
              for m, ns in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                            ("mlp", ("gate_proj", "up_proj", "down_proj"))) for n in ns}
    layers["model.layers.0.mlp.experts.0.w1"] = {"quant_algo": "FP8"}
    hq = {"producer": {"name": "modelopt", "version": "0.47.0"},
          "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}}
    info = inspect_checkpoint(build("mo", llama_tensors("mo_fp8"), dict(LLAMA_CONFIG), hf_quant=hq))
    f = next(f for f in info.findings if f.code == "quantized-layers-unmatched")
    assert f.modules == ("model.layers.0.mlp.experts.0.w1",) and "safetensors files" in f.message
    del layers["model.layers.0.mlp.experts.0.w1"]
    info = inspect_checkpoint(build("mo2", llama_tensors("mo_fp8"), dict(LLAMA_CONFIG), hf_quant=hq))
    assert not any(f.code == "quantized-layers-unmatched" for f in info.findings)


def test_names_absent_reads_containers_and_expert_stacks():
    from advisor.checkpoint.synth import names_absent

    mods = [("m.layers.0.mlp.experts.0.w1", 8), ("m.layers.0.self_attn.q_proj", 1), ("m.layers.1.mlp.experts.3.w2", 1)]
    declared = ["m.layers.0.mlp.experts", "m.layers.0.mlp.experts.7", "m.layers.0.mlp.experts.7.w1",
                "m.layers.0.self_attn.q_proj", "m.layers.1.mlp.experts.3.w2",
                "m.layers.0.mlp.experts.8.w1", "m.layers.0.mlp.experts.7.w2", "m.layers.1.mlp.experts.2.w2",
                "m.layers.0.self_attn.q"]
    assert names_absent(declared, mods) == declared[5:]

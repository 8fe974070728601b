"""Quantization configs of every producer on config-only folders (sizes from the architecture)."""

from __future__ import annotations

import json

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.roles import role_of

from ckpt_builders import LLAMA_CONFIG

MO = [
    ("FP8", "W8A8-FP8"), ("FP8_PER_CHANNEL_PER_TOKEN", "W8A8-FP8"), ("FP8_PB_WO", "W8A16-FP8"),
    ("fp8_pb_wo", "W8A16-FP8"), ("MXFP8", "W8A8-FP8"), ("W8A16", "W8A16-INT8"),
    ("W8A8_SQ_PER_CHANNEL", "W8A8-INT8"), ("NVFP4", "W4A4-NVFP4"), ("NVFP4_AWQ", "W4A4-NVFP4"),
    ("NVFP4_SVD", "W4A4-NVFP4"), ("W4A16_NVFP4", "W4A16-NVFP4"), ("W4A16_AWQ", "W4A16-INT4"),
    ("INT4_AWQ", "W4A16-INT4"), ("W4A8_AWQ", "W4A8-FP8"), ("W4A8_NVFP4_FP8", "W4A8-FP8"), ("mxfp4", "W4A4-MXFP4"),
    ("W4A8_MXFP4_FP8", "W4A8-FP8"),
]


def _cfg_folder(tmp_path, name, config, hf_quant=None, extra=None):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (d / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    for fname, obj in (extra or {}).items():
        (d / fname).write_text(json.dumps(obj))
    return str(d)


@pytest.mark.parametrize("algo,label", MO)
def test_modelopt_quant_algos(tmp_path, algo, label):
    hq = {"producer": {"name": "modelopt", "version": "0.47.0"},
          "quantization": {"quant_algo": algo, "kv_cache_quant_algo": "NVFP4", "group_size": 16,
                           "exclude_modules": ["lm_head"]}}
    info = inspect_checkpoint(_cfg_folder(tmp_path, "m", dict(LLAMA_CONFIG), hq))
    assert (info.label, info.producer, info.kv_cache_quant) == (label, "modelopt", "nvfp4")
    assert info.modules_with_role("lm_head")[0].scheme == "BF16"


def test_modelopt_unknown_algo(tmp_path):
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP3_MAGIC"}}
    info = inspect_checkpoint(_cfg_folder(tmp_path, "m", dict(LLAMA_CONFIG), hq))
    assert info.producer == "unknown" and info.label == "UNKNOWN"       # never a confident 16-bit label
    assert any(f.code == "unknown-quant-algo" for f in info.findings) and info.raw_quant_config == hq


def test_modelopt_031_string_kv_scheme(tmp_path):
    qc = {"config_groups": {"group_0": {"input_activations": {"dynamic": False, "num_bits": 8, "type": "float"},
                                        "weights": {"dynamic": False, "num_bits": 8, "type": "float"}}},
          "ignore": ["lm_head"], "quant_algo": "FP8", "kv_cache_scheme": "FP8",
          "producer": {"name": "modelopt", "version": "0.31.0"}}
    info = inspect_checkpoint(_cfg_folder(tmp_path, "m", dict(LLAMA_CONFIG, quantization_config=qc)))
    # no quant_method at all (0.31 layout): quant_algo + producer say ModelOpt
    assert info.label == "W8A8-FP8" and info.kv_cache_quant == "fp8"


def _ct(weights, acts=None, fmt="pack-quantized", targets=("Linear",), **kw):
    return {"config_groups": {"group_0": {"targets": list(targets), "weights": weights, "input_activations": acts}},
            "format": fmt, "ignore": ["lm_head"], "quant_method": "compressed-tensors", **kw}


CT = [
    ("W4AFP8", _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
                   {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}, "naive-quantized"),
     "W4A8-FP8"),
    ("W4A16_ASYM", _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": False}),
     "W4A16-INT4"),
    ("marlin-24", _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}, None, "marlin-24"),
     "W4A16-INT4"),
    ("FP8_BLOCK", _ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]},
                      {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": True},
                      "float-quantized"), "W8A8-FP8"),
    ("FP8 weight-only", _ct({"num_bits": 8, "type": "float", "strategy": "channel"}, None, "naive-quantized"),
     "W8A16-FP8"),
    ("MXFP4A16", _ct({"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32,
                      "scale_dtype": "torch.uint8"}, None, "mxfp4-pack-quantized"), "W4A16-MXFP4"),
    ("no strategy", _ct({"num_bits": 8, "type": "int"}, {"num_bits": 8, "type": "int", "dynamic": True},
                        "int-quantized"), "W8A8-INT8"),
]


@pytest.mark.parametrize("name,qc,label", CT, ids=[c[0] for c in CT])
def test_compressed_tensors_configs(tmp_path, name, qc, label):
    info = inspect_checkpoint(_cfg_folder(tmp_path, "c", dict(LLAMA_CONFIG, quantization_config=qc)))
    assert (info.label, info.producer) == (label, "compressed-tensors")


def test_ct_class_and_name_targets(tmp_path):
    qc = _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128},
             targets=["model.layers.0.mlp.down_proj", "re:.*self_attn\\.o_proj$"])
    info = inspect_checkpoint(_cfg_folder(tmp_path, "c", dict(LLAMA_CONFIG, quantization_config=qc)))
    q = {g.name: g.scheme for g in info.modules}
    assert q["model.layers.*.self_attn.o_proj"] == "W4A16-INT4"
    assert any(g.name == "model.layers.*.mlp.down_proj" and g.layers == (0,) and g.scheme == "W4A16-INT4"
               for g in info.modules)
    assert any(g.name == "model.layers.*.mlp.down_proj" and g.layers == (1,) and g.scheme == "BF16"
               for g in info.modules)


OTHER = [
    ("gptq", {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}, "W4A16-INT4"),
    ("gptq8", {"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": True}, "W8A16-INT8"),
    ("awq", {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True,
             "modules_to_not_convert": ["mlp.gate."]}, "W4A16-INT4"),
    ("bnb4", {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "W4A16-INT4"),
    ("bnb8", {"quant_method": "bitsandbytes", "load_in_8bit": True}, "W8A8-INT8"),
    ("fp8-tensor", {"quant_method": "fp8", "activation_scheme": "static"}, "W8A8-FP8"),
]


@pytest.mark.parametrize("name,qc,label", OTHER, ids=[c[0] for c in OTHER])
def test_other_methods(tmp_path, name, qc, label):
    info = inspect_checkpoint(_cfg_folder(tmp_path, "o", dict(LLAMA_CONFIG, quantization_config=qc)))
    assert info.label == label
    assert info.modules_with_role("lm_head")[0].scheme in ("BF16", "FP16")


def test_old_gptq_quantize_config_json(tmp_path):
    info = inspect_checkpoint(_cfg_folder(tmp_path, "g", dict(LLAMA_CONFIG), extra={
        "quantize_config.json": {"bits": 4, "group_size": 128, "desc_act": True, "sym": True}}))
    assert (info.label, info.producer) == ("W4A16-INT4", "gptq")


def test_tied_embeddings_and_nested_text_config(tmp_path):
    text = dict(LLAMA_CONFIG, tie_word_embeddings=True)
    cfg = {"architectures": ["X"], "model_type": "x_vl", "text_config": text, "tie_word_embeddings": True,
           "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128}}
    info = inspect_checkpoint(_cfg_folder(tmp_path, "t", cfg))
    assert info.arch.tie_word_embeddings and info.arch.has_vision
    assert not info.modules_with_role("lm_head")
    embed = info.modules_with_role("embed")[0]
    vision = sum(g.stored_bytes for g in info.modules_with_role("vision"))
    assert vision > 0
    # tied: the embedding matrix is the lm_head, read once per token; the vision tower is not read per token
    assert info.totals.bytes_per_token == info.totals.stored_bytes - vision
    assert embed.stored_bytes == 2 * LLAMA_CONFIG["vocab_size"] * LLAMA_CONFIG["hidden_size"]


@pytest.mark.parametrize("name,role", [
    ("model.layers.0.self_attn.q_proj", "attn_qkv"), ("model.layers.0.self_attn.o_proj", "attn_o"),
    ("model.layers.0.self_attn.kv_a_proj_with_mqa", "attn_qkv"), ("model.layers.0.self_attn.kv_a_layernorm", "norm"),
    ("model.layers.0.self_attn.q_norm", "norm"), ("model.layers.0.linear_attn.in_proj_qkvz", "gdn_in_proj"),
    ("model.layers.0.linear_attn.out_proj", "gdn_out_proj"), ("model.layers.0.linear_attn.conv1d", "conv"),
    ("backbone.layers.0.mixer.in_proj", "gdn_in_proj"), ("backbone.layers.0.mixer.out_proj", "gdn_out_proj"),
    ("model.layers.0.mlp.gate", "router"), ("model.layers.0.mlp.router", "router"),
    ("model.layers.0.block_sparse_moe.gate", "router"), ("model.layers.0.mlp.shared_expert_gate", "router"),
    ("model.layers.0.mlp.gate_proj", "mlp_gate_up"), ("model.layers.0.mlp.down_proj", "mlp_down"),
    ("model.layers.3.mlp.experts.7.up_proj", "expert"), ("model.layers.3.mlp.experts.gate_up_proj", "expert"),
    ("model.layers.3.mlp.shared_experts.down_proj", "shared_expert"), ("lm_head", "lm_head"),
    ("model.embed_tokens", "embed"), ("model.visual.blocks.0.attn.qkv", "vision"), ("mtp.fc", "mtp"),
    ("model.layers.61.eh_proj", "mtp"), ("model.norm", "norm"),
])
def test_roles(name, role):
    assert role_of(name, num_layers=61) == role

"""A tiny real ModelOpt NVFP4 checkpoint on disk (config.json + a safetensors file of zeros)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from advisor.checkpoint.demo import demo_path

_BYTES = {"U8": 1, "I8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2}

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "vocab_size": 256, "max_position_embeddings": 512, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                            "kv_cache_quant_algo": None, "ignore": ["lm_head"]},
}


def _nvfp4(prefix: str, n: int, k: int) -> dict:
    return {f"{prefix}.weight": ("U8", [n, k // 2]), f"{prefix}.weight_scale": ("F8_E4M3", [n, k // 16]),
            f"{prefix}.weight_scale_2": ("F32", []), f"{prefix}.input_scale": ("F32", [])}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = _BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def write_nvfp4_llama(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    h, i, kvd = 64, 128, 2 * 16
    tensors: dict = {"model.embed_tokens.weight": ("BF16", [256, h]), "lm_head.weight": ("BF16", [256, h]),
                     "model.norm.weight": ("BF16", [h])}
    for layer in range(2):
        p = f"model.layers.{layer}"
        tensors.update(_nvfp4(f"{p}.self_attn.q_proj", h, h))
        tensors.update(_nvfp4(f"{p}.self_attn.k_proj", kvd, h))
        tensors.update(_nvfp4(f"{p}.self_attn.v_proj", kvd, h))
        tensors.update(_nvfp4(f"{p}.self_attn.o_proj", h, h))
        tensors.update(_nvfp4(f"{p}.mlp.gate_proj", i, h))
        tensors.update(_nvfp4(f"{p}.mlp.up_proj", i, h))
        tensors.update(_nvfp4(f"{p}.mlp.down_proj", h, i))
        tensors[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        tensors[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
    write_safetensors(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


def write_gpt_oss(folder: Path) -> Path:
    """gpt-oss layout (transformers' Mxfp4GptOssExperts names), shrunk; config = the demo's real one, resized."""
    folder.mkdir(parents=True, exist_ok=True)
    h, inter, experts, heads, kv, hd, vocab, layers = 64, 64, 4, 4, 2, 16, 256, 2
    cfg = json.loads((demo_path("gpt-oss-20b-mxfp4") / "config.json").read_text())
    cfg.update({"hidden_size": h, "intermediate_size": inter, "num_local_experts": experts, "num_experts_per_tok": 2,
                "experts_per_token": 2, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": hd,
                "vocab_size": vocab, "num_hidden_layers": layers, "sliding_window": 8,
                "layer_types": ["sliding_attention", "full_attention"]})
    t = {"model.embed_tokens.weight": ("BF16", [vocab, h]), "lm_head.weight": ("BF16", [vocab, h]),
         "model.norm.weight": ("BF16", [h])}
    for layer in range(layers):
        p = f"model.layers.{layer}"
        for name, (n, k) in {"q_proj": (heads * hd, h), "k_proj": (kv * hd, h), "v_proj": (kv * hd, h),
                             "o_proj": (h, heads * hd)}.items():
            t[f"{p}.self_attn.{name}.weight"] = ("BF16", [n, k])
            t[f"{p}.self_attn.{name}.bias"] = ("BF16", [n])
        t[f"{p}.self_attn.sinks"] = ("BF16", [heads])
        t[f"{p}.mlp.router.weight"] = ("BF16", [experts, h])
        t[f"{p}.mlp.router.bias"] = ("BF16", [experts])
        for proj, (n, k) in {"gate_up_proj": (2 * inter, h), "down_proj": (h, inter)}.items():
            t[f"{p}.mlp.experts.{proj}_blocks"] = ("U8", [experts, n, k // 32, 16])
            t[f"{p}.mlp.experts.{proj}_scales"] = ("U8", [experts, n, k // 32])
            t[f"{p}.mlp.experts.{proj}_bias"] = ("BF16", [experts, n])
        t[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        t[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
    write_safetensors(folder / "model.safetensors", t)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder

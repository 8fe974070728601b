"""A tiny real ModelOpt NVFP4 checkpoint on disk (config.json + a safetensors file of zeros)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

_BYTES = {"U8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2}

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

"""Builders of real (tiny) safetensors checkpoints laid out as each producer writes them.

Tensor names, dtypes and shapes follow shared/research/oracles.md (llm-compressor 0.14.0.1 /
compressed-tensors 0.19.0 and ModelOpt 0.47.0 exports of a tiny Llama) and
checkpoint-formats.md §2-§4. Dimensions are small but keep the producers' ratios.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402

H, I, HEADS, KVH, HD, V, L = 128, 256, 4, 2, 32, 512, 2   # noqa: E741 (I: intermediate size, as in the configs)

LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": I,
    "num_attention_heads": HEADS, "num_key_value_heads": KVH, "head_dim": HD, "num_hidden_layers": L,
    "vocab_size": V, "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "hidden_act": "silu",
}


def _z(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


# ------------------------------------------------------------------ one linear per format

def linear(prefix: str, n: int, k: int, fmt: str, *, scale=1.0, input_scale=True) -> dict:
    """The tensors a producer writes for one Linear of shape (n, k)."""
    t = {}
    if fmt == "bf16":
        t[f"{prefix}.weight"] = _z((n, k), torch.bfloat16)
    elif fmt == "fp16":
        t[f"{prefix}.weight"] = _z((n, k), torch.float16)
    elif fmt == "mo_nvfp4":          # ModelOpt NVFP4 (W4A4) / W4A16_NVFP4 without input_scale
        t[f"{prefix}.weight"] = _z((n, k // 2), torch.uint8)
        t[f"{prefix}.weight_scale"] = _z((n, k // 16), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale_2"] = torch.tensor(scale, dtype=torch.float32)
        if input_scale:
            t[f"{prefix}.input_scale"] = torch.tensor(0.0016, dtype=torch.float32)
    elif fmt == "mo_fp8":
        t[f"{prefix}.weight"] = _z((n, k), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale"] = torch.tensor(0.01, dtype=torch.float32)
        t[f"{prefix}.input_scale"] = torch.tensor(0.02, dtype=torch.float32)
    elif fmt == "mo_int4_awq":       # uint8 [N/2, K] packed along the output dim, F32 [N, K/128]
        t[f"{prefix}.weight"] = _z((n // 2, k), torch.uint8)
        t[f"{prefix}.weight_scale"] = _z((n, k // 128), torch.float32)
    elif fmt == "mo_int8_sq":
        t[f"{prefix}.weight"] = _z((n, k), torch.int8)
        t[f"{prefix}.weight_scale"] = _z((n,), torch.float32)
        t[f"{prefix}.input_scale"] = torch.tensor(0.02, dtype=torch.float32)
    elif fmt in ("ct_w4a16", "ct_w8a16"):
        bits = 4 if fmt == "ct_w4a16" else 8
        t[f"{prefix}.weight_packed"] = _z((n, k * bits // 32), torch.int32)
        t[f"{prefix}.weight_scale"] = _z((n, k // 128), torch.bfloat16)
        t[f"{prefix}.weight_shape"] = torch.tensor([n, k], dtype=torch.int64)
    elif fmt == "ct_fp8_dynamic":
        t[f"{prefix}.weight"] = _z((n, k), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale"] = _z((n, 1), torch.bfloat16)
    elif fmt == "ct_fp8_static":
        t[f"{prefix}.weight"] = _z((n, k), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale"] = _z((1,), torch.bfloat16)
        t[f"{prefix}.input_scale"] = _z((1,), torch.bfloat16)
    elif fmt == "ct_fp8_block":
        t[f"{prefix}.weight"] = _z((n, k), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale"] = _z((-(-n // 128), -(-k // 128)), torch.bfloat16)
    elif fmt == "ct_w8a8_int8":
        t[f"{prefix}.weight"] = _z((n, k), torch.int8)
        t[f"{prefix}.weight_scale"] = _z((n, 1), torch.bfloat16)
    elif fmt in ("ct_nvfp4a16", "ct_nvfp4"):
        t[f"{prefix}.weight_packed"] = _z((n, k // 2), torch.uint8)
        t[f"{prefix}.weight_scale"] = _z((n, k // 16), torch.float8_e4m3fn)
        t[f"{prefix}.weight_global_scale"] = torch.tensor([1.0 / scale], dtype=torch.float32)
        if fmt == "ct_nvfp4":
            t[f"{prefix}.input_global_scale"] = torch.tensor([600.0], dtype=torch.float32)
    elif fmt == "ct_mxfp4":
        t[f"{prefix}.weight_packed"] = _z((n, k // 2), torch.uint8)
        t[f"{prefix}.weight_scale"] = _z((n, k // 32), torch.uint8)
    elif fmt == "hf_fp8_block":
        t[f"{prefix}.weight"] = _z((n, k), torch.float8_e4m3fn)
        t[f"{prefix}.weight_scale_inv"] = _z((-(-n // 128), -(-k // 128)), torch.float32)
    elif fmt == "gptq4":             # qweight [K/8, N], qzeros [K/g, N/8], scales [K/g, N], g_idx [K]
        t[f"{prefix}.qweight"] = _z((k // 8, n), torch.int32)
        t[f"{prefix}.qzeros"] = _z((k // 128, n // 8), torch.int32)
        t[f"{prefix}.scales"] = _z((k // 128, n), torch.float16)
        t[f"{prefix}.g_idx"] = _z((k,), torch.int32)
    elif fmt == "awq4":              # qweight [K, N/8], qzeros [K/g, N/8], scales [K/g, N]
        t[f"{prefix}.qweight"] = _z((k, n // 8), torch.int32)
        t[f"{prefix}.qzeros"] = _z((k // 128, n // 8), torch.int32)
        t[f"{prefix}.scales"] = _z((k // 128, n), torch.float16)
    elif fmt == "bnb_nf4":
        t[f"{prefix}.weight"] = _z((n * k // 2, 1), torch.uint8)
        t[f"{prefix}.weight.absmax"] = _z((n * k // 64,), torch.float32)
        t[f"{prefix}.weight.quant_map"] = _z((16,), torch.float32)
        t[f"{prefix}.weight.quant_state.bitsandbytes__nf4"] = _z((64,), torch.uint8)
    else:
        raise ValueError(fmt)
    return t


def norms(prefix: str) -> dict:
    return {f"{prefix}.input_layernorm.weight": _z((H,), torch.bfloat16),
            f"{prefix}.post_attention_layernorm.weight": _z((H,), torch.bfloat16)}


def llama_tensors(attn_fmt: str, mlp_fmt: str | None = None, *, head_fmt="bf16", scales=None,
                  input_scale=True) -> dict:
    mlp_fmt = mlp_fmt or attn_fmt
    scales = scales or {}
    t = {"model.embed_tokens.weight": _z((V, H), torch.bfloat16), "model.norm.weight": _z((H,), torch.bfloat16)}
    for i in range(L):
        p = f"model.layers.{i}"
        t.update(norms(p))
        for name, n, k in (("q_proj", HEADS * HD, H), ("k_proj", KVH * HD, H), ("v_proj", KVH * HD, H),
                           ("o_proj", H, HEADS * HD)):
            t.update(linear(f"{p}.self_attn.{name}", n, k, attn_fmt, scale=scales.get(f"{p}.self_attn.{name}", 1.0),
                            input_scale=input_scale))
        for name, n, k in (("gate_proj", I, H), ("up_proj", I, H), ("down_proj", H, I)):
            t.update(linear(f"{p}.mlp.{name}", n, k, mlp_fmt, scale=scales.get(f"{p}.mlp.{name}", 1.0),
                            input_scale=input_scale))
    t.update(linear("lm_head", V, H, head_fmt))
    return t


def write_checkpoint(folder: Path, tensors: dict | None, config: dict | None = None, *,
                     hf_quant: dict | None = None, shards: int = 1, index: bool | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    if tensors is None:
        return folder
    names = sorted(tensors)
    if shards == 1 and not index:
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return folder
    weight_map, total = {}, 0
    for s in range(shards):
        part = {n: tensors[n] for n in names[s::shards]}
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, str(folder / fname), metadata={"format": "pt"})
        for n, v in part.items():
            weight_map[n] = fname
            total += v.numel() * v.element_size()
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    return folder


def with_qc(qc: dict | None, base: dict | None = None) -> dict:
    cfg = dict(base or LLAMA_CONFIG)
    if qc is not None:
        cfg["quantization_config"] = qc
    return cfg


def mo_cfgs(algo, kv=None, extra=None, groups=None):
    """(config.json, hf_quant_config.json) as ModelOpt 0.47 writes them for ``algo``."""
    excl = ["lm_head", "model.embed_tokens"]
    hq = {"producer": {"name": "modelopt", "version": "0.47.0"},
          "quantization": {"quant_algo": algo, "kv_cache_quant_algo": kv, **(extra or {}), "exclude_modules": excl}}
    qc = {"ignore": excl, "quant_algo": algo, "producer": {"name": "modelopt", "version": "0.47.0"},
          "quant_method": "modelopt"}
    if groups:
        qc = {"config_groups": groups, **qc}
    if kv == "FP8":
        qc["kv_cache_scheme"] = {"dynamic": False, "num_bits": 8, "type": "float"}
    return with_qc(qc), hq


def write_with_floats(path: Path, header: dict, size: int, floats: dict[int, float]) -> None:
    """A .safetensors file of ``header`` over ``size`` data bytes, zero but for the F32 values at their offsets."""
    body = json.dumps(header).encode()
    data = bytearray(size)
    for off, v in floats.items():
        data[off:off + 4] = struct.pack("<f", v)
    path.write_bytes(struct.pack("<Q", len(body)) + body + bytes(data))

"""Builders for the quality tests: small BF16 checkpoints written with safetensors.torch (an
independent writer) and quantized twins in layouts no producer in our venvs writes (GPTQ, AWQ,
gpt-oss MXFP4, block-scale FP8), packed the way the engines' own reference code packs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

HIDDEN, INTER, LAYERS = 128, 256, 2


def write(folder: Path, tensors: dict, config: dict | None = None) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config or {"model_type": "llama"}))
    return folder


def llama_tensors(seed: int = 0, hidden: int = HIDDEN, inter: int = INTER, layers: int = LAYERS) -> dict:
    """A Llama-shaped BF16 state dict with heavy-tailed weights and a few outliers."""
    import torch

    g = torch.Generator().manual_seed(seed)

    def w(n, k):
        x = torch.randn(n, k, generator=g) * 0.02 * (1 + torch.rand(n, k, generator=g))
        x[0, 3] = 0.4
        return x.to(torch.bfloat16)

    t = {"model.embed_tokens.weight": w(512, hidden), "lm_head.weight": w(512, hidden),
         "model.norm.weight": torch.ones(hidden, dtype=torch.bfloat16)}
    kv = hidden // 2
    for i in range(layers):
        p = f"model.layers.{i}"
        t |= {f"{p}.self_attn.q_proj.weight": w(hidden, hidden), f"{p}.self_attn.k_proj.weight": w(kv, hidden),
              f"{p}.self_attn.v_proj.weight": w(kv, hidden), f"{p}.self_attn.o_proj.weight": w(hidden, hidden),
              f"{p}.mlp.gate_proj.weight": w(inter, hidden), f"{p}.mlp.up_proj.weight": w(inter, hidden),
              f"{p}.mlp.down_proj.weight": w(hidden, inter),
              f"{p}.input_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16),
              f"{p}.post_attention_layernorm.weight": torch.ones(hidden, dtype=torch.bfloat16)}
    return t


LLAMA_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": HIDDEN,
                "intermediate_size": INTER, "num_hidden_layers": LAYERS, "torch_dtype": "bfloat16"}


def linear_names(tensors: dict) -> list[str]:
    return [k for k in tensors if k.endswith("_proj.weight")]


def copy_folder(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def rtn_int(w: np.ndarray, bits: int, group: int, symmetric: bool):
    """Round-to-nearest integer quantization of w [N, K] along K in groups (vLLM quant_utils.quantize_weights
    semantics): returns unsigned codes [N, K], scales [N, K/g], zeros [N, K/g] (unsigned)."""
    n, k = w.shape
    blocks = w.reshape(n, k // group, group)
    maxq = (1 << bits) - 1
    if symmetric:
        s = np.abs(blocks).max(axis=2) / ((maxq + 1) / 2 - 0.5)
        z = np.full(s.shape, (maxq + 1) // 2, np.int64)
    else:
        lo, hi = np.minimum(blocks.min(axis=2), 0), np.maximum(blocks.max(axis=2), 0)
        s = (hi - lo) / maxq
        z = np.rint(-lo / s).astype(np.int64)
    s = s.astype(np.float16).astype(np.float32)           # GPTQ/AWQ store fp16 scales
    q = np.clip(np.rint(blocks / s[..., None]) + z[..., None], 0, maxq).astype(np.int64).reshape(n, k)
    return q, s, z


def pack_rows(q: np.ndarray, bits: int) -> np.ndarray:
    """vLLM quant_utils.pack_rows (= gptq_pack): q [K, N] -> int32 [K*bits/32, N]."""
    per = 32 // bits
    out = np.zeros((q.shape[0] // per, q.shape[1]), np.uint32)
    for i in range(per):
        out |= q[i::per, :].astype(np.uint32) << np.uint32(bits * i)
    return out.view(np.int32)


def pack_cols(q: np.ndarray, bits: int, interleave: np.ndarray | None = None) -> np.ndarray:
    """vLLM quant_utils.pack_cols, with awq_pack's interleave [0,2,4,6,1,3,5,7] when given."""
    per = 32 // bits
    if interleave is not None:
        q = q.reshape(-1, len(interleave))[:, interleave].reshape(q.shape)
    out = np.zeros((q.shape[0], q.shape[1] // per), np.uint32)
    for i in range(per):
        out |= q[:, i::per].astype(np.uint32) << np.uint32(bits * i)
    return out.view(np.int32)


def mxfp4_quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [R, K] -> (blocks uint8 [R, K/32, 16], scales uint8 [R, K/32]) with OCP MX rounding."""
    from advisor.quality import codecs as c

    r, k = w.shape
    blocks = w.reshape(r, k // 32, 32)
    amax = np.abs(blocks).max(axis=2)
    exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, 0).astype(np.int32)
    scaled = blocks / np.ldexp(1.0, exp)[..., None]
    vals = c.rne_to_grid(scaled.astype(np.float32), c.E2M1_GRID)
    mag = np.searchsorted(c.E2M1_GRID, np.abs(vals)).astype(np.uint8)
    codes = mag | (np.signbit(vals).astype(np.uint8) << 3)
    codes = codes.reshape(r, k // 32, 32)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return packed, (exp + 127).astype(np.uint8)

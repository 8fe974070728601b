"""Activation-aware smoothing (AWQ, SmoothQuant) re-parametrises a layer: the weight's input
columns are multiplied by s and the layer's input by 1/s, the latter folded into the norm in
front (ModelOpt requantize_resmooth_fused_llm_layers; AutoAWQ scale_ln_fcs). The stored weight
then differs from the original on purpose, and comparing it column for column with the
reference would report the smoothing as error. The effective weight is W' * (norm' / norm):
the factor per input column is the ratio of the candidate's norm weight to the reference's.

This table says which modules read which norm (HF Llama/Qwen/Mistral/DeepSeek naming).
"""

from __future__ import annotations

import re

import numpy as np

from advisor.convert.safetensors_io import read_bytes
from advisor.convert.source import Checkpoint
from advisor.quality.codecs import floats

_CONSUMERS = {
    "input_layernorm": re.compile(r"\.(self_attn\.(q_proj|k_proj|v_proj|qkv_proj|q_a_proj|kv_a_proj_with_mqa)"
                                  r"|linear_attn\.in_proj\w*)$"),
    "post_attention_layernorm": re.compile(r"\.(mlp|block_sparse_moe|feed_forward)\.((shared_experts?\.)?"
                                           r"(gate_proj|up_proj|gate_up_proj)|experts\.\d+\.(gate_proj|up_proj|w1|w3))$"),
}


def _vector(ck: Checkpoint, name: str) -> np.ndarray | None:
    e = ck.tensors.get(name)
    if e is None or len(e.shape) != 1 or e.dtype not in ("BF16", "F16", "F32"):
        return None
    return floats(np.frombuffer(read_bytes(e), {"BF16": np.uint16, "F16": np.uint16, "F32": np.float32}[e.dtype]),
                  e.dtype)


def folded_factors(ref: Checkpoint, cand: Checkpoint, modules: list[str]) -> dict[str, tuple[np.ndarray, str]]:
    """{module: (factor per input column, norm tensor name)} for modules behind a norm whose
    weight differs between candidate and reference."""
    out: dict[str, tuple[np.ndarray, str]] = {}
    ratios: dict[str, np.ndarray | None] = {}
    for mod in modules:
        for norm, pattern in _CONSUMERS.items():
            m = pattern.search(mod)
            if not m:
                continue
            name = mod[: m.start()] + f".{norm}.weight"
            if name not in ratios:
                a, b = _vector(ref, name), _vector(cand, name)
                ratios[name] = None
                if a is not None and b is not None and a.shape == b.shape and not np.array_equal(a, b):
                    with np.errstate(divide="ignore", invalid="ignore"):
                        ratios[name] = np.where(a != 0, b / a, 1.0).astype(np.float32)
            ratio = ratios[name]
            if ratio is not None:
                out[mod] = (ratio, name)
    return out

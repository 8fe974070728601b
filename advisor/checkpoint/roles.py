"""Module roles from HF parameter names (Llama/Qwen/DeepSeek/gpt-oss/Nemotron-H/Qwen3-Next/Qwen3.5 naming)."""

from __future__ import annotations

import re

from advisor.checkpoint.model import Role

# the containers whose numbered children are the decoder layers (model.layers.3, transformer.h.3, blocks.3, ...)
LAYER_WORDS = ("layers", "h", "blocks", "block", "decoder_layers")
_LAYER = re.compile(r"(?:^|\.)(?:%s)\.(\d+)(?:\.|$)" % "|".join(LAYER_WORDS))
_INDEX = re.compile(r"\.\d+(?=\.|$)")

_VISION = ("visual", "vision", "vit.", "image_", "mm_projector", "multi_modal_projector", "embed_vision",
           "patch_embed", "audio", "merger", "patch_merge_mlp")
_ROUTER_TAIL = re.compile(r"\.(?:mlp|moe|block_sparse_moe|feed_forward|mixer|ffn)\.(?:gate|router)$|\.router$"
                          r"|shared_expert_gate$|\.gate\.wg$")
_QKV = re.compile(r"\.(?:q_proj|k_proj|v_proj|qkv_proj|query_key_value|c_attn|wqkv|Wqkv|q_a_proj|q_b_proj"
                  r"|kv_a_proj_with_mqa|kv_b_proj|wq|wk|wv|wq_a|wq_b|wkv_a|wkv_b|fused_wqa_wkv|q_a|kv_a"
                  r"|index_q_proj|index_k_proj)$")
_ATTN_O = re.compile(r"\.(?:o_proj|wo|wo_a|wo_b|out_proj|dense|c_proj)$")
_GATE_UP = re.compile(r"\.(?:gate_proj|up_proj|gate_up_proj|w1|w3|fc1|c_fc|dense_h_to_4h|w13|gate_up)$")
_DOWN = re.compile(r"\.(?:down_proj|w2|fc2|dense_4h_to_h|c_proj)$")
_ATTN_PARENT = re.compile(r"\.(?:self_attn|attn|attention|self_attention|mixer)\.")
_LINEAR_ATTN_PARENT = re.compile(r"\.(?:linear_attn|linear_attention|mamba|ssm|mixer)\.")


def layer_index(name: str) -> int | None:
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def group_name(name: str) -> str:
    """Collapse layer and expert indices:
    model.layers.3.mlp.experts.17.up_proj -> model.layers.*.mlp.experts.*.up_proj."""
    return _INDEX.sub(".*", name)


_INDEX_LINES = re.compile(r"\.\d+(?=\.|\n|\Z)")      # _INDEX over names joined by newlines


def group_names(names: list[str]) -> list[str]:
    """``[group_name(n) for n in names]`` in one regex pass over the names joined by newlines (a name
    holding a newline takes group_name itself)."""
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1:
        return list(map(group_name, names))
    return _INDEX_LINES.sub(".*", joined).split("\n")


# _LAYER's first match on each line of names joined by newlines, or none: one findall result per line
_LAYER_LINES = re.compile(r"^(?:[^\n]*?(?:^|\.)(?:%s)\.(\d+)(?=\.|$))?[^\n]*$" % "|".join(LAYER_WORDS), re.M)


def layer_indexes(names: list[str]) -> list[int | None]:
    """``[layer_index(n) for n in names]`` in one regex pass over the names joined by newlines (a regex search
    per name is most of what a 100k-tensor MoE's module rows cost after the grouping). The lazy prefix finds
    the leftmost place _LAYER matches, as search() does; a name holding a newline takes layer_index itself."""
    joined = "\n".join(names)
    found = _LAYER_LINES.findall(joined) if joined.count("\n") == len(names) - 1 else None
    if found is None or len(found) != len(names):
        return list(map(layer_index, names))
    number = {d: int(d) for d in set(found) if d}       # int() once per distinct index; "" (none) -> None
    return list(map(number.get, found))


def role_of(name: str, num_layers: int | None = None) -> Role:
    """The role of a module (its parameter prefix, e.g. ``model.layers.0.self_attn.q_proj``)."""
    low = name.lower()
    if any(v in low for v in _VISION) and not low.startswith("lm_head"):
        return "vision"
    layer = layer_index(name)
    if low.startswith("mtp.") or ".mtp." in low or "nextn" in low or (
            num_layers and layer is not None and layer >= num_layers and "layers." in low):
        return "mtp"
    last = low.rsplit(".", 1)[-1]
    if "embed_tokens" in low or last in ("wte", "word_embeddings", "tok_embeddings", "embeddings", "embed",
                                         "embedding"):
        return "embed"
    if low in ("lm_head", "output", "embed_out") or low.endswith(".lm_head") or last == "lm_head":
        return "lm_head"
    if "norm" in last or last.startswith("ln_") or last in ("ln_f", "ln1", "ln2"):
        return "norm"
    if "conv" in last:
        return "conv"
    if _ROUTER_TAIL.search(low):
        return "router"
    if "shared_expert" in low or "shared_mlp" in low:
        return "shared_expert"
    if ".experts." in low or low.endswith(".experts"):
        return "expert"
    if _LINEAR_ATTN_PARENT.search(low):
        if last.startswith("in_proj"):
            return "gdn_in_proj"
        if last == "out_proj":
            return "gdn_out_proj"
    if _QKV.search(name):
        return "attn_qkv"
    if _ATTN_O.search(name) and (_ATTN_PARENT.search(low) or last in ("o_proj", "wo", "wo_a", "wo_b")):
        return "attn_o"
    if _GATE_UP.search(name):
        return "mlp_gate_up"
    if _DOWN.search(name):
        return "mlp_down"
    return "other"


# Roles whose weights are matrices run through a GEMM (the quantizable ones).
LINEAR_ROLES: frozenset[Role] = frozenset({"attn_qkv", "attn_o", "gdn_in_proj", "gdn_out_proj", "mlp_gate_up",
                                          "mlp_down", "expert", "shared_expert", "router", "lm_head"})

# Fused groups that engines load as one GEMM and whose NVFP4 global scales must be equal (ModelOpt
# preprocess_linear_fusion, LLMC observers/helpers.py FUSED_LAYER_NAMES).
FUSED_SETS = (
    ("q_proj", "k_proj", "v_proj"),
    ("gate_proj", "up_proj"),
    ("w1", "w3"),
    ("q_a_proj", "kv_a_proj_with_mqa"),
    ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b"),
    ("in_proj_qkvz", "in_proj_ba"),
)

"""config.json values checked for their JSON type at the edge, before anything reads them.

A value of the wrong type (a list where a name belongs, a string where a count belongs) is one
line naming the file, the key path and what was expected: exit 3, never an internal error later
in a report. Values of the right type but out of range (a count of 0 or -1, NaN) stay doctor
findings (arch.invalid_numbers): the advisor can still answer with those figures as N/A.
"""

from __future__ import annotations

from advisor.checkpoint.aliases import ALIAS_SOURCE_KEYS
from advisor.errors import BadInput

# Counts and sizes (a JSON number, or null = not given).
NUMBER = frozenset({
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "num_kv_heads", "head_dim",
    "attention_head_dim", "max_position_embeddings", "vocab_size", "intermediate_size", "intermediate_size_mlp",
    "ffn_hidden_size", "moe_intermediate_size", "expert_intermediate_size", "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size", "num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts",
    "num_experts_per_tok", "num_experts_per_token", "experts_per_token", "top_k_experts", "moe_top_k",
    "num_selected_experts", "n_shared_experts", "num_shared_experts", "kv_lora_rank", "q_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "first_k_dense_replace", "decoder_sparse_step",
    "interleave_moe_layer_step", "full_attention_interval", "sliding_window_pattern", "max_window_layers",
    "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", "n_mtp_layers", "linear_num_key_heads",
    "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim", "linear_conv_kernel_dim",
    "conv_kernel", "ssm_state_size", "state_size", "mamba_num_heads", "mamba_head_dim", "mamba_n_heads",
    "mamba_d_head", "mamba_d_state", "mamba_d_conv", "mamba_conv_kernel", "mamba_expand", "expand", "n_groups",
    "mamba_n_groups", "mamba_intermediate_size", "moe_latent_size", "routed_expert_hidden_size",
    "global_head_dim", "num_global_key_value_heads", "depth", "embed_dim", "out_hidden_size", "spatial_merge_size",
    "time_step_rank",
}) | ALIAS_SOURCE_KEYS
NAME = frozenset({"model_type", "torch_dtype", "dtype", "hidden_act", "hidden_activation", "mlp_hidden_act",
                  "hybrid_override_pattern"})
FLAG = frozenset({"tie_word_embeddings", "use_sliding_window", "attn_output_gate", "enable_moe_block",
                  "multi_query", "new_decoder_architecture", "parallel_attn", "attention_k_eq_v",
                  "multi_query_attention"})
NAMES = frozenset({"architectures", "layer_types", "layers_block_type"})
OBJECT = frozenset({"text_config", "language_config", "llm_config", "vision_config", "linear_attn_config",
                    "ffn_config", "attn_config"})
OBJECTS = frozenset({"block_configs"})
NESTED = ("text_config", "language_config", "llm_config", "vision_config")


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "an object"


def _show(v) -> str:
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(key: str, v) -> str | None:
    if v is None:
        return None
    if key in NUMBER:
        # a boolean count (MiniMind writes n_shared_experts: true) is read as a value, not a type error
        ok = isinstance(v, (int, float))
        want = "a number"
    elif key in NAME:
        ok, want = isinstance(v, str), "a string"
    elif key in FLAG:
        ok, want = isinstance(v, bool), "true or false"
    elif key in NAMES:
        ok, want = isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"
    elif key in OBJECT:
        ok, want = isinstance(v, dict), "an object"
    elif key in OBJECTS:
        ok, want = isinstance(v, list) and all(isinstance(x, dict) for x in v), "a list of objects"
    elif key in ("moe_layer_freq", "sliding_window"):
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
            key == "moe_layer_freq" and isinstance(v, list) and all(isinstance(x, (int, bool)) for x in v))
        want = "a number" + (" or a list of 0/1 per layer" if key == "moe_layer_freq" else "")
    elif key == "mlp_only_layers":
        ok = isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        want = "a list of layer numbers"
    else:
        return None
    if ok:
        return None
    return f"is {_show(v)} ({_kind(v)}), expected {want}"


def check_config_types(config: dict | None, path: str) -> None:
    """Raise BadInput for the first value of the wrong JSON type (top level and nested model configs)."""
    if not isinstance(config, dict):
        return
    for prefix, d in _sections(config):
        for key, v in d.items():
            why = _problem(key, v)
            if why:
                raise BadInput(f"{prefix}{key} {why}", path=path)


def _sections(config: dict):
    yield "", config
    for key in NESTED:
        sub = config.get(key)
        if isinstance(sub, dict):
            yield key + ".", sub
            for inner in ("text_config", "vision_config"):     # e.g. llm_config.text_config (omni models)
                if isinstance(sub.get(inner), dict):
                    yield f"{key}.{inner}.", sub[inner]

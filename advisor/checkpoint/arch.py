"""Architecture numbers from config.json (dense, MoE, MLA, hybrid GDN/Mamba, sliding window, MTP, vision).

Multimodal configs nest the language model under ``text_config`` (Qwen3.5/3.6, Gemma, Kimi),
``language_config`` or ``llm_config``; the text part is what the cost model needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.aliases import canonical, tie_default
from advisor.checkpoint.model import ArchInfo, KVGroup, LinearStateInfo, MLAInfo, MoEInfo

_NESTED_TEXT = ("text_config", "language_config", "llm_config")
_VISION_KEYS = ("vision_config", "visual", "vision_tower_config", "mm_vision_tower")


def raw_text_config(config: dict) -> dict:
    """The language-model part of a config as written (the config itself when not nested)."""
    for key in _NESTED_TEXT:
        sub = config.get(key)
        if isinstance(sub, dict) and ("num_hidden_layers" in sub or "hidden_size" in sub or "num_layers" in sub):
            return sub
    return config


def text_config(config: dict) -> dict:
    """The language-model part with the advisor's key names (aliases.canonical): what sizing reads."""
    return canonical(raw_text_config(config))


def _first(cfg: dict, *keys, default=None):
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def _int(v, default: int = 0) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _pos(v) -> int:
    """A count that must be a positive integer; 0 (= unknown) for anything else."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


# Numbers every figure downstream divides or multiplies by: a value that is present but not a
# positive integer is reported (doctor) and taken as unknown, never as a default.
POSITIVE_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "num_kv_heads",
                 "head_dim", "max_position_embeddings", "vocab_size", "intermediate_size")


def invalid_numbers(config: dict) -> list[tuple[str, object]]:
    """(key path, value) of each POSITIVE_KEYS entry of the text config that is set but not a positive int."""
    cfg = raw_text_config(config)
    prefix = next((k + "." for k in _NESTED_TEXT if config.get(k) is cfg), "")
    norm = canonical(cfg)
    out = [(prefix + k, cfg[k]) for k in POSITIVE_KEYS if cfg.get(k) is not None and not _pos(cfg[k])]
    # a family spelling (n_embd, num_layers, ...) that is set but unusable is named as written
    out += [(prefix + k, v) for k, v in norm.items() if k in POSITIVE_KEYS and k not in cfg and v is not None
            and not _pos(v) and not isinstance(v, float)]
    return out


@dataclass(frozen=True)
class LayerKind:
    mixer: str      # attention | mla | sliding | gdn | mamba | none
    ffn: str        # dense | moe | none


def num_experts(cfg: dict) -> int:
    return _int(_first(cfg, "num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"))


def top_k(cfg: dict) -> int:
    return _int(_first(cfg, "num_experts_per_tok", "num_experts_per_token", "experts_per_token", "top_k_experts",
                       "moe_top_k", "num_selected_experts"))


def _moe_layer(cfg: dict, i: int) -> bool:
    if num_experts(cfg) <= 1 or cfg.get("enable_moe_block") is False:
        return False
    if i in (cfg.get("mlp_only_layers") or []):
        return False
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        return bool(freq[i]) if i < len(freq) else True
    if _int(cfg.get("interleave_moe_layer_step")) > 1:  # Llama 4 Maverick: every step-th layer is MoE
        return (i + 1) % _int(cfg["interleave_moe_layer_step"]) == 0
    if "decoder_sparse_step" in cfg:  # Qwen2/3-MoE: (i + 1) % step == 0
        step = _int(cfg.get("decoder_sparse_step"), 1) or 1
        return (i + 1) % step == 0
    first_dense = _int(cfg.get("first_k_dense_replace"))  # DeepSeek: dense below first_k, then every freq-th
    step = _int(freq, 1) or 1
    return i >= first_dense and i % step == 0


MAX_LAYERS = 10_000   # far above any real model; guards the per-layer loops against absurd configs


def layer_kinds(config: dict) -> list[LayerKind]:
    cfg = text_config(config)
    n = _int(cfg.get("num_hidden_layers"))
    pattern_len = max(len(cfg.get("hybrid_override_pattern") or "") if isinstance(
        cfg.get("hybrid_override_pattern"), str) else 0, len(cfg.get("layers_block_type") or [])
        if isinstance(cfg.get("layers_block_type"), list) else 0)
    if max(n, pattern_len) > MAX_LAYERS:
        raise ValueError(f"num_hidden_layers={max(n, pattern_len)} is implausible (> {MAX_LAYERS})")
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        # Nemotron-H: one character per layer, M=Mamba2, *=attention, -=MLP, E=MoE.
        kinds = {"M": LayerKind("mamba", "none"), "*": LayerKind("attention", "none"),
                 "-": LayerKind("none", "dense"), "E": LayerKind("none", "moe")}
        return [kinds.get(c, LayerKind("none", "none")) for c in pattern]
    nas = nas_blocks(cfg)
    if nas is not None:
        return [LayerKind(_nas_part(b.get("attention"), "attention"), _nas_part(b.get("ffn"), "dense")) for b in nas]
    if str(cfg.get("model_type", "")) in ("mamba", "falcon_mamba", "mamba2"):
        return [LayerKind("mamba", "none") for _ in range(n)]     # attention-free: every layer a Mamba mixer
    mla = _int(cfg.get("kv_lora_rank")) > 0
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and blocks and str(cfg.get("model_type", "")).startswith("nemotron"):
        kinds = {"mamba": LayerKind("mamba", "none"), "attention": LayerKind("attention", "none"),
                 "mlp": LayerKind("none", "dense"), "moe": LayerKind("none", "moe")}
        return [kinds.get(str(b), LayerKind("none", "none")) for b in blocks]
    lin = cfg.get("linear_attn_config")
    if isinstance(lin, dict) and isinstance(lin.get("kda_layers"), list):
        kda = set(lin["kda_layers"])  # 1-based layer numbers (Kimi Linear)
        return [LayerKind("gdn" if i + 1 in kda else ("mla" if mla else "attention"),
                          "moe" if _moe_layer(cfg, i) else "dense") for i in range(n)]
    layer_types = cfg.get("layer_types")
    interval = _int(cfg.get("full_attention_interval"))
    use_sw = cfg.get("use_sliding_window", True) is not False and cfg.get("sliding_window") is not None
    sw_pattern = _int(_first(cfg, "sliding_window_pattern"))
    out = []
    for i in range(n):
        if isinstance(layer_types, list) and i < len(layer_types):
            t = str(layer_types[i])
            if t in ("linear_attention", "gdn", "gated_deltanet"):
                mixer = "gdn"
            elif t in ("mamba", "mamba2", "ssm"):
                mixer = "mamba"
            elif t.startswith("sliding") or t in ("local_attention", "chunked_attention"):
                mixer = "sliding"
            else:
                mixer = "mla" if mla else "attention"
        elif interval > 0 and ("linear_num_value_heads" in cfg or "linear_num_key_heads" in cfg):
            mixer = "attention" if (i + 1) % interval == 0 else "gdn"  # Qwen3-Next convention
        elif sw_pattern > 0 and use_sw:
            mixer = "attention" if (i + 1) % sw_pattern == 0 else "sliding"  # Gemma3
        elif use_sw and _sw_all_layers(cfg, i):
            mixer = "sliding"
        else:
            mixer = "mla" if mla else "attention"
        out.append(LayerKind(mixer, "moe" if _moe_layer(cfg, i) else "dense"))
    return out


def nas_blocks(cfg: dict) -> list[dict] | None:
    """Nemotron-NAS / DeciLM per-layer blocks ({attention: {n_heads_in_group, no_op, replace_with_linear},
    ffn: {ffn_mult, no_op, replace_with_linear}}), None for other models."""
    blocks = cfg.get("block_configs")
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, dict) for b in blocks):
        return None
    return blocks


def _nas_part(part, kind: str) -> str:
    """vllm model_executor/models/nemotron_nas.py:134-135@0.33.0: a no_op attention / FFN has no weights."""
    if not isinstance(part, dict) or part.get("no_op") is True:
        return "none"
    return "linear" if part.get("replace_with_linear") is True else kind


def layer_attention(cfg: dict, i: int) -> tuple[int, int, bool]:
    """(KV heads, head size, has a V projection) of decoder layer i.

    Nemotron-NAS: num_attention_heads // n_heads_in_group (nemotron_nas.py:148-150@0.33.0).
    Gemma 4 full-attention layers: global_head_dim and num_global_key_value_heads, and no v_proj when
    attention_k_eq_v (transformers models/gemma4/configuration_gemma4.py per_layer_config and
    modeling_gemma4.py Gemma4TextAttention @5.24.0; vLLM loads K into both K and V, gemma4.py:89-107@0.33.0).
    """
    heads = _pos(cfg.get("num_attention_heads"))
    kv_raw = _first(cfg, "num_key_value_heads", "num_kv_heads", "multi_query_group_num")
    kvh = heads if kv_raw is None else _pos(kv_raw)
    hd = head_dim(cfg)
    nas = nas_blocks(cfg)
    if nas is not None and i < len(nas):
        group = (nas[i].get("attention") or {}).get("n_heads_in_group")
        kvh = heads // _pos(group) if _pos(group) and heads else kvh
        return kvh, hd, True
    types = cfg.get("layer_types")
    if str(cfg.get("model_type", "")).startswith("gemma4") and isinstance(types, list) and i < len(types) \
            and types[i] == "full_attention":
        g_hd = _pos(cfg.get("global_head_dim")) or hd
        k_eq_v = cfg.get("attention_k_eq_v") is True
        g_kv = _pos(cfg.get("num_global_key_value_heads")) if k_eq_v else 0
        return g_kv or kvh, g_hd, not k_eq_v
    return kvh, hd, True


def kv_groups(cfg: dict, kinds: list[LayerKind]) -> tuple[KVGroup, ...]:
    """Per-layer KV geometry when attention layers differ in KV heads or head size (else empty)."""
    seen: dict[tuple[int, int, bool], int] = {}
    for i, k in enumerate(kinds):
        if k.mixer in ("attention", "sliding"):
            kvh, hd, _ = layer_attention(cfg, i)
            key = (kvh, hd, k.mixer == "sliding")
            seen[key] = seen.get(key, 0) + 1
    if len({(kvh, hd) for kvh, hd, _ in seen}) <= 1:
        return ()
    return tuple(KVGroup(n, kvh, hd, sliding, 2 * kvh * hd) for (kvh, hd, sliding), n in seen.items())


def _sw_all_layers(cfg: dict, i: int) -> bool:
    """Mistral-style: sliding_window on every layer; Qwen2-style max_window_layers bounds it."""
    mt = str(cfg.get("model_type", ""))
    if mt.startswith("qwen"):
        mwl = _int(cfg.get("max_window_layers"))
        return cfg.get("use_sliding_window") is True and i >= mwl
    return mt.startswith(("mistral", "mixtral"))


def head_dim(cfg: dict) -> int:
    hd = _pos(_first(cfg, "head_dim", "attention_head_dim"))
    if hd:
        return hd
    heads = _pos(cfg.get("num_attention_heads"))
    return _pos(cfg.get("hidden_size")) // heads if heads else 0


def mtp_layers(cfg: dict) -> int:
    return _int(_first(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers",
                       "n_mtp_layers"))


def linear_state(cfg: dict, kinds: list[LayerKind]) -> LinearStateInfo | None:
    """The per-request state shape of the GDN / KDA / Mamba layers (None when the config lacks it).

    Field names follow the engines' readers: vLLM 0.33.0 qwen3_5.py / qwen3_next.py (GDN),
    kimi_linear (KDA), nemotron_h.py (mamba_num_heads x mamba_head_dim), falcon_h1 / granitemoehybrid
    (mamba_n_heads, mamba_d_head, mamba_expand), jamba.py (mamba1: mamba_expand x hidden, mamba_d_state).
    """
    gdn = sum(1 for k in kinds if k.mixer == "gdn")
    mamba = sum(1 for k in kinds if k.mixer == "mamba")
    ssm_dtype = _first(cfg, "mamba_ssm_dtype", "mamba_ssm_cache_dtype")
    ssm_dtype = str(ssm_dtype) if isinstance(ssm_dtype, str) else None
    if gdn:
        kv_heads, k_dim = _int(cfg.get("linear_num_key_heads")), _int(cfg.get("linear_key_head_dim"))
        v_heads, v_dim = _int(cfg.get("linear_num_value_heads")), _int(cfg.get("linear_value_head_dim"))
        kernel = _int(cfg.get("linear_conv_kernel_dim"))
        if kv_heads and k_dim and v_heads and v_dim and kernel:
            return LinearStateInfo("gdn", kernel, v_heads * v_dim, kv_heads, k_dim, v_heads, v_dim, ssm_dtype, gdn)
        lin = cfg.get("linear_attn_config")
        if isinstance(lin, dict):    # Kimi Linear KDA: q/k/v all num_heads x head_dim
            h, d = _int(lin.get("num_heads")), _int(lin.get("head_dim"))
            kernel = _int(_first(lin, "short_conv_kernel_size", "conv_kernel_size"))
            if h and d and kernel:
                return LinearStateInfo("kda", kernel, h * d, h, d, h, d, ssm_dtype, gdn)
        return None
    if not mamba:
        return None
    kernel = _int(_first(cfg, "conv_kernel", "mamba_d_conv", "mamba_conv_kernel"))
    state = _int(_first(cfg, "ssm_state_size", "mamba_d_state", "state_size"))
    heads = _int(_first(cfg, "mamba_num_heads", "mamba_n_heads"))
    head_dim = _int(_first(cfg, "mamba_head_dim", "mamba_d_head"))
    groups = _int(_first(cfg, "n_groups", "mamba_n_groups"), 1)
    if not (kernel and state):
        return None
    if heads and head_dim:
        return LinearStateInfo("mamba2", kernel, heads * head_dim, groups, state, heads, head_dim, ssm_dtype, mamba)
    expand = _first(cfg, "mamba_expand", "expand")
    hidden = _int(cfg.get("hidden_size"))
    inner = _int(cfg.get("mamba_intermediate_size")) or (int(expand * hidden) if isinstance(
        expand, (int, float)) and not isinstance(expand, bool) else 0)
    if not inner:
        return None
    return LinearStateInfo("mamba1", kernel, inner, 0, state, 0, 0, ssm_dtype, mamba)


def has_vision(config: dict) -> bool:
    return any(isinstance(config.get(k), dict) for k in _VISION_KEYS)


def vision_config(config: dict) -> dict | None:
    for k in _VISION_KEYS:
        if isinstance(config.get(k), dict):
            return config[k]
    return None


def arch_info(config: dict) -> ArchInfo:
    cfg = text_config(config)
    kinds = layer_kinds(config)
    heads = _pos(cfg.get("num_attention_heads"))
    e = num_experts(cfg)
    moe = None
    if e > 1:
        shared = _int(_first(cfg, "n_shared_experts", "num_shared_experts"))
        shared_size = _int(_first(cfg, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"))
        if not shared and shared_size:
            shared = 1
        moe_size = _int(_first(cfg, "moe_intermediate_size", "expert_intermediate_size"))
        if not moe_size:  # Mixtral, gpt-oss, Llama 4: experts use intermediate_size
            moe_size = _int(cfg.get("intermediate_size"))
        if str(cfg.get("model_type", "")).startswith("llama4") and not shared:
            shared = 1
        if shared and not shared_size and moe_size:
            shared_size = moe_size * shared
        moe = MoEInfo(num_experts=e, top_k=top_k(cfg), num_shared_experts=shared,
                      expert_intermediate_size=moe_size or None,
                      shared_expert_intermediate_size=shared_size or None,
                      moe_layers=sum(1 for k in kinds if k.ffn == "moe"))
    mla = None
    if _int(cfg.get("kv_lora_rank")) > 0:
        mla = MLAInfo(kv_lora_rank=_int(cfg["kv_lora_rank"]), qk_rope_head_dim=_int(cfg.get("qk_rope_head_dim")),
                      qk_nope_head_dim=_int(cfg.get("qk_nope_head_dim")) or None,
                      v_head_dim=_int(cfg.get("v_head_dim")) or None,
                      q_lora_rank=_int(cfg.get("q_lora_rank")) or None)
    hd = head_dim(cfg)
    if mla and not _int(cfg.get("head_dim")):
        hd = (mla.qk_nope_head_dim or 0) + mla.qk_rope_head_dim
    # absent: as many KV heads as query heads (HF's default); present but invalid: unknown (0)
    kv_raw = _first(cfg, "num_key_value_heads", "num_kv_heads", "multi_query_group_num")
    kv_heads = heads if kv_raw is None else _pos(kv_raw)
    if nas_blocks(cfg) is not None:     # per-block KV heads: the most common one stands for the model
        per = [layer_attention(cfg, i)[0] for i, k in enumerate(kinds) if k.mixer == "attention"]
        kv_heads = max(set(per), key=per.count) if per else kv_heads
    sw = cfg.get("sliding_window")
    n_sw = sum(1 for k in kinds if k.mixer == "sliding")
    tie = config.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    if tie is None:
        tie = tie_default(str(cfg.get("model_type") or config.get("model_type") or ""))
    archs = config.get("architectures") or cfg.get("architectures") or ()
    return ArchInfo(
        model_type=config.get("model_type") or cfg.get("model_type"),
        architectures=tuple(str(a) for a in archs),
        num_layers=len(kinds),
        hidden_size=_pos(cfg.get("hidden_size")),
        intermediate_size=_pos(_first(cfg, "intermediate_size_mlp", "intermediate_size", "ffn_hidden_size")) or None,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=hd,
        vocab_size=_pos(cfg.get("vocab_size")),
        tie_word_embeddings=bool(tie),
        max_position_embeddings=_pos(cfg.get("max_position_embeddings")) or None,
        kv_layers=sum(1 for k in kinds if k.mixer in ("attention", "mla")),
        sliding_window=_int(sw) or None if n_sw else None,
        sliding_window_layers=n_sw,
        linear_attention_layers=sum(1 for k in kinds if k.mixer in ("gdn", "mamba")),
        layer_types=tuple(k.mixer for k in kinds),
        moe=moe,
        mla=mla,
        mtp_layers=mtp_layers(cfg),
        has_vision=has_vision(config),
        linear_state=linear_state(cfg, kinds),
        kv_groups=kv_groups(cfg, kinds),
    )

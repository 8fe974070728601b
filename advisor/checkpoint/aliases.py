"""Size keys under other names, per model_type.

The advisor reads one spelling (hidden_size, num_hidden_layers, num_attention_heads, ...); families
written before that convention settled keep their own. ``canonical(cfg)`` returns the config with
the advisor's spellings filled in from the family's own (never overwriting a key that is present).

ATTRIBUTE_MAPS mirrors the `attribute_map` of transformers' configuration classes (transformers
5.24.0, models/<type>/configuration_<type>.py), restricted to the size keys the advisor reads;
tests/checkpoint/test_checkpoint_aliases.py compares every entry with the installed transformers.
DERIVED holds what the modeling code computes when a key is absent (with its source), and
REMOTE_CODE the families whose configuration class lives in the model repository.
"""

from __future__ import annotations

_GPT2 = {"hidden_size": "n_embd", "max_position_embeddings": "n_positions", "num_attention_heads": "n_head",
         "num_hidden_layers": "n_layer"}
_T5 = {"hidden_size": "d_model", "num_attention_heads": "num_heads", "num_hidden_layers": "num_layers",
       "head_dim": "d_kv"}

ATTRIBUTE_MAPS: dict[str, dict[str, str]] = {
    "gpt2": _GPT2, "gpt_bigcode": _GPT2, "gptj": _GPT2, "codegen": _GPT2, "ctrl": _GPT2, "openai-gpt": _GPT2,
    "gpt-sw3": _GPT2,
    "bloom": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"},
    "mpt": {"num_attention_heads": "n_heads", "hidden_size": "d_model", "num_hidden_layers": "n_layers"},
    "dbrx": {"num_attention_heads": "n_heads", "hidden_size": "d_model", "num_hidden_layers": "n_layers",
             "max_position_embeddings": "max_seq_len"},
    "gpt_neo": {"num_attention_heads": "num_heads", "num_hidden_layers": "num_layers"},
    "xglm": {"num_attention_heads": "attention_heads", "hidden_size": "d_model", "num_hidden_layers": "num_layers"},
    "t5": _T5, "mt5": _T5, "umt5": _T5, "longt5": _T5,
    "switch_transformers": {"hidden_size": "d_model", "num_attention_heads": "num_heads",
                            "num_hidden_layers": "num_layers"},
    "jetmoe": {"head_dim": "kv_channels"},
    "zamba": {"head_dim": "attention_head_dim"}, "zamba2": {"head_dim": "attention_head_dim"},
    "recurrent_gemma": {"sliding_window": "attention_window_size"},
    "rwkv": {"max_position_embeddings": "context_length"},
}

# Older spellings transformers' config classes still accept in __init__ (kwargs.pop): BloomConfig and
# FalconConfig take n_embed for hidden_size (configuration_bloom.py / configuration_falcon.py @5.24.0).
INIT_ALIASES: dict[str, dict[str, str]] = {
    "bloom": {"hidden_size": "n_embed"},
    "falcon": {"hidden_size": "n_embed"},
}

# Families whose configuration class ships with the model (trust_remote_code), as their config.json
# files spell the keys (configuration_chatglm.py, configuration_qwen.py, configuration_RW.py,
# configuration_mixformer_sequential.py of the THUDM/ChatGLM*, Qwen/Qwen-*, tiiuae/falcon-* and
# microsoft/phi-1_5 repositories).
REMOTE_CODE: dict[str, dict[str, str]] = {
    "chatglm": {"num_hidden_layers": "num_layers", "head_dim": "kv_channels", "vocab_size": "padded_vocab_size",
                "max_position_embeddings": "seq_length", "intermediate_size": "ffn_hidden_size"},
    "qwen": {"head_dim": "kv_channels", "max_position_embeddings": "seq_length"},
    "RefinedWeb": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head", "num_key_value_heads": "n_head_kv"},
    "RefinedWebModel": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                        "num_key_value_heads": "n_head_kv"},
    "mixformer-sequential": _GPT2,
    "opt": {"intermediate_size": "ffn_dim"},
}

# Every source spelling above (config_types.py type-checks them as counts).
ALIAS_SOURCE_KEYS = frozenset(v for table in (ATTRIBUTE_MAPS, INIT_ALIASES, REMOTE_CODE) for m in table.values()
                              for v in m.values()) | {"n_inner", "expansion_ratio", "inner_hidden_size",
                                                      "multi_query_group_num", "d_ff", "num_decoder_layers",
                                                      "word_embed_proj_dim", "ffn_dim"}

# Families whose decoder has no KV cache to size from heads (recurrent or encoder-decoder).
ENCODER_DECODER = frozenset({"t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus",
                             "marian", "whisper", "fsmt", "m2m_100", "nllb-moe", "plbart", "led", "prophetnet"})


def _num(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def canonical(cfg: dict) -> dict:
    """cfg with the advisor's key names filled in from the family's own (a new dict when anything is added)."""
    mt = str(cfg.get("model_type") or "")
    table = {**REMOTE_CODE.get(mt, {}), **INIT_ALIASES.get(mt, {}), **ATTRIBUTE_MAPS.get(mt, {})}
    add: dict = {}
    for canon, src in table.items():
        if cfg.get(canon) is None and cfg.get(src) is not None:
            add[canon] = cfg[src]
    out = {**cfg, **add} if add else cfg
    derived = _derived(mt, out)
    return {**out, **derived} if derived else out


def _derived(mt: str, cfg: dict) -> dict:
    """What the family's modeling code computes when the config leaves it implicit."""
    d: dict = {}
    h = _num(cfg.get("hidden_size"))
    heads = _num(cfg.get("num_attention_heads"))
    if cfg.get("intermediate_size") is None and h:
        if mt in ("gpt2", "gpt_bigcode", "gptj", "codegen", "mixformer-sequential", "openai-gpt", "gpt-sw3"):
            # modeling_gpt2.py: inner_dim = n_inner if not None else 4 * hidden_size (same in gptj, codegen)
            d["intermediate_size"] = _num(cfg.get("n_inner")) or 4 * h
        elif mt in ("bloom", "gpt_neo", "falcon", "RefinedWeb", "RefinedWebModel"):
            # modeling_bloom.py / modeling_falcon.py: 4 * hidden_size (falcon: ffn_hidden_size when set)
            d["intermediate_size"] = _num(cfg.get("ffn_hidden_size")) or 4 * h
        elif mt == "mpt":
            d["intermediate_size"] = int((cfg.get("expansion_ratio") or 4) * h)   # modeling_mpt.py MptMLP
        elif mt == "chatglm" and _num(cfg.get("inner_hidden_size")):
            d["intermediate_size"] = cfg["inner_hidden_size"]      # ChatGLM-6B (v1)
        elif mt == "dbrx" and isinstance(cfg.get("ffn_config"), dict):
            d["intermediate_size"] = cfg["ffn_config"].get("ffn_hidden_size")
        elif mt in ("mamba", "falcon_mamba"):
            d["intermediate_size"] = int((cfg.get("expand") or 2) * h)   # configuration_mamba.py
    if cfg.get("num_key_value_heads") is None and heads:
        if mt == "gpt_bigcode" and cfg.get("multi_query", True):
            d["num_key_value_heads"] = 1       # configuration_gpt_bigcode.py: multi_query=True by default
        elif mt == "falcon":
            # configuration_falcon.py: num_kv_heads defaults to num_attention_heads; modeling_falcon.py
            # uses one KV head when multi_query (the default) and not new_decoder_architecture
            if cfg.get("new_decoder_architecture"):
                d["num_key_value_heads"] = _num(cfg.get("num_kv_heads")) or heads
            elif cfg.get("multi_query", True):
                d["num_key_value_heads"] = 1
        elif mt in ("RefinedWeb", "RefinedWebModel") and cfg.get("multi_query"):
            d["num_key_value_heads"] = 1
        elif mt == "chatglm" and cfg.get("multi_query_attention"):
            d["num_key_value_heads"] = cfg.get("multi_query_group_num")
        elif mt == "dbrx" and isinstance(cfg.get("attn_config"), dict):
            d["num_key_value_heads"] = cfg["attn_config"].get("kv_n_heads")
    if mt == "dbrx" and isinstance(cfg.get("ffn_config"), dict):
        ffn = cfg["ffn_config"]
        if cfg.get("num_local_experts") is None and ffn.get("moe_num_experts") is not None:
            d["num_local_experts"] = ffn.get("moe_num_experts")
        if cfg.get("num_experts_per_tok") is None and ffn.get("moe_top_k") is not None:
            d["num_experts_per_tok"] = ffn.get("moe_top_k")
    return d


# transformers' default tie_word_embeddings where a family's config.json leaves the key out: every causal-LM
# model_type whose config class defaults to tied (transformers 5.24; test_checkpoint_aliases.py checks the set)
_TIED_BY_DEFAULT = frozenset({
    "bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "biogpt", "blenderbot", "blenderbot-small",
    "bloom", "camembert", "cohere", "cohere2", "cohere2_moe", "cohere_compass_text", "cpmant", "ctrl", "data2vec-text",
    "electra", "ernie", "ernie4_5", "ernie4_5_moe", "falcon", "falcon_mamba", "gemma", "gemma2", "gemma3",
    "gemma3_text", "gemma3n", "gemma3n_text", "gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_assistant",
    "gemma4_unified_text", "got_ocr2", "gpt-sw3", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox_japanese", "granite_swa",
    "jetmoe", "lara_mini", "lfm2", "lfm2_moe", "lfm3", "mamba", "marian", "mbart", "megatron-bert", "minicpm3",
    "modernbert-decoder", "moss_transcribe_diarize", "mpt", "mvp", "openai-gpt", "opt", "pegasus", "plbart",
    "prophetnet", "recurrent_gemma", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "smollm3",
    "starcoder2", "trocr", "vaultgemma", "whisper", "xglm", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod",
    "youtu", "zamba", "zamba2", "zaya"})


def tie_default(model_type: str) -> bool:
    return model_type in _TIED_BY_DEFAULT

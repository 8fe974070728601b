"""The module list of a model computed from its architecture config (no weights present).

Names follow the published checkpoints of each family (their model.safetensors.index.json weight
maps; tests/checkpoint/test_checkpoint_corpus.py compares them), so quantization configs (exclude
lists, regex targets, quantized_layers) resolve against them; expert stacks are one entry with
``count`` = number of experts. What cannot be synthesized faithfully is returned as a note for the
doctor (``Synthesis.notes``), never silently guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from advisor.checkpoint.aliases import ENCODER_DECODER, tie_default
from advisor.checkpoint.arch import (_first, _int, _pos, layer_attention, layer_kinds, mtp_layers, nas_blocks,
                                     raw_text_config, text_config, vision_config)
from advisor.checkpoint.synth_parts import (W123_MOE, SynthModule, dbrx_moe_modules, dsa_indexer, gemma4_moe_modules,
                                            mamba_modules, minimax_m3_indexer, minimax_qk_norms,
                                            minimax_vision_modules, moe_modules, nas_intermediate, vision_modules)


@dataclass
class Synthesis:
    modules: list[SynthModule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # what could not be synthesized faithfully


_HINT_PREFIX = re.compile(r'"((?:[A-Za-z_]\w*\.)*)layers\.\d+\.')
_HINT_MOE = re.compile(r'layers\.\d+\.(\w+)\.experts')


def naming_hints(quant_text: str) -> tuple[str | None, str | None]:
    """Module-name prefix and MoE container as a quantization config spells them
    (``model.language_model.`` / ``backbone.`` / none; ``mlp`` / ``ffn`` / ``mixer``)."""
    prefix = None
    for m in _HINT_PREFIX.finditer(quant_text):
        if not any(x in m.group(1) for x in ("mtp", "vision", "visual", "audio", "encoder")):
            prefix = m.group(1)
            break
    c = _HINT_MOE.search(quant_text)
    return prefix, (c.group(1) if c else None)


# ------------------------------------------------------------------ family naming

@dataclass(frozen=True)
class Naming:
    """How one family names its decoder (from published index files of the family)."""

    prefix: str = "model."
    layers: str = "layers"
    embed: str = "embed_tokens"
    final_norm: str = "norm"
    lm_head: str = "lm_head"
    attn: str = "self_attn."
    qkv: str | None = None              # one fused projection (out = q + 2 kv), else q/k/v_proj
    o: str = "o_proj"
    mlp: str = "mlp."
    gate_up: str | None = None          # one fused gate+up projection (out = 2 x inter)
    gate: str | None = "gate_proj"      # None: not gated (out = inter)
    up: str = "up_proj"
    down: str = "down_proj"
    norms: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    pos_embed: str | None = None        # learned absolute positions (max_position_embeddings x H)
    extra_embed_norm: str | None = None
    q_k_v: tuple[str, str, str] = ("q_proj", "k_proj", "v_proj")


_LLAMA = Naming()
_GPT2 = Naming("transformer.", "h", "wte", "ln_f", attn="attn.", qkv="c_attn", o="c_proj", gate=None, up="c_fc",
               down="c_proj", norms=("ln_1", "ln_2"), pos_embed="wpe")
NAMING: dict[str, Naming] = {
    "gpt2": _GPT2, "gpt_bigcode": _GPT2,
    "gptj": Naming("transformer.", "h", "wte", "ln_f", attn="attn.", o="out_proj", gate=None, up="fc_in",
                   down="fc_out", norms=("ln_1",), q_k_v=("q_proj", "k_proj", "v_proj")),
    "codegen": Naming("transformer.", "h", "wte", "ln_f", attn="attn.", qkv="qkv_proj", o="out_proj", gate=None,
                      up="fc_in", down="fc_out", norms=("ln_1",)),
    "gpt_neo": Naming("transformer.", "h", "wte", "ln_f", attn="attn.attention.", o="out_proj", gate=None,
                      up="c_fc", down="c_proj", norms=("ln_1", "ln_2"), pos_embed="wpe"),
    "gpt_neox": Naming("gpt_neox.", "layers", "embed_in", "final_layer_norm", "embed_out", "attention.",
                       qkv="query_key_value", o="dense", gate=None, up="dense_h_to_4h", down="dense_4h_to_h"),
    "falcon": Naming("transformer.", "h", "word_embeddings", "ln_f", attn="self_attention.", qkv="query_key_value",
                     o="dense", gate=None, up="dense_h_to_4h", down="dense_4h_to_h", norms=("input_layernorm",)),
    "bloom": Naming("transformer.", "h", "word_embeddings", "ln_f", attn="self_attention.", qkv="query_key_value",
                    o="dense", gate=None, up="dense_h_to_4h", down="dense_4h_to_h",
                    extra_embed_norm="word_embeddings_layernorm"),
    "mpt": Naming("transformer.", "blocks", "wte", "norm_f", attn="attn.", qkv="Wqkv", o="out_proj", mlp="ffn.",
                  gate=None, norms=("norm_1", "norm_2")),
    "chatglm": Naming("transformer.", "encoder.layers", "embedding.word_embeddings", "encoder.final_layernorm",
                      "transformer.output_layer", "self_attention.", qkv="query_key_value", o="dense",
                      gate_up="dense_h_to_4h", down="dense_4h_to_h"),
    "qwen": Naming("transformer.", "h", "wte", "ln_f", attn="attn.", qkv="c_attn", o="c_proj", gate="w2", up="w1",
                   down="c_proj", norms=("ln_1", "ln_2")),
    "baichuan": Naming(qkv="W_pack"),
    "internlm2": Naming(embed="tok_embeddings", lm_head="output", attn="attention.", qkv="wqkv", o="wo",
                        mlp="feed_forward.", gate="w1", up="w3", down="w2", norms=("attention_norm", "ffn_norm")),
    "phi": Naming(final_norm="final_layernorm", o="dense", gate=None, up="fc1", down="fc2",
                  norms=("input_layernorm",)),
    "phi3": Naming(qkv="qkv_proj", gate_up="gate_up_proj"),
    # microsoft/phi-1_5 and phi-2 remote code (modeling_mixformer_sequential.py / modeling_phi.py of the repos)
    "mixformer-sequential": Naming("transformer.", "h", "embd.wte", "lm_head.ln", "lm_head.linear", "mixer.",
                                   qkv="Wqkv", o="out_proj", gate=None, up="fc1", down="fc2", norms=("ln",)),
    "opt": Naming("model.decoder.", final_norm="final_layer_norm", o="out_proj", mlp="", gate=None, up="fc1",
                  down="fc2", norms=("self_attn_layer_norm", "final_layer_norm"), pos_embed="embed_positions"),
    "dbrx": Naming("transformer.", "blocks", "wte", "norm_f", attn="norm_attn_norm.attn.", qkv="Wqkv", o="out_proj",
                   mlp="ffn.", norms=("norm_attn_norm.norm_1", "norm_attn_norm.norm_2")),
}
# ChatGLM-6B (v1: has inner_hidden_size) predates the encoder/embedding layout of ChatGLM2+.
_CHATGLM1 = Naming("transformer.", "layers", "word_embeddings", "final_layernorm", attn="attention.",
                   qkv="query_key_value", o="dense", gate=None, up="dense_h_to_4h", down="dense_4h_to_h")
_ALIASES = {"RefinedWeb": "falcon", "RefinedWebModel": "falcon", "gpt-sw3": "gpt2", "openai-gpt": "gpt2",
            "gpt_neox_reward_model": "gpt_neox",
            "internlm2": "internlm2", "baichuan": "baichuan", "phi3small": "phi3"}


def naming_for(config: dict) -> Naming:
    cfg = text_config(config)
    mt = str(cfg.get("model_type") or config.get("model_type") or "")
    if mt == "chatglm" and cfg.get("inner_hidden_size") is not None:
        return _CHATGLM1
    archs = " ".join(str(a) for a in (config.get("architectures") or []))
    if "Baichuan" in archs:
        return NAMING["baichuan"]
    if "InternLM2" in archs:
        return NAMING["internlm2"]
    return NAMING.get(_ALIASES.get(mt, mt), _LLAMA)


def _prefix(config: dict) -> str:
    mt = str(config.get("model_type", ""))
    if mt.startswith("nemotron_h") or mt in ("mamba", "falcon_mamba", "mamba2"):
        return "backbone."
    if mt == "minimax_m3_vl":    # vllm/models/minimax_m3/nvidia/model.py:1171-1175, mtp.py:208-211@0.33.0
        return "language_model.model."
    if raw_text_config(config) is not config and mt.startswith(("qwen3_5", "qwen3_vl", "gemma", "mistral3")):
        return "model.language_model."
    return naming_for(config).prefix


# ------------------------------------------------------------------ the model

def synthesize(config: dict, *, quant_text: str = "") -> Synthesis:
    syn = Synthesis()
    cfg = text_config(config)
    mt = str(cfg.get("model_type") or config.get("model_type") or "")
    if mt in ENCODER_DECODER or config.get("is_encoder_decoder") is True:
        syn.notes.append(f"model_type {mt!r} is an encoder-decoder: the advisor sizes decoder-only models, "
                         "so its sizes are not computed")
        return syn
    nm = naming_for(config)
    hint_prefix, hint_moe = naming_hints(quant_text)
    p = hint_prefix if hint_prefix is not None else _prefix(config)
    H = _pos(cfg.get("hidden_size"))
    V = _pos(cfg.get("vocab_size"))
    out = syn.modules
    add = out.append
    nemotron = mt.startswith("nemotron_h") or mt in ("mamba", "falcon_mamba", "mamba2")
    add(SynthModule(p + ("embeddings" if nemotron else nm.embed), V, H))
    if nm.pos_embed:
        extra = 2 if mt == "opt" else 0            # OPT's learned positions keep an offset of 2
        add(SynthModule(p + nm.pos_embed, _pos(cfg.get("max_position_embeddings")) + extra, H))
    if nm.extra_embed_norm:
        add(SynthModule(p + nm.extra_embed_norm, H, 1))
    kinds = layer_kinds(config)
    L = len(kinds)
    blocks = nas_blocks(cfg)
    for i, k in enumerate(kinds):
        out.extend(_layer(cfg, mt, f"{p}{nm.layers}.{i}.", k.mixer, k.ffn, H, nm, i, nemotron=nemotron,
                          moe_container=hint_moe, block=blocks[i] if blocks else None, notes=syn.notes))
    add(SynthModule(p + ("norm_f" if nemotron else nm.final_norm), H, 1))
    tie = config.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    if not (tie_default(mt) if tie is None else tie):
        # LLaVA-style nesting keeps the head beside the inner model: language_model.lm_head
        head = p[: -len("model.")] + nm.lm_head if p.endswith(".model.") and nm.lm_head == "lm_head" else nm.lm_head
        add(SynthModule(head, V, H))
    n_mtp = mtp_layers(cfg)
    if n_mtp > 1000:
        raise ValueError(f"{n_mtp} MTP layers is implausible")
    for j in range(n_mtp):
        if mt.startswith(("deepseek", "kimi", "glm")):
            base = f"{p}layers.{L + j}."
        elif mt.startswith("minimax_m3"):      # vllm/models/minimax_m3/nvidia/mtp.py:208-221@0.33.0
            base = f"{p}mtp.layers.{j}."
        else:
            base = f"mtp.layers.{j}."
        last = kinds[-1] if kinds else None
        ffn = "moe" if mt.startswith("minimax_m3") else (last.ffn if last else "dense")   # mtp.py:58-64: force_moe
        mixer = "mla" if _int(cfg.get("kv_lora_rank")) else "attention"
        out.extend(_layer(cfg, mt, base, mixer, ffn, H, _LLAMA, L + j, notes=syn.notes))
        add(SynthModule(base + "eh_proj" if base.startswith(p) else "mtp.fc", H, 2 * H))
        if mt.startswith("minimax_m3"):        # mtp.py:49-66: enorm, hnorm, final_layernorm
            out.extend(SynthModule(base + n, H, 1) for n in ("enorm", "hnorm", "final_layernorm"))
    vis = vision_config(config)
    if vis and mt == "minimax_m3_vl":
        out.extend(minimax_vision_modules(config, vis, H))
    elif vis:
        out.extend(vision_modules(vis, mt))
    return syn


def modules_from_config(config: dict, *, quant_text: str = "") -> list[SynthModule]:
    return synthesize(config, quant_text=quant_text).modules


_EXPERT_NO = re.compile(r"\.experts\.(\d+)(?=\.|$)")


def names_absent(declared, modules) -> list[str]:
    """The declared names (e.g. ModelOpt ``quantized_layers`` keys) that are neither a module of ``modules``
    ((name, count) pairs) nor a container of one. A stack ``...experts.0.w1`` with count E stands for experts
    0 .. E-1, as synthesize() writes expert stacks."""
    known: set[str] = set()
    stacks: dict[str, int] = {}              # "...experts.*" (and below) -> experts in the stack
    for name, count in modules:
        parts = name.split(".")
        known.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
        m = _EXPERT_NO.search(name)
        if m and m.group(1) == "0" and count > 1:
            head, tail = name[:m.start()] + ".experts.*", name[m.end():].split(".")
            for k in range(len(tail)):
                key = head + ".".join(tail[:k + 1])
                stacks[key] = max(stacks.get(key, 0), count)
    out = []
    for d in declared:
        if d in known:
            continue
        m = _EXPERT_NO.search(d)
        if m and int(m.group(1)) < stacks.get(d[:m.start()] + ".experts.*" + d[m.end():], 0):
            continue
        out.append(d)
    return out


def _layer(cfg: dict, mt: str, b: str, mixer: str, ffn: str, H: int, nm: Naming, i: int, nemotron: bool = False,
           moe_container: str | None = None, block: dict | None = None, notes: list | None = None
           ) -> list[SynthModule]:
    out: list[SynthModule] = []
    add = out.append
    heads = _pos(cfg.get("num_attention_heads"))
    kvh, hd, has_v = layer_attention(cfg, i)
    mix = "mixer." if nemotron else ""
    if nemotron:
        add(SynthModule(b + "norm", H, 1))
    elif mixer != "none" or ffn != "none":
        first = "ln_attn" if mt == "falcon" and cfg.get("new_decoder_architecture") else nm.norms[0]
        add(SynthModule(b + first, H, 1))
    if mixer in ("attention", "sliding"):
        a = b + (mix or nm.attn)
        gate = 2 if cfg.get("attn_output_gate") else 1
        if nm.qkv:
            add(SynthModule(a + nm.qkv, heads * hd * gate + 2 * kvh * hd, H))
        else:
            q, k, v = nm.q_k_v
            add(SynthModule(a + q, heads * hd * gate, H))
            add(SynthModule(a + k, kvh * hd, H))
            if has_v:
                add(SynthModule(a + v, kvh * hd, H))
        add(SynthModule(a + nm.o, H, heads * hd))
        if mt.startswith(("qwen3", "gemma3", "gemma4", "olmo2", "olmo3")):      # per-head RMSNorm of q and k
            add(SynthModule(a + "q_norm", hd, 1))
            add(SynthModule(a + "k_norm", hd, 1))
        elif mt.startswith("minimax") and cfg.get("use_qk_norm"):
            out.extend(minimax_qk_norms(cfg, a, heads, kvh, hd))
        if mt.startswith("minimax_m3"):
            out.extend(minimax_m3_indexer(cfg, a, H, i, notes))
    elif mixer == "mla":
        a = b + "self_attn."
        nope, rope = _int(cfg.get("qk_nope_head_dim")), _int(cfg.get("qk_rope_head_dim"))
        vdim, kvr, qr = _int(cfg.get("v_head_dim")), _int(cfg.get("kv_lora_rank")), _int(cfg.get("q_lora_rank"))
        if qr:
            add(SynthModule(a + "q_a_proj", qr, H))
            add(SynthModule(a + "q_a_layernorm", qr, 1))
            add(SynthModule(a + "q_b_proj", heads * (nope + rope), qr))
        else:
            add(SynthModule(a + "q_proj", heads * (nope + rope), H))
        add(SynthModule(a + "kv_a_proj_with_mqa", kvr + rope, H))
        add(SynthModule(a + "kv_a_layernorm", kvr, 1))
        add(SynthModule(a + "kv_b_proj", heads * (nope + vdim), kvr))
        add(SynthModule(a + "o_proj", H, heads * vdim))
        out.extend(dsa_indexer(cfg, a + "indexer.", H, i))
    elif mixer == "gdn":
        a = b + "linear_attn."
        nk, nv = _int(cfg.get("linear_num_key_heads")), _int(cfg.get("linear_num_value_heads"))
        dk, dv = _int(cfg.get("linear_key_head_dim")), _int(cfg.get("linear_value_head_dim"))
        kd, vd = nk * dk, nv * dv
        ker = _int(cfg.get("linear_conv_kernel_dim"), 4)
        if mt.startswith("qwen3_next"):
            add(SynthModule(a + "in_proj_qkvz", 2 * kd + 2 * vd, H))
            add(SynthModule(a + "in_proj_ba", 2 * nv, H))
        else:  # Qwen3.5 / 3.6 split projections
            add(SynthModule(a + "in_proj_qkv", 2 * kd + vd, H))
            add(SynthModule(a + "in_proj_z", vd, H))
            add(SynthModule(a + "in_proj_b", nv, H))
            add(SynthModule(a + "in_proj_a", nv, H))
        add(SynthModule(a + "conv1d", 2 * kd + vd, ker))
        add(SynthModule(a + "out_proj", H, vd))
        add(SynthModule(a + "norm", dv, 1))
        add(SynthModule(a + "A_log", nv, 1))
        add(SynthModule(a + "dt_bias", nv, 1))
    elif mixer == "mamba":
        a = b + (mix or "mamba.")
        out.extend(mamba_modules(cfg, mt, a, H))
    if mixer == "linear":      # Nemotron-NAS replace_with_linear: one H x H matrix instead of attention
        add(SynthModule(b + "self_attn.linear_attn", H, H))
    if not nemotron and mixer != "none" and len(nm.norms) > 1:
        add(SynthModule(b + nm.norms[1], H, 1))
    if mt.startswith(("gemma2", "gemma3", "gemma4")):       # sandwich norms around the MLP
        add(SynthModule(b + "pre_feedforward_layernorm", H, 1))
        add(SynthModule(b + "post_feedforward_layernorm", H, 1))
    if mt == "falcon" and cfg.get("new_decoder_architecture"):
        add(SynthModule(b + "ln_mlp", H, 1))
    gated = not nemotron and nm.gate is not None and str(
        cfg.get("hidden_act", cfg.get("mlp_hidden_act", "silu"))) != "relu2"
    if ffn == "dense":
        m = b + (mix or nm.mlp)
        inter = _pos(_first(cfg, "intermediate_size_mlp", "intermediate_size", "ffn_hidden_size"))
        if block is not None:
            inter = nas_intermediate(block, H)
        if mt.startswith("minimax_m3"):   # dense layers (vllm/models/minimax_m3/nvidia/model.py:748-754@0.33.0)
            inter = _pos(cfg.get("dense_intermediate_size")) or inter
        if mt == "qwen":           # Qwen (v1): intermediate_size counts w1 and w2 together (modeling_qwen.py QWenMLP)
            inter //= 2
        if nm.gate_up:
            add(SynthModule(m + nm.gate_up, 2 * inter if gated or mt == "chatglm" else inter, H))
        else:
            if gated and nm.gate is not None:   # gated already implies a gate name; restated for the checker
                add(SynthModule(m + nm.gate, inter, H))
            add(SynthModule(m + nm.up, inter, H))
        add(SynthModule(m + nm.down, H, inter))
    elif ffn == "linear":
        add(SynthModule(b + "mlp.linear_mlp", H, H))
    elif ffn == "moe":
        if mt.startswith("gemma4"):
            out.extend(gemma4_moe_modules(cfg, b, H))
        elif mt == "dbrx":
            out.extend(dbrx_moe_modules(cfg, b + nm.mlp, H))
        else:
            container = moe_container + "." if moe_container else (mix or W123_MOE.get(mt, "mlp."))
            out.extend(moe_modules(cfg, mt, b + container, H, gated))
    return out

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
from advisor.checkpoint.arch import (layer_kinds, layer_attention, mtp_layers, nas_blocks, num_experts,
                                     raw_text_config, text_config, vision_config, _int, _pos, _first)


@dataclass(frozen=True)
class SynthModule:
    name: str
    out_f: int
    in_f: int
    count: int = 1


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


# Mixtral-style MoE: the checkpoint keeps <container>.gate and experts.N.w1 (gate) / w3 (up) / w2 (down)
# (transformers conversion_mapping.py:50-51,850-882,1359-1378,1483-1500,2352-2355@5.24.0 rename from these;
# vllm mixtral.py:131, minimax_m2.py:107, phimoe.py:285@0.33.0 and vllm/models/minimax_m3/nvidia/model.py:936-941
# load them as ckpt names w1/w2/w3).
_W123_MOE = {"mixtral": "block_sparse_moe.", "phimoe": "block_sparse_moe.", "minimax": "block_sparse_moe.",
             "minimax_m1": "block_sparse_moe.", "minimax_m2": "block_sparse_moe.", "minimax_m3": "block_sparse_moe.",
             "minimax_m3_vl": "block_sparse_moe."}


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
        out.extend(_minimax_vision(config, vis, H))
    elif vis:
        out.extend(_vision(vis, mt))
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
            out.extend(_minimax_qk_norms(cfg, a, heads, kvh, hd))
        if mt.startswith("minimax_m3"):
            out.extend(_minimax_m3_indexer(cfg, a, H, i, notes))
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
        out.extend(_dsa_indexer(cfg, a + "indexer.", H, i))
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
        out.extend(_mamba(cfg, mt, a, H))
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
            if gated:
                add(SynthModule(m + nm.gate, inter, H))
            add(SynthModule(m + nm.up, inter, H))
        add(SynthModule(m + nm.down, H, inter))
    elif ffn == "linear":
        add(SynthModule(b + "mlp.linear_mlp", H, H))
    elif ffn == "moe":
        if mt.startswith("gemma4"):
            out.extend(_gemma4_moe(cfg, b, H))
        elif mt == "dbrx":
            out.extend(_dbrx_moe(cfg, b + nm.mlp, H))
        else:
            container = moe_container + "." if moe_container else (mix or _W123_MOE.get(mt, "mlp."))
            out.extend(_moe(cfg, mt, b + container, H, gated))
    return out


def _mamba(cfg: dict, mt: str, a: str, H: int) -> list[SynthModule]:
    out: list[SynthModule] = []
    add = out.append
    ker = _int(_first(cfg, "conv_kernel", "mamba_d_conv"), 4)
    st = _int(_first(cfg, "ssm_state_size", "state_size", "mamba_d_state"), 16 if mt in ("mamba", "falcon_mamba")
              else 128)
    if mt in ("mamba", "falcon_mamba"):
        # Mamba-1 (modeling_mamba.py MambaMixer): in_proj 2 x inner, x_proj (dt_rank + 2 state), dt_proj
        inner = _pos(cfg.get("intermediate_size")) or 2 * H
        rank = _int(cfg.get("time_step_rank")) or -(-H // 16)
        add(SynthModule(a + "in_proj", 2 * inner, H))
        add(SynthModule(a + "conv1d", inner, ker))
        add(SynthModule(a + "x_proj", rank + 2 * st, inner))
        add(SynthModule(a + "dt_proj", inner, rank))
        add(SynthModule(a + "A_log", inner, st))
        add(SynthModule(a + "D", inner, 1))
        add(SynthModule(a + "out_proj", H, inner))
        return out
    nh, hdm = _int(_first(cfg, "mamba_num_heads", "num_heads")), _int(_first(cfg, "mamba_head_dim", "head_dim"))
    d_inner = nh * hdm or _int(cfg.get("expand"), 2) * H
    ng = _int(cfg.get("n_groups"), 1)
    add(SynthModule(a + "in_proj", 2 * d_inner + 2 * ng * st + nh, H))
    add(SynthModule(a + "conv1d", d_inner + 2 * ng * st, ker))
    add(SynthModule(a + "out_proj", H, d_inner))
    add(SynthModule(a + "norm", d_inner, 1))
    add(SynthModule(a + "A_log", nh, 1))
    add(SynthModule(a + "D", nh, 1))
    add(SynthModule(a + "dt_bias", nh, 1))
    return out


def nas_intermediate(block: dict, H: int) -> int:
    """Nemotron-NAS / DeciLM: ffn_mult -> intermediate size (vllm model_executor/models/nemotron_nas.py:60-70@0.33.0:
    int(2 x ffn_mult x hidden / 3) rounded up to a multiple of 256)."""
    mult = (block.get("ffn") or {}).get("ffn_mult")
    if not isinstance(mult, (int, float)) or isinstance(mult, bool) or mult <= 0:
        return 0
    n = int(2 * mult * H / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


def _gemma4_moe(cfg: dict, b: str, H: int) -> list[SynthModule]:
    """Gemma 4 MoE layers keep their dense MLP and add a router and fused experts beside it
    (transformers models/gemma4/modeling_gemma4.py Gemma4TextDecoderLayer @5.24.0, no checkpoint renaming)."""
    E = num_experts(cfg)
    inter = _pos(cfg.get("intermediate_size"))
    moe = _pos(_first(cfg, "moe_intermediate_size", "expert_intermediate_size"))
    return [SynthModule(b + "mlp.gate_proj", inter, H), SynthModule(b + "mlp.up_proj", inter, H),
            SynthModule(b + "mlp.down_proj", H, inter),
            SynthModule(b + "router.proj", E, H),
            SynthModule(b + "experts.gate_up_proj", 2 * moe, H, E),
            SynthModule(b + "experts.down_proj", H, moe, E)]


def _dbrx_moe(cfg: dict, m: str, H: int) -> list[SynthModule]:
    """DBRX: one 2-D parameter per projection holding every expert (experts x ffn rows)."""
    E = num_experts(cfg)
    inter = _pos(cfg.get("intermediate_size"))
    return [SynthModule(m + "router.layer", E, H), SynthModule(m + "experts.mlp.w1", inter, H, E),
            SynthModule(m + "experts.mlp.v1", inter, H, E), SynthModule(m + "experts.mlp.w2", H, inter, E)]


def _minimax_qk_norms(cfg: dict, a: str, heads: int, kvh: int, hd: int) -> list[SynthModule]:
    """MiniMax q/k RMSNorm: one per head (M3 "per_head", vllm/models/minimax_m3/nvidia/model.py:342-344) or one
    over all heads (M2 "per_layer", vllm model_executor/models/minimax_m2.py:215-231@0.33.0)."""
    if cfg.get("qk_norm_type") == "per_head":
        return [SynthModule(a + "q_norm", hd, 1), SynthModule(a + "k_norm", hd, 1)]
    return [SynthModule(a + "q_norm", heads * hd, 1), SynthModule(a + "k_norm", kvh * hd, 1)]


def _minimax_m3_indexer(cfg: dict, a: str, H: int, i: int, notes: list | None) -> list[SynthModule]:
    """MiniMax-M3 sparse-attention layers hold the lightning indexer's projections beside q/k/v: index_q (index
    heads x index dim) and index_k (one shared head) with their norms (vllm/models/minimax_m3/nvidia/model.py:99-107
    which layers, 435-441 and 482-487 dims, layers/linear.py:1433-1445 sizes; MTP layers always, mtp.py:58-64
    @0.33.0)."""
    sp = cfg.get("sparse_attention_config")
    if not isinstance(sp, dict):
        return []
    freq, off = sp.get("sparse_attention_freq"), sp.get("sparse_disable_index_value")
    mtp = i >= _int(cfg.get("num_hidden_layers"))
    if not (mtp or (isinstance(freq, list) and i < len(freq) and freq[i] != 0)):
        return []
    n, dim = _pos(sp.get("sparse_num_index_heads")), _pos(sp.get("sparse_index_dim"))
    if not (n and dim):
        if notes is not None:
            notes.append("sparse_attention_config has no usable sparse_num_index_heads / sparse_index_dim: the "
                         "indexer projections of the sparse-attention layers cannot be sized")
        return []
    if not mtp and isinstance(off, list) and i < len(off) and off[i] == 0 and notes is not None:
        notes.append(f"layer {i}: sparse_disable_index_value is 0, so it would hold index_v/index_o projections that "
                     "vLLM 0.33 never builds (vllm/models/minimax_m3/nvidia/model.py:401-405): not sized")
    return [SynthModule(a + "index_q_proj", n * dim, H), SynthModule(a + "index_k_proj", dim, H),
            SynthModule(a + "index_q_norm", dim, 1), SynthModule(a + "index_k_norm", dim, 1)]


def _dsa_indexer(cfg: dict, x: str, H: int, i: int) -> list[SynthModule]:
    """DeepSeek-V3.2 / GLM-5 lightning indexer (``self_attn.indexer.*``): on every layer of a config with
    index_topk unless the IndexCache pattern shares the previous one's; MTP layers always have one
    (vllm model_executor/models/deepseek_v2.py:697-720 modules, 1138-1168 which layers, 1609-1616 names @0.33.0)."""
    if "index_topk" not in cfg:
        return []
    n, dim, qr = _pos(cfg.get("index_n_heads")), _pos(cfg.get("index_head_dim")), _pos(cfg.get("q_lora_rank"))
    if not (n and dim and qr):
        return []
    if i < _int(cfg.get("num_hidden_layers")):
        pattern = cfg.get("index_topk_pattern")
        if isinstance(pattern, (str, list)) and pattern:
            if i < len(pattern) and pattern[i] == "S":
                return []
        else:
            freq = _pos(cfg.get("index_topk_freq")) or 1
            offset = _int(cfg.get("index_skip_topk_offset"), 2)
            if max(i - offset + 1, 0) % freq:
                return []
    return [SynthModule(x + "wq_b", n * dim, qr), SynthModule(x + "wk", dim, H), SynthModule(x + "k_norm", dim, 1),
            SynthModule(x + "weights_proj", n, H)]


def _moe(cfg: dict, mt: str, m: str, H: int, gated: bool) -> list[SynthModule]:
    E = num_experts(cfg)
    inter = _pos(_first(cfg, "moe_intermediate_size", "expert_intermediate_size"))
    if not inter:
        inter = _pos(cfg.get("intermediate_size"))
    out: list[SynthModule] = []
    if mt.startswith("gpt_oss"):  # fused 3-D expert parameters, router named "router"
        out.append(SynthModule(m + "router", E, H))
        out.append(SynthModule(m + "experts.gate_up_proj", 2 * inter, H, E))
        out.append(SynthModule(m + "experts.down_proj", H, inter, E))
        return out
    gate, up, down = ("w1", "w3", "w2") if mt in _W123_MOE else ("gate_proj", "up_proj", "down_proj")
    out.append(SynthModule(m + "gate", E, H))
    # Latent MoE (Nemotron 3 Super/Ultra, Kimi K3): routed experts work in a smaller hidden size
    latent = _int(_first(cfg, "moe_latent_size", "routed_expert_hidden_size"))
    eh = latent or H
    if latent:
        out.append(SynthModule(m + "fc1_latent_proj", latent, H))
        out.append(SynthModule(m + "fc2_latent_proj", H, latent))
    if gated:
        out.append(SynthModule(m + "experts.0." + gate, inter, eh, E))
    out.append(SynthModule(m + "experts.0." + up, inter, eh, E))
    out.append(SynthModule(m + "experts.0." + down, eh, inter, E))
    shared = _int(_first(cfg, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"))
    n_shared = _int(_first(cfg, "n_shared_experts", "num_shared_experts"))
    if mt.startswith("llama4"):
        n_shared = n_shared or 1
    if shared or n_shared:
        size = shared or inter * n_shared
        name = "shared_expert." if "shared_expert_intermediate_size" in cfg else "shared_experts."
        if gated:
            out.append(SynthModule(m + name + "gate_proj", size, H))
        out.append(SynthModule(m + name + "up_proj", size, H))
        out.append(SynthModule(m + name + "down_proj", H, size))
        if name == "shared_expert.":
            out.append(SynthModule(m + "shared_expert_gate", 1, H))
    return out


def _minimax_vision(config: dict, vis: dict, text_h: int) -> list[SynthModule]:
    """MiniMax-M3 VL: a CLIP-style tower under vision_tower.vision_model, then multi_modal_projector and
    patch_merge_mlp at the top level (vllm/models/minimax_m3/common/vision_tower.py:36-62,184-219,355-362,527-660
    and nvidia/model.py:1129-1138 names; the release has no post_layernorm, vision_tower.py:628-637 @0.33.0)."""
    depth = _int(vis.get("num_hidden_layers"))
    if depth > 10_000:
        raise ValueError(f"vision_config num_hidden_layers={depth} is implausible")
    h, inter = _int(vis.get("hidden_size")), _int(vis.get("intermediate_size"))
    comp = vis.get("img_token_compression_config")
    comp = comp if isinstance(comp, dict) else {}
    merge, t = _int(comp.get("spatial_merge_size"), 2), _int(comp.get("temporal_patch_size"), 2)
    patch, ch = _int(vis.get("patch_size")), _int(vis.get("num_channels"), 3)
    mid = _int(config.get("projector_hidden_size")) or text_h
    v = "vision_tower.vision_model."
    out = [SynthModule(v + "embeddings.patch_embedding", h, ch * t * patch * patch),
           SynthModule(v + "pre_layrnorm", h, 1)]
    for blk in range(depth):
        b = f"{v}encoder.layers.{blk}."
        out.append(SynthModule(b + "layer_norm1", h, 1))
        out.extend(SynthModule(b + f"self_attn.{n}", h, h) for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
        out.append(SynthModule(b + "layer_norm2", h, 1))
        out.append(SynthModule(b + "mlp.fc1", inter, h))
        out.append(SynthModule(b + "mlp.fc2", h, inter))
    out += [SynthModule("multi_modal_projector.linear_1", mid, h),
            SynthModule("multi_modal_projector.linear_2", text_h, mid),
            SynthModule("patch_merge_mlp.linear_1", mid, text_h * merge * merge),
            SynthModule("patch_merge_mlp.linear_2", text_h, mid)]
    return out


def _vision(vis: dict, mt: str) -> list[SynthModule]:
    depth = _int(_first(vis, "depth", "num_hidden_layers"))
    if depth > 10_000:
        raise ValueError(f"vision_config depth={depth} is implausible")
    # Qwen2-VL writes the tower width as embed_dim and the projection's output as hidden_size
    h = _int(_first(vis, "embed_dim", "hidden_size"))
    ratio = vis.get("mlp_ratio") if isinstance(vis.get("mlp_ratio"), (int, float)) else 4
    inter = _int(_first(vis, "intermediate_size"), int(ratio * h))
    out = []
    if mt.startswith(("gemma3", "gemma4")):
        # Gemma 3/4: model.vision_tower.* (SigLIP-style encoder) + model.embed_vision / multi_modal_projector
        lin = ".linear" if mt.startswith("gemma4") else ""
        enc = "model.vision_tower.encoder.layers" if mt.startswith("gemma4") else \
            "model.vision_tower.vision_model.encoder.layers"
        for blk in range(depth):
            b = f"{enc}.{blk}."
            for n in ("q_proj", "k_proj", "v_proj"):
                out.append(SynthModule(b + f"self_attn.{n}{lin}", h, h))
            out.append(SynthModule(b + ("self_attn.o_proj" if lin else "self_attn.out_proj") + lin, h, h))
            if lin:
                for n in ("gate_proj", "up_proj"):
                    out.append(SynthModule(b + f"mlp.{n}{lin}", inter, h))
                out.append(SynthModule(b + f"mlp.down_proj{lin}", h, inter))
            else:
                out.append(SynthModule(b + "mlp.fc1", inter, h))
                out.append(SynthModule(b + "mlp.fc2", h, inter))
        return out
    out_h = _int(_first(vis, "out_hidden_size"), _int(vis.get("hidden_size"), h) if "embed_dim" in vis else h)
    merge = _int(vis.get("spatial_merge_size"), 1)
    for blk in range(depth):
        b = f"model.visual.blocks.{blk}."
        out.append(SynthModule(b + "attn.qkv", 3 * h, h))
        out.append(SynthModule(b + "attn.proj", h, h))
        out.append(SynthModule(b + "mlp.linear_fc1", inter, h))
        out.append(SynthModule(b + "mlp.linear_fc2", h, inter))
    if depth:
        out.append(SynthModule("model.visual.merger.linear_fc1", h * merge * merge, h * merge * merge))
        out.append(SynthModule("model.visual.merger.linear_fc2", out_h, h * merge * merge))
    return out

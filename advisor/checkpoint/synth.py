"""The module list of a model computed from its architecture config (no weights present).

Names follow the HF checkpoints of each family closely enough for quantization configs
(exclude lists, regex targets, quantized_layers) to resolve against them; expert stacks are one
entry with ``count`` = number of experts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.checkpoint.arch import (layer_kinds, mtp_layers, num_experts, text_config, vision_config, head_dim,
                                     _int, _pos, _first)


@dataclass(frozen=True)
class SynthModule:
    name: str
    out_f: int
    in_f: int
    count: int = 1


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


def _prefix(config: dict, uses_language_model: bool) -> str:
    mt = str(config.get("model_type", ""))
    if mt.startswith("nemotron_h"):
        return "backbone."
    if uses_language_model or (text_config(config) is not config and mt.startswith(("qwen3_5", "qwen3_vl", "gemma"))):
        return "model.language_model."
    return "model."


def modules_from_config(config: dict, *, quant_text: str = "") -> list[SynthModule]:
    cfg = text_config(config)
    mt = str(cfg.get("model_type") or config.get("model_type") or "")
    hint_prefix, hint_moe = naming_hints(quant_text)
    p = hint_prefix if hint_prefix is not None else _prefix(config, False)
    # counts that are not positive integers are unknown (0, reported by the doctor), never negative sizes
    H = _pos(cfg.get("hidden_size"))
    V = _pos(cfg.get("vocab_size"))
    out: list[SynthModule] = []
    add = out.append
    add(SynthModule(p + ("embeddings" if mt.startswith("nemotron_h") else "embed_tokens"), V, H))
    kinds = layer_kinds(config)
    L = len(kinds)
    for i, k in enumerate(kinds):
        out.extend(_layer(cfg, mt, f"{p}layers.{i}.", k.mixer, k.ffn, H, nemotron=mt.startswith("nemotron_h"),
                          moe_container=hint_moe))
    add(SynthModule(p + ("norm_f" if mt.startswith("nemotron_h") else "norm"), H, 1))
    tie = config.get("tie_word_embeddings", cfg.get("tie_word_embeddings", False))
    if not tie:
        add(SynthModule("lm_head", V, H))
    n_mtp = mtp_layers(cfg)
    if n_mtp > 1000:
        raise ValueError(f"{n_mtp} MTP layers is implausible")
    for j in range(n_mtp):
        if mt.startswith(("deepseek", "kimi", "glm")):
            base = f"{p}layers.{L + j}."
        else:
            base = f"mtp.layers.{j}."
        last = kinds[-1] if kinds else None
        ffn = last.ffn if last else "dense"
        mixer = "mla" if _int(cfg.get("kv_lora_rank")) else "attention"
        out.extend(_layer(cfg, mt, base, mixer, ffn, H))
        add(SynthModule(base + "eh_proj" if base.startswith(p) else "mtp.fc", H, 2 * H))
    vis = vision_config(config)
    if vis:
        out.extend(_vision(vis))
    return out


def _layer(cfg: dict, mt: str, b: str, mixer: str, ffn: str, H: int, nemotron: bool = False,
           moe_container: str | None = None) -> list[SynthModule]:
    out: list[SynthModule] = []
    add = out.append
    heads = _pos(cfg.get("num_attention_heads"))
    kv_raw = _first(cfg, "num_key_value_heads", "num_kv_heads")
    kvh = heads if kv_raw is None else _pos(kv_raw)
    hd = head_dim(cfg)
    mix = "mixer." if nemotron else ""
    add(SynthModule(b + ("norm" if nemotron else "input_layernorm"), H, 1))
    if mixer in ("attention", "sliding"):
        a = b + (mix or "self_attn.")
        gate = 2 if cfg.get("attn_output_gate") else 1
        add(SynthModule(a + "q_proj", heads * hd * gate, H))
        add(SynthModule(a + "k_proj", kvh * hd, H))
        add(SynthModule(a + "v_proj", kvh * hd, H))
        add(SynthModule(a + "o_proj", H, heads * hd))
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
        nh, hdm = _int(cfg.get("mamba_num_heads")), _int(cfg.get("mamba_head_dim"))
        d_inner = nh * hdm or _int(cfg.get("expand"), 2) * H
        ng, st = _int(cfg.get("n_groups"), 1), _int(cfg.get("ssm_state_size"), 128)
        add(SynthModule(a + "in_proj", 2 * d_inner + 2 * ng * st + nh, H))
        add(SynthModule(a + "conv1d", d_inner + 2 * ng * st, _int(cfg.get("conv_kernel"), 4)))
        add(SynthModule(a + "out_proj", H, d_inner))
        add(SynthModule(a + "norm", d_inner, 1))
        add(SynthModule(a + "A_log", nh, 1))
        add(SynthModule(a + "D", nh, 1))
        add(SynthModule(a + "dt_bias", nh, 1))
    if not nemotron and mixer != "none":
        add(SynthModule(b + "post_attention_layernorm", H, 1))
    gated = not nemotron and str(cfg.get("hidden_act", cfg.get("mlp_hidden_act", "silu"))) != "relu2"
    if ffn == "dense":
        m = b + (mix or "mlp.")
        inter = _pos(_first(cfg, "intermediate_size_mlp", "intermediate_size", "ffn_hidden_size"))
        if gated:
            add(SynthModule(m + "gate_proj", inter, H))
        add(SynthModule(m + "up_proj", inter, H))
        add(SynthModule(m + "down_proj", H, inter))
    elif ffn == "moe":
        out.extend(_moe(cfg, mt, b + (moe_container + "." if moe_container else (mix or "mlp.")), H, gated))
    return out


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
    if mt.startswith("mixtral"):
        m = m.replace("mlp.", "block_sparse_moe.")
        out.append(SynthModule(m + "gate", E, H))
        out.append(SynthModule(m + "experts.0.w1", inter, H, E))
        out.append(SynthModule(m + "experts.0.w3", inter, H, E))
        out.append(SynthModule(m + "experts.0.w2", H, inter, E))
        return out
    out.append(SynthModule(m + "gate", E, H))
    # Latent MoE (Nemotron 3 Super/Ultra, Kimi K3): routed experts work in a smaller hidden size
    latent = _int(_first(cfg, "moe_latent_size", "routed_expert_hidden_size"))
    eh = latent or H
    if latent:
        out.append(SynthModule(m + "fc1_latent_proj", latent, H))
        out.append(SynthModule(m + "fc2_latent_proj", H, latent))
    if gated:
        out.append(SynthModule(m + "experts.0.gate_proj", inter, eh, E))
    out.append(SynthModule(m + "experts.0.up_proj", inter, eh, E))
    out.append(SynthModule(m + "experts.0.down_proj", eh, inter, E))
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


def _vision(vis: dict) -> list[SynthModule]:
    depth = _int(_first(vis, "depth", "num_hidden_layers"))
    if depth > 10_000:
        raise ValueError(f"vision_config depth={depth} is implausible")
    h = _int(_first(vis, "hidden_size", "embed_dim"))
    inter = _int(_first(vis, "intermediate_size"), 4 * h)
    out_h = _int(_first(vis, "out_hidden_size"), h)
    merge = _int(vis.get("spatial_merge_size"), 1)
    out = []
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

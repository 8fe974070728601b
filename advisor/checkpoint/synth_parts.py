"""The sub-blocks that synth.py assembles into a model's module list: Mamba mixers, MoE blocks
(generic, Gemma 4, DBRX), MiniMax and DeepSeek-sparse-attention indexers and norms, vision towers.
Each returns ``SynthModule`` entries named as the published checkpoints of its family name them.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.arch import _first, _int, _pos, num_experts

# Mixtral-style MoE: the checkpoint keeps <container>.gate and experts.N.w1 (gate) / w3 (up) / w2 (down)
# (transformers conversion_mapping.py:50-51,850-882,1359-1378,1483-1500,2352-2355@5.24.0 rename from these;
# vllm mixtral.py:131, minimax_m2.py:107, phimoe.py:285@0.33.0 and vllm/models/minimax_m3/nvidia/model.py:936-941
# load them as ckpt names w1/w2/w3).
W123_MOE = {"mixtral": "block_sparse_moe.", "phimoe": "block_sparse_moe.", "minimax": "block_sparse_moe.",
            "minimax_m1": "block_sparse_moe.", "minimax_m2": "block_sparse_moe.", "minimax_m3": "block_sparse_moe.",
            "minimax_m3_vl": "block_sparse_moe."}


@dataclass(frozen=True)
class SynthModule:
    name: str
    out_f: int
    in_f: int
    count: int = 1


def mamba_modules(cfg: dict, mt: str, a: str, H: int) -> list[SynthModule]:
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


def gemma4_moe_modules(cfg: dict, b: str, H: int) -> list[SynthModule]:
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


def dbrx_moe_modules(cfg: dict, m: str, H: int) -> list[SynthModule]:
    """DBRX: one 2-D parameter per projection holding every expert (experts x ffn rows)."""
    E = num_experts(cfg)
    inter = _pos(cfg.get("intermediate_size"))
    return [SynthModule(m + "router.layer", E, H), SynthModule(m + "experts.mlp.w1", inter, H, E),
            SynthModule(m + "experts.mlp.v1", inter, H, E), SynthModule(m + "experts.mlp.w2", H, inter, E)]


def minimax_qk_norms(cfg: dict, a: str, heads: int, kvh: int, hd: int) -> list[SynthModule]:
    """MiniMax q/k RMSNorm: one per head (M3 "per_head", vllm/models/minimax_m3/nvidia/model.py:342-344) or one
    over all heads (M2 "per_layer", vllm model_executor/models/minimax_m2.py:215-231@0.33.0)."""
    if cfg.get("qk_norm_type") == "per_head":
        return [SynthModule(a + "q_norm", hd, 1), SynthModule(a + "k_norm", hd, 1)]
    return [SynthModule(a + "q_norm", heads * hd, 1), SynthModule(a + "k_norm", kvh * hd, 1)]


def minimax_m3_indexer(cfg: dict, a: str, H: int, i: int, notes: list | None) -> list[SynthModule]:
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


def dsa_indexer(cfg: dict, x: str, H: int, i: int) -> list[SynthModule]:
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


def moe_modules(cfg: dict, mt: str, m: str, H: int, gated: bool) -> list[SynthModule]:
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
    gate, up, down = ("w1", "w3", "w2") if mt in W123_MOE else ("gate_proj", "up_proj", "down_proj")
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


def minimax_vision_modules(config: dict, vis: dict, text_h: int) -> list[SynthModule]:
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


def vision_modules(vis: dict, mt: str) -> list[SynthModule]:
    depth = _int(_first(vis, "depth", "num_hidden_layers"))
    if depth > 10_000:
        raise ValueError(f"vision_config depth={depth} is implausible")
    # Qwen2-VL writes the tower width as embed_dim and the projection's output as hidden_size
    h = _int(_first(vis, "embed_dim", "hidden_size"))
    ratio = vis.get("mlp_ratio")
    if not isinstance(ratio, (int, float)):
        ratio = 4
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

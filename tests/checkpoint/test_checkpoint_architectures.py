"""Architectures on real safetensors headers: MoE (active parameters, pruned experts), gpt-oss MXFP4 experts,
hybrid Gated-DeltaNet with MTP and vision, DeepSeek MLA with block FP8 (formats: test_checkpoint_formats.py)."""

from __future__ import annotations

from advisor.checkpoint.inspect import inspect_checkpoint

from ckpt_builders import H, HEADS, I, L, LLAMA_CONFIG, V, linear, mo_cfgs, norms, _z, torch  # noqa: F401

# ---------------------------------------------------------------- architectures

def _moe_tensors(fmt="bf16", experts=4):
    t = {"model.embed_tokens.weight": _z((V, H), torch.bfloat16), "model.norm.weight": _z((H,), torch.bfloat16)}
    t.update(linear("lm_head", V, H, "bf16"))
    for i in range(L):
        p = f"model.layers.{i}"
        t.update(norms(p))
        for name, n, k in (("q_proj", 128, H), ("k_proj", 64, H), ("v_proj", 64, H), ("o_proj", H, 128)):
            t.update(linear(f"{p}.self_attn.{name}", n, k, "bf16"))
        t.update(linear(f"{p}.mlp.gate", experts, H, "bf16"))
        for e in range(experts):
            for name, n, k in (("gate_proj", 64, H), ("up_proj", 64, H), ("down_proj", H, 64)):
                t.update(linear(f"{p}.mlp.experts.{e}.{name}", n, k, fmt))
    return t


MOE_CONFIG = {**LLAMA_CONFIG, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
              "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "decoder_sparse_step": 1,
              "mlp_only_layers": []}


def test_moe_active_params_and_collapse(build):
    cfg, hq = mo_cfgs("NVFP4", extra={"group_size": 16})
    hq["quantization"]["exclude_modules"] += ["model.layers.*.self_attn*", "model.layers.0.mlp.gate",
                                              "model.layers.1.mlp.gate"]
    cfg = {**MOE_CONFIG, "quantization_config": cfg["quantization_config"]}
    info = inspect_checkpoint(build("moe", _moe_tensors("mo_nvfp4"), cfg, hf_quant=hq))
    assert info.label == "W4A4-NVFP4"
    experts = info.modules_with_role("expert")
    assert len(experts) == 3 and all(g.count == 4 * L for g in experts)   # 24 modules -> 3 groups
    assert info.arch.moe.num_experts == 4 and info.arch.moe.top_k == 2
    expert_params = sum(g.params for g in experts)
    assert info.totals.active_params == info.totals.params - V * H - expert_params // 2
    router = info.modules_with_role("router")
    assert router and router[0].scheme == "BF16"


def test_expert_pruned_checkpoint(build):
    info = inspect_checkpoint(build("pruned", _moe_tensors("bf16", experts=3), dict(MOE_CONFIG)))
    assert any(f.code == "expert-count-mismatch" for f in info.findings)
    experts = info.modules_with_role("expert")
    ep = sum(g.params for g in experts)
    assert info.totals.active_params == info.totals.params - V * H - ep + round(ep * 2 / 3)


def test_gpt_oss_mxfp4_experts(build):
    t = {"model.embed_tokens.weight": _z((V, H), torch.bfloat16), "model.norm.weight": _z((H,), torch.bfloat16)}
    t.update(linear("lm_head", V, H, "bf16"))
    E = 4
    for i in range(L):
        p = f"model.layers.{i}"
        t.update(norms(p))
        for name, n, k in (("q_proj", 128, H), ("k_proj", 64, H), ("v_proj", 64, H), ("o_proj", H, 128)):
            t.update(linear(f"{p}.self_attn.{name}", n, k, "bf16"))
            t[f"{p}.self_attn.{name}.bias"] = _z((n,), torch.bfloat16)
        t[f"{p}.self_attn.sinks"] = _z((HEADS,), torch.bfloat16)
        t.update(linear(f"{p}.mlp.router", E, H, "bf16"))
        t[f"{p}.mlp.experts.gate_up_proj_blocks"] = _z((E, 2 * 64, H // 32, 16), torch.uint8)
        t[f"{p}.mlp.experts.gate_up_proj_scales"] = _z((E, 2 * 64, H // 32), torch.uint8)
        t[f"{p}.mlp.experts.gate_up_proj_bias"] = _z((E, 2 * 64), torch.float32)
        t[f"{p}.mlp.experts.down_proj_blocks"] = _z((E, H, 64 // 32, 16), torch.uint8)
        t[f"{p}.mlp.experts.down_proj_scales"] = _z((E, H, 64 // 32), torch.uint8)
        t[f"{p}.mlp.experts.down_proj_bias"] = _z((E, H), torch.float32)
    cfg = {**LLAMA_CONFIG, "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_local_experts": E,
           "num_experts_per_tok": 2, "experts_per_token": 2, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"],
           "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                              "model.embed_tokens", "lm_head"],
                                   "quant_method": "mxfp4"}}
    info = inspect_checkpoint(build("gptoss", t, cfg))
    assert (info.producer, info.label) == ("mxfp4", "W4A16-MXFP4")
    ex = info.modules_with_role("expert")
    assert {g.shape for g in ex} == {(128, H), (H, 64)} and all(g.count == E * L for g in ex)
    assert info.arch.kv_layers == 1 and info.arch.sliding_window_layers == 1 and info.arch.sliding_window == 128
    assert sum(g.params for g in ex) == L * E * (128 * H + H * 64)


def test_hybrid_gdn_mtp_vision_headers(build):
    """Qwen3.5-style tensors: GDN layers, full attention every 4th layer, MTP head, vision tower."""
    pre = "model.language_model"
    t = {f"{pre}.embed_tokens.weight": _z((V, H), torch.bfloat16), f"{pre}.norm.weight": _z((H,), torch.bfloat16)}
    t.update(linear("lm_head", V, H, "mo_nvfp4", input_scale=False))
    layer_types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
    layers = {}
    for i, lt in enumerate(layer_types):
        p = f"{pre}.layers.{i}"
        t.update(norms(p))
        if lt == "linear_attention":
            for name, n in (("in_proj_qkv", 256), ("in_proj_z", 128), ("out_proj", None)):
                t.update(linear(f"{p}.linear_attn.{name}", n or H, 128 if n is None else H, "mo_fp8"))
                layers[f"{p}.linear_attn.{name}"] = {"quant_algo": "FP8"}
            for name in ("in_proj_a", "in_proj_b"):
                t.update(linear(f"{p}.linear_attn.{name}", 16, H, "bf16"))
            t[f"{p}.linear_attn.conv1d.weight"] = _z((384, 1, 4), torch.bfloat16)
            t[f"{p}.linear_attn.A_log"] = _z((16,), torch.float32)
            t[f"{p}.linear_attn.dt_bias"] = _z((16,), torch.bfloat16)
        else:
            for name, n, k in (("q_proj", 256, H), ("k_proj", 64, H), ("v_proj", 64, H), ("o_proj", H, 128)):
                t.update(linear(f"{p}.self_attn.{name}", n, k, "mo_fp8"))
                layers[f"{p}.self_attn.{name}"] = {"quant_algo": "FP8"}
        for name, n, k in (("gate_proj", I, H), ("up_proj", I, H), ("down_proj", H, I)):
            t.update(linear(f"{p}.mlp.{name}", n, k, "mo_nvfp4", input_scale=False))
            layers[f"{p}.mlp.{name}"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    layers["lm_head"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    for name, n, k in (("mtp.fc", H, 2 * H), ("mtp.layers.0.mlp.up_proj", I, H)):
        t.update(linear(name, n, k, "bf16"))
    for name, n, k in (("model.visual.blocks.0.attn.qkv", 192, 64), ("model.visual.merger.linear_fc2", H, 256)):
        t.update(linear(name, n, k, "bf16"))
    hq = {"producer": {"name": "modelopt", "version": "0.45.0"},
          "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8", "quantized_layers": layers,
                           "exclude_modules": ["mtp*", "mtp.layers.0*"]}}
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
           "text_config": {**LLAMA_CONFIG, "model_type": "qwen3_5_text", "num_hidden_layers": 4,
                           "layer_types": layer_types, "full_attention_interval": 4, "mtp_num_hidden_layers": 1},
           "vision_config": {"depth": 1, "hidden_size": 64}}
    info = inspect_checkpoint(build("qwen35", t, cfg, hf_quant=hq))
    assert info.label == "MIXED" and set(info.scheme_shares) == {"W8A8-FP8", "W4A16-NVFP4"}
    a = info.arch
    assert (a.kv_layers, a.linear_attention_layers, a.mtp_layers, a.has_vision) == (1, 3, 1, True)
    roles = {g.name: g.role for g in info.modules}
    assert roles["model.language_model.layers.*.linear_attn.in_proj_qkv"] == "gdn_in_proj"
    assert roles["model.language_model.layers.*.linear_attn.out_proj"] == "gdn_out_proj"
    assert roles["model.language_model.layers.*.linear_attn.conv1d"] == "conv"
    assert roles["mtp.fc"] == "mtp" and roles["model.visual.blocks.*.attn.qkv"] == "vision"
    kept = {g.name for g in info.kept_bf16}
    assert {"mtp.fc", "model.language_model.layers.*.linear_attn.in_proj_a", "model.visual.blocks.*.attn.qkv"} <= kept
    assert not any(f.severity == "error" for f in info.findings), info.findings
    # per-token bytes leave out the vision tower, MTP head and embedding table
    not_read = sum(g.stored_bytes for g in info.modules if g.role in ("vision", "mtp", "embed"))
    assert info.totals.bytes_per_token == info.totals.stored_bytes - not_read


def test_deepseek_mla_fp8_block_headers(build):
    """DeepSeek-V3-style: MLA projections, dense first layer, routed + shared experts, MTP layer, block FP8."""
    t = {"model.embed_tokens.weight": _z((V, H), torch.bfloat16), "model.norm.weight": _z((H,), torch.bfloat16)}
    t.update(linear("lm_head", V, H, "bf16"))
    for i in range(3):                                  # layers 0, 1 and the MTP layer 2
        p = f"model.layers.{i}"
        t.update(norms(p))
        for name, n, k in (("q_a_proj", 128, H), ("q_b_proj", 256, 128), ("kv_a_proj_with_mqa", 128 + 64, H),
                           ("kv_b_proj", 256, 128), ("o_proj", H, 128)):
            t.update(linear(f"{p}.self_attn.{name}", n, k, "hf_fp8_block"))
        t[f"{p}.self_attn.q_a_layernorm.weight"] = _z((128,), torch.bfloat16)
        t[f"{p}.self_attn.kv_a_layernorm.weight"] = _z((128,), torch.bfloat16)
        if i == 0:
            for name, n, k in (("gate_proj", I, H), ("up_proj", I, H), ("down_proj", H, I)):
                t.update(linear(f"{p}.mlp.{name}", n, k, "hf_fp8_block"))
        else:
            t.update(linear(f"{p}.mlp.gate", 4, H, "bf16"))
            t[f"{p}.mlp.gate.e_score_correction_bias"] = _z((4,), torch.float32)
            for e in range(4):
                for name, n, k in (("gate_proj", 128, H), ("up_proj", 128, H), ("down_proj", H, 128)):
                    t.update(linear(f"{p}.mlp.experts.{e}.{name}", n, k, "hf_fp8_block"))
            for name, n, k in (("gate_proj", 128, H), ("up_proj", 128, H), ("down_proj", H, 128)):
                t.update(linear(f"{p}.mlp.shared_experts.{name}", n, k, "hf_fp8_block"))
    t.update(linear("model.layers.2.eh_proj", H, 2 * H, "bf16"))
    cfg = {**LLAMA_CONFIG, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
           "num_hidden_layers": 2, "kv_lora_rank": 128, "q_lora_rank": 128, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 64, "v_head_dim": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
           "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_intermediate_size": 128,
           "num_nextn_predict_layers": 1,
           "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                   "weight_block_size": [128, 128]}}
    info = inspect_checkpoint(build("dsv3", t, cfg))
    assert info.label == "W8A8-FP8" and info.producer == "fp8"
    a = info.arch
    assert a.mla.kv_lora_rank == 128 and a.moe.moe_layers == 1 and a.moe.num_shared_experts == 1 and a.mtp_layers == 1
    assert a.kv_layers == 2
    mtp = info.modules_with_role("mtp")
    assert mtp and all(g.layers == (2,) for g in mtp if g.layers)
    shared = info.modules_with_role("shared_expert")
    assert shared and all(g.scheme == "W8A8-FP8" for g in shared)
    experts = [g for g in info.modules_with_role("expert")]
    ep = sum(g.params for g in experts)
    mtp_p = sum(g.params for g in mtp)
    # active: everything read per token, routed experts at top_k / E = 2 / 4
    assert info.totals.active_params == info.totals.params - V * H - mtp_p - ep // 2

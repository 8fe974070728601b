"""Every format, on real safetensors files laid out as the producers write them (architectures:
test_checkpoint_architectures.py)."""

from __future__ import annotations

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint

from ckpt_builders import H, HEADS, I, L, LLAMA_CONFIG, V, linear, llama_tensors, mo_cfgs, norms, with_qc, _z, torch  # noqa: F401

# ---- compressed-tensors argument blocks exactly as llm-compressor 0.14.0.1 writes them (oracles.md §2)
_A = {"actorder": None, "block_structure": None, "observer_kwargs": {}, "zp_dtype": None, "symmetric": True}
W4A16_W = {**_A, "dynamic": False, "group_size": 128, "num_bits": 4, "observer": "memoryless_minmax",
           "scale_dtype": None, "strategy": "group", "type": "int"}
W8A16_W = {**W4A16_W, "num_bits": 8}
FP8_CH_W = {**_A, "dynamic": False, "group_size": None, "num_bits": 8, "observer": "memoryless_minmax",
            "scale_dtype": None, "strategy": "channel", "type": "float"}
FP8_TOKEN_A = {**_A, "dynamic": True, "group_size": None, "num_bits": 8, "observer": None, "scale_dtype": None,
               "strategy": "token", "type": "float"}
FP8_T_W = {**FP8_CH_W, "strategy": "tensor"}
FP8_T_A = {**_A, "dynamic": False, "group_size": None, "num_bits": 8, "observer": "static_minmax",
           "scale_dtype": None, "strategy": "tensor", "type": "float"}
INT8_CH_W = {**FP8_CH_W, "type": "int"}
INT8_TOKEN_A = {**FP8_TOKEN_A, "type": "int"}
NVFP4_W = {**_A, "dynamic": False, "group_size": 16, "num_bits": 4, "observer": "memoryless_minmax",
           "scale_dtype": "torch.float8_e4m3fn", "strategy": "tensor_group", "type": "float"}
NVFP4_A = {**NVFP4_W, "dynamic": "local", "observer": "static_minmax"}
MXFP4_W = {**_A, "dynamic": False, "group_size": 32, "num_bits": 4, "observer": "memoryless_minmax",
           "scale_dtype": "torch.uint8", "strategy": "group", "type": "float"}
MXFP4_A = {**MXFP4_W, "dynamic": True, "observer": None}
FP8_BLOCK_W = {**_A, "block_structure": [128, 128], "dynamic": False, "group_size": None, "num_bits": 8,
               "observer": "memoryless_minmax", "scale_dtype": None, "strategy": "block", "type": "float"}
FP8_GROUP_A = {**_A, "dynamic": True, "group_size": 128, "num_bits": 8, "observer": None, "scale_dtype": None,
               "strategy": "group", "type": "float"}


def ct_qc(groups: dict, fmt: str, kv=None, ignore=("lm_head",)) -> dict:
    return {"config_groups": groups, "format": fmt, "global_compression_ratio": None, "ignore": list(ignore),
            "kv_cache_scheme": kv, "quant_method": "compressed-tensors", "quantization_status": "compressed",
            "sparsity_config": {}, "transform_config": {}, "version": "0.19.0"}


def ct_group(fmt, w, a=None, targets=("Linear",)):
    return {"format": fmt, "input_activations": a, "output_activations": None, "targets": list(targets), "weights": w}


CT_CASES = [
    # name, attn fmt, mlp fmt, qc, expected label, expected weight format, act format
    ("W4A16", "ct_w4a16", None, ct_qc({"group_0": ct_group("pack-quantized", W4A16_W)}, "pack-quantized"),
     "W4A16-INT4", "int4", "none"),
    ("W8A16", "ct_w8a16", None, ct_qc({"group_0": ct_group("pack-quantized", W8A16_W)}, "pack-quantized"),
     "W8A16-INT8", "int8", "none"),
    ("FP8_DYNAMIC", "ct_fp8_dynamic", None,
     ct_qc({"group_0": ct_group("float-quantized", FP8_CH_W, FP8_TOKEN_A)}, "float-quantized"),
     "W8A8-FP8", "fp8_e4m3", "fp8_e4m3"),
    ("FP8_STATIC", "ct_fp8_static", None,
     ct_qc({"group_0": ct_group("float-quantized", FP8_T_W, FP8_T_A)}, "float-quantized"),
     "W8A8-FP8", "fp8_e4m3", "fp8_e4m3"),
    ("FP8_BLOCK", "ct_fp8_block", None,
     ct_qc({"group_0": ct_group("float-quantized", FP8_BLOCK_W, FP8_GROUP_A)}, "float-quantized"),
     "W8A8-FP8", "fp8_e4m3", "fp8_e4m3"),
    ("W8A8_INT8", "ct_w8a8_int8", None,
     ct_qc({"group_0": ct_group("int-quantized", INT8_CH_W, INT8_TOKEN_A)}, "int-quantized"),
     "W8A8-INT8", "int8", "int8"),
    ("NVFP4A16", "ct_nvfp4a16", None,
     ct_qc({"group_0": ct_group("nvfp4-pack-quantized", NVFP4_W)}, "nvfp4-pack-quantized"),
     "W4A16-NVFP4", "nvfp4", "none"),
    ("NVFP4", "ct_nvfp4", None,
     ct_qc({"group_0": ct_group("nvfp4-pack-quantized", NVFP4_W, NVFP4_A)}, "nvfp4-pack-quantized"),
     "W4A4-NVFP4", "nvfp4", "nvfp4"),
    ("MXFP4", "ct_mxfp4", None,
     ct_qc({"group_0": ct_group("mxfp4-pack-quantized", MXFP4_W, MXFP4_A)}, "mxfp4-pack-quantized"),
     "W4A4-MXFP4", "mxfp4", "mxfp4"),
    ("MXFP4A16", "ct_mxfp4", None,
     ct_qc({"group_0": ct_group("mxfp4-pack-quantized", MXFP4_W)}, "mxfp4-pack-quantized"),
     "W4A16-MXFP4", "mxfp4", "none"),
]


@pytest.mark.parametrize("name,attn,mlp,qc,label,wfmt,afmt", CT_CASES, ids=[c[0] for c in CT_CASES])
def test_compressed_tensors_presets(build, name, attn, mlp, qc, label, wfmt, afmt):
    info = inspect_checkpoint(build(name, llama_tensors(attn, mlp), with_qc(qc)))
    assert info.producer == "compressed-tensors"
    assert info.label == label
    assert info.scheme_shares == {label: 1.0}
    lin = [g for g in info.modules if g.role in ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down")]
    assert lin and all(g.weight.format == wfmt and g.act.format == afmt for g in lin)
    # lm_head is ignored -> kept BF16, listed with its bytes
    kept = {g.name: g for g in info.kept_bf16}
    assert kept["lm_head"].stored_bytes == V * H * 2
    assert "model.embed_tokens" in kept
    assert info.totals.sizes_from == "headers"
    # per-member logical shapes are recovered from packed tensors
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.shape == (128, H) and q.count == L
    down = next(g for g in info.modules if g.name.endswith("down_proj"))
    assert down.shape == (H, I)


def test_ct_granularities(build):
    info = inspect_checkpoint(build("blk", llama_tensors("ct_fp8_block"),
                                    with_qc(CT_CASES[4][3])))
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.weight.granularity == "block" and q.weight.block == (128, 128)
    assert q.act.dynamic is True and q.act.granularity == "group" and q.act.group_size == 128
    info = inspect_checkpoint(build("w4", llama_tensors("ct_w4a16"), with_qc(CT_CASES[0][3])))
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.weight.granularity == "group" and q.weight.group_size == 128 and q.weight.packing == "int32-8-per-word"


def test_ct_mixed_precision_and_shares(build):
    qc = ct_qc({"group_0": ct_group("float-quantized", FP8_CH_W, FP8_TOKEN_A, [r"re:.*self_attn\.(q|k|v|o)_proj$"]),
                "group_1": ct_group("nvfp4-pack-quantized", NVFP4_W, None, [r"re:.*mlp\.(gate|up|down)_proj$"])},
               "mixed-precision")
    info = inspect_checkpoint(build("mixed", llama_tensors("ct_fp8_dynamic", "ct_nvfp4a16"), with_qc(qc)))
    assert info.label == "MIXED"
    assert set(info.scheme_shares) == {"W8A8-FP8", "W4A16-NVFP4"}
    assert abs(sum(info.scheme_shares.values()) - 1) < 1e-6
    # shares are byte shares among quantized linear weights, computed from the headers
    fp8 = sum(g.stored_bytes for g in info.modules if g.scheme == "W8A8-FP8")
    fp4 = sum(g.stored_bytes for g in info.modules if g.scheme == "W4A16-NVFP4")
    assert info.scheme_shares["W8A8-FP8"] == pytest.approx(fp8 / (fp8 + fp4), abs=1e-5)


def test_ct_mixed_same_format_int(build):
    qc = ct_qc({"group_0": ct_group("pack-quantized", W8A16_W, None, [r"re:.*self_attn\.(q|k|v|o)_proj$"]),
                "group_1": ct_group("pack-quantized", W4A16_W, None, [r"re:.*mlp\.(gate|up|down)_proj$"])},
               "pack-quantized")
    info = inspect_checkpoint(build("mixint", llama_tensors("ct_w8a16", "ct_w4a16"), with_qc(qc)))
    assert info.label == "MIXED"
    assert set(info.scheme_shares) == {"W8A16-INT8", "W4A16-INT4"}


def test_ct_kv_cache_scheme(build):
    kv = {**_A, "dynamic": False, "group_size": None, "num_bits": 8, "observer": None, "scale_dtype": None,
          "strategy": "tensor", "type": "float"}
    qc = ct_qc({"group_0": ct_group("float-quantized", FP8_CH_W, FP8_TOKEN_A)}, "float-quantized", kv=kv)
    t = llama_tensors("ct_fp8_dynamic")
    for i in range(L):
        t[f"model.layers.{i}.self_attn.k_scale"] = _z((1,), torch.bfloat16)
        t[f"model.layers.{i}.self_attn.v_scale"] = _z((1,), torch.bfloat16)
    info = inspect_checkpoint(build("kv", t, with_qc(qc)))
    assert info.kv_cache_quant == "fp8"
    assert not any(f.code == "kv-scales-undeclared" for f in info.findings)
    # stored bytes include the kv scales (nothing dropped)
    assert info.totals.stored_bytes == sum(v.numel() * v.element_size() for v in t.values())


def test_ct_ignore_regex_and_class_targets(build):
    qc = ct_qc({"group_0": ct_group("nvfp4-pack-quantized", NVFP4_W)}, "nvfp4-pack-quantized",
               ignore=["lm_head", r"re:.*self_attn.*"])
    info = inspect_checkpoint(build("ign", llama_tensors("bf16", "ct_nvfp4a16"), with_qc(qc)))
    assert info.label == "W4A16-NVFP4"
    attn = [g for g in info.modules if g.role in ("attn_qkv", "attn_o")]
    assert attn and all(g.scheme == "BF16" for g in attn)
    assert {g.name for g in info.kept_bf16} >= {g.name for g in attn}


def test_ignored_but_quantized_is_flagged(build):
    qc = ct_qc({"group_0": ct_group("nvfp4-pack-quantized", NVFP4_W)}, "nvfp4-pack-quantized",
               ignore=["lm_head", r"re:.*self_attn\.q_proj$"])
    info = inspect_checkpoint(build("ignq", llama_tensors("ct_nvfp4a16"), with_qc(qc)))
    f = [f for f in info.findings if f.code == "ignored-but-quantized"]
    assert f and any("q_proj" in m for m in f[0].modules)


# ---------------------------------------------------------------- ModelOpt

MO_CASES = [
    ("NVFP4", "mo_nvfp4", {"group_size": 16}, True, "W4A4-NVFP4", "nvfp4", "nvfp4"),
    ("W4A16_NVFP4", "mo_nvfp4", {"group_size": 16}, False, "W4A16-NVFP4", "nvfp4", "none"),
    ("FP8", "mo_fp8", {}, True, "W8A8-FP8", "fp8_e4m3", "fp8_e4m3"),
    ("W4A16_AWQ", "mo_int4_awq", {"group_size": 128, "has_zero_point": False, "pre_quant_scale": True}, True,
     "W4A16-INT4", "int4", "none"),
    ("W8A8_SQ_PER_CHANNEL", "mo_int8_sq", {}, True, "W8A8-INT8", "int8", "int8"),
]


@pytest.mark.parametrize("algo,fmt,extra,inp,label,wfmt,afmt", MO_CASES, ids=[c[0] for c in MO_CASES])
def test_modelopt_algos(build, algo, fmt, extra, inp, label, wfmt, afmt):
    cfg, hq = mo_cfgs(algo, extra=extra)
    info = inspect_checkpoint(build(algo, llama_tensors(fmt, input_scale=inp), cfg, hf_quant=hq))
    assert (info.producer, info.label, info.quant_method) == ("modelopt", label, algo)
    lin = [g for g in info.modules if g.role in ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down")]
    assert all(g.weight.format == wfmt and g.act.format == afmt for g in lin)
    q = next(g for g in lin if g.name.endswith("q_proj"))
    assert q.shape == (128, H)
    assert info.kv_cache_quant is None


def test_modelopt_nvfp4_kv_fp8_and_old_layout(build):
    cfg, hq = mo_cfgs("NVFP4", kv="FP8", extra={"group_size": 16})
    t = llama_tensors("mo_nvfp4")
    for i in range(L):
        t[f"model.layers.{i}.self_attn.k_proj.k_scale"] = torch.tensor(0.003)
        t[f"model.layers.{i}.self_attn.v_proj.v_scale"] = torch.tensor(0.003)
    info = inspect_checkpoint(build("kv", t, cfg, hf_quant=hq))
    assert info.kv_cache_quant == "fp8" and info.label == "W4A4-NVFP4"
    # old exporters (0.23/0.33) write hf_quant_config.json only; config.json has no quantization_config
    info2 = inspect_checkpoint(build("old", t, dict(LLAMA_CONFIG), hf_quant=hq))
    assert (info2.label, info2.kv_cache_quant, info2.producer) == ("W4A4-NVFP4", "fp8", "modelopt")
    # new layout without hf_quant_config.json: config.json quantization_config alone
    info3 = inspect_checkpoint(build("new", t, cfg))
    assert (info3.label, info3.kv_cache_quant) == ("W4A4-NVFP4", "fp8")


def test_modelopt_mixed_precision(build):
    layers = {}
    for i in range(L):
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            layers[f"model.layers.{i}.self_attn.{n}"] = {"quant_algo": "FP8"}
        for n in ("gate_proj", "up_proj", "down_proj"):
            layers[f"model.layers.{i}.mlp.{n}"] = {"quant_algo": "NVFP4", "group_size": 16}
    hq = {"producer": {"name": "modelopt", "version": "0.47.0"},
          "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None, "quantized_layers": layers}}
    # config_groups deliberately contradict (as in nvidia/Qwen3.6-35B-A3B-NVFP4): quantized_layers wins
    qc = {"config_groups": {"group_1": {"input_activations": {"num_bits": 4, "type": "float"},
                                        "weights": {"num_bits": 4, "type": "float"},
                                        "targets": ["model.layers.0.self_attn.q_proj"]}},
          "quantized_layers": layers, "ignore": [], "quant_algo": "MIXED_PRECISION", "quant_method": "modelopt"}
    info = inspect_checkpoint(build("momix", llama_tensors("mo_fp8", "mo_nvfp4"), with_qc(qc), hf_quant=hq))
    assert info.label == "MIXED" and set(info.scheme_shares) == {"W8A8-FP8", "W4A4-NVFP4"}
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.scheme == "W8A8-FP8"
    assert not any(f.code == "config-tensor-mismatch" for f in info.findings)


def test_fp8_dominated_nvfp4_mixed_is_flagged(build):
    # FP8 MLP (the big part) + NVFP4 attention: named "NVFP4" but mostly FP8
    layers = {}
    for i in range(L):
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            layers[f"model.layers.{i}.self_attn.{n}"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
        for n in ("gate_proj", "up_proj", "down_proj"):
            layers[f"model.layers.{i}.mlp.{n}"] = {"quant_algo": "FP8"}
    hq = {"producer": {"name": "modelopt", "version": "0.45.0"},
          "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8", "quantized_layers": layers}}
    info = inspect_checkpoint(build("fp8dom", llama_tensors("mo_nvfp4", "mo_fp8", input_scale=False),
                                    dict(LLAMA_CONFIG), hf_quant=hq))
    assert info.label == "MIXED"
    assert info.scheme_shares["W8A8-FP8"] > 0.5
    assert any(f.code == "fp8-dominates-mixed" for f in info.findings)


def test_fused_global_scale_mismatch(build):
    scales = {"model.layers.0.self_attn.k_proj": 3.0, "model.layers.1.mlp.up_proj": 2.0}
    cfg, hq = mo_cfgs("NVFP4", extra={"group_size": 16})
    info = inspect_checkpoint(build("fused", llama_tensors("mo_nvfp4", scales=scales), cfg, hf_quant=hq))
    f = [f for f in info.findings if f.code == "fused-global-scale-mismatch"]
    assert f, info.findings
    assert "model.layers.0.self_attn.k_proj" in f[0].modules
    assert "model.layers.1.mlp.up_proj" in f[0].modules
    assert "model.layers.0.mlp.up_proj" not in f[0].modules
    # equal scales: no finding; compressed-tensors reciprocal global scales are compared the same way
    info = inspect_checkpoint(build("fused_ok", llama_tensors("mo_nvfp4"), cfg, hf_quant=hq))
    assert not any(f.code == "fused-global-scale-mismatch" for f in info.findings)
    qc = ct_qc({"group_0": ct_group("nvfp4-pack-quantized", NVFP4_W)}, "nvfp4-pack-quantized")
    info = inspect_checkpoint(build("ct_fused", llama_tensors("ct_nvfp4a16", scales=scales), with_qc(qc)))
    assert any(f.code == "fused-global-scale-mismatch" for f in info.findings)


# ---------------------------------------------------------------- other methods

def test_hf_fp8_block(build):
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128],
          "modules_to_not_convert": ["lm_head"]}
    info = inspect_checkpoint(build("fp8b", llama_tensors("hf_fp8_block"), with_qc(qc)))
    assert (info.producer, info.label) == ("fp8", "W8A8-FP8")
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.weight.block == (128, 128) and q.act.dynamic is True


def test_gptq_and_awq(build):
    gq = {"bits": 4, "group_size": 128, "desc_act": True, "sym": True, "quant_method": "gptq",
          "checkpoint_format": "gptq"}
    info = inspect_checkpoint(build("gptq", llama_tensors("gptq4"), with_qc(gq)))
    assert (info.producer, info.label) == ("gptq", "W4A16-INT4")
    q = next(g for g in info.modules if g.name.endswith("q_proj"))
    assert q.shape == (128, H) and q.weight.group_size == 128
    aq = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}
    info = inspect_checkpoint(build("awq", llama_tensors("awq4"), with_qc(aq)))
    assert (info.producer, info.label) == ("awq", "W4A16-INT4")
    d = next(g for g in info.modules if g.name.endswith("down_proj"))
    assert d.shape == (H, I) and d.weight.symmetric is False


def test_bitsandbytes_nf4(build):
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
          "bnb_4bit_use_double_quant": False}
    info = inspect_checkpoint(build("bnb", llama_tensors("bnb_nf4"), with_qc(qc)))
    assert (info.producer, info.label) == ("bitsandbytes", "W4A16-INT4")
    assert any(g.weight.format == "nf4" for g in info.modules)


def test_unquantized_bf16_fp16(build):
    info = inspect_checkpoint(build("bf16", llama_tensors("bf16"), dict(LLAMA_CONFIG)))
    assert (info.label, info.producer, info.kept_bf16) == ("BF16", "none", ())
    n_params = V * H * 2 + H + L * (2 * H + 2 * 128 * H + 2 * 64 * H + 3 * I * H)
    assert info.totals.params == n_params and info.totals.stored_bytes == 2 * n_params
    # per-token bytes exclude the embedding table (one row per token), include lm_head
    assert info.totals.bytes_per_token == 2 * (n_params - V * H)
    info = inspect_checkpoint(build("fp16", llama_tensors("fp16", head_fmt="fp16"), dict(LLAMA_CONFIG)))
    assert info.label == "FP16"


def test_unknown_method_reports_raw_block(build):
    qc = {"quant_method": "superquant9000", "bits": 3}
    info = inspect_checkpoint(build("unk", llama_tensors("bf16"), with_qc(qc)))
    assert info.producer == "unknown" and info.raw_quant_config == qc
    assert any(f.code == "unknown-quant-method" for f in info.findings)


def test_headers_without_config_use_heuristics(build, tmp_path):
    folder = build("noqc", llama_tensors("mo_nvfp4"), dict(LLAMA_CONFIG))
    info = inspect_checkpoint(folder)
    assert info.label == "W4A4-NVFP4"     # input_scale present -> static W4A4
    assert any(f.code == "quantized-without-config" for f in info.findings)
    # a single .safetensors file works on its own
    single = inspect_checkpoint(folder + "/model.safetensors")
    assert single.label == "W4A4-NVFP4" and single.totals.stored_bytes == info.totals.stored_bytes


def test_config_declares_quantized_but_tensors_bf16(build):
    cfg, hq = mo_cfgs("NVFP4", extra={"group_size": 16})
    info = inspect_checkpoint(build("liar", llama_tensors("bf16"), cfg, hf_quant=hq))
    assert info.label == "BF16"
    assert any(f.code == "config-quantized-but-bf16" for f in info.findings)


def test_sharded_index_and_mismatch(build, tmp_path):
    import json

    folder = build("sharded", llama_tensors("bf16"), dict(LLAMA_CONFIG), shards=3)
    info = inspect_checkpoint(folder)
    assert info.label == "BF16" and not any(f.code.startswith("index") for f in info.findings)
    idx = tmp_path / "sharded" / "model.safetensors.index.json"
    d = json.loads(idx.read_text())
    d["weight_map"]["model.layers.9.mlp.ghost.weight"] = "model-00001-of-00003.safetensors"
    d["metadata"]["total_size"] += 1
    idx.write_text(json.dumps(d))
    info = inspect_checkpoint(folder)
    codes = {f.code for f in info.findings}
    assert "index-header-mismatch" in codes


def test_config_only_folder_and_index_without_shards(build, tmp_path):
    import json

    folder = build("cfgonly", None, dict(LLAMA_CONFIG))
    info = inspect_checkpoint(folder)
    assert info.totals.sizes_from == "config" and info.label == "BF16"
    n_params = V * H * 2 + H + L * (2 * H + 2 * 128 * H + 2 * 64 * H + 3 * I * H)
    assert info.totals.params == n_params
    (tmp_path / "cfgonly" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    assert inspect_checkpoint(folder).totals.sizes_from == "config"


def test_config_sizes_match_header_sizes(build, tmp_path):
    """Sizes computed from the config agree with the real headers for every format."""
    cases = [("ct_nvfp4", CT_CASES[7][3]), ("ct_w4a16", CT_CASES[0][3]), ("ct_fp8_dynamic", CT_CASES[2][3])]
    for fmt, qc in cases:
        cfg = with_qc(qc)
        with_w = inspect_checkpoint(build("w_" + fmt, llama_tensors(fmt), cfg))
        no_w = inspect_checkpoint(build("c_" + fmt, None, cfg))
        assert no_w.label == with_w.label
        assert no_w.totals.params == with_w.totals.params
        assert abs(no_w.totals.stored_bytes - with_w.totals.stored_bytes) / with_w.totals.stored_bytes < 0.02, fmt


def test_gptq_desc_act_is_carried_per_module(tmp_path):
    """The kernel path needs GPTQ's activation ordering (vLLM 0.33 refuses desc_act with groups)."""
    import json

    from advisor.checkpoint.inspect import inspect_checkpoint

    for desc_act in (True, False):
        d = tmp_path / f"gptq-{desc_act}"
        d.mkdir()
        cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 2,
               "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 1000, "torch_dtype": "float16",
               "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True,
                                       "desc_act": desc_act}}
        (d / "config.json").write_text(json.dumps(cfg))
        info = inspect_checkpoint(str(d))
        quant = [m for m in info.modules if m.scheme == "W4A16-INT4"]
        assert quant and all(m.weight.act_order is desc_act for m in quant)

"""SGLang 0.5.23 and FastLLM 1.9 rules for gpt-oss MXFP4 experts and INT8 W8A8 layers, per GPU architecture.

The checkpoints are tiny but real: safetensors files with gpt-oss / compressed-tensors tensor names written
here and classified by the advisor's own inspector, plus the bundled config-only gpt-oss-20b demo. Every
expected kernel comes from the engine source cited in profiles/engines/sglang-0.5.23.yaml and
fastllm-1.9.yaml (SGLang: layers/quantization/mxfp4.py, arg_groups/model_overrides/gpt_oss.py,
w8a8_int8.py, compressed_tensors/; FastLLM: src/model.cpp).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_files import load_rules
from kernel_path_builders import gpu
from kernel_path_ckpt import CONFIG, write_gpt_oss, write_safetensors

DEMO = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "gpt-oss-20b-mxfp4"
# A citation starts with path:line[-line][, line[-line]]@version, or for a compiled library with the
# .so path and what was read in it (a string, the fatbin headers) @version.
CITATION = re.compile(r"^[\w./-]+(\.(py|cu|cpp|h|txt|sh)[^@;]*:\d+(-\d+)?(, ?\d+(-\d+)?)*|\.so\b[^@;]*)@[\w.-]+")

CT_INT8 = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
           "config_groups": {"group_0": {
               "targets": ["Linear"],
               "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False},
               "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                                     "dynamic": True}}}}
NATIVE_INT8 = {"quant_method": "w8a8_int8", "activation_scheme": "dynamic"}


# ---------------------------------------------------------------- tiny real checkpoints

def _write_int8_llama(folder: Path, qcfg: dict) -> Path:
    """INT8 weights (I8) + per-channel weight_scale, as llm-compressor and SGLang's w8a8_int8 store them."""
    folder.mkdir(parents=True)
    h, inter, kvd = 64, 128, 32
    cfg = dict(CONFIG, quantization_config=qcfg)
    t = {"model.embed_tokens.weight": ("BF16", [256, h]), "lm_head.weight": ("BF16", [256, h]),
         "model.norm.weight": ("BF16", [h])}
    shapes = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kvd, h), "self_attn.v_proj": (kvd, h),
              "self_attn.o_proj": (h, h), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
              "mlp.down_proj": (h, inter)}
    for layer in range(2):
        p = f"model.layers.{layer}"
        for name, (n, k) in shapes.items():
            t[f"{p}.{name}.weight"] = ("I8", [n, k])
            t[f"{p}.{name}.weight_scale"] = ("BF16", [n, 1])
        t[f"{p}.input_layernorm.weight"] = ("BF16", [h])
        t[f"{p}.post_attention_layernorm.weight"] = ("BF16", [h])
    write_safetensors(folder / "model.safetensors", t)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("extra")
    return {"gpt-oss": inspect_checkpoint(str(write_gpt_oss(root / "gpt-oss"))),
            "ct-int8": inspect_checkpoint(str(_write_int8_llama(root / "ct-int8", CT_INT8))),
            "native-int8": inspect_checkpoint(str(_write_int8_llama(root / "native-int8", NATIVE_INT8)))}


def _decision(ck, gid, engine, layer_class, options=InstallOptions()):
    exp = explain(ck, gpu(gid), engine=engine, options=options)
    return next(d for d in exp.decisions if d.layer_class == layer_class)


def _check_explained(d):
    """Every decision carries reasons, non-empty rejection reasons and path:line@version sources."""
    assert d.reasons
    for r in d.rejected:
        assert r.reason.strip(), r.kernel
        assert CITATION.match(r.source), (r.kernel, r.source)
    if d.runs:
        assert d.kernel and CITATION.match(d.source), d.source
    else:
        assert d.error
    for w in d.warnings:
        assert w.text and w.meaning and w.source


def _flags(**kw) -> InstallOptions:
    return InstallOptions(flags=tuple(kw.items()))


def test_the_tiny_checkpoints_classify_as_their_engines_read_them(ckpts):
    goss = ckpts["gpt-oss"]
    assert goss.producer == "mxfp4" and goss.label == "W4A16-MXFP4"
    schemes = {m.role: m.scheme for m in goss.modules}
    assert schemes["expert"] == "W4A16-MXFP4" and schemes["attn_qkv"] == "BF16" and schemes["router"] == "BF16"
    assert ckpts["ct-int8"].label == "W8A8-INT8" and ckpts["ct-int8"].producer == "compressed-tensors"
    assert ckpts["native-int8"].quant_method == "w8a8_int8"


# ---------------------------------------------------------------- SGLang gpt-oss MXFP4 experts

MOE = [
    # (gpu, options, kernel substring, mma, activation, effective scheme, warning substring)
    ("a100", InstallOptions(), "triton_kernels matmul_ogs", "hmma_bf16", "bf16", "W4A16-MXFP4",
     "enabling triton_kernels MOE kernel"),
    ("rtx-3090", InstallOptions(), "triton_kernels matmul_ogs", "hmma_bf16", "bf16", "W4A16-MXFP4", None),
    ("l40s", InstallOptions(), "triton_kernels matmul_ogs", "hmma_bf16", "bf16", "W4A16-MXFP4", None),
    ("h100", InstallOptions(), "triton_kernels matmul_ogs", "wgmma_bf16", "bf16", "W4A16-MXFP4", None),
    ("b200", InstallOptions(), "TRT-LLM-gen MXFP4 MoE", "tcgen05_mxf8f6f4", "mxfp8", "W4A8-FP8",
     "Detected SM100 and MXFP4"),
    ("b300", InstallOptions(), "TRT-LLM-gen MXFP4 MoE", "tcgen05_mxf8f6f4", "mxfp8", "W4A8-FP8", None),
    ("rtx-5090", InstallOptions(), "FlashInfer CUTLASS MXFP4 MoE", "qmma_e4m3", "mxfp8", "W4A8-FP8",
     "Detected SM120 and MXFP4"),
    ("gb10", InstallOptions(), "FlashInfer CUTLASS MXFP4 MoE", "qmma_e4m3", "mxfp8", "W4A8-FP8", None),
    ("thor", InstallOptions(), "triton_kernels matmul_ogs", "tcgen05_bf16", "bf16", "W4A16-MXFP4", None),
    # the override's conditions fail -> MXFP4 experts are upcast to BF16 in memory at load
    ("h100", InstallOptions(ep=2), "MXFP4 upcast at load", "wgmma_bf16", "bf16", "BF16", None),
    ("rtx-3090", _flags(quantization="mxfp4"), "MXFP4 upcast at load", "hmma_bf16", "bf16", "BF16", None),
    # requested backends
    ("h100", _flags(moe_runner_backend="marlin"), "Marlin MoE (MXFP4", "hmma_bf16", "bf16", "W4A16-MXFP4", None),
    ("h100", _flags(moe_runner_backend="flashinfer_mxfp4"), "MXFP4 x BF16 MoE (sm_90", "wgmma_bf16", "bf16",
     "W4A16-MXFP4", None),
    ("h100", _flags(moe_runner_backend="flashinfer_mxfp4", flashinfer_mxfp4_moe_precision="fp8"),
     "Humming W4A8", "wgmma_e4m3", "fp8_e4m3", "W4A8-FP8", None),
    ("b200", _flags(flashinfer_mxfp4_moe_precision="bf16"), "TRT-LLM-gen MXFP4 MoE (BF16", "tcgen05_bf16", "bf16",
     "W4A16-MXFP4", None),
    ("b200", _flags(moe_runner_backend="deep_gemm"), "DeepGEMM fp8_fp4", "tcgen05_mxf8f6f4", "fp8_e4m3",
     "W4A8-FP8", None),
]


@pytest.mark.parametrize("gid, options, kernel, mma, act, effective, warn", MOE)
def test_sglang_gpt_oss_experts(ckpts, gid, options, kernel, mma, act, effective, warn):
    d = _decision(ckpts["gpt-oss"], gid, "sglang", "moe_experts", options)
    _check_explained(d)
    assert d.runs and kernel in d.kernel, d.kernel
    assert (d.mma, d.activation_dtype, d.effective_scheme) == (mma, act, effective)
    if warn:
        assert any(warn in w.text for w in d.warnings), [w.text for w in d.warnings]
    if effective == "BF16":
        assert d.dequant == "memory"


def test_sglang_gpt_oss_experts_on_ampere_reject_the_blackwell_kernels_with_reasons(ckpts):
    d = _decision(ckpts["gpt-oss"], "rtx-3090", "sglang", "moe_experts")
    rejected = {r.kernel: r.reason for r in d.rejected}
    trt = next(k for k in rejected if "TRT-LLM-gen" in k and "MXFP8" in k)
    cutlass = next(k for k in rejected if "CUTLASS MXFP4 MoE" in k)
    assert "sm_10x" in rejected[trt] and "sm_86" in rejected[trt]
    assert "sm_12x" in rejected[cutlass]
    assert all("opt-in" in v for k, v in rejected.items() if "sm_90" in k)


FAILS = [
    # (gpu, options, layer class, error substring)
    ("t4", InstallOptions(), "moe_experts", "Minimum capability: 80"),
    ("t4", InstallOptions(), "dense_linear", "Minimum capability: 80"),
    ("rtx-3090", InstallOptions(triton_kernels=False), "moe_experts", "No module named 'triton_kernels'"),
    ("rtx-3090", _flags(moe_runner_backend="marlin"), "moe_experts", "MXFP4 Marlin requires SM90+"),
    ("rtx-3090", _flags(moe_runner_backend="flashinfer_mxfp4"), "moe_experts",
     "requires SM90, SM100, or SM120"),
    ("b200", _flags(flashinfer_mxfp4_moe_precision="fp8"), "moe_experts", "Unsupported flashinfer_mxfp4_moe_precision"),
    # Triton's own message (issue 26): fp8e4nv is refused below sm_89
    ("rtx-3090", InstallOptions(kv_cache_dtype="fp8_e4m3"), "attention_kv", "fp8e4nv not supported"),
]


@pytest.mark.parametrize("gid, options, layer_class, error", FAILS)
def test_sglang_gpt_oss_failures_say_what_sglang_prints(ckpts, gid, options, layer_class, error):
    d = _decision(ckpts["gpt-oss"], gid, "sglang", layer_class, options)
    _check_explained(d)
    assert not d.runs and d.mma == "none" and error in d.error, d.error


@pytest.mark.parametrize("gid, attn_kernel, mma", [
    ("rtx-3090", "triton", "hmma_bf16"), ("h100", "fa3", "wgmma_bf16"), ("b200", "trtllm_mha", "tcgen05_bf16"),
    ("rtx-5090", "triton", "hmma_bf16"), ("thor", "triton", "tcgen05_bf16")])
def test_sglang_gpt_oss_dense_is_bf16_and_attention_follows_the_override(ckpts, gid, attn_kernel, mma):
    dense = _decision(ckpts["gpt-oss"], gid, "sglang", "dense_linear")
    _check_explained(dense)
    assert dense.runs and dense.effective_scheme == "BF16" and "models/gpt_oss.py" in dense.source
    attn = _decision(ckpts["gpt-oss"], gid, "sglang", "attention_kv")
    _check_explained(attn)
    assert attn.kernel == attn_kernel and attn.mma == mma
    assert "gpt_oss.py" in attn.source      # the gpt-oss override, not the generic backend choice


# ---------------------------------------------------------------- SGLang INT8 W8A8

INT8 = [
    # (checkpoint, gpu, options, kernel substring (None: fails), mma, error substring)
    ("ct-int8", "t4", InstallOptions(), None, None, "Min capability: 80"),
    ("ct-int8", "rtx-3090", InstallOptions(), "int8_scaled_mm", "imma_int8", None),
    ("ct-int8", "rtx-4090", InstallOptions(), "int8_scaled_mm", "imma_int8", None),
    ("ct-int8", "h100", InstallOptions(), "int8_scaled_mm", "wgmma_int8", None),
    ("ct-int8", "b200", InstallOptions(), "int8_scaled_mm", None, "No implemented int8_scaled_mm"),
    ("ct-int8", "thor", InstallOptions(), "int8_scaled_mm", None, "No implemented int8_scaled_mm"),
    ("ct-int8", "rtx-5090", InstallOptions(), "int8_scaled_mm", None, "No implemented int8_scaled_mm"),
    ("ct-int8", "t4", _flags(quantization="w8a8_int8"), "Sm75 branch", None, "no kernel image"),
    ("ct-int8", "v100", _flags(quantization="w8a8_int8"), None, None, "Minimum capability: 75"),
    ("ct-int8", "a100", _flags(quantization="w8a8_int8"), "int8_scaled_mm", "imma_int8", None),
    ("native-int8", "h100", InstallOptions(), "int8_scaled_mm", "wgmma_int8", None),
    ("native-int8", "gb10", InstallOptions(), "int8_scaled_mm", None, "No implemented int8_scaled_mm"),
]


@pytest.mark.parametrize("ck, gid, options, kernel, mma, error", INT8)
def test_sglang_int8_w8a8_dense(ckpts, ck, gid, options, kernel, mma, error):
    d = _decision(ckpts[ck], gid, "sglang", "dense_linear", options)
    _check_explained(d)
    if kernel is None:
        assert d.kernel is None
    else:
        assert kernel in d.kernel
        assert d.effective_scheme == "W8A8-INT8" and d.activation_dtype == "int8"
    assert d.runs == (error is None)
    if error:
        assert error in d.error and d.mma == "none"
    else:
        assert d.mma == mma and d.dequant == "none"


def test_sglang_int8_on_blackwell_is_selected_then_crashes_with_a_remedy(ckpts):
    d = _decision(ckpts["ct-int8"], "b200", "sglang", "dense_linear")
    crash = next(w for w in d.warnings if "No implemented int8_scaled_mm" in w.text)
    assert "Remedy:" in crash.meaning and "sglang-kernel-0.4.10" in crash.source
    ampere = _decision(ckpts["ct-int8"], "rtx-3090", "sglang", "dense_linear")
    assert "not used" in " ".join(ampere.reasons)    # static input scales / zero points are ignored


def test_sglang_int8_moe_needs_the_w8a8_int8_flag(ckpts):
    from kernel_path_builders import checkpoint

    ck = checkpoint("int8-w8a8", moe=True)
    plain = _decision(ck, "h100", "sglang", "moe_experts")
    assert not plain.runs and "implemented only for NPU" in plain.error
    flagged = _decision(ck, "h100", "sglang", "moe_experts", _flags(quantization="w8a8_int8"))
    _check_explained(flagged)
    assert flagged.runs and flagged.mma == "wgmma_int8" and flagged.activation_dtype == "int8"


# ---------------------------------------------------------------- FastLLM refuses both formats

@pytest.mark.parametrize("gid", ["rtx-3090", "h100", "b200", "rtx-5090", "t4"])
def test_fastllm_does_not_load_gpt_oss_mxfp4(ckpts, gid):
    exp = explain(ckpts["gpt-oss"], gpu(gid), engine="fastllm")
    assert not exp.runs
    for d in exp.decisions:
        assert not d.runs and "unsupport src dtype U8" in d.error, (d.layer_class, d.error)
        assert any("refused before kernel choice" in r for r in d.reasons)
        assert any("d3aea32" in r for r in d.reasons)         # the source cited with the refusal


@pytest.mark.parametrize("ck", ["ct-int8", "native-int8"])
def test_fastllm_does_not_load_int8_w8a8(ckpts, ck):
    d = _decision(ckpts[ck], "rtx-4090", "fastllm", "dense_linear")
    assert not d.runs and "unsupport src dtype I8" in d.error
    assert "--dtype int8" in " ".join(d.reasons)           # the remedy names FastLLM's own INT8


@pytest.mark.parametrize("gid", ["t4", "rtx-3090", "b200"])
def test_fastllm_reads_compressed_tensors_mxfp4_as_its_compact_fp4_type(gid):
    """llm-compressor MXFP4 (not gpt-oss) loads; FastLLM runs it weight-only in FP16 on every GPU."""
    from kernel_path_builders import checkpoint

    d = _decision(checkpoint("mxfp4-w4a4"), gid, "fastllm", "dense_linear")
    _check_explained(d)
    assert d.runs and "compact FP4" in d.kernel
    assert (d.effective_scheme, d.activation_dtype, d.dequant) == ("W4A16-MXFP4", "fp16", "memory")


# ---------------------------------------------------------------- rule data

NEW_PATHS = {
    "sglang": {"dense-bf16-gpt-oss", "dense-int8-w8a8-flag", "dense-int8-w8a8-native", "dense-int8-w8a8-ct",
               "moe-mxfp4-gpt-oss", "moe-mxfp4", "moe-int8-w8a8", "moe-int8-w8a8-flag", "moe-int8-w8a8-ct",
               "attn-gpt-oss", "attn-nvfp4", "attn-mxfp8"},
    "fastllm": {"gpt-oss-mxfp4-dense", "gpt-oss-mxfp4-experts", "gpt-oss-mxfp4-lm-head", "gpt-oss-mxfp4-attn",
                "int8-w8a8-dense", "int8-w8a8-native-dense", "int8-w8a8-experts", "dense-mxfp4-ct"},
}


@pytest.mark.parametrize("engine", ["sglang", "fastllm"])
def test_new_rules_cite_path_line_at_version(engine):
    rules, _ = load_rules(engine)
    paths = {p.id: p for p in rules.paths}
    assert NEW_PATHS[engine] <= set(paths)
    for pid in NEW_PATHS[engine]:
        p = paths[pid]
        failures = [r for r in p.refusals] + [p.none_error]
        for c in p.candidates:
            if c.kernel != "(not loaded)":
                assert CITATION.match(c.source), (pid, c.kernel, c.source)
            failures += [c.crash] if c.crash else []
            for w in c.warnings:
                assert CITATION.match(w.source), (pid, w.source)
        for f in failures:
            assert CITATION.match(f.source), (pid, f.source)


def test_sglang_sources_are_all_read_not_inferred():
    rules, _ = load_rules("sglang")
    for p in rules.paths:
        for c in p.candidates:
            assert "[inf]" not in c.source, (p.id, c.source)
            assert "@0.5.23" in c.source or "@sglang-kernel" in c.source, (p.id, c.source)


# ---------------------------------------------------------------- the gpt-oss-20b demo

@pytest.fixture
def demo():
    from advisor.checkpoint.demo import list_demos

    assert "gpt-oss-20b-mxfp4" in list_demos()
    return "demo:gpt-oss-20b-mxfp4"


def _json(capsys, argv):
    code = main(argv + ["--json"])
    return code, json.loads(capsys.readouterr().out)


def test_demo_inspect_matches_the_config(demo, capsys):
    cfg = json.loads((DEMO / "config.json").read_text())
    code, doc = _json(capsys, ["inspect", demo])
    assert code == 0
    ck = doc["checkpoint"]
    assert ck["label"] == "W4A16-MXFP4" and ck["producer"] == "mxfp4" and ck["totals"]["sizes_from"] == "config"
    arch = ck["arch"]
    n_sliding = cfg["layer_types"].count("sliding_attention")
    assert arch["num_layers"] == cfg["num_hidden_layers"] and arch["sliding_window_layers"] == n_sliding
    assert arch["kv_layers"] == cfg["num_hidden_layers"] - n_sliding and arch["sliding_window"] == cfg["sliding_window"]
    assert arch["moe"]["num_experts"] == cfg["num_local_experts"] and arch["moe"]["top_k"] == cfg["num_experts_per_tok"]
    # MXFP4 experts: E2M1 (4 bits) + one E8M0 byte per 32 values = 4.25 bits per weight
    h, inter, e = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_local_experts"]
    expert_params = cfg["num_hidden_layers"] * e * (h * 2 * inter + inter * h)
    expert_bytes = sum(m["stored_bytes"] for m in ck["modules"] if m["role"] == "expert")
    assert expert_bytes == pytest.approx(expert_params * 4.25 / 8, rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "fastllm"])
@pytest.mark.parametrize("gid", ["rtx-3090", "h100-sxm", "b200", "rtx-5090"])
def test_demo_explains_with_sources(demo, capsys, engine, gid):
    code, doc = _json(capsys, ["explain", demo, "--gpu", gid, "--engine", engine])
    exp = doc["explanation"]
    assert code in (0, 4) and exp["runs"] == (engine != "fastllm")
    moe = next(d for d in exp["decisions"] if d["layer_class"] == "moe_experts")
    assert moe["checkpoint_scheme"] == "W4A16-MXFP4"
    for d in exp["decisions"]:
        assert all(r["reason"] for r in d["rejected"])
        if d["runs"]:
            assert CITATION.match(d["source"]), d["source"]
        else:
            assert d["error"]


def test_demo_plan_runs_on_sglang(demo, capsys):
    code, doc = _json(capsys, ["plan", demo, "--gpu", "rtx-3090", "--engine", "sglang"])
    assert code == 0 and doc["kind"] == "plan"

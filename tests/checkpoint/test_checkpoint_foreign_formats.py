"""Formats the engines' kernel rules do not serve: named with their bits in the headline, sized from
their own bits, explain says which engines load them; unknown quantization is UNKNOWN, never BF16.
Also: KV-cache quantization in words, and producers that mix formats are MIXED with byte shares."""

from __future__ import annotations

import json
import shutil

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.report import headline, to_doc
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

from ckpt_builders import LLAMA_CONFIG
from corpus_files import real_configs_dir, require

DATA = require(real_configs_dir)

# exllamav2 writes this block into config.json (conversion/compile.py); values of bartowski's
# magnum-12b-v2.5-kto-exl2 (branch 4_25) as quoted verbatim in public source.
EXL2 = {"quant_method": "exl2", "version": "0.1.8", "bits": 4.25, "head_bits": 6,
        "calibration": {"rows": 115, "length": 2048, "dataset": "(default)"}}

CASES = {
    # name: (config additions, label, headline words, bits per linear weight incl. scales)
    "exl2": ({"quantization_config": EXL2}, "EXL2", ("EXL2", "4.25 bits per weight", "lm_head 6"), 4.25),
    "mlx-old": ({"quantization": {"group_size": 64, "bits": 4}}, "MLX", ("MLX affine 4-bit", "group 64"),
                4 + 32 / 64),
    "mlx-new": ({"quantization_config": {"group_size": 32, "bits": 8}}, "MLX", ("MLX affine 8-bit", "group 32"),
                8 + 32 / 32),
    "bitnet": ({"quantization_config": {"quant_method": "bitnet", "linear_class": "bitlinear",
                                        "quantization_mode": "offline"}}, "BITNET", ("ternary", "1.58"), 2),
    "hqq": ({"quantization_config": {"quant_method": "hqq", "quant_config": {"weight_quant_params": {
        "nbits": 4, "group_size": 64}}}}, "HQQ", ("HQQ 4-bit", "group 64"), 4 + 32 / 64),
    "aqlm": ({"quantization_config": {"quant_method": "aqlm", "in_group_size": 8, "out_group_size": 1,
                                      "num_codebooks": 1, "nbits_per_codebook": 16}}, "AQLM", ("AQLM 1x16",), None),
    "eetq": ({"quantization_config": {"quant_method": "eetq", "weights": "int8"}}, "W8A16-INT8", ("EETQ",), None),
    "fbgemm": ({"quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}}, "W8A8-FP8",
               ("FBGEMM FP8",), None),
    "smooth_quant": ({"quantization_config": {"quant_method": "smooth_quant"}}, "W8A8-INT8", ("SmoothQuant",), None),
    "torchao": ({"quantization_config": {"quant_method": "torchao", "quant_type": {"default": {
        "_type": "Int4WeightOnlyConfig", "_data": {"group_size": 128}}}}}, "W4A16-INT4", ("torchao int4",), None),
    "unknown": ({"quantization_config": {"quant_method": "fancyq", "bits": 3}}, "UNKNOWN",
                ("UNKNOWN", "fancyq"), None),
    "unknown-keys": ({"quantization_config": {"wbits": 3, "codebook": "x"}}, "UNKNOWN", ("UNKNOWN", "wbits"), None),
}


def _folder(tmp_path, name, cfg):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


@pytest.mark.parametrize("name", sorted(CASES))
def test_format_headline_and_size(tmp_path, name):
    extra, label, words, bpw = CASES[name]
    info = inspect_checkpoint(_folder(tmp_path, name, {**LLAMA_CONFIG, **extra}))
    assert info.label == label, headline(info)
    head = headline(info)
    assert all(w in head for w in words), head
    assert to_doc(info).blocks[0].text.endswith(head)
    if bpw is not None:
        g = next(g for g in info.modules if g.name.endswith("self_attn.q_proj") or g.name.endswith(".q_proj"))
        assert g.stored_bytes * 8 / g.params == pytest.approx(bpw, rel=0.02)


@pytest.mark.parametrize("name,engine,words", [
    ("exl2", "vllm", ("does not load EXL2", "quantization/__init__.py:15-49@0.33.0", "ExLlamaV2")),
    ("exl2", "sglang", ("does not load EXL2", "@0.5.23")),
    ("mlx-old", "vllm", ("does not load MLX", "mlx-lm")),
    ("unknown", "vllm", ("unknown to the advisor",)),
])
def test_explain_says_which_engines_load_the_format(tmp_path, name, engine, words):
    info = inspect_checkpoint(_folder(tmp_path, name, {**LLAMA_CONFIG, **CASES[name][0]}))
    exp = explain(info, get_gpu("rtx-3090"), engine=engine)
    assert not exp.runs
    text = " ".join(r for d in exp.decisions for r in d.reasons)
    assert all(w in text for w in words), text


def test_gguf_folder_named_and_sized_from_its_files(tmp_path):
    d = tmp_path / "g"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    with open(d / "model-Q4_K_M.gguf", "wb") as f:
        f.truncate(123_456)                            # only the size is read
    info = inspect_checkpoint(str(d))
    assert info.label == "GGUF" and "Q4_K_M" in headline(info) and info.totals.sizes_from == "gguf"
    assert abs(info.totals.stored_bytes - 123_456) < 0.01 * 123_456 + 2 * LLAMA_CONFIG["hidden_size"] * 8
    (d / "config.json").unlink()                       # GGUF files alone: the stored size, the format
    info = inspect_checkpoint(str(d))
    assert info.label == "GGUF" and info.totals.stored_bytes == 123_456


@pytest.mark.parametrize("kv,dtype,words", [
    ("static", "fp8", ("FP8 E4M3", "static per-tensor", "'static'")),
    ("FP8", "fp8", ("FP8 E4M3", "static per-tensor")),
    ({"num_bits": 8, "type": "float", "dynamic": False, "strategy": "tensor"}, "fp8", ("FP8 E4M3", "static")),
    ({"num_bits": 8, "type": "float", "dynamic": False, "strategy": "attn_head"}, "fp8", ("per-head",)),
])
def test_kv_cache_in_words(tmp_path, kv, dtype, words):
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "kv_cache_scheme": kv}
    info = inspect_checkpoint(_folder(tmp_path, "k", {**LLAMA_CONFIG, "quantization_config": qc}))
    assert info.kv_cache_quant == dtype
    pairs = dict(to_doc(info).blocks[1].pairs)
    assert all(w in pairs["kv cache"] for w in words) and pairs["kv cache"] != str(kv)


def _real(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    shutil.copy(DATA / f"{name}_config.json", d / "config.json")
    if (DATA / f"{name}_hf_quant_config.json").exists():
        shutil.copy(DATA / f"{name}_hf_quant_config.json", d / "hf_quant_config.json")
    return str(d)


@pytest.mark.parametrize("name,schemes", [
    # FP8-block attention / shared experts + ModelOpt NVFP4 routed experts (vllm models/deepseek_v4)
    ("nvidia--DeepSeek-V4-Flash-NVFP4", {"W8A8-FP8", "W4A4-NVFP4"}),
    ("nvidia--DeepSeek-V4-Pro-NVFP4", {"W8A8-FP8", "W4A4-NVFP4"}),
    # expert_dtype fp4: MXFP4 experts with MXFP8 activations beside the FP8-block linears
    ("deepseek-ai--DeepSeek-V4-Flash", {"W8A8-FP8", "W4A8-FP8"}),
    ("nvidia--Qwen3.6-27B-NVFP4", {"W8A8-FP8", "W4A16-NVFP4"}),
])
def test_producers_that_mix_formats_are_mixed(tmp_path, name, schemes):
    info = inspect_checkpoint(_real(tmp_path, name))
    assert info.label == "MIXED" and set(info.scheme_shares) == schemes
    assert sum(info.scheme_shares.values()) == pytest.approx(1.0, abs=1e-4)
    experts = {g.scheme for g in info.modules_with_role("expert")}
    if "DeepSeek-V4" in name:
        assert experts == (schemes - {"W8A8-FP8"})
        assert {g.scheme for g in info.modules_with_role("attn_qkv")} == {"W8A8-FP8"}

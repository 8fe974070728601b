"""Hostile config values: a malformed quantization or architecture number is a doctor finding that
names the file and key (or exit 3 where nothing can be assumed), never a silent default.

Each case is a real folder: config.json (+ hf_quant_config.json / quantize_config.json) and tiny
safetensors shards written by ckpt_builders.
"""

from __future__ import annotations

import json
import math

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main

from ckpt_builders import LLAMA_CONFIG, L, llama_tensors, with_qc, write_checkpoint

torch = pytest.importorskip("torch")
from safetensors.torch import save_file  # noqa: E402


def _errors(info, code):
    return [f for f in info.findings if f.code == code]


def _one(info, code, *words, severity="error"):
    hits = [f for f in info.findings if f.code == code and all(w in f.message for w in words)]
    assert hits, f"no {code} finding with {words}: {[(f.code, f.message) for f in info.findings]}"
    assert hits[0].severity == severity
    return hits[0]


# ------------------------------------------------------------------ quantization configs

def _ct(weights, acts=None, groups=None):
    g = {"targets": ["Linear"], "weights": weights, "input_activations": acts}
    return {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": groups if groups is not None else {"group_0": g}, "ignore": ["lm_head"]}


NVFP4_W = {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group", "symmetric": True}


@pytest.mark.parametrize("gs", [0, -7, "16"])
def test_gptq_group_size_invalid(build, gs):
    info = inspect_checkpoint(build("g", llama_tensors("gptq4"),
                                    with_qc({"quant_method": "gptq", "bits": 4, "group_size": gs})))
    f = _one(info, "invalid-quant-config", "config.json", "quantization_config.group_size", "assumed 128")
    assert repr(gs) in f.message or str(gs) in f.message


def test_gptq_group_size_minus_one_is_per_channel(build):
    info = inspect_checkpoint(build("g", llama_tensors("gptq4"),
                                    with_qc({"quant_method": "gptq", "bits": 4, "group_size": -1})))
    assert not _errors(info, "invalid-quant-config")


def test_gptq_bits_word(build):
    info = inspect_checkpoint(build("g", llama_tensors("gptq4"),
                                    with_qc({"quant_method": "gptq", "bits": "four", "group_size": 128})))
    _one(info, "invalid-quant-config", "quantization_config.bits", "'four'", "assumed 4")
    assert info.label == "W4A16-INT4"


def test_quantize_config_json_invalid_named(build, tmp_path):
    folder = build("g", llama_tensors("gptq4"), dict(LLAMA_CONFIG))
    (tmp_path / "g" / "quantize_config.json").write_text(json.dumps({"bits": 4, "group_size": 0}))
    info = inspect_checkpoint(folder)
    _one(info, "invalid-quant-config", "quantize_config.json: group_size is 0")


@pytest.mark.parametrize("key,value,words", [
    ("group_size", 0, ("weights.group_size is 0", "assumed 16")),
    ("num_bits", 0, ("weights.num_bits is 0", "assumed 4")),
])
def test_ct_weight_args_invalid(build, key, value, words):
    w = dict(NVFP4_W, **{key: value})
    info = inspect_checkpoint(build("c", llama_tensors("ct_nvfp4a16"), with_qc(_ct(w))))
    _one(info, "invalid-quant-config", "config.json", "config_groups.group_0", *words)


def test_ct_activation_group_size_invalid(build):
    acts = {"num_bits": 4, "type": "float", "group_size": -3, "dynamic": "local"}
    info = inspect_checkpoint(build("c", llama_tensors("ct_nvfp4"), with_qc(_ct(NVFP4_W, acts))))
    _one(info, "invalid-quant-config", "input_activations.group_size is -3")


def test_ct_valid_config_has_no_finding(build):
    acts = {"num_bits": 4, "type": "float", "group_size": 16, "dynamic": "local"}
    info = inspect_checkpoint(build("c", llama_tensors("ct_nvfp4"), with_qc(_ct(NVFP4_W, acts))))
    assert not _errors(info, "invalid-quant-config")
    assert info.label == "W4A4-NVFP4"


def test_ct_weights_null(build):
    info = inspect_checkpoint(build("c", llama_tensors("ct_nvfp4a16"), with_qc(_ct(None))))
    _one(info, "invalid-quant-config", "config_groups.group_0.weights is null")


@pytest.mark.parametrize("groups", ["oops", ["group_0"], {"group_0": "W4A16"}])
def test_ct_config_groups_not_a_mapping_is_bad_input(build, capsys, groups):
    folder = build("c", llama_tensors("ct_nvfp4a16"), with_qc(_ct(NVFP4_W, groups=groups)))
    assert main(["inspect", folder]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config.json" in err[0] and "config_groups" in err[0], err


@pytest.mark.parametrize("gs", [0, -16])
def test_modelopt_group_size_invalid_in_hf_quant_config(build, gs):
    hq = {"producer": {"name": "modelopt", "version": "0.40.0"},
          "quantization": {"quant_algo": "NVFP4", "group_size": gs, "exclude_modules": ["lm_head"]}}
    info = inspect_checkpoint(build("m", llama_tensors("mo_nvfp4"), dict(LLAMA_CONFIG), hf_quant=hq))
    _one(info, "invalid-quant-config", "hf_quant_config.json", f"quantization.group_size is {gs}",
         "assumed 16 as ModelOpt writes")
    assert info.label == "W4A4-NVFP4"


def test_modelopt_group_size_invalid_in_config_json(build):
    qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 0, "ignore": ["lm_head"]}
    info = inspect_checkpoint(build("m", llama_tensors("mo_nvfp4"), with_qc(qc)))
    _one(info, "invalid-quant-config", "config.json: quantization_config.group_size is 0",
         "assumed 16 as ModelOpt writes")


def test_modelopt_quantized_layers_group_size_invalid(build):
    layers = {f"model.layers.{i}.{m}": {"quant_algo": "W4A16_NVFP4", "group_size": 0}
              for i in range(L) for m in ("self_attn.q_proj", "mlp.down_proj")}
    hq = {"producer": {"name": "modelopt", "version": "0.45.0"},
          "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}}
    info = inspect_checkpoint(build("m", llama_tensors("mo_nvfp4", input_scale=False), dict(LLAMA_CONFIG),
                                    hf_quant=hq))
    _one(info, "invalid-quant-config", "quantized_layers['model.layers.0.self_attn.q_proj'].group_size is 0")


@pytest.mark.parametrize("block", [[0, 0], "128", [128]])
def test_fp8_block_size_invalid(build, block):
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": block}
    info = inspect_checkpoint(build("f", llama_tensors("hf_fp8_block"), with_qc(qc)))
    _one(info, "invalid-quant-config", "quantization_config.weight_block_size", "per-tensor")


def test_fp8_block_size_valid(build):
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    info = inspect_checkpoint(build("f", llama_tensors("hf_fp8_block"), with_qc(qc)))
    assert not _errors(info, "invalid-quant-config")


@pytest.mark.parametrize("qc", [["fp8"], "modelopt", 4])
def test_quantization_config_not_an_object(build, qc):
    cfg = dict(LLAMA_CONFIG, quantization_config=qc)
    info = inspect_checkpoint(build("q", llama_tensors("mo_nvfp4"), cfg))
    _one(info, "invalid-quant-config", "config.json: quantization_config is", "not an object")
    # the headers still classify the tensors
    assert info.label == "W4A4-NVFP4"


def test_three_files_contradict(build, tmp_path):
    qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head"]}
    hq = {"producer": {"name": "modelopt", "version": "0.40.0"}, "quantization": {"quant_algo": "FP8"}}
    folder = build("x", llama_tensors("mo_nvfp4"), with_qc(qc), hf_quant=hq)
    (tmp_path / "x" / "quantize_config.json").write_text(json.dumps({"bits": 4, "group_size": 128}))
    info = inspect_checkpoint(folder)
    f = _one(info, "quant-config-conflict", "config.json", "hf_quant_config.json", "NVFP4", "FP8",
             severity="warn")
    assert "engines read config.json" in f.message
    _one(info, "quant-config-conflict", "quantize_config.json", "config.json", severity="warn")
    # the advisor follows what the engines read: config.json's NVFP4 (and the tensors agree)
    assert info.label == "W4A4-NVFP4"
    assert not any(f.code == "config-tensor-mismatch" for f in info.findings)


def test_agreeing_modelopt_files_no_conflict(build):
    qc = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"]}
    hq = {"producer": {"name": "modelopt", "version": "0.40.0"},
          "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}
    info = inspect_checkpoint(build("x", llama_tensors("mo_nvfp4"), with_qc(qc), hf_quant=hq))
    assert not _errors(info, "quant-config-conflict")
    assert not _errors(info, "invalid-quant-config")


def test_ct_config_with_stray_hf_quant_config(build):
    acts = {"num_bits": 4, "type": "float", "group_size": 16, "dynamic": "local"}
    hq = {"producer": {"name": "modelopt", "version": "0.40.0"}, "quantization": {"quant_algo": "FP8"}}
    info = inspect_checkpoint(build("x", llama_tensors("ct_nvfp4"), with_qc(_ct(NVFP4_W, acts)), hf_quant=hq))
    _one(info, "quant-config-conflict", "compressed-tensors", "hf_quant_config.json", severity="warn")
    assert info.producer == "compressed-tensors" and info.label == "W4A4-NVFP4"


# ------------------------------------------------------------------ architecture numbers

@pytest.mark.parametrize("key,value,field,unknown", [
    ("num_key_value_heads", 0, "num_kv_heads", 0),
    ("num_key_value_heads", -2, "num_kv_heads", 0),
    ("num_attention_heads", 0, "num_attention_heads", 0),
    ("max_position_embeddings", -1, "max_position_embeddings", None),
    ("hidden_size", math.nan, "hidden_size", 0),
    ("vocab_size", 0, "vocab_size", 0),
])
def test_arch_number_invalid(build, key, value, field, unknown):
    cfg = dict(LLAMA_CONFIG, **{key: value})
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), cfg))
    _one(info, "invalid-arch-config", f"config.json: {key} is", "positive integer")
    assert getattr(info.arch, field) == unknown


def test_valid_arch_has_no_finding(build):
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), dict(LLAMA_CONFIG)))
    assert not _errors(info, "invalid-arch-config") and not _errors(info, "layer-count-mismatch")
    assert info.arch.num_kv_heads == LLAMA_CONFIG["num_key_value_heads"]


def test_absent_kv_heads_default_to_heads(build):
    cfg = {k: v for k, v in LLAMA_CONFIG.items() if k != "num_key_value_heads"}
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), cfg))
    assert info.arch.num_kv_heads == LLAMA_CONFIG["num_attention_heads"]
    assert not _errors(info, "invalid-arch-config")


def test_negative_heads_do_not_make_negative_head_dim(build):
    cfg = {k: v for k, v in LLAMA_CONFIG.items() if k != "head_dim"}
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), dict(cfg, num_attention_heads=-4)))
    assert info.arch.head_dim == 0 and info.arch.num_attention_heads == 0


def test_text_config_key_named(build):
    cfg = {"model_type": "qwen3_5", "architectures": ["X"],
           "text_config": dict(LLAMA_CONFIG, num_key_value_heads=0)}
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), cfg))
    _one(info, "invalid-arch-config", "text_config.num_key_value_heads is 0")


@pytest.mark.parametrize("declared", [0, 1])
def test_layer_count_vs_tensors(build, declared):
    info = inspect_checkpoint(build("a", llama_tensors("bf16"), dict(LLAMA_CONFIG, num_hidden_layers=declared)))
    _one(info, "layer-count-mismatch", f"num_hidden_layers {declared}", f"hold {L} decoder layers",
         severity="warn")


def test_config_only_invalid_hidden_is_scheme_without_sizes(build, capsys):
    # nothing to size the modules from: the scheme is answered, sizes are N/A, never a zero-byte answer
    folder = build("a", None, dict(LLAMA_CONFIG, hidden_size=0))
    assert main(["inspect", folder]) == 0
    out = capsys.readouterr().out
    assert "hidden_size is 0" in out and "cannot be computed" in out and "N/A (sizes unknown)" in out


@pytest.mark.parametrize("key,value", [("hidden_size", "4096"), ("model_type", ["llama"]), ("architectures", "X"),
                                       ("tie_word_embeddings", "false"), ("layer_types", [1, 2]),
                                       ("text_config", "x"), ("block_configs", [1])])
def test_config_value_of_wrong_type_is_one_line(build, capsys, key, value):
    """A value of the wrong JSON type is one line naming the key (exit 3), for inspect and report alike."""
    folder = build("a", None, dict(LLAMA_CONFIG, **{key: value}))
    for argv in (["inspect", folder], ["report", folder, "--gpu", "rtx-3090", "-o", folder + "/r.md"]):
        assert main(argv) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "config.json" in err[0] and key in err[0] and "expected" in err[0], err


def test_header_without_tensors_is_bad_input(tmp_path, capsys):
    folder = write_checkpoint(tmp_path / "e", None, dict(LLAMA_CONFIG))
    save_file({}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    assert main(["inspect", str(folder)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.safetensors" in err[0] and "no tensors" in err[0], err


def test_inspect_cli_exit_zero_with_error_finding_in_json(build, capsys):
    folder = build("a", llama_tensors("bf16"), dict(LLAMA_CONFIG, num_key_value_heads=0))
    assert main(["inspect", "--json", folder]) == 0
    doc = json.loads(capsys.readouterr().out)
    codes = {(f["code"], f["severity"]) for f in doc["checkpoint"]["findings"]}
    assert ("invalid-arch-config", "error") in codes


@pytest.mark.parametrize("key,value", [("num_key_value_heads", -2), ("num_attention_heads", -4),
                                       ("vocab_size", -512), ("intermediate_size", -1)])
def test_config_only_invalid_counts_never_negative(build, key, value):
    # no weights: sizes come from the config, so a negative count must not become negative bytes
    info = inspect_checkpoint(build("a", None, dict(LLAMA_CONFIG, **{key: value})))
    _one(info, "invalid-arch-config", f"config.json: {key} is {value}")
    assert info.totals.sizes_from == "config"
    assert all(g.params >= 0 and g.stored_bytes >= 0 for g in info.modules)
    assert info.totals.params > 0

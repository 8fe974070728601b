"""The converter against full ModelOpt 0.47 exports of a tiny random Llama: same bytes, same
configs, same shards; verify on those exports (round trip, compare, tampered copies)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from advisor.cli import main
from advisor.convert.safetensors_io import read_bytes
from advisor.convert.source import open_checkpoint

pytestmark = pytest.mark.oracle


def _tensor_bytes(folder):
    ck = open_checkpoint(folder)
    return ck, {n: (e.dtype, e.shape, read_bytes(e)) for n, e in ck.tensors.items()}


def test_weight_only_export_is_reproduced_byte_for_byte(modelopt_w4a16, tmp_path, capsys):
    bf16, export = modelopt_w4a16
    out = tmp_path / "ours"
    assert main(["convert", str(bf16), str(out), "--weight-only", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["quant_algo"] == "W4A16_NVFP4"
    ours, a = _tensor_bytes(out)
    ref, b = _tensor_bytes(export)
    assert a.keys() == b.keys()
    differing = [n for n in b if a[n] != b[n]]
    assert differing == []
    assert ours.hf_quant_config == ref.hf_quant_config
    assert ours.config["quantization_config"] == ref.config["quantization_config"]
    assert ours.shard_files == ref.shard_files == ("model.safetensors",)
    # q/k/v of layer 0 share the scale set by k's outlier
    s = {x: read_bytes(ours.tensors[f"model.layers.0.self_attn.{x}.weight_scale_2"])
         for x in ("q_proj", "k_proj", "v_proj")}
    assert len(set(s.values())) == 1
    assert np.frombuffer(s["q_proj"], np.float32)[0] == np.float32(np.float32(0.75) / np.float32(2688))


def test_default_nvfp4_without_reference_differs_only_in_input_scale(modelopt_nvfp4_sharded, tmp_path):
    bf16, export = modelopt_nvfp4_sharded
    out = tmp_path / "ours"
    assert main(["convert", str(bf16), str(out), "--json"]) == 0
    _, a = _tensor_bytes(out)
    _, b = _tensor_bytes(export)
    assert a.keys() == b.keys()
    differing = sorted(n for n in b if a[n] != b[n])
    assert differing and all(n.endswith(".input_scale") for n in differing)
    assert all(np.frombuffer(a[n][2], np.float32)[0] == 1.0 for n in differing)


def test_with_reference_everything_matches_including_shards(modelopt_nvfp4_sharded, tmp_path):
    bf16, export = modelopt_nvfp4_sharded
    out = tmp_path / "ours"
    assert main(["convert", str(bf16), str(out), "--reference", str(export), "--json"]) == 0
    ours, a = _tensor_bytes(out)
    ref, b = _tensor_bytes(export)
    assert a == b
    assert ours.weight_map == ref.weight_map and len(ref.shard_files) > 1
    idx = json.loads((out / "model.safetensors.index.json").read_text())
    ref_idx = json.loads((export / "model.safetensors.index.json").read_text())
    assert idx["metadata"]["total_size"] == ref_idx["metadata"]["total_size"]
    assert ours.config["quantization_config"] == ref.config["quantization_config"]
    assert (out / "generation_config.json").exists()


def test_verify_round_trip_of_the_export(modelopt_w4a16, capsys):
    _, export = modelopt_w4a16
    assert main(["verify", "--reference", str(export), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["identical"] and rep["mode"] == "roundtrip"
    # the all-zero-code blocks planted by the oracle script (tiny values, tiny negatives -> FP4 -0)
    # cannot give back their clamped scale; the -0 codes themselves must survive
    assert rep["undetermined_blocks"] == 2
    assert all(not m["fails"] for m in rep["mismatches"])


def test_verify_bf16_candidate_and_tampered_copy(modelopt_nvfp4_sharded, tmp_path, capsys):
    bf16, export = modelopt_nvfp4_sharded
    assert main(["verify", str(bf16), "--reference", str(export), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "convert+compare"
    bad = tmp_path / "tampered"
    shutil.copytree(export, bad)
    ck = open_checkpoint(bad)
    e = ck.tensors["model.layers.1.mlp.up_proj.weight"]
    with open(e.file, "r+b") as f:
        f.seek(e.offset + 3 * e.shape[1] + 5)
        byte = f.read(1)
        f.seek(e.offset + 3 * e.shape[1] + 5)
        f.write(bytes([byte[0] ^ 0x10]))
    assert main(["verify", str(bad), "--reference", str(export), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    [mm] = [m for m in rep["mismatches"] if m["fails"]]
    assert mm["tensor"] == "model.layers.1.mlp.up_proj.weight"
    assert mm["differing_bytes"] == 1 and mm["first_positions"] == [[3, 5]]


def test_hybrid_gdn_moe_export_is_reproduced(modelopt_qwen35_moe, tmp_path, capsys):
    """Qwen3.5-MoE: GDN in_proj_qkv/z share (in_proj_a/b, conv1d, routers stay BF16 in 0.47),
    each expert's gate/up share, the shared expert's gate/up share, attention q/k/v share."""
    bf16, export = modelopt_qwen35_moe
    out = tmp_path / "ours"
    assert main(["convert", str(bf16), str(out), "--weight-only", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    ours, a = _tensor_bytes(out)
    ref, b = _tensor_bytes(export)
    assert a.keys() == b.keys()
    assert [n for n in b if a[n] != b[n]] == []
    assert ours.hf_quant_config == ref.hf_quant_config
    assert ours.config["quantization_config"] == ref.config["quantization_config"]
    rules_used = {g["rule"] for g in payload["quantized"]}
    assert {"gated-delta-net in_proj", "MoE expert gate/up", "MLP gate/up", "attention q/k/v"} <= rules_used
    p = "model.language_model.layers.0.linear_attn"
    assert a[f"{p}.in_proj_qkv.weight_scale_2"] == a[f"{p}.in_proj_z.weight_scale_2"]
    assert a[f"{p}.in_proj_a.weight"][0] == "BF16"
    assert main(["verify", "--reference", str(export), "--json"]) == 0

"""Converter behaviour without the oracle: layout, keep patterns, fused groups per architecture,
streaming/atomic output and the one-line errors for bad inputs."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from advisor.cli import main
from advisor.convert import nvfp4_math as m
from advisor.convert.converter import convert
from advisor.convert.plan import Options
from advisor.convert.safetensors_io import read_bytes
from advisor.convert.source import open_checkpoint
from tests.conftest import ROOT
from tests.convert.conftest import write_checkpoint

H = 64


def _w(n, k, scale=0.02, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=g) * scale).to(torch.bfloat16)


def _qwen35_like():
    """Names of a hybrid GDN + MoE + VL checkpoint (Qwen3.5-MoE style)."""
    p = "model.language_model.layers"
    t = {
        "model.language_model.embed_tokens.weight": _w(128, H),
        "lm_head.weight": _w(128, H, seed=1),
        "model.language_model.norm.weight": torch.ones(H, dtype=torch.bfloat16),
        f"{p}.0.input_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
        f"{p}.0.linear_attn.in_proj_qkv.weight": _w(96, H, seed=2),
        f"{p}.0.linear_attn.in_proj_z.weight": _w(32, H, 0.5, seed=3),
        f"{p}.0.linear_attn.in_proj_a.weight": _w(4, H, seed=4),
        f"{p}.0.linear_attn.in_proj_b.weight": _w(4, H, seed=5),
        f"{p}.0.linear_attn.conv1d.weight": _w(96, 4, seed=6).reshape(96, 1, 4),
        f"{p}.0.linear_attn.out_proj.weight": _w(H, 32, seed=7),
        f"{p}.0.mlp.gate.weight": _w(4, H, seed=8),
        f"{p}.0.mlp.shared_expert_gate.weight": _w(1, H, seed=9),
        f"{p}.1.self_attn.q_proj.weight": _w(128, H, seed=10),
        f"{p}.1.self_attn.k_proj.weight": _w(32, H, 1.0, seed=11),
        f"{p}.1.self_attn.v_proj.weight": _w(32, H, seed=12),
        f"{p}.1.self_attn.o_proj.weight": _w(H, 64, seed=13),
        "model.visual.blocks.0.attn.qkv.weight": _w(96, 32, seed=14),
        "mtp.layers.0.mlp.up_proj.weight": _w(32, H, seed=15),
    }
    for e in range(2):
        t[f"{p}.0.mlp.experts.{e}.gate_proj.weight"] = _w(32, H, 0.1 * (e + 1), seed=20 + e)
        t[f"{p}.0.mlp.experts.{e}.up_proj.weight"] = _w(32, H, 0.3 * (e + 1), seed=30 + e)
        t[f"{p}.0.mlp.experts.{e}.down_proj.weight"] = _w(H, 32, seed=40 + e)
    cfg = {"model_type": "qwen3_5_moe", "text_config": {"model_type": "qwen3_5_moe_text"}}
    return t, cfg


def _scale2(ck, module):
    return np.frombuffer(read_bytes(ck.tensors[module + ".weight_scale_2"]), np.float32)[0]


def test_layout_groups_and_kept_tensors(tmp_path):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg, shards=3)
    res = convert(src, tmp_path / "out", options=Options(weight_only=True))
    out = open_checkpoint(tmp_path / "out")
    p = "model.language_model.layers"
    # kept in BF16, unchanged bytes
    for name in ("lm_head.weight", "model.language_model.embed_tokens.weight", f"{p}.0.linear_attn.conv1d.weight",
                 f"{p}.0.mlp.gate.weight", f"{p}.0.mlp.shared_expert_gate.weight",
                 "model.visual.blocks.0.attn.qkv.weight",
                 "mtp.layers.0.mlp.up_proj.weight", f"{p}.0.linear_attn.in_proj_a.weight",
                 f"{p}.0.linear_attn.in_proj_b.weight", "model.language_model.norm.weight"):
        assert out.tensors[name].dtype == "BF16", name
        assert read_bytes(out.tensors[name]) == tensors[name].view(torch.uint16).numpy().tobytes()
        assert name.rsplit(".", 1)[0] + ".weight_scale" not in out.tensors
    # GDN in_proj_qkv/z share one scale from the joint amax; a/b are kept (ModelOpt 0.47 default)
    qkv, z = f"{p}.0.linear_attn.in_proj_qkv", f"{p}.0.linear_attn.in_proj_z"
    joint = max(tensors[x + ".weight"].float().abs().max().item() for x in (qkv, z))
    assert _scale2(out, qkv) == _scale2(out, z) == m.global_scale(joint)
    # attention q/k/v share; o_proj alone
    att = f"{p}.1.self_attn"
    assert _scale2(out, att + ".q_proj") == _scale2(out, att + ".k_proj") == _scale2(out, att + ".v_proj")
    assert _scale2(out, att + ".o_proj") == m.global_scale(tensors[att + ".o_proj.weight"].float().abs().max().item())
    # each expert's gate/up share, experts differ from each other, down_proj alone
    e0, e1 = f"{p}.0.mlp.experts.0", f"{p}.0.mlp.experts.1"
    assert _scale2(out, e0 + ".gate_proj") == _scale2(out, e0 + ".up_proj")
    assert _scale2(out, e1 + ".gate_proj") == _scale2(out, e1 + ".up_proj")
    assert _scale2(out, e0 + ".up_proj") != _scale2(out, e1 + ".up_proj")
    # layout: U8 [N, K/2], F8_E4M3 [N, K/16], F32 scalar; weight-only has no input_scale
    w = out.tensors[qkv + ".weight"]
    assert (w.dtype, w.shape) == ("U8", (96, H // 2))
    scales = out.tensors[qkv + ".weight_scale"]
    assert (scales.dtype, scales.shape) == ("F8_E4M3", (96, H // 16))
    assert (out.tensors[qkv + ".weight_scale_2"].dtype, out.tensors[qkv + ".weight_scale_2"].shape) == ("F32", ())
    assert not any(n.endswith("input_scale") for n in out.tensors)
    # the nibbles decode to the block-wise nearest values: element 2j is the low nibble
    bits = tensors[qkv + ".weight"].view(torch.uint16).numpy()
    packed = np.frombuffer(read_bytes(w), np.uint8).reshape(w.shape)
    scale = np.frombuffer(read_bytes(out.tensors[qkv + ".weight_scale"]), np.uint8).reshape(96, H // 16)
    deq = m.dequantize(packed, scale, _scale2(out, qkv))
    orig = m.bf16_to_f32(bits)
    swapped = m.dequantize(((packed >> 4) | (packed << 4)).astype(np.uint8), scale, _scale2(out, qkv))
    assert np.abs(deq - orig).mean() < np.abs(swapped - orig).mean() / 2
    # config: W4A16_NVFP4, exclusions summarised with prefix wildcards
    hq = json.loads((tmp_path / "out" / "hf_quant_config.json").read_text())["quantization"]
    assert hq["quant_algo"] == "W4A16_NVFP4" and hq["group_size"] == 16
    assert "lm_head" in hq["exclude_modules"] and "mtp*" in hq["exclude_modules"]
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["quantization_config"]["ignore"] == hq["exclude_modules"]
    assert res.plan.groups and len(res.files) >= 3


def test_user_keep_patterns_and_input_scale(tmp_path):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    convert(src, tmp_path / "out", options=Options(keep=("*experts.1.*", "*.o_proj")))
    out = open_checkpoint(tmp_path / "out")
    p = "model.language_model.layers"
    assert out.tensors[f"{p}.0.mlp.experts.1.up_proj.weight"].dtype == "BF16"
    assert out.tensors[f"{p}.1.self_attn.o_proj.weight"].dtype == "BF16"
    assert out.tensors[f"{p}.0.mlp.experts.0.up_proj.weight"].dtype == "U8"
    iscale = out.tensors[f"{p}.0.mlp.experts.0.up_proj.input_scale"]
    assert iscale.dtype == "F32" and np.frombuffer(read_bytes(iscale), np.float32)[0] == 1.0
    assert json.loads((tmp_path / "out" / "hf_quant_config.json").read_text())["quantization"]["quant_algo"] == "NVFP4"


def test_source_untouched_and_progress_reported(tmp_path):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg, shards=2)
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in src.iterdir()}
    seen = []
    convert(src, tmp_path / "out", options=Options(threads=2, chunk_elements=256),
            progress=lambda stage, done, total, name: seen.append((stage, done, total)))
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in src.iterdir()} == before
    writes = [s for s in seen if s[0] == "write"]
    assert writes[-1][1] == writes[-1][2] == sum(t.numel() * 2 for t in tensors.values())
    assert any(s[0] == "scan" for s in seen)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_threads_and_chunks_do_not_change_bytes(tmp_path):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    convert(src, tmp_path / "a", options=Options())
    convert(src, tmp_path / "b", options=Options(threads=3, chunk_elements=100))
    a, b = open_checkpoint(tmp_path / "a"), open_checkpoint(tmp_path / "b")
    assert {n: read_bytes(e) for n, e in a.tensors.items()} == {n: read_bytes(e) for n, e in b.tensors.items()}


def test_interrupted_run_leaves_nothing(tmp_path):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)

    def stop(stage, done, total, name):
        if stage == "write" and done > total // 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        convert(src, tmp_path / "out", progress=stop)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


# ------------------------------------------------------------------ bad inputs -> exit 3, one line

def _cli(args, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip()
    return code, err


def test_bad_inputs_are_one_line_errors(tmp_path, capsys):
    good, cfg = _qwen35_like()
    cases = {}
    f32 = dict(good)
    f32["model.language_model.layers.1.self_attn.o_proj.weight"] = torch.randn(H, 64)
    cases["F32; the converter reads BF16 or FP16"] = write_checkpoint(tmp_path / "f32", f32, cfg)
    odd = dict(good)
    odd["model.language_model.layers.1.self_attn.o_proj.weight"] = _w(H, 40)
    cases["not divisible by the NVFP4 block size 16"] = write_checkpoint(tmp_path / "odd", odd, cfg)
    cases["not a checkpoint folder"] = tmp_path / "missing"
    trunc = write_checkpoint(tmp_path / "trunc", good, cfg)
    data = (trunc / "model.safetensors").read_bytes()
    (trunc / "model.safetensors").write_bytes(data[: len(data) - 100])
    cases["truncated file"] = trunc
    quantized = write_checkpoint(tmp_path / "quantized", good, {**cfg, "quantization_config": {"quant_method": "fp8"}})
    cases["already quantized"] = quantized
    nan = dict(good)
    v_proj = "model.language_model.layers.1.self_attn.v_proj.weight"
    nan[v_proj] = nan[v_proj].clone()
    nan["model.language_model.layers.1.self_attn.v_proj.weight"][0, 0] = float("inf")
    cases["inf or NaN"] = write_checkpoint(tmp_path / "nan", nan, cfg)
    shard_missing = write_checkpoint(tmp_path / "shardmissing", good, cfg, shards=2)
    (shard_missing / "model-00002-of-00002.safetensors").unlink()
    cases["missing"] = shard_missing
    for expected, src in cases.items():
        dst = tmp_path / f"out-{src.name}"
        code, err = _cli(["convert", str(src), str(dst)], capsys)
        assert code == 3, (expected, err)
        assert expected in err and "\n" not in err and "Traceback" not in err
        assert not dst.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_refuses_non_empty_destination_and_destination_in_source(tmp_path, capsys):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    code, err = _cli(["convert", str(src), str(dst)], capsys)
    assert code == 3 and "not empty" in err
    assert [p.name for p in dst.iterdir()] == ["keep.txt"]
    code, err = _cli(["convert", str(src), str(src / "inside")], capsys)
    assert code == 3 and "source" in err and not (src / "inside").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _cli(["convert", str(src), str(empty), "--json"], capsys)[0] == 0
    assert (empty / "model.safetensors").exists()


def test_disk_full_leaves_nothing(tmp_path):
    """A real write failure: the file-size limit (RLIMIT_FSIZE) makes the kernel refuse writes
    past 200 kB, as a full disk would refuse them."""
    tensors, cfg = _qwen35_like()
    tensors["lm_head.weight"] = _w(4096, H)           # 512 kB, copied
    src = write_checkpoint(tmp_path / "src", tensors, cfg)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "advisor", "convert", str(src), str(tmp_path / "out")],
                          capture_output=True, text=True, preexec_fn=limit, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk full" in lines[0] and "nothing was written" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_verify_exit_codes_on_synthetic_reference(tmp_path, capsys):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    assert main(["convert", str(src), str(tmp_path / "ref"), "--json"]) == 0
    capsys.readouterr()
    # our own output as reference: the BF16 source reproduces it, the round trip is clean
    assert main(["verify", str(src), "--reference", str(tmp_path / "ref"), "--json"]) == 0
    capsys.readouterr()
    assert main(["verify", "--reference", str(tmp_path / "ref"), "--json"]) == 0
    capsys.readouterr()
    # another source against it: the quantized bytes differ -> exit 1 with the report
    other = dict(tensors)
    other["model.language_model.layers.1.self_attn.v_proj.weight"] = _w(32, H, seed=99)
    src2 = write_checkpoint(tmp_path / "src2", other, cfg)
    assert main(["verify", str(src2), "--reference", str(tmp_path / "ref"), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    failing = {d["tensor"] for d in rep["mismatches"] if d["fails"]}
    assert "model.language_model.layers.1.self_attn.v_proj.weight" in failing
    # a candidate that is not a checkpoint: one line, exit 3
    code, err = _cli(["verify", str(tmp_path / "nope"), "--reference", str(tmp_path / "ref")], capsys)
    assert code == 3 and "not a checkpoint folder" in err


def test_round_trip_catches_a_broken_fused_group(tmp_path, capsys):
    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    convert(src, tmp_path / "ref", options=Options(weight_only=True))
    ck = open_checkpoint(tmp_path / "ref")
    e = ck.tensors["model.language_model.layers.1.self_attn.q_proj.weight_scale_2"]
    value = np.frombuffer(read_bytes(e), np.float32)[0]
    with open(e.file, "r+b") as f:              # q no longer shares k/v's global scale
        f.seek(e.offset)
        f.write(np.float32(value * 0.5).tobytes())
    assert main(["verify", "--reference", str(tmp_path / "ref"), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    failing = [d for d in rep["mismatches"] if d["fails"]]
    assert any(d["kind"] == "weight_scale_2" and "self_attn" in d["tensor"] for d in failing)


def test_output_loads_with_the_safetensors_library(tmp_path):
    from safetensors import safe_open

    tensors, cfg = _qwen35_like()
    src = write_checkpoint(tmp_path / "src", tensors, cfg)
    convert(src, tmp_path / "out", options=Options(max_shard_bytes=20_000))
    out = open_checkpoint(tmp_path / "out")
    assert len(out.shard_files) > 1
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(e.nbytes for e in out.tensors.values())
    assert index["weight_map"] == out.weight_map
    seen = 0
    for shard in out.shard_files:
        with safe_open(str(tmp_path / "out" / shard), framework="pt") as f:
            assert f.metadata() == {"format": "pt"}
            for name in f.keys():
                t = f.get_tensor(name)
                e = out.tensors[name]
                raw = (t if t.dim() else t.reshape(1)).view(torch.uint8).numpy().tobytes()
                assert raw == read_bytes(e), name
                seen += 1
    assert seen == len(out.tensors)
    assert out.tensors["model.language_model.layers.1.self_attn.q_proj.weight_scale"].dtype == "F8_E4M3"

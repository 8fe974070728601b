"""`quality REFERENCE CANDIDATE` on CPU: our converter's NVFP4 output, a candidate with one broken
scale group, fused members with unshared global scales, the layouts no producer here writes
(GPTQ, AWQ, gpt-oss MXFP4, block-scale FP8; checked against transformers' own dequantizers where
it has one), fused/split projections, and bad inputs (one line, exit 3)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from advisor.cli import main
from advisor.convert import nvfp4_math as m
from advisor.convert.safetensors_io import read_header
from advisor.quality.compare import compare
from quality_builders import (LLAMA_CONFIG, linear_names, mxfp4_quantize, pack_cols, pack_rows,
                              rtn_int, write)


def _bf16(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.float32).numpy()


def _patch_byte(folder: Path, tensor: str, index: int, value) -> int:
    """Set byte `index` of `tensor` in the folder's model.safetensors; returns the old byte."""
    path = folder / "model.safetensors"
    entries, _ = read_header(path)
    e = entries[tensor]
    with open(path, "r+b") as f:
        f.seek(e.offset + index)
        old = f.read(1)[0]
        f.seek(e.offset + index)
        f.write(bytes([value(old) if callable(value) else value]))
    return old


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# ------------------------------------------------------------------ NVFP4 from our converter

def test_converter_output_equals_round_to_nearest(bf16_ckpt, nvfp4_ckpt):
    rep = compare(bf16_ckpt, nvfp4_ckpt)
    assert rep.verdict.status == "ok" and rep.verdict.line.startswith("OK")
    assert len(rep.tensors) == 14 and rep.formats == ("NVFP4 (ModelOpt)",)
    # our converter IS ModelOpt's round-to-nearest: the error equals the baseline's to the last bit
    assert all(t.excess_db == 0.0 for t in rep.tensors)
    assert all(18 < t.snr_db < 24 and 0.99 < t.cosine < 1 for t in rep.tensors)
    assert all(c.shared for c in rep.scale_groups) and {c.rule for c in rep.scale_groups} == {"attention q/k/v",
                                                                                              "MLP gate/up"}
    assert rep.kept == {"identical": 2, "different": [], "missing": []}      # embed_tokens, lm_head
    assert {c.layer_class for c in rep.classes} == {f"model.layers.*.{p}" for p in
                                                     ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                      "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                                      "mlp.down_proj")}


def test_metrics_by_hand(bf16_ckpt, nvfp4_ckpt):
    """relative error, SNR, cosine and max error of one tensor recomputed from the files."""
    from safetensors.torch import load_file

    rep = compare(bf16_ckpt, nvfp4_ckpt)
    name = "model.layers.1.mlp.down_proj"
    t = next(x for x in rep.tensors if x.module == name)
    q = load_file(str(nvfp4_ckpt / "model.safetensors"))
    ref = _bf16(load_file(str(bf16_ckpt / "model.safetensors"))[name + ".weight"])
    deq = m.dequantize(q[name + ".weight"].numpy(), q[name + ".weight_scale"].view(torch.uint8).numpy(),
                       q[name + ".weight_scale_2"].numpy())
    err = deq.astype(np.float64) - ref
    assert t.rel_error == pytest.approx(math.sqrt((err ** 2).sum() / (ref.astype(np.float64) ** 2).sum()), rel=1e-9)
    assert t.snr_db == pytest.approx(-20 * math.log10(t.rel_error), rel=1e-9)
    norms = math.sqrt((ref ** 2).sum() * (deq.astype(np.float64) ** 2).sum())
    assert t.cosine == pytest.approx((ref * deq).sum() / norms, rel=1e-6)
    assert t.max_abs_error == pytest.approx(np.abs(err).max(), rel=1e-6)


def test_one_broken_scale_group_is_caught_and_named(nvfp4_ckpt, bf16_ckpt, tmp_path, capsys):
    bad = shutil.copytree(nvfp4_ckpt, tmp_path / "bad")
    name = "model.layers.1.self_attn.o_proj.weight_scale"
    cols = 128 // 16
    row, group = 37, 5
    old = _patch_byte(bad, name, row * cols + group, lambda b: b + 8)   # e4m3 exponent + 1: the block x2
    assert 0 < old < 0x70
    rc, out, err = _run(capsys, "quality", str(bf16_ckpt), str(bad), "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"]["status"] == "broken"
    assert "model.layers.1.self_attn.o_proj.weight row 37, columns 80-95" in doc["verdict"]["line"]
    bad_t = [t for t in doc["tensors"] if t["broken_groups"]]
    assert [t["tensor"] for t in bad_t] == ["model.layers.1.self_attn.o_proj.weight"]
    assert [(g["row"], g["col"]) for g in bad_t[0]["broken"]] == [(37, 80)]
    assert bad_t[0]["broken"][0]["factor"] == pytest.approx(2.0, rel=0.1)
    # the tensor as a whole barely moves: only the group check sees it
    assert abs(bad_t[0]["excess_db"]) < 1.0
    rc, out, _ = _run(capsys, "quality", str(bf16_ckpt), str(bad))
    assert rc == 1 and "BROKEN" in out and "Broken scale groups" in out


def test_unshared_fused_global_scales(bf16_ckpt, tmp_path):
    """q/k/v quantized each with its own amax (a converter without fusion tables): every tensor is a
    fine round-to-nearest, but the engine serves them with one scale."""
    from safetensors.torch import load_file

    from advisor.convert.modelopt_config import hf_quant_config, quantization_config

    src = load_file(str(bf16_ckpt / "model.safetensors"))
    for name in [n for n in src if ".k_proj." in n or ".up_proj." in n]:
        src[name] = (src[name].float() * 0.25).to(torch.bfloat16)      # members with a smaller amax
    ref = write(tmp_path / "ref", src, LLAMA_CONFIG)
    out = {}
    for name, t in src.items():
        if name in linear_names(src):
            mod = name[: -len(".weight")]
            bits = t.view(torch.int16).numpy().view(np.uint16)
            wsf2 = m.global_scale(float(m.bf16_to_f32(np.array([m.amax_of_bf16(bits)], np.uint16))[0]))
            packed, scale = m.quantize_bf16_rows(bits, wsf2)
            out[name] = torch.from_numpy(packed)
            out[mod + ".weight_scale"] = torch.from_numpy(scale).view(torch.float8_e4m3fn)
            out[mod + ".weight_scale_2"] = torch.tensor(float(wsf2), dtype=torch.float32)
        else:
            out[name] = t
    cand = write(tmp_path / "unshared", out, {**LLAMA_CONFIG, "quantization_config": quantization_config(
        hf_quant_config(weight_only=True, exclude_modules=["lm_head"]))})
    (cand / "hf_quant_config.json").write_text(json.dumps(hf_quant_config(weight_only=True,
                                                                          exclude_modules=["lm_head"])))
    rep = compare(ref, cand)
    assert all(t.excess_db < 0.5 for t in rep.tensors)                 # each one alone is fine
    unshared = [c for c in rep.scale_groups if not c.shared]
    assert len(unshared) == 4 and all(max(c.scales) / min(c.scales) == pytest.approx(4) for c in unshared)
    # served with the max of the scales (vLLM, ModelOpt layout) the small member's values grow 4x
    assert all(min(c.served_snr_db) < 0 for c in unshared)
    assert rep.verdict.status in ("broken", "degraded")
    assert "global scales differ" in rep.verdict.line and "modelopt.py:2085-2093@0.33.0" in rep.verdict.line


# ------------------------------------------------------------------ layouts no producer here writes

def _int_twin(bf16: Path, folder: Path, kind: str, bits: int = 4, group: int = 32, desc_act: bool = False) -> Path:
    from safetensors.torch import load_file

    src = load_file(str(bf16 / "model.safetensors"))
    out = {}
    rng = np.random.default_rng(0)
    for name, t in src.items():
        if name not in linear_names(src):
            out[name] = t
            continue
        mod = name[: -len(".weight")]
        w = _bf16(t)                                             # [N, K]
        n, k = w.shape
        perm = rng.permutation(k) if desc_act else np.arange(k)
        q, s, z = rtn_int(w[:, perm], bits, group, symmetric=kind == "gptq")
        g_idx = np.empty(k, np.int32)
        g_idx[perm] = np.arange(k) // group
        qk = np.empty_like(q)
        qk[:, perm] = q                                           # codes back in natural column order
        if kind == "gptq":
            out[mod + ".qweight"] = torch.from_numpy(pack_rows(qk.T, bits))             # [K/8, N]
            out[mod + ".qzeros"] = torch.from_numpy(pack_cols(z.T - 1, bits))            # v1: stored z - 1
            out[mod + ".g_idx"] = torch.from_numpy(g_idx)
        else:
            out[mod + ".qweight"] = torch.from_numpy(pack_cols(qk.T, bits, np.array([0, 2, 4, 6, 1, 3, 5, 7])))
            out[mod + ".qzeros"] = torch.from_numpy(pack_cols(z.T, bits, np.array([0, 2, 4, 6, 1, 3, 5, 7])))
        out[mod + ".scales"] = torch.from_numpy(s.T.astype(np.float16))                  # [K/g, N]
        gi = np.broadcast_to(g_idx, (n, k))
        expected = (qk - np.take_along_axis(z, gi, 1)) * np.take_along_axis(s, gi, 1)
        out[mod + ".ref_deq"] = torch.from_numpy(expected.astype(np.float32))     # what a reader must return
    qc = ({"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": desc_act, "sym": True,
           "checkpoint_format": "gptq"} if kind == "gptq" else
          {"quant_method": "awq", "bits": bits, "group_size": group, "zero_point": True, "version": "gemm"})
    return write(folder, out, {**LLAMA_CONFIG, "quantization_config": qc})


@pytest.mark.parametrize("kind,desc_act", [("gptq", False), ("gptq", True), ("awq", False)])
def test_gptq_awq_layouts(bf16_ckpt, tmp_path, kind, desc_act):
    from safetensors.torch import load_file

    from advisor.convert.source import open_checkpoint
    from advisor.quality.dequantize import Reader
    from advisor.quality.layouts import detect

    cand = _int_twin(bf16_ckpt, tmp_path / kind, kind, desc_act=desc_act)
    qts, _ = detect(open_checkpoint(cand))
    expected = load_file(str(cand / "model.safetensors"))
    for qt in qts:
        if qt.module.endswith("ref_deq"):
            continue
        got = Reader(qt).rows(0, qt.rows).values
        np.testing.assert_array_equal(got, expected[qt.module + ".ref_deq"].numpy())
    assert {qt.layout.label for qt in qts if not qt.module.endswith("ref_deq")} == \
        {f"INT4 group 32 ({'GPTQ v1' if kind == 'gptq' else 'AWQ'})"}


def _strip_ref(folder: Path) -> Path:
    from safetensors.torch import load_file, save_file

    t = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in t.items() if not k.endswith("ref_deq")}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    return folder


@pytest.mark.parametrize("kind", ["gptq", "awq"])
def test_gptq_awq_quality_ok_and_bad_zero_point_caught(bf16_ckpt, tmp_path, kind):
    cand = _strip_ref(_int_twin(bf16_ckpt, tmp_path / kind, kind, desc_act=kind == "gptq"))
    rep = compare(bf16_ckpt, cand)
    assert rep.verdict.status == "ok", rep.verdict.line
    assert all(abs(t.excess_db) < 0.6 for t in rep.tensors)    # RTN twin: at the round-to-nearest baseline
    # read as the other GPTQ version (zero offset off by one step): every tensor shifts
    if kind == "gptq":
        cfg = json.loads((cand / "config.json").read_text())
        cfg["quantization_config"]["checkpoint_format"] = "gptq_v2"
        (cand / "config.json").write_text(json.dumps(cfg))
        rep = compare(bf16_ckpt, cand)
        assert rep.verdict.status != "ok"
        assert min(t.excess_db for t in rep.tensors) > 3


def test_gpt_oss_mxfp4_matches_transformers_and_maps_transposed(tmp_path):
    """gpt-oss experts: blocks [E, out, K/32, 16] against BF16 [E, in, out]; our dequantization equals
    transformers' convert_moe_packed_tensors."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    from advisor.convert.source import open_checkpoint
    from advisor.quality.dequantize import Reader
    from advisor.quality.layouts import detect

    g = torch.Generator().manual_seed(1)
    e, hidden, inter = 4, 64, 96
    ref = {"model.layers.0.mlp.experts.gate_up_proj": (torch.randn(e, hidden, 2 * inter, generator=g) * 0.05),
           "model.layers.0.mlp.experts.down_proj": (torch.randn(e, inter, hidden, generator=g) * 0.05),
           "model.layers.0.self_attn.q_proj.weight": torch.randn(hidden, hidden, generator=g) * 0.05}
    ref = {k: v.to(torch.bfloat16) for k, v in ref.items()}
    cand = {}
    for name, w in ref.items():
        if "experts" not in name:
            cand[name] = w
            continue
        mat = _bf16(w).transpose(0, 2, 1).reshape(-1, w.shape[1])           # [E*out, in]
        blocks, scales = mxfp4_quantize(mat)
        out = w.shape[2]
        cand[name + "_blocks"] = torch.from_numpy(blocks.reshape(e, out, -1, 16))
        cand[name + "_scales"] = torch.from_numpy(scales.reshape(e, out, -1))
    cfg = {"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}}
    rdir, cdir = write(tmp_path / "ref", ref, {"model_type": "gpt_oss"}), write(tmp_path / "cand", cand, cfg)
    qts, kept = detect(open_checkpoint(cdir))
    assert kept == ["model.layers.0.self_attn.q_proj.weight"]
    for qt in qts:
        theirs = convert_moe_packed_tensors(cand[qt.name + "_blocks"], cand[qt.name + "_scales"],
                                            dtype=torch.float32).numpy()            # [E, in, out]
        ours = Reader(qt).rows(0, qt.rows).values.reshape(qt.stack, -1, qt.cols).transpose(0, 2, 1)
        np.testing.assert_array_equal(ours, theirs)
    rep = compare(rdir, cdir)
    assert rep.verdict.status == "ok" and {t.reference for t in rep.tensors} == {"transposed"}
    assert all(abs(t.excess_db) < 0.01 for t in rep.tensors)


def test_block_fp8_matches_transformers(bf16_ckpt, tmp_path):
    """DeepSeek/Qwen block FP8: weight_scale_inv is a multiplier per 128x128 block (transformers'
    _dequantize_fp8_weight is the oracle)."""
    from safetensors.torch import load_file
    from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight

    from advisor.convert.source import open_checkpoint
    from advisor.quality.dequantize import Reader
    from advisor.quality.layouts import detect

    src = load_file(str(bf16_ckpt / "model.safetensors"))
    out = {}
    for name, t in src.items():
        if name not in linear_names(src):
            out[name] = t
            continue
        w = t.float()
        n, k = w.shape
        s = w.abs().reshape(-1, 128, k // 128, 128).amax(dim=(1, 3)) / 448 if n % 128 == 0 else \
            torch.nn.functional.pad(w.abs(), (0, 0, 0, -n % 128)).reshape(-1, 128, k // 128, 128).amax(dim=(1, 3)) / 448
        full = s.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        out[name] = (w / full).to(torch.float8_e4m3fn)
        out[name[:-len("weight")] + "weight_scale_inv"] = s.float()
    cfg = {**LLAMA_CONFIG, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                                   "weight_block_size": [128, 128]}}
    cand = write(tmp_path / "fp8", out, cfg)
    qts, _ = detect(open_checkpoint(cand))
    for qt in qts:
        theirs = _dequantize_fp8_weight(out[qt.name], out[qt.module + ".weight_scale_inv"], [128, 128], torch.float32)
        np.testing.assert_array_equal(Reader(qt).rows(0, qt.rows).values, theirs.numpy())
    rep = compare(bf16_ckpt, cand)
    assert rep.verdict.status == "ok" and all(t.format == "FP8 E4M3 block 128x128 (block-scale)" for t in rep.tensors)


def test_fused_candidate_against_split_reference_and_back(bf16_ckpt, nvfp4_ckpt, tmp_path):
    """Phi-3 style fused qkv_proj / gate_up_proj on one side, split projections on the other."""
    from safetensors.torch import load_file

    from advisor.convert import Options, convert

    src = load_file(str(bf16_ckpt / "model.safetensors"))
    fused = {}
    for name, t in src.items():
        if ".q_proj." in name:
            p = name.replace(".q_proj.weight", "")
            fused[p + ".qkv_proj.weight"] = torch.cat([src[p + f".{x}_proj.weight"] for x in "qkv"])
        elif ".gate_proj." in name:
            p = name.replace(".gate_proj.weight", "")
            fused[p + ".gate_up_proj.weight"] = torch.cat([src[p + ".gate_proj.weight"], src[p + ".up_proj.weight"]])
        elif not any(f".{x}_proj." in name for x in ("k", "v", "up")):
            fused[name] = t
    fdir = write(tmp_path / "fused-bf16", fused, {**LLAMA_CONFIG, "model_type": "phi3"})
    fq = tmp_path / "fused-nvfp4"
    convert(fdir, fq, options=Options(threads=1))
    rep = compare(bf16_ckpt, fq)                       # fused candidate vs split reference
    assert rep.verdict.status == "ok" and {t.reference for t in rep.tensors} == {"same name", "split"}
    rep = compare(fdir, nvfp4_ckpt)                    # split candidate vs fused reference
    assert rep.verdict.status == "ok" and {t.reference for t in rep.tensors} == {"same name", "slice"}


# ------------------------------------------------------------------ bad inputs

def _drop(folder: Path, dst: Path, drop: str) -> Path:
    from safetensors.torch import load_file

    t = load_file(str(folder / "model.safetensors"))
    t.pop(drop)
    return write(dst, t, json.loads((folder / "config.json").read_text()))


def test_bad_inputs_are_one_line_errors(bf16_ckpt, nvfp4_ckpt, tmp_path, capsys):
    no_q = _drop(bf16_ckpt, tmp_path / "no-q", "model.layers.0.self_attn.q_proj.weight")
    rc, out, err = _run(capsys, "quality", str(no_q), str(nvfp4_ckpt))
    assert rc == 3 and err.count("\n") == 1 and "Traceback" not in err
    assert "missing tensor: the reference has no model.layers.0.self_attn.q_proj.weight" in err

    from safetensors.torch import load_file
    t = load_file(str(bf16_ckpt / "model.safetensors"))
    t["model.layers.1.mlp.down_proj.weight"] = t["model.layers.1.mlp.down_proj.weight"][:, :128].contiguous()
    shrunk = write(tmp_path / "shrunk", t, LLAMA_CONFIG)
    rc, _, err = _run(capsys, "quality", str(shrunk), str(nvfp4_ckpt))
    assert rc == 3 and err.count("\n") == 1
    assert "shape mismatch: candidate model.layers.1.mlp.down_proj.weight dequantizes to [128, 256], reference " \
           "model.layers.1.mlp.down_proj.weight is [128, 128]" in err

    bnb = dict(t)
    bnb["model.layers.0.mlp.up_proj.weight"] = torch.zeros(256 * 128 // 2, 1, dtype=torch.uint8)
    bnb["model.layers.0.mlp.up_proj.weight.absmax"] = torch.ones(512)
    unsupported = write(tmp_path / "bnb", bnb,
                        {**LLAMA_CONFIG, "quantization_config": {"quant_method": "bitsandbytes"}})
    rc, _, err = _run(capsys, "quality", str(bf16_ckpt), str(unsupported))
    assert rc == 3 and err.count("\n") == 1 and "model.layers.0.mlp.up_proj: unsupported quantization layout" in err

    rc, _, err = _run(capsys, "quality", str(nvfp4_ckpt), str(nvfp4_ckpt))
    assert rc == 3 and "the reference is quantized" in err
    rc, _, err = _run(capsys, "quality", str(bf16_ckpt), str(bf16_ckpt))
    assert rc == 3 and "the candidate has no quantized weights" in err
    rc, out, err = _run(capsys, "quality", str(bf16_ckpt), str(tmp_path / "nowhere"), "--json")
    assert rc == 3 and json.loads(out)["kind"] == "error" and "not a checkpoint folder" in err

    broken_scale = shutil.copytree(nvfp4_ckpt, tmp_path / "torn")
    data = (broken_scale / "model.safetensors").read_bytes()
    (broken_scale / "model.safetensors").write_bytes(data[: len(data) // 2])
    rc, _, err = _run(capsys, "quality", str(bf16_ckpt), str(broken_scale))
    assert rc == 3 and err.count("\n") == 1 and "Traceback" not in err

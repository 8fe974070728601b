"""`convert SRC DST --dequantized`: the BF16 copy of a quantized checkpoint, through the CLI."""

from __future__ import annotations

import json

import numpy as np
import torch
from safetensors.torch import load_file

from advisor.cli import main
from advisor.convert import nvfp4_math as m


def test_nvfp4_round_trip_through_the_cli(bf16_ckpt, nvfp4_ckpt, tmp_path, capsys):
    src = tmp_path / "src"
    import shutil

    shutil.copytree(nvfp4_ckpt, src)
    (src / "tokenizer.json").write_text("{}")
    (src / "quantize_config.json").write_text('{"bits": 4}')          # would re-quantize the copy on load
    out = tmp_path / "copy"
    rc = main(["convert", str(src), str(out), "--dequantized", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["mode"] == "dequantized" and doc["dequantized"] == 14
    assert doc["formats"] == ["NVFP4 (ModelOpt)"]
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    ref, copy, q = (load_file(str(p / "model.safetensors")) for p in (bf16_ckpt, out, nvfp4_ckpt))
    assert set(copy) == set(ref)
    for name, t in copy.items():
        assert t.dtype == torch.bfloat16 and t.shape == ref[name].shape
        mod = name[: -len(".weight")]
        if mod + ".weight_scale" in q:
            want = m.f32_to_bf16(m.dequantize(q[name].numpy(), q[mod + ".weight_scale"].view(torch.uint8).numpy(),
                                              q[mod + ".weight_scale_2"].numpy()))
            assert np.array_equal(t.view(torch.int16).numpy().view(np.uint16), want)
        else:
            assert torch.equal(t, ref[name])                               # kept tensors: byte for byte
    # the copy is what quality calls unquantized, and a BF16 source has nothing to dequantize
    rc = main(["convert", str(out), str(tmp_path / "again"), "--dequantized"])
    assert rc == 3 and "nothing to dequantize" in capsys.readouterr().err


def test_dequantized_flag_misuse_is_a_usage_error(nvfp4_ckpt, bf16_ckpt, tmp_path, capsys):
    rc = main(["convert", str(nvfp4_ckpt), str(tmp_path / "x"), "--dequantized", "--reference", str(bf16_ckpt)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--reference does not apply" in err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    rc = main(["convert", str(nvfp4_ckpt), str(tmp_path / "busy"), "--dequantized"])
    assert rc == 3 and "not empty" in capsys.readouterr().err

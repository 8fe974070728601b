"""`quality` and `convert --dequantized` on real checkpoints from llm-compressor 0.14 and ModelOpt
0.47 (built in the oracle venv): every one is judged OK, within the producer's measured distance
from round-to-nearest; our dequantization equals compressed-tensors' own decompressor (the main
venv's compressed-tensors, an independent implementation); the BF16 copy holds exactly our
dequantized values."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.convert.source import open_checkpoint
from advisor.quality.compare import compare
from advisor.quality.dequantize import Reader
from advisor.quality.layouts import detect

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(900)]

# producer folder -> (format label, largest allowed dB below round-to-nearest)
EXPECTED = {
    "llmc-NVFP4A16": ("NVFP4 (compressed-tensors)", 0.2), "llmc-NVFP4": ("NVFP4 (compressed-tensors)", 0.2),
    "llmc-FP8": ("FP8 E4M3 per-tensor (compressed-tensors)", 0.3),
    "llmc-FP8_DYNAMIC": ("FP8 E4M3 per-channel (compressed-tensors)", 0.3),
    "llmc-FP8_BLOCK": ("FP8 E4M3 block 128x128 (compressed-tensors)", 0.3),
    "llmc-MXFP4A16": ("MXFP4 (compressed-tensors)", 0.2),
    "llmc-W4A16": ("INT4 group 128 (compressed-tensors)", 0.2),
    "llmc-W4A16_ASYM": ("INT4 group 128 asymmetric (compressed-tensors)", 0.2),
    "llmc-W8A8": ("INT8 per-channel", 1.0),
    "llmc-GPTQ_W4A16": ("INT4 group 128 (compressed-tensors)", 6.0),
    "mo-NVFP4": ("NVFP4 (ModelOpt)", 0.0), "mo-FP8": ("FP8 E4M3 per-tensor (ModelOpt)", 0.3),
    "mo-INT4_AWQ": ("INT4 group 128 (ModelOpt AWQ)", 2.5),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_producers_are_judged_ok(quality_oracles, name):
    rep = compare(quality_oracles / "bf16", quality_oracles / name)
    label, slack = EXPECTED[name]
    assert rep.formats == (label,)
    assert rep.verdict.status == "ok", rep.verdict.line
    assert len(rep.tensors) == 14 and rep.kept["identical"] == 2
    assert max(t.excess_db for t in rep.tensors) <= slack
    assert all(t.broken_groups == 0 and t.nonfinite == 0 for t in rep.tensors)
    if "NVFP4" in name:
        assert rep.scale_groups and all(c.shared for c in rep.scale_groups)
    if name == "mo-INT4_AWQ":          # ModelOpt folds q/k/v and gate/up smoothing into the norms
        assert any("smoothing folded" in n for n in rep.notes)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("llmc-")))
def test_dequantization_equals_compressed_tensors(quality_oracles, name):
    import torch
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from safetensors.torch import load_file

    folder = quality_oracles / name
    qc = json.loads((folder / "config.json").read_text())["quantization_config"]
    group = qc["config_groups"]["group_0"]
    compressor = BaseCompressor.get_value_from_registry(group.get("format") or qc["format"])
    scheme = QuantizationScheme(**{k: v for k, v in group.items() if k != "format"})
    tensors = load_file(str(folder / "model.safetensors"))
    qts, _ = detect(open_checkpoint(folder))
    for qt in qts:
        local = {k[len(qt.module) + 1:]: v for k, v in tensors.items() if k.startswith(qt.module + ".")}
        theirs = compressor.decompress(local, scheme)["weight"].to(torch.float32).numpy()
        ours = Reader(qt).rows(0, qt.rows).values
        # compressed-tensors decompresses in BF16 (scale / global scale and the product rounded to BF16)
        np.testing.assert_allclose(ours, theirs, rtol=2 ** -6, atol=1e-30)


@pytest.mark.parametrize("name", ["mo-NVFP4", "llmc-GPTQ_W4A16", "mo-INT4_AWQ", "llmc-FP8_BLOCK"])
def test_dequantized_copy_holds_our_values(quality_oracles, tmp_path, name):
    import torch
    from safetensors.torch import load_file

    from advisor.quality.dequantized_copy import dequantize_checkpoint
    from advisor.convert.nvfp4_math import f32_to_bf16

    out = tmp_path / "bf16-copy"
    r = dequantize_checkpoint(quality_oracles / name, out)
    assert r["dequantized"] == 14
    ref_names = set(load_file(str(quality_oracles / "bf16" / "model.safetensors")))
    copy = load_file(str(out / "model.safetensors"))
    assert set(copy) == ref_names and all(v.dtype == torch.bfloat16 for v in copy.values())
    cfg = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in cfg and not (out / "hf_quant_config.json").exists()
    qts, _ = detect(open_checkpoint(quality_oracles / name))
    for qt in qts:
        want = f32_to_bf16(Reader(qt).rows(0, qt.rows).values)
        np.testing.assert_array_equal(copy[qt.name].view(torch.int16).numpy().view(np.uint16), want)

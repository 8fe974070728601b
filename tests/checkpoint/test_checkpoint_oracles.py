"""Oracle tests: real checkpoints from llm-compressor 0.14.0.1 and nvidia-modelopt 0.47.0.

A session fixture builds a tiny random Llama and quantizes it with both producers in the oracle
venv (tests/checkpoint/producers/make_oracle_checkpoints.py, ~30-60 s). The classifier must agree
with each producer's own metadata (quantization_config / hf_quant_config.json) and with the
safetensors headers read by the safetensors library itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from tests.conftest import quant_python

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(900)]

PRODUCER = Path(__file__).parent / "producers" / "make_oracle_checkpoints.py"

# What each producer's scheme is, by the producers' own documentation (not by our classifier).
EXPECTED = {
    "tiny-llama-bf16": "BF16",
    "llmc-W4A16": "W4A16-INT4", "llmc-W8A16": "W8A16-INT8", "llmc-FP8_DYNAMIC": "W8A8-FP8", "llmc-FP8": "W8A8-FP8",
    "llmc-W8A8": "W8A8-INT8", "llmc-NVFP4A16": "W4A16-NVFP4", "llmc-NVFP4": "W4A4-NVFP4", "llmc-MXFP4": "W4A4-MXFP4",
    "llmc-MIXED_FP": "MIXED", "llmc-FP8_DYNAMIC_KV": "W8A8-FP8",
    "mo-NVFP4": "W4A4-NVFP4", "mo-FP8": "W8A8-FP8", "mo-W4A16_NVFP4": "W4A16-NVFP4", "mo-INT4_AWQ": "W4A16-INT4",
    "mo-MIXED_NVFP4_FP8": "MIXED", "mo-NVFP4_FP8KV": "W4A4-NVFP4",
}
MO_ALGO = {"FP8": "W8A8-FP8", "NVFP4": "W4A4-NVFP4", "W4A16_NVFP4": "W4A16-NVFP4", "W4A16_AWQ": "W4A16-INT4"}
# compressed-tensors group -> (weight bits, activation bits or 16)
WEIGHT_DTYPES = {"nvfp4": {"U8"}, "mxfp4": {"U8"}, "fp8_e4m3": {"F8_E4M3"}, "int8": {"I8", "I32"},
                 "int4": {"I32", "U8"}}


@pytest.fixture(scope="session")
def oracle_dir(tmp_path_factory):
    py = quant_python()
    if py is None:
        pytest.skip("oracle venv (llm-compressor + nvidia-modelopt) not set up")
    out = tmp_path_factory.mktemp("oracles")
    r = subprocess.run([py, str(PRODUCER), str(out)], capture_output=True, text=True, timeout=850,
                       env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(out),
                            "TRANSFORMERS_VERBOSITY": "error"})
    if r.returncode != 0:
        pytest.fail("producer failed:\n" + r.stderr[-3000:])
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest) == set(EXPECTED)
    return out


def _headers(folder: Path) -> dict[str, tuple[str, tuple[int, ...], int]]:
    """name -> (dtype, shape, nbytes) via the safetensors library (an independent reader)."""
    from safetensors import safe_open

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="numpy") as sf:
            for name in sf.keys():
                sl = sf.get_slice(name)
                dt, shape = sl.get_dtype(), tuple(sl.get_shape())
                n = 1
                for d in shape:
                    n *= d
                bits = {"F8_E4M3": 8, "U8": 8, "I8": 8, "BF16": 16, "F16": 16, "F32": 32, "I32": 32, "I64": 64}[dt]
                out[name] = (dt, shape, n * bits // 8)
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_oracle_checkpoint(oracle_dir, name):
    folder = oracle_dir / name
    info = inspect_checkpoint(str(folder))
    assert info.label == EXPECTED[name]
    hdr = _headers(folder)
    # sizes: every byte of every tensor is accounted for
    assert info.totals.stored_bytes == sum(v[2] for v in hdr.values())
    assert info.totals.sizes_from == "headers"
    # logical parameters are those of the base model, whatever the packing
    base = _headers(oracle_dir / "tiny-llama-bf16")
    n_base = sum(v[2] // 2 for v in base.values())
    weights = sum(g.params for g in info.modules if g.weight.format not in ("bf16", "fp16", "fp32") or g.shape)
    assert weights == sum(v[2] // 2 for k, v in base.items() if len(v[1]) == 2)
    assert info.totals.params >= n_base
    for g in info.modules:
        if g.role in ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down"):
            base_shape = base[g.name.replace("*", "0") + ".weight"][1]
            assert g.shape == base_shape, g.name
    # quantized modules store their weight in the dtype of their format (headers)
    for g in info.modules:
        if g.scheme in ("BF16", "FP16"):
            continue
        member = g.name.replace("*", "0")
        main = hdr.get(member + ".weight") or hdr.get(member + ".weight_packed")
        assert main is not None and main[0] in WEIGHT_DTYPES[g.weight.format], (g.name, main)
    # lm_head is kept 16-bit by both producers' defaults
    assert all(g.scheme == "BF16" for g in info.modules_with_role("lm_head"))


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("llmc-")))
def test_oracle_agrees_with_compressed_tensors_metadata(oracle_dir, name):
    folder = oracle_dir / name
    qc = json.loads((folder / "config.json").read_text())["quantization_config"]
    info = inspect_checkpoint(str(folder))
    assert info.producer == "compressed-tensors" and info.quant_method == qc["format"]
    assert (info.kv_cache_quant is not None) == (qc.get("kv_cache_scheme") is not None)
    import re

    for g in info.modules:
        if g.role not in ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down"):
            continue
        member = g.name.replace("*", "0")
        hits = [grp for grp in qc["config_groups"].values()
                if any(t == "Linear" or (t.startswith("re:") and re.match(t[3:], member)) for t in grp["targets"])]
        assert len(hits) == 1, member
        w, a = hits[0]["weights"], hits[0]["input_activations"]
        assert g.weight.bits == w["num_bits"]
        assert ("float" if g.weight.format in ("nvfp4", "mxfp4") or g.weight.format.startswith("fp") else "int") \
            == w["type"]
        assert (g.act.format == "none") == (a is None)
        if a is not None:
            assert g.act.dynamic == (a["dynamic"] in (True, "local"))
    for ignored in qc["ignore"]:
        assert all(g.scheme == "BF16" for g in info.modules if g.name == ignored)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.startswith("mo-")))
def test_oracle_agrees_with_modelopt_metadata(oracle_dir, name):
    folder = oracle_dir / name
    hq = json.loads((folder / "hf_quant_config.json").read_text())["quantization"]
    info = inspect_checkpoint(str(folder))
    assert info.producer == "modelopt" and info.quant_method == hq["quant_algo"]
    assert info.kv_cache_quant == (hq["kv_cache_quant_algo"].lower() if hq["kv_cache_quant_algo"] else None)
    by_member = {}
    for g in info.modules:
        by_member[g.name] = g
    if hq["quant_algo"] == "MIXED_PRECISION":
        for layer, entry in hq["quantized_layers"].items():
            grp = next(g for g in info.modules if g.name == _collapse(layer))
            assert grp.scheme == MO_ALGO[entry["quant_algo"]], layer
    else:
        lin = [g for g in info.modules if g.role in ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down")]
        assert lin and all(g.scheme == MO_ALGO[hq["quant_algo"]] for g in lin)
    for ex in hq.get("exclude_modules", []):
        assert all(g.scheme == "BF16" for g in info.modules if g.name == ex)
    if hq["kv_cache_quant_algo"]:
        assert not any(f.code == "kv-scales-undeclared" for f in info.findings)
    # ModelOpt shares global scales across fused q/k/v and gate/up: no mismatch may be reported
    assert not any(f.code == "fused-global-scale-mismatch" for f in info.findings)


def _collapse(name: str) -> str:
    import re

    return re.sub(r"\.\d+(?=\.|$)", ".*", name)

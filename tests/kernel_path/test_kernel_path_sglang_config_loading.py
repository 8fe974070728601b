"""SGLang 0.5.23's config-loading stage and refusals as its code runs (issue 26 points 4 and 5).

4. GPTQ that Marlin cannot take (a GPU below sm_80, sym false, an unsupported group size, a missing key):
   CUDA builds register no plain 'gptq' method, so the model config stops with "Unknown quantization method:
   gptq" before any layer is built (configs/model_config.py:2150-2155@0.5.23).
5. compressed-tensors W4A16 / W4A16-NVFP4 on sm_75 fail the per-scheme check (its tuple message), not the
   loader's; --kv-cache-dtype auto takes FP8 from any quant config carrying kv_cache_quant_algo.
The checkpoints are real config folders written here (config.json only) and read by the advisor's inspector.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.kernel_path.explain import explain

from kernel_path_builders import checkpoint, gpu

DEMOS = Path(__file__).resolve().parents[2] / "profiles" / "demo"
GPTQ = json.loads((DEMOS / "llama-3.1-8b-gptq-int4" / "config.json").read_text())


def _gptq_folder(tmp_path: Path, **changes) -> Path:
    cfg = json.loads(json.dumps(GPTQ))
    q = cfg["quantization_config"]
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    d = tmp_path / "gptq"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("changes,gid", [
    ({}, "t4"),                             # Marlin lists nothing below sm_80
    ({"sym": False}, "rtx-3090"),           # (4, False) is not in GPTQMarlinConfig.TYPE_MAP
    ({"group_size": 256}, "h100"),          # not one of -1/32/64/128
    ({"desc_act": None}, "rtx-3090"),       # a missing key: no conversion
    ({"checkpoint_format": "marlin"}, "rtx-3090"),   # already Marlin-packed: not converted
])
def test_gptq_marlin_cannot_take_is_unknown_method(tmp_path, changes, gid):
    ck = inspect_checkpoint(str(_gptq_folder(tmp_path, **changes)))
    exp = explain(ck, gpu(gid), engine="sglang")
    assert not exp.runs
    assert exp.load is not None and exp.load.refused and exp.load.method == "gptq"
    assert exp.load.error.startswith("ValueError: Unknown quantization method: gptq.")
    assert all(not d.runs and d.error == exp.load.error for d in exp.decisions)
    # the old rule's RuntimeError (a removed non-Marlin kernel) cannot happen: the model never gets a layer
    assert not any("non-Marlin GPTQ" in (d.error or "") for d in exp.decisions)


@pytest.mark.parametrize("gid", ["a100", "rtx-3090", "h100", "rtx-5090"])
def test_gptq_marlin_compatible_converts(tmp_path, gid):
    ck = inspect_checkpoint(str(_gptq_folder(tmp_path)))
    exp = explain(ck, gpu(gid), engine="sglang")
    assert exp.runs and exp.load.method == "gptq_marlin"
    d = next(d for d in exp.decisions if d.layer_class == "dense_linear" and d.checkpoint_scheme == "W4A16-INT4")
    assert d.kernel == "gptq_marlin / awq_marlin"


def test_gptq_refusal_in_explain_json(tmp_path, capsys):
    folder = _gptq_folder(tmp_path)
    code = main(["explain", str(folder), "--gpu", "t4", "--engine", "sglang", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 4
    load = doc["explanation"]["load"]
    assert load["method"] == "gptq" and "Unknown quantization method: gptq" in load["error"]


@pytest.mark.parametrize("preset,scheme", [("nvfp4-w4a4-ct", "W4A4-NVFP4")])
def test_ct_w4a16_nvfp4_on_turing_is_the_scheme_check(preset, scheme):
    exp = explain(checkpoint(preset), gpu("t4"), engine="sglang")
    d = next(d for d in exp.decisions if d.layer_class == "dense_linear" and d.checkpoint_scheme == scheme)
    assert not d.runs
    assert d.error == ("RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min "
                       "capability: 80. ', 'Current capability: 75.')")


def test_ct_w4a16_int4_on_turing_is_the_scheme_check():
    from dataclasses import replace

    ck = checkpoint("gptq-int4")
    ck = replace(ck, producer="compressed-tensors", quant_method="pack-quantized")
    d = next(d for d in explain(ck, gpu("t4"), engine="sglang").decisions
             if d.layer_class == "dense_linear" and d.checkpoint_scheme == "W4A16-INT4")
    assert not d.runs and "Quantization scheme is not supported for " in d.error
    ok = next(d for d in explain(ck, gpu("rtx-3090"), engine="sglang").decisions
              if d.layer_class == "dense_linear" and d.checkpoint_scheme == "W4A16-INT4")
    assert ok.runs and ok.kernel == "Marlin WNA16 (CompressedTensorsWNA16)"


@pytest.mark.parametrize("preset", ["nvfp4-w4a4", "fp8-dynamic", "fp8-ct-dynamic"])
def test_fp8_kv_from_any_config_that_carries_it(preset):
    d = next(d for d in explain(checkpoint(preset, kv="fp8"), gpu("h100"), engine="sglang").decisions
             if d.layer_class == "attention_kv")
    assert d.kv_cache_dtype == "fp8_e4m3"
    assert any("kv_cache_quant_algo" in r for r in d.reasons)

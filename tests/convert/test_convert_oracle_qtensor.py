"""Bit-exactness of the NumPy quantizer against nvidia-modelopt 0.47's NVFP4QTensor on raw tensors.
One oracle run (session fixture) quantizes every case; each test compares its own cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from advisor.convert import nvfp4_math as m
from tests.convert.conftest import run_oracle

pytestmark = pytest.mark.oracle


def _bf16(x) -> np.ndarray:
    return m.f32_to_bf16(np.asarray(x, np.float32))


def _single_cases(rng) -> dict[str, np.ndarray]:
    cases = {
        "randn_64x256": rng.standard_normal((64, 256)),
        "uniform_33x48": rng.uniform(-3, 3, (33, 48)),
        "laplace_16x1024": rng.laplace(size=(16, 1024)) * 0.02,
        "row_1x16": rng.standard_normal((1, 16)),
        "tiny_8x64": rng.standard_normal((8, 64)) * 1e-30,
        "wide_range_32x128": rng.standard_normal((32, 128)) * np.exp(rng.uniform(-25, 5, (32, 128))),
    }
    x = rng.standard_normal((48, 128)) * 1e-2
    x[3, 5] = 60.0                       # outlier drives the global scale
    x[7, :16] = 0.0                      # all-zero block -> scale 1.0
    x[8, 16:32] = -0.0                   # -0.0 inputs -> code 0, not 0x8
    x[9, :16] = 1e-9                     # underflowing block -> clamp to 2^-9
    x[10, 32:48] = -1e-9                 # tiny negatives -> FP4 -0 (0x8)
    x[11] *= 1e-5                        # subnormal block scales
    cases["outliers_48x128"] = x
    # exact E2M1 ties and saturation: a block max of 6 makes the scale exactly 1 * wsf2
    t = np.array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5, -5, 0.1])
    cases["ties_4x32"] = np.tile(t, (4, 2)) * np.array([[1], [2.0**-3], [2.0**5], [0.5]])
    cases["zeros_8x32"] = np.zeros((8, 32))    # amax 0: ModelOpt's NaN scales, reproduced
    return {k: _bf16(v) for k, v in cases.items()}


def _all_cases():
    rng = np.random.default_rng(7)
    single = _single_cases(rng)
    fused = {"q": _bf16(rng.standard_normal((64, 128))), "k": _bf16(rng.standard_normal((32, 128)) * 4),
             "v": _bf16(rng.standard_normal((32, 128)) * 0.1), "a": _bf16(rng.standard_normal((4, 128)) * 1e-3)}
    half = {"h1": rng.standard_normal((32, 64)).astype(np.float16).view(np.uint16),
            "h2": (rng.standard_normal((16, 256)) * 1e-4).astype(np.float16).view(np.uint16)}
    groups = ([{"dtype": "bf16", "names": [n]} for n in single] + [{"dtype": "bf16", "names": list(fused)}]
              + [{"dtype": "f16", "names": [n]} for n in half])
    return {**single, **fused, **half}, groups


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qtensor")
    cases, groups = _all_cases()
    np.savez(tmp / "in.npz", **cases)
    (tmp / "groups.json").write_text(json.dumps({"groups": groups}))
    run_oracle("nvfp4_qtensor.py", str(tmp / "in.npz"), str(tmp / "groups.json"), str(tmp / "out.npz"))
    return cases, groups, dict(np.load(tmp / "out.npz"))


def _amax(bits, dtype) -> float:
    if dtype == "bf16":
        return float(m.bf16_to_f32(np.array([m.amax_of_bf16(bits)], np.uint16))[0])
    return float(np.abs(bits.view(np.float16).astype(np.float32)).max())


def _check(oracle, select) -> int:
    cases, groups, ref = oracle
    checked = 0
    for group in groups:
        names, dtype = group["names"], group["dtype"]
        if not select(names, dtype):
            continue
        wsf2 = m.global_scale(max(_amax(cases[n], dtype) for n in names))
        for name in names:
            if dtype == "bf16":
                packed, scale = m.quantize_bf16_rows(cases[name], wsf2)
            else:
                packed, scale = m.quantize_f32_rows(cases[name].view(np.float16).astype(np.float32), wsf2)
            assert packed.tobytes() == ref[f"{name}.weight"].tobytes(), f"{name}: packed weight differs"
            assert scale.tobytes() == ref[f"{name}.weight_scale"].tobytes(), f"{name}: block scales differ"
            assert wsf2.tobytes() == ref[f"{name}.weight_scale_2"].tobytes(), f"{name}: global scale differs"
            checked += 1
    return checked


def test_bf16_tensors_match_nvfp4qtensor(oracle):
    assert _check(oracle, lambda names, dtype: dtype == "bf16" and len(names) == 1) == 9


def test_fused_group_joint_scale_matches(oracle):
    assert _check(oracle, lambda names, dtype: len(names) > 1) == 4
    cases = oracle[0]
    # the small member quantized alone would get another global scale: the sharing matters
    alone = m.global_scale(_amax(cases["a"], "bf16"))
    joint = m.global_scale(max(_amax(cases[n], "bf16") for n in "qkva"))
    assert alone != joint


def test_fp16_tensors_match_nvfp4qtensor(oracle):
    assert _check(oracle, lambda names, dtype: dtype == "f16") == 2


def test_row_chunking_does_not_change_bytes(oracle):
    cases, _, ref = oracle
    bits = cases["laplace_16x1024"]
    wsf2 = m.global_scale(_amax(bits, "bf16"))
    parts = [m.quantize_bf16_rows(bits[a:a + 3], wsf2) for a in range(0, 16, 3)]
    assert np.concatenate([p for p, _ in parts]).tobytes() == ref["laplace_16x1024.weight"].tobytes()
    assert np.concatenate([s for _, s in parts]).tobytes() == ref["laplace_16x1024.weight_scale"].tobytes()

"""The shipped GPU table validates and obeys the architecture rules from issue 2."""

from __future__ import annotations

import math

import pytest

from advisor.gpu_spec import NOT_SUPPORTED, PEAK_KEYS
from advisor.gpu_table import ARCHS, load_gpu_table, load_sources


def supported(spec, key) -> bool:
    return spec.peaks[key] is not NOT_SUPPORTED


def test_at_least_35_nvidia_gpus_all_archs(table):
    assert len(table) >= 35
    assert {s.arch for s in table} == set(ARCHS)
    assert all("mi300" not in s.id and "AMD" not in s.name for s in table)
    ccs = {s.cc for s in table}
    # every compute capability the tool cares about, incl. DGX Spark GB10 (12.1) and Jetson Thor (11.0)
    assert {(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)} <= ccs
    segments = {s.segment for s in table}
    assert segments == {"consumer", "workstation", "datacenter", "embedded"}
    names = " ".join(s.name for s in table)
    assert "GB10" in names and "Thor" in names


def test_every_peak_key_is_explicit(table):
    for s in table:
        assert tuple(s.peaks) == PEAK_KEYS, s.id
        for k, v in s.peaks.items():
            assert v is None or v is NOT_SUPPORTED or (isinstance(v, float) and v > 0), (s.id, k, v)


@pytest.mark.parametrize("keys,threshold", [
    (("bf16", "tf32"), (8, 0)),
    (("fp8_fp32acc", "fp8_fp16acc"), (8, 9)),
    (("fp4", "fp6"), (10, 0)),
])
def test_format_supported_iff_cc(table, keys, threshold):
    for s in table:
        for k in keys:
            assert supported(s, k) == (s.cc >= threshold), f"{s.id} cc {s.cc_str}: {k}={s.peaks[k]!r}"


def test_int4_only_before_hopper(table):
    for s in table:
        assert supported(s, "int4") == (s.cc < (9, 0)), f"{s.id}: int4={s.peaks['int4']!r}"


def test_fp16_and_int8_supported_everywhere(table):
    for s in table:
        assert supported(s, "fp16_fp32acc") and supported(s, "fp16_fp16acc") and supported(s, "int8"), s.id


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.01, abs_tol=0.1)


def test_geforce_fp32_accumulate_is_half_rate(table):
    checked = 0
    for s in table:
        for f32, f16 in (("fp16_fp32acc", "fp16_fp16acc"), ("fp8_fp32acc", "fp8_fp16acc")):
            a, b = s.peaks[f32], s.peaks[f16]
            if not (isinstance(a, float) and isinstance(b, float)):
                continue
            if "GeForce" in s.name:
                assert _close(a, b / 2), f"{s.id}: {f32}={a} is not half of {f16}={b}"
                checked += 1
            else:  # professional / datacenter parts: full-rate FP32 accumulate
                assert _close(a, b), f"{s.id}: {f32}={a} != {f16}={b}"
    assert checked >= 15


def test_bf16_runs_at_the_fp32_accumulate_rate(table):
    for s in table:
        a, b = s.peaks["bf16"], s.peaks["fp16_fp32acc"]
        if isinstance(a, float) and isinstance(b, float):
            assert _close(a, b), s.id


def test_ids_and_pci_ids_unique(table):
    ids = [s.id for s in table]
    assert len(ids) == len(set(ids))
    pci = [d for s in table for d in s.pci_device_ids]
    assert len(pci) == len(set(pci))
    assert len(pci) >= 20


def test_sources_resolve(table):
    sources = load_sources()
    for s in table:
        assert s.sources, s.id
        for key in s.sources:
            assert key in sources and sources[key]["title"], (s.id, key)


def test_flags_point_at_real_values(table):
    for s in table:
        for k in s.halved_from_sparse:
            assert isinstance(s.peaks[k], float), (s.id, k)
        for k in s.derived_fields:
            if k in PEAK_KEYS:
                assert s.peaks[k] is not NOT_SUPPORTED, (s.id, k)
        assert s.confidence in ("high", "medium", "low")
        assert not s.derived


def test_hopper_tensor_clock_below_boost(table):
    for s in table:
        if s.tensor_peak_clock_mhz is not None:
            assert s.boost_clock_mhz is None or s.tensor_peak_clock_mhz <= s.boost_clock_mhz, s.id


def test_load_is_cached_per_file_version(write_table):
    p = write_table()
    first = load_gpu_table(p)
    assert load_gpu_table(p) is first
    p.write_text(p.read_text().replace("name: GeForce RTX 3090\n", "name: GeForce RTX 3090 X\n"))
    import os
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again = load_gpu_table(p)
    assert again is not first
    assert any(s.name == "GeForce RTX 3090 X" for s in again)

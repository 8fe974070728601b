"""Tensor-core capability facts (profiles/arch.yaml) and their agreement with the GPU table."""

from __future__ import annotations

import copy

import pytest
import yaml

from advisor.arch_caps import FORMATS, caps_for, default_path
from advisor.errors import BadInput
from advisor.gpu_spec import NOT_SUPPORTED
from advisor.kernel_path.model import MMA_CLASSES


@pytest.mark.parametrize("cc,bf16,e4m3,nvfp4,int4", [
    ((7, 5), None, None, None, "imma_int4"),
    ((8, 0), "hmma_bf16", None, None, "imma_int4"),
    ((8, 6), "hmma_bf16", None, None, "imma_int4"),
    ((8, 9), "hmma_bf16", "qmma_e4m3", None, "imma_int4"),
    ((9, 0), "wgmma_bf16", "wgmma_e4m3", None, None),
    ((10, 0), "tcgen05_bf16", "tcgen05_e4m3", "tcgen05_fp4_block_scaled", None),
    ((10, 3), "tcgen05_bf16", "tcgen05_e4m3", "tcgen05_fp4_block_scaled", None),
    ((11, 0), "tcgen05_bf16", "tcgen05_e4m3", "tcgen05_fp4_block_scaled", None),
    ((12, 0), "hmma_bf16", "qmma_e4m3", "mma_sync_fp4_block_scaled", None),
    ((12, 1), "hmma_bf16", "qmma_e4m3", "mma_sync_fp4_block_scaled", None),
])
def test_mma_class_per_cc(cc, bf16, e4m3, nvfp4, int4):
    caps = caps_for(cc)
    assert caps.known and caps.exact and caps.cc == cc
    assert caps.mma_for("bf16") == bf16
    assert caps.mma_for("fp8") == caps.mma_for("e4m3") == e4m3
    assert caps.mma_for("nvfp4") == caps.mma_for("fp4") == nvfp4
    assert caps.mma_for("int4") == int4
    assert caps.has_bf16 == (bf16 is not None)
    assert caps.has_fp8_mma == (e4m3 is not None)
    assert caps.has_fp4_mma == (nvfp4 is not None)
    assert caps.has_int4_mma == (int4 is not None)
    assert caps.target == f"sm_{cc[0]}{cc[1]}"


def test_every_fact_has_a_source_and_a_known_class():
    for cc in [(7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)]:
        caps = caps_for(cc)
        assert set(caps.mma) == set(FORMATS)
        for fmt in FORMATS:
            assert caps.mma_for(fmt) is None or caps.mma_for(fmt) in MMA_CLASSES
            assert caps.source_for(fmt).strip(), (cc, fmt)


def test_arch_specific_targets():
    assert caps_for((9, 0)).arch_specific_target == "sm_90a"
    assert caps_for((12, 1)).arch_specific_target == "sm_121a"
    assert caps_for((8, 9)).arch_specific_target is None
    assert "wgmma.mma_async" in caps_for((9, 0)).instructions
    assert "tcgen05.mma" not in caps_for((12, 0)).instructions
    assert "kind::mxf4nvf4" in caps_for((12, 0)).block_scaled_kinds


def test_legacy_thor_cc_maps_to_sm110_record():
    assert caps_for((10, 1)).mma == caps_for((11, 0)).mma
    assert caps_for((10, 1)).arch_specific_target == "sm_101a"


def test_unknown_minor_borrows_nearest_lower_record():
    caps = caps_for((12, 2))
    assert caps.known and not caps.exact and caps.matched_cc == (12, 1)
    assert caps.has_fp4_mma


@pytest.mark.parametrize("cc", [(7, 0), (6, 1), (13, 0)])
def test_unknown_major_assumes_nothing(cc):
    caps = caps_for(cc)
    assert not caps.known
    assert all(caps.mma_for(f) is None for f in FORMATS)
    assert "not in profiles/arch.yaml" in caps.source_for("bf16")


def test_unknown_format_is_an_error():
    with pytest.raises(KeyError):
        caps_for((8, 9)).mma_for("fp3")


def test_caps_agree_with_gpu_table(table):
    """A format the GPU table lists as not supported has no MMA class, and vice versa."""
    pairs = (("bf16", "bf16"), ("fp8_fp32acc", "e4m3"), ("fp4", "nvfp4"), ("int4", "int4"), ("int8", "int8"))
    for spec in table:
        caps = caps_for(spec.cc)
        assert caps.exact, spec.id
        for peak_key, fmt in pairs:
            has_mma = caps.mma_for(fmt) is not None
            assert has_mma == (spec.peaks[peak_key] is not NOT_SUPPORTED), (spec.id, fmt)


@pytest.fixture
def write_arch(tmp_path):
    raw = yaml.safe_load(default_path().read_text(encoding="utf-8"))

    def write(mutate):
        data = copy.deepcopy(raw)
        mutate(data)
        path = tmp_path / "arch.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    return write


def _mma(i, fmt, value):
    def mutate(d):
        d["archs"][i]["mma"][fmt] = value
    return mutate


@pytest.mark.parametrize("mutate,expect", [
    (_mma(0, "f16", "hmma_f64"), "hmma_f64"),
    (lambda d: d["archs"][0].update(colour="green"), "colour"),
    (lambda d: d["archs"][0]["fact_sources"].update(f16="NOPE"), "NOPE"),
    (lambda d: d["archs"][0]["mma"].pop("int4"), "archs[0].mma"),
    (lambda d: d["archs"][1]["cc"].append("7.5"), "listed twice"),
    (lambda d: d["archs"][0].update(cc=[7.5]), "X.Y"),
])
def test_invalid_arch_table(write_arch, mutate, expect):
    path = write_arch(mutate)
    with pytest.raises(BadInput) as info:
        caps_for((7, 5), path=path)
    assert str(path.resolve()) in str(info.value) and expect in str(info.value)


@pytest.mark.parametrize("key,value", [("arch", "volta"), ("sparse_2_4", "yes"), ("instructions", "mma.sync")])
def test_invalid_arch_record_fields(write_arch, key, value):
    path = write_arch(lambda d: d["archs"][2].update({key: value}))
    with pytest.raises(BadInput, match=rf"archs\[2\]\.{key}"):
        caps_for((8, 9), path=path)

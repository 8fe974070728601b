"""Broken GPU tables fail at load with one BadInput naming the file and the first problem."""

from __future__ import annotations

import pytest

from advisor.errors import EXIT_BAD_INPUT, BadInput
from advisor.gpu_table import get_gpu, load_gpu_table


def _entry(data, gpu_id):
    return next(g for g in data["gpus"] if g["id"] == gpu_id)


def _set(gpu_id, key, value):
    def mutate(data):
        _entry(data, gpu_id)[key] = value
    return mutate


def _set_peak(gpu_id, key, value):
    def mutate(data):
        _entry(data, gpu_id)["dense_tensor_peak"][key] = value
    return mutate


def _dup_id(data):
    data["gpus"][1]["id"] = data["gpus"][0]["id"]


def _dup_pci(data):
    _entry(data, "rtx-4090")["pci_device_ids"] = ["0x2204"]


def _drop_peak(data):
    del _entry(data, "rtx-3090")["dense_tensor_peak"]["fp4"]


def _unknown_top(data):
    data["vendors"] = ["NVIDIA"]


CASES = [
    ("extra key", _set("rtx-3090", "vendor", "NVIDIA"), ["rtx-3090", "vendor", "unknown key"]),
    ("wrong type", _set("rtx-3090", "sm_count", "many"), ["rtx-3090", "sm_count"]),
    ("cc as float", _set("rtx-3090", "compute_capability", 8.6), ["rtx-3090", "compute_capability"]),
    ("cc pre-Turing", _set("rtx-3090", "compute_capability", "6.1"), ["rtx-3090", "6.1"]),
    ("cc garbage", _set("rtx-3090", "compute_capability", "eight"), ["rtx-3090", "compute_capability"]),
    ("bad arch", _set("rtx-3090", "arch", "volta"), ["rtx-3090", "arch"]),
    ("bad segment", _set("rtx-3090", "segment", "gaming"), ["rtx-3090", "segment"]),
    ("bad pci id", _set("rtx-3090", "pci_device_ids", ["2204"]), ["rtx-3090", "0x2204"]),
    ("negative peak", _set_peak("rtx-3090", "bf16", -1), ["rtx-3090", "bf16"]),
    ("missing peak key", _drop_peak, ["rtx-3090", "fp4"]),
    ("n/s with a value", _set_peak("rtx-3090", "fp8_fp32acc", 100.0), ["rtx-3090", "fp8_fp32acc", "not supported"]),
    ("unknown peak in not_supported", _set("rtx-3090", "not_supported", ["fp3"]), ["rtx-3090", "not_supported"]),
    ("unknown source", _set("rtx-3090", "sources", ["NOPE"]), ["rtx-3090", "NOPE"]),
    ("no source", _set("rtx-3090", "sources", []), ["rtx-3090", "sources"]),
    ("duplicate id", _dup_id, ["duplicate id"]),
    ("duplicate pci id", _dup_pci, ["rtx-4090", "0x2204", "rtx-3090"]),
    ("unknown top-level key", _unknown_top, ["vendors"]),
    ("bad confidence", _set("rtx-3090", "confidence", "certain"), ["rtx-3090", "confidence"]),
]


@pytest.mark.parametrize("label,mutate,expect", CASES, ids=[c[0] for c in CASES])
def test_invalid_table_names_file_and_problem(write_table, label, mutate, expect):
    path = write_table(mutate)
    with pytest.raises(BadInput) as info:
        load_gpu_table(path)
    msg = str(info.value)
    assert msg.startswith(f"{path.resolve()}: "), msg
    assert "\n" not in msg
    for part in expect:
        assert part in msg, (part, msg)
    assert info.value.exit_code == EXIT_BAD_INPUT


@pytest.mark.parametrize("text,expect", [
    ("gpus: [\n  - id: x\n", "not valid YAML"),
    ("- just\n- a list\n", "mapping"),
    ("", "mapping"),
])
def test_unparseable_files(write_table, text, expect):
    path = write_table(text=text)
    with pytest.raises(BadInput) as info:
        load_gpu_table(path)
    assert str(path.resolve()) in str(info.value) and expect in str(info.value)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(BadInput) as info:
        load_gpu_table(path)
    assert str(path) in str(info.value)


def test_lookups_surface_bad_table(write_table):
    path = write_table(_set("t4", "sm_count", 0))
    with pytest.raises(BadInput, match="t4"):
        get_gpu("t4", path=path)

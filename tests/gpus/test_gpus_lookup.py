"""Finding table entries by id, name, NVML name, PCI device id, and filtering."""

from __future__ import annotations

import pytest

from advisor.errors import EXIT_USAGE, UsageError
from advisor.gpu_table import filter_gpus, find_by_name, find_by_pci_device_id, get_gpu, parse_cc


@pytest.mark.parametrize("query", ["rtx-3090", "RTX-3090", "GeForce RTX 3090", "NVIDIA GeForce RTX 3090",
                                   "  geforce rtx 3090 ", "RTX 3090"])
def test_get_gpu_by_id_name_alias(query):
    assert get_gpu(query).id == "rtx-3090"


def test_get_gpu_unknown_lists_close_matches():
    with pytest.raises(UsageError) as info:
        get_gpu("rtx-3095")
    msg = str(info.value)
    assert "rtx-3095" in msg and "rtx-3090" in msg
    assert info.value.exit_code == EXIT_USAGE


def test_get_gpu_partial_id_suggests_ids_containing_it_first():
    with pytest.raises(UsageError) as info:
        get_gpu("a100")           # four cards: no guess ("3090" names one card: tests/gpus/test_gpus_id_spellings.py)
    hint = str(info.value).split("close matches: ")[1].split(" (")[0].split(", ")
    assert sorted(hint) == ["a100-40gb-pcie", "a100-40gb-sxm", "a100-80gb-pcie", "a100-80gb-sxm"]


def test_get_gpu_unknown_without_matches():
    with pytest.raises(UsageError, match="unknown GPU"):
        get_gpu("zzzzzzzz")


@pytest.mark.parametrize("devid", ["0x2204", "0X2204", "2204", 0x2204, 0x220410DE, "0x220410DE"])
def test_find_by_pci_device_id_forms(devid):
    assert find_by_pci_device_id(devid).id == "rtx-3090"


@pytest.mark.parametrize("devid,gpu_id", [
    ("0x1E07", "rtx-2080-ti"), ("0x1E04", "rtx-2080-ti"), ("0x2330", "h100-sxm"), ("0x2331", "h100-pcie"),
    ("0x20B2", "a100-80gb-sxm"), ("0x20F1", "a100-40gb-pcie"), ("0x2B85", "rtx-5090"), ("0x2684", "rtx-4090"),
    ("0x2901", "b200"), ("0x26B9", "l40s"),
])
def test_find_by_pci_device_id_table(devid, gpu_id):
    assert find_by_pci_device_id(devid).id == gpu_id


@pytest.mark.parametrize("devid", ["0xFFFF", 0x0001, "not-hex", ""])
def test_find_by_pci_device_id_unknown(devid):
    assert find_by_pci_device_id(devid) is None


@pytest.mark.parametrize("nvml_name,gpu_id", [
    ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"),
    ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb-sxm"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA GeForce RTX 3060", "rtx-3060-12gb"),     # memory-size variant dropped by NVML
    ("NVIDIA GeForce RTX 3080", "rtx-3080"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA GB10", "dgx-spark-gb10"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-bw-ws"),
    ("nvidia geforce rtx 5090", "rtx-5090"),
])
def test_find_by_name(nvml_name, gpu_id):
    assert find_by_name(nvml_name).id == gpu_id


def test_find_by_name_memory_disambiguates():
    # NVML calls both RTX 4060 Ti variants "NVIDIA GeForce RTX 4060 Ti"; only the 16 GB one is listed.
    assert find_by_name("NVIDIA GeForce RTX 4060 Ti", memory_gb=17.17).id == "rtx-4060-ti-16gb"
    assert find_by_name("NVIDIA GeForce RTX 4060 Ti", memory_gb=8.59) is None
    assert find_by_name("NVIDIA GeForce RTX 3060", memory_gb=8.0) is None


@pytest.mark.parametrize("nvml_name", ["NVIDIA Future GPU X", "", "NVIDIA", "NVIDIA A100"])
def test_find_by_name_unknown_or_ambiguous(nvml_name):
    # "NVIDIA A100" names no single entry (form factor and memory tell the four apart): no guess.
    assert find_by_name(nvml_name) is None


def test_filter_by_arch_and_cc(table):
    hopper = filter_gpus(arch="Hopper")
    assert hopper and all(s.arch == "hopper" for s in hopper)
    window = filter_gpus(cc_min="8.9", cc_max="9.0")
    assert {s.cc for s in window} == {(8, 9), (9, 0)}
    assert len(window) == sum(1 for s in table if (8, 9) <= s.cc <= (9, 0))
    fp4 = filter_gpus(cc_min=(10, 0))
    assert all(s.supports("fp4") or s.peaks["fp4"] is None for s in fp4)
    assert [s.id for s in filter_gpus(segment="embedded")] == ["jetson-agx-thor"]
    assert filter_gpus(arch="turing", cc_min="8.0") == ()
    assert filter_gpus() == table


@pytest.mark.parametrize("kwargs", [{"arch": "volta"}, {"segment": "gaming"}, {"cc_min": "eight"}])
def test_filter_rejects_bad_values(kwargs):
    with pytest.raises(UsageError):
        filter_gpus(**kwargs)


@pytest.mark.parametrize("text,cc", [("8.9", (8, 9)), ("sm_90a", (9, 0)), ("120", (12, 0)), ("sm_121", (12, 1)),
                                     ((10, 3), (10, 3))])
def test_parse_cc(text, cc):
    assert parse_cc(text) == cc

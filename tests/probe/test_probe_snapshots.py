"""The probe on recorded NVML snapshots: matching, derived figures, N/A handling, topology, MIG."""

from __future__ import annotations

import json

import pytest
from probe_fixtures import load_snapshot, snapshot_names

from advisor.doc import KeyValues
from advisor.gpu_spec import NOT_SUPPORTED, PEAK_KEYS
from advisor.gpu_table import get_gpu
from advisor.probe.report import capability_statements, probe_doc, probe_payload

MiB = 2**20

EXPECTED_STATUS = {"no_driver": "no-driver", "driver_not_loaded": "no-driver", "no_gpu": "no-gpu"}


def _bw(snap_dev: dict) -> float:
    """The documented formula, recomputed from the snapshot's own NVML answers."""
    width = snap_dev["nvmlDeviceGetMemoryBusWidth"]
    clock = snap_dev["nvmlDeviceGetMaxClockInfo"]["by_arg"]["2"]
    return round(width / 8 * clock * 2 / 1000, 1)


def _doc_text(doc) -> str:
    parts = []
    for b in doc.blocks:
        if isinstance(b, KeyValues):
            parts += [f"{k}: {v}" for k, v in b.pairs]
        else:
            parts.append(repr(b))
    return "\n".join(parts)


@pytest.mark.parametrize("name", snapshot_names())
def test_every_snapshot_probes_cleanly(name, probe_snapshot):
    result, fake = probe_snapshot(name)
    assert result.status == EXPECTED_STATUS.get(name, "ok")
    assert fake._initialised == 0, "nvmlInit without nvmlShutdown"
    assert len(result.devices) == len(load_snapshot(name)["devices"])
    # Every failure is a real pynvml error class, recorded by field and query.
    for d in result.devices:
        for f in d.na:
            assert f.error.startswith("NVMLError_") and f.query.startswith("nvml") and f.field
    payload = probe_payload(result)
    text = json.dumps(payload)            # fully JSON-able (NOT_SUPPORTED included)
    assert "NOT_SUPPORTED" not in text
    # Human output never prints a bare None.
    for b in probe_doc(result).blocks:
        if isinstance(b, KeyValues):
            assert all("None" not in v for _, v in b.pairs), b


def test_2080ti_pair_with_nvlink(probe_snapshot):
    result, _ = probe_snapshot("rtx2080ti_x2_nvlink")
    snap = load_snapshot("rtx2080ti_x2_nvlink")
    table = get_gpu("rtx-2080-ti")
    assert [d.spec.id for d in result.devices] == ["rtx-2080-ti", "rtx-2080-ti"]
    assert {d.match for d in result.devices} == {"pci-id"}
    for d, sd in zip(result.devices, snap["devices"]):
        assert d.nvml.pci_device_id == "0x1E07"
        assert d.nvml.cc == (7, 5)
        assert d.bandwidth.gbs == _bw(sd) == pytest.approx(table.bandwidth_gbs, rel=0.01)
        assert d.nvml.memory_total_bytes == 11264 * MiB
        assert [link.active for link in d.nvml.nvlinks] == [True, True]
        assert d.nvml.mig_current is None
        assert any(f.field == "mig_mode" and f.error == "NVMLError_NotSupported" for f in d.na)
        assert d.overrides == () and not any("power limit" in n for n in d.notes)
    (link,) = result.topology
    assert (link.a, link.b, link.kind, link.nvlink_links) == (0, 1, "nvlink", 2)
    assert link.pcie_path == "PHB" and link.p2p_read == "ok" and link.p2p_nvlink == "ok"
    assert link.description == "NVLink x2"
    assert [(p.gpu, p.pid, p.name) for p in result.foreign_processes] == [(0, 4242, "python3"), (1, 4242, "python3")]
    assert result.driver_version == "570.133.07" and result.cuda_driver_version == "12.8"
    caps = dict(capability_statements(result.devices[0].spec))
    assert caps["BF16"] == "no (needs sm_80+)"
    assert caps["FP8 tensor cores"] == "no (needs sm_89+)"
    assert caps["FP4 tensor cores"].startswith("no")
    assert caps["FP16 tensor cores"].startswith("yes")


def test_own_process_is_not_foreign(probe_snapshot):
    result, _ = probe_snapshot("rtx2080ti_x2_nvlink", own_pid=4242)
    assert len(result.processes) == 2 and all(p.own for p in result.processes)
    assert result.foreign_processes == ()


def test_3090_power_limit_below_tdp(probe_snapshot):
    result, _ = probe_snapshot("rtx3090")
    (d,) = result.devices
    table = get_gpu("rtx-3090")
    assert (d.spec.id, d.match) == ("rtx-3090", "pci-id")
    assert d.nvml.enforced_power_limit_w == 280 and d.nvml.default_power_limit_w == 350
    assert any("power limit 280 W is below the 350 W TDP" in n for n in d.notes)
    assert d.bandwidth.gbs == pytest.approx(table.bandwidth_gbs, rel=0.005)
    assert len(d.nvml.nvlinks) == 4 and not any(link.active for link in d.nvml.nvlinks)
    assert result.topology == ()


def test_4090_has_fp8_not_fp4_and_no_nvlink(probe_snapshot):
    result, _ = probe_snapshot("rtx4090")
    (d,) = result.devices
    assert d.spec.id == "rtx-4090"
    caps = dict(capability_statements(d.spec))
    assert caps["FP8 tensor cores"].startswith("yes")
    assert str(d.spec.peaks["fp8_fp16acc"]) in caps["FP8 tensor cores"].replace(" TFLOPS", "")
    assert caps["FP4 tensor cores"] == "no (needs sm_100+ or sm_120+)"
    assert d.nvml.nvlinks is None
    assert [f.error for f in d.na if f.field == "nvlink_state"] == ["NVMLError_NotSupported"]
    assert [(p.pid, p.name) for p in result.foreign_processes] == [(5120, "Xwayland")]


def test_5090_fp4_from_table(probe_snapshot):
    result, _ = probe_snapshot("rtx5090")
    (d,) = result.devices
    table = get_gpu("rtx-5090")
    assert d.spec.id == "rtx-5090" and d.nvml.cc == (12, 0)
    assert d.spec.supports("fp4") and d.spec.peaks["fp4"] == table.peaks["fp4"]
    assert d.bandwidth.gbs == pytest.approx(table.bandwidth_gbs, rel=0.005)
    assert d.nvml.pcie_max_gen == 5


def test_h100_pair_over_nvswitch(probe_snapshot):
    result, _ = probe_snapshot("h100_sxm_x2")
    table = get_gpu("h100-sxm")
    assert [d.spec.id for d in result.devices] == ["h100-sxm"] * 2
    for d in result.devices:
        assert sum(link.active for link in d.nvml.nvlinks) == 18
        assert d.nvml.max_customer_boost_mhz == 1980
        assert d.nvml.mig_current is False and d.nvml.mig_devices == ()
        assert d.bandwidth.gbs == pytest.approx(table.bandwidth_gbs, rel=0.05)
        assert not any("bandwidth" in n for n in d.notes)
    (link,) = result.topology
    assert (link.kind, link.nvlink_links, link.pcie_path) == ("nvswitch", 0, "SYS")
    assert {p.name for p in result.foreign_processes} == {"vllm"}


def test_a100_with_mig(probe_snapshot):
    result, fake = probe_snapshot("a100_mig")
    (d,) = result.devices
    assert (d.spec.id, d.match) == ("a100-40gb-sxm", "pci-id")
    assert d.nvml.mig_current is True and d.nvml.mig_pending is True
    assert [m.index for m in d.nvml.mig_devices] == [0, 1]
    assert [m.gpu_instance_id for m in d.nvml.mig_devices] == [1, 2]
    assert all(m.sm_count == 42 and m.memory_total_bytes == 19968 * MiB for m in d.nvml.mig_devices)
    assert all(m.uuid.startswith("MIG-") for m in d.nvml.mig_devices)
    assert any("MIG is enabled" in n and "2 MIG slice" in n for n in d.notes)
    assert d.nvml.util_gpu_pct is None and any(f.field == "utilization" for f in d.na)
    # All seven slots were asked; the empty ones are not failures.
    assert fake.calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 7
    assert not any(f.field == "mig_handle" for f in d.na)
    text = _doc_text(probe_doc(result))
    assert "enabled (2 MIG devices)" in text


def test_unknown_future_card_gets_a_derived_spec(probe_snapshot):
    result, _ = probe_snapshot("unknown_future")
    (d,) = result.devices
    s = d.spec
    assert d.match == "derived" and s.derived and s.confidence == "derived"
    assert s.id == "nvml-nvidia-geforce-rtx-6090" and s.arch == "blackwell" and s.cc == (12, 3)
    sm, clock = 24576 // 128, 3200                     # cores / 128 per SM; NVML max SM clock
    assert s.sm_count == sm and s.boost_clock_mhz == clock
    # sm_12x GeForce per-SM-per-clock rates (gpu-specs.md derivation rules)
    for key, rate in {"fp4": 4096, "fp8_fp16acc": 2048, "fp8_fp32acc": 1024, "fp16_fp16acc": 1024,
                      "fp16_fp32acc": 512, "int8": 2048}.items():
        assert s.peaks[key] == pytest.approx(sm * rate * clock / 1e6, abs=0.05), key
        assert key in s.derived_fields
    assert s.peaks["int4"] is NOT_SUPPORTED and s.peaks["fp6"] is None
    assert s.memory_gb == 48.0 and s.bandwidth_gbs == _bw(load_snapshot("unknown_future")["devices"][0])
    assert s.tdp_w == 600 and "tdp_w" in s.derived_fields
    assert any("assumed sm_12x family rates" in n for n in d.notes)
    assert any("upper bound" in n for n in d.notes)        # no customer boost clock on GeForce
    caps = dict(capability_statements(s))
    assert caps["FP4 tensor cores"].startswith("yes") and "derived" in caps["FP4 tensor cores"]


def test_derived_spec_leaves_segment_dependent_rates_unknown(probe_snapshot):
    import dataclasses

    from advisor.probe.derive import derived_spec

    result, _ = probe_snapshot("unknown_future")
    raw = dataclasses.replace(result.devices[0].nvml, name="NVIDIA Xyz 9000")
    spec, notes = derived_spec(raw)
    assert spec.peaks["fp16_fp32acc"] is None and spec.peaks["bf16"] is None
    assert spec.peaks["fp16_fp16acc"] is not None and spec.peaks["fp4"] is not None
    assert any("FP32-accumulate" in n for n in notes)
    # A capability this far in the future has no rates at all, and says so.
    far = dataclasses.replace(raw, cc=(14, 0))
    spec, notes = derived_spec(far)
    assert spec.arch == "unknown" and all(spec.peaks[k] is None for k in PEAK_KEYS if k != "int4")
    assert any("no per-SM rates" in n for n in notes)


def test_modded_2080ti_keeps_entry_uses_probed_memory(probe_snapshot):
    result, _ = probe_snapshot("rtx2080ti_22gb_modded")
    (d,) = result.devices
    table = get_gpu("rtx-2080-ti")
    assert d.spec.id == "rtx-2080-ti" and not d.spec.derived
    (o,) = d.overrides
    assert (o.field, o.table_value, o.probed_value) == ("memory_gb", table.memory_gb, 22.0)
    assert d.spec.memory_gb == 22.0 and d.spec.peaks == table.peaks
    assert any("200 W is below the 250 W TDP" in n for n in d.notes)


def test_consumer_card_not_supported_queries_become_na(probe_snapshot):
    result, _ = probe_snapshot("consumer_not_supported")
    (d,) = result.devices
    n = d.nvml
    assert d.spec.id == "rtx-3060-12gb"
    assert n.memory_bus_width_bits is None and n.max_mem_clock_mhz is None and d.bandwidth is None
    assert n.power_limit_w is None and n.enforced_power_limit_w is None and n.util_gpu_pct is None
    assert n.processes is None and n.cuda_cores is None and n.pcie_curr_gen is None
    errors = {f.field: f.error for f in d.na}
    assert errors["memory_bus_width"] == "NVMLError_NotSupported"
    assert errors["processes"] == "NVMLError_NoPermission"
    assert errors["cuda_cores"] == "NVMLError_FunctionNotFound"
    assert n.max_sm_clock_mhz == 2100 and n.pcie_max_gen == 4   # what did answer is kept
    text = _doc_text(probe_doc(result))
    assert "Memory bandwidth: N/A (Not Supported); table 360 GB/s" in text
    assert "Power limit: N/A (Not Supported)" in text
    assert "Processes using GPU memory: N/A" in text


def test_heterogeneous_box(probe_snapshot):
    result, _ = probe_snapshot("hetero_4090_3090x2")
    assert [d.spec.id for d in result.devices] == ["rtx-4090", "rtx-3090", "rtx-3090"]
    assert any("heterogeneous" in n for n in result.notes)
    kinds = {(link.a, link.b): (link.kind, link.pcie_path, link.p2p_read) for link in result.topology}
    assert kinds[(0, 1)] == ("pcie", "SYS", "GPU not supported")
    assert kinds[(1, 2)] == ("pcie", "NODE", "chipset not supported")


@pytest.mark.parametrize("name,status", [("no_driver", "no-driver"), ("driver_not_loaded", "no-driver"),
                                         ("no_gpu", "no-gpu")])
def test_no_driver_no_gpu(name, status, probe_snapshot):
    result, fake = probe_snapshot(name)
    assert result.status == status and result.devices == () and not result.ok
    assert "NVIDIA" in result.message and "\n" not in result.message
    if status == "no-driver":
        assert fake.calls == ["nvmlInit"]


def test_lost_gpu_is_reported_not_fatal(probe_snapshot):
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import read_snapshot
    from advisor.probe.snapshot import ReplayNvml

    snap = load_snapshot("rtx2080ti_x2_nvlink")
    snap["devices"][1]["handle_error"] = "GpuIsLost"
    result = build_result(read_snapshot(ReplayNvml(snap), process_name=lambda pid: None, own_pid=1))
    assert result.status == "ok" and len(result.devices) == 2
    lost = result.devices[1]
    assert lost.nvml.name is None and lost.spec.derived
    assert [f.error for f in lost.na] == ["NVMLError_GpuIsLost"]
    assert result.topology == ()
    json.dumps(probe_payload(result))

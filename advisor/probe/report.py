"""ProbeResult -> renderer-neutral Doc (CLI, TUI, reports) and the JSON payload."""

from __future__ import annotations

from typing import Any

from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph, Table, na
from advisor.gpu_spec import NOT_SUPPORTED, GpuSpec
from advisor.jsonout import to_jsonable
from advisor.probe.model import MATCH_DERIVED, MATCH_NAME, MATCH_PCI_ID, ProbedDevice, ProbeResult
from advisor.probe.selection import GpuSelection

# (label, peak keys shown, why not in words, cc from which a missing rate still means "yes")
CAPABILITIES = (
    ("FP16 tensor cores", ("fp16_fp16acc", "fp16_fp32acc"), "needs sm_70+", (7, 0)),
    ("BF16", ("bf16",), "needs sm_80+", (8, 0)),
    ("TF32", ("tf32",), "needs sm_80+", (8, 0)),
    ("FP8 tensor cores", ("fp8_fp16acc", "fp8_fp32acc"), "needs sm_89+", (8, 9)),
    ("FP4 tensor cores", ("fp4",), "needs sm_100+ or sm_120+", (10, 0)),
    ("INT8 tensor cores", ("int8",), "needs sm_75+", (7, 5)),
    ("INT4 tensor cores", ("int4",), "only sm_75 to sm_89 have it", None),
)
_ACC = {"fp16_fp16acc": "FP16 acc", "fp16_fp32acc": "FP32 acc", "fp8_fp16acc": "FP16 acc",
        "fp8_fp32acc": "FP32 acc"}


def _fmt_peak(v: float, key: str) -> str:
    unit = "TOPS" if key.startswith("int") else "TFLOPS"
    return f"{v:g} {unit}"


def capability_statements(spec: GpuSpec) -> tuple[tuple[str, str], ...]:
    """Plain-words answers: ("FP8 tensor cores", "no (needs sm_89+)"), from the spec's peaks."""
    out = []
    for label, keys, needs, _cc in CAPABILITIES:
        values = [spec.peaks.get(k) for k in keys]
        if all(v is NOT_SUPPORTED for v in values):
            out.append((label, f"no ({needs})"))
            continue
        known = [(k, v) for k, v in zip(keys, values) if isinstance(v, (int, float))]
        if not known:
            out.append((label, "yes (rate unknown)" if any(v is None for v in values)
                        and _cc is not None and spec.cc >= _cc else "unknown"))
            continue
        if len(known) == 1:
            text = _fmt_peak(known[0][1], known[0][0])
        else:
            text = ", ".join(f"{_fmt_peak(v, k)} {_ACC.get(k, '')}".strip() for k, v in known)
        derived = [k for k, _ in known if k in spec.derived_fields]
        halved = [k for k, _ in known if k in spec.halved_from_sparse]
        flag = (", derived" if derived or spec.derived else "") + (", half the published sparse figure"
                                                                     if halved else "")
        out.append((label, f"yes (dense {text}{flag})"))
    return tuple(out)


def _gib(b: int | None) -> str:
    return na(None if b is None else b / 2**30, "GiB", "{:.1f}")


def _why(dev: ProbedDevice, *fields: str) -> str:
    for f in dev.na:
        if f.field in fields:
            return f"N/A ({f.message})"
    return "N/A"


def _val(dev: ProbedDevice, value: Any, fields: tuple[str, ...], unit: str = "", fmt: str = "{}") -> str:
    return _why(dev, *fields) if value is None else na(value, unit, fmt)


def _match_text(d: ProbedDevice) -> str:
    s = d.spec
    if d.match == MATCH_DERIVED:
        return f"not in the table: derived from NVML ({s.id}, confidence derived)"
    how = {MATCH_PCI_ID: f"PCI id {d.nvml.pci_device_id}", MATCH_NAME: "name"}.get(d.match, d.match)
    return f"{s.id} - {s.name} (matched by {how}, confidence {s.confidence})"


def _memory_text(d: ProbedDevice) -> str:
    n = d.nvml
    if n.memory_total_bytes is None:
        return _why(d, "memory")
    return f"{_gib(n.memory_total_bytes)} total, {_gib(n.memory_used_bytes)} used, {_gib(n.memory_free_bytes)} free"


def _bandwidth_text(d: ProbedDevice) -> str:
    table = f"; table {d.spec.bandwidth_gbs:g} GB/s" if d.spec.bandwidth_gbs and not d.spec.derived else ""
    if d.bandwidth is None:
        return _why(d, "memory_bus_width", "max_mem_clock") + table
    b = d.bandwidth
    return (f"{b.gbs:g} GB/s theoretical (derived: {b.bus_width_bits}-bit x {b.max_mem_clock_mhz} MHz x 2)"
            + table)


def _power_text(d: ProbedDevice) -> str:
    n = d.nvml
    limit = n.enforced_power_limit_w if n.enforced_power_limit_w is not None else n.power_limit_w
    if limit is None:
        return _why(d, "enforced_power_limit", "power_limit")
    extra = [f"default {na(n.default_power_limit_w, 'W', '{:g}')}"]
    if d.spec.tdp_w and not d.spec.derived:
        extra.append(f"TDP {d.spec.tdp_w:g} W")
    return f"{limit:g} W ({', '.join(extra)})"


def _pcie_text(d: ProbedDevice) -> str:
    n = d.nvml
    def link(gen, width, fields):
        if gen is None and width is None:
            return _why(d, *fields)
        return f"Gen{na(gen)} x{na(width)}"
    return (f"{link(n.pcie_max_gen, n.pcie_max_width, ('pcie_max_gen', 'pcie_max_width'))} max, "
            f"{link(n.pcie_curr_gen, n.pcie_curr_width, ('pcie_curr_gen', 'pcie_curr_width'))} now")


def _nvlink_text(d: ProbedDevice) -> str:
    links = d.nvml.nvlinks
    if links is None:
        return _why(d, "nvlink_state")
    if not links:
        return "no links"
    active = sum(1 for x in links if x.active)
    return f"{active} of {len(links)} links active"


def _mig_text(d: ProbedDevice) -> str:
    n = d.nvml
    if n.mig_current is None:
        return _why(d, "mig_mode")
    if n.mig_current:
        return f"enabled ({len(n.mig_devices)} MIG device{'s' if len(n.mig_devices) != 1 else ''})"
    return "disabled" + (" (enabled after reset)" if n.mig_pending else "")


def _util_text(d: ProbedDevice) -> str:
    n = d.nvml
    if n.util_gpu_pct is None:
        return _why(d, "utilization")
    return f"GPU {n.util_gpu_pct} %, memory {n.util_mem_pct} %"


def device_blocks(d: ProbedDevice) -> tuple:
    n, s = d.nvml, d.spec
    cc = f"{n.cc[0]}.{n.cc[1]} (sm_{n.cc[0]}{n.cc[1]}, {s.arch})" if n.cc else _why(d, "cc")
    pairs = [
        ("Table entry", _match_text(d)),
        ("Compute capability", cc),
        ("UUID", _val(d, n.uuid, ("uuid",))),
        ("PCI", f"{_val(d, n.pci_bus_id, ('pci',))}, device id {_val(d, n.pci_device_id, ('pci',))}"),
        ("Memory", _memory_text(d)),
        ("Memory bandwidth", _bandwidth_text(d)),
        ("SMs", na(s.sm_count) + (" (derived)" if "sm_count" in s.derived_fields else "")),
        ("SM clock max", _val(d, n.max_sm_clock_mhz, ("max_sm_clock",), "MHz")),
        ("Power limit", _power_text(d)),
        ("PCIe", _pcie_text(d)),
        ("NVLink", _nvlink_text(d)),
        ("MIG", _mig_text(d)),
        ("Utilisation", _util_text(d)),
    ]
    pairs.extend(capability_statements(s))
    blocks: list = [Heading(f"GPU {d.index}: {d.label}", level=2), KeyValues(tuple(pairs))]
    notes = list(d.notes) + [o.reason for o in d.overrides]
    if notes:
        blocks.append(Bullets(tuple(notes), title="Notes", style="warn"))
    if n.mig_devices:
        blocks.append(Table(
            ("MIG device", "UUID", "GPU instance", "compute instance", "SMs", "memory"),
            tuple((str(m.index), na(m.uuid), na(m.gpu_instance_id), na(m.compute_instance_id),
                   na(m.sm_count), _gib(m.memory_total_bytes)) for m in n.mig_devices),
            title=f"MIG devices on GPU {d.index}",
        ))
    if d.na:
        blocks.append(Bullets(tuple(f"{f.field}: {f.query} -> {f.message}" for f in d.na),
                              title="Not answered by NVML (shown as N/A)", style="dim"))
    return tuple(blocks)


def selection_blocks(sel: GpuSelection) -> tuple:
    pairs = [("GPU", f"{sel.spec.id} - {sel.spec.name}"), ("Count", str(sel.count)),
             ("Source", sel.source), ("Note", sel.note),
             ("Memory", na(sel.spec.memory_gb, "GB", "{:g}")),
             ("Memory bandwidth", na(sel.spec.bandwidth_gbs, "GB/s", "{:g}")),
             ("Compute capability", f"{sel.spec.cc_str} ({sel.spec.arch})")]
    pairs.extend(capability_statements(sel.spec))
    return (Heading("Planning set", level=2), KeyValues(tuple(pairs)))


def probe_doc(result: ProbeResult, selection: GpuSelection | None = None) -> Doc:
    blocks: list = [Heading("GPU probe")]
    if result.status == "ok":
        blocks.append(Paragraph(result.message, style="good"))
        blocks.append(KeyValues((
            ("Driver", na(result.driver_version)),
            ("CUDA (driver)", na(result.cuda_driver_version)),
            ("NVML", na(result.nvml_version)),
        )))
    else:
        blocks.append(Paragraph(f"{result.message[:1].upper()}{result.message[1:]}.", style="warn"))
        if selection is None:
            blocks.append(Paragraph("What-if: nvfp4-advisor probe --gpu ID [--gpus N] (ids: nvfp4-advisor gpus)",
                                    style="dim"))
    if result.notes:
        blocks.append(Bullets(result.notes, style="warn"))
    for d in result.devices:
        blocks.extend(device_blocks(d))
    if result.topology:
        blocks.append(Table(
            ("GPUs", "link", "PCIe path", "P2P read", "P2P over NVLink"),
            tuple((f"{link.a} <-> {link.b}", link.description, na(link.pcie_path), na(link.p2p_read),
                   na(link.p2p_nvlink)) for link in result.topology),
            title="Topology",
        ))
    if result.devices:
        if all(d.nvml.processes is None for d in result.devices):
            blocks.append(Paragraph("Processes using GPU memory: N/A (NVML did not list them)", style="dim"))
        elif result.foreign_processes:
            blocks.append(Table(
                ("GPU", "PID", "name", "GPU memory"),
                tuple((str(p.gpu), str(p.pid), na(p.name), _gib(p.used_memory_bytes))
                      for p in result.foreign_processes),
                title="Other processes using GPU memory",
            ))
        else:
            blocks.append(Paragraph("No other process holds GPU memory.", style="dim"))
    if selection is not None:
        blocks.extend(selection_blocks(selection))
    return Doc(tuple(blocks))


def _clean(v: Any) -> Any:
    """to_jsonable leaves the NOT_SUPPORTED marker as an object; give it its JSON form."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    if hasattr(v, "to_json"):
        return v.to_json()
    return v


def spec_json(spec: GpuSpec) -> dict[str, Any]:
    return _clean(to_jsonable(spec))


def probe_payload(result: ProbeResult, selection: GpuSelection | None = None) -> dict[str, Any]:
    devices = []
    for d in result.devices:
        item = _clean(to_jsonable(d))
        item["capabilities"] = dict(capability_statements(d.spec))
        devices.append(item)
    body = _clean(to_jsonable(result))
    body["devices"] = devices
    body["topology"] = [dict(_clean(to_jsonable(link)), description=link.description) for link in result.topology]
    sel = None
    if selection is not None:
        sel = _clean(to_jsonable(selection))
        sel["capabilities"] = dict(capability_statements(selection.spec))
    return {"probe": body, "selection": sel}

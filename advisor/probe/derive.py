"""Figures derived from NVML values: theoretical bandwidth and a GpuSpec for an unknown card.

Everything here is labelled derived. Rates are dense tensor-core FLOP (or integer op) per SM per
clock, from ../shared/research/gpu-specs.md "Derivation rules", which reproduce NVIDIA's
whitepaper peaks: peak = SMs x rate x clock.
"""

from __future__ import annotations

import re

from advisor.gpu_spec import NOT_SUPPORTED, PEAK_KEYS, GpuSpec
from advisor.probe.nvml_source import RawDevice

NS = NOT_SUPPORTED

# DRAM bandwidth. NVML's "max memory clock" is already scaled per memory type so that the same
# double-data-rate formula holds for GDDR6, GDDR6X (PAM4), GDDR7 and HBM:
#   GB/s = bus_width_bits / 8 * max_mem_clock_MHz * 2 / 1000
# Checks: RTX 3090 384 bit x 9751 MHz -> 936; A100 40GB 5120 x 1215 -> 1555; RTX 2080 Ti
# 352 x 7000 -> 616; RTX 4090 384 x 10501 -> 1008; H100 SXM 5120 x 2619 -> 3352;
# RTX 5090 512 x 14001 -> 1792 (NVIDIA forum, "RTX 3090 & A100 memory frequency", 198730).
BANDWIDTH_FORMULA = "bus_width_bits / 8 x max_mem_clock_MHz x 2 (DDR) / 1000"


def theoretical_bandwidth_gbs(bus_width_bits: int | None, max_mem_clock_mhz: int | None) -> float | None:
    if not bus_width_bits or not max_mem_clock_mhz:
        return None
    return round(bus_width_bits / 8 * max_mem_clock_mhz * 2 / 1000, 1)


def arch_from_cc(cc: tuple[int, int] | None) -> str:
    if cc is None:
        return "unknown"
    major, minor = cc
    if (major, minor) == (7, 5):
        return "turing"
    if major == 8:
        return "ada" if minor == 9 else "ampere"
    if major == 9:
        return "hopper"
    if major in (10, 11, 12):
        return "blackwell"
    return "unknown"


# CUDA cores per SM, to recover the SM count from nvmlDeviceGetNumGpuCores.
def cores_per_sm(cc: tuple[int, int]) -> int | None:
    if cc in ((7, 5), (8, 0)):
        return 64
    if cc in ((8, 6), (8, 7), (8, 9)) or cc[0] in (9, 10, 11, 12):
        return 128
    return None


# Per-SM-per-clock dense rates. "consumer"/"pro" split only where GeForce halves FP32-accumulate.
# Columns: fp16_fp16acc, fp16_fp32acc, bf16, tf32, fp8_fp16acc, fp8_fp32acc, fp6, fp4, int8, int4
_R = ("fp16_fp16acc", "fp16_fp32acc", "bf16", "tf32", "fp8_fp16acc", "fp8_fp32acc", "fp6", "fp4", "int8", "int4")
_RATES: dict[str, dict[str, tuple]] = {
    "sm_75": {"consumer": (1024, 512, NS, NS, NS, NS, NS, NS, 2048, 4096),
              "pro": (1024, 1024, NS, NS, NS, NS, NS, NS, 2048, 4096)},
    "sm_80": {"any": (2048, 2048, 2048, 1024, NS, NS, NS, NS, 4096, 8192)},
    "sm_86": {"consumer": (1024, 512, 512, 256, NS, NS, NS, NS, 2048, 4096),
              "pro": (1024, 1024, 1024, 512, NS, NS, NS, NS, 2048, 4096)},
    "sm_89": {"consumer": (1024, 512, 512, 256, 2048, 1024, NS, NS, 2048, 4096),
              "pro": (1024, 1024, 1024, 512, 2048, 2048, NS, NS, 2048, 4096)},
    "sm_90": {"any": (4096, 4096, 4096, 2048, 8192, 8192, NS, NS, 8192, NS)},
    "sm_100": {"any": (8192, 8192, 8192, 4096, 16384, 16384, 16384, 32768, 16384, NS)},
    "sm_12x": {"consumer": (1024, 512, 512, 256, 2048, 1024, None, 4096, 2048, NS),
               "pro": (1024, 1024, 1024, 512, 2048, 2048, None, 4096, 2048, NS)},
}
# Rates that do not depend on the GeForce accumulate split.
_SEGMENT_FREE = {"fp16_fp16acc", "fp8_fp16acc", "fp6", "fp4", "int8", "int4"}


def _family(cc: tuple[int, int]) -> tuple[str | None, str]:
    """Rate family for a compute capability, and a note when it is an assumption."""
    if cc == (7, 5):
        return "sm_75", ""
    if cc == (8, 0):
        return "sm_80", ""
    if cc in ((8, 6), (8, 7)):
        return "sm_86", ""
    if cc == (8, 9):
        return "sm_89", ""
    if cc == (9, 0):
        return "sm_90", ""
    if cc == (10, 0):
        return "sm_100", ""
    if cc in ((12, 0), (12, 1)):
        return "sm_12x", ""
    if cc[0] == 12:
        return "sm_12x", f"cc {cc[0]}.{cc[1]} is not a known target: assumed sm_12x family rates"
    return None, f"no per-SM rates known for cc {cc[0]}.{cc[1]}"


def segment_from_name(name: str | None) -> str | None:
    """consumer | pro | None. GeForce halves FP32-accumulate; unknown brands stay unknown."""
    if not name:
        return None
    if re.search(r"geforce", name, re.I):
        return "consumer"
    if re.search(r"quadro|titan|tesla|rtx pro|rtx a\d|rtx \d{4} ada|\bl\d+s?\b|\b[abh]\d{2,3}\b", name, re.I):
        return "pro"
    return None


def _unsupported_by_cc(cc: tuple[int, int]) -> set[str]:
    """Formats the issue's consistency rules exclude by compute capability alone."""
    out = set()
    if cc < (8, 0):
        out |= {"bf16", "tf32"}
    if cc < (8, 9):
        out |= {"fp8_fp16acc", "fp8_fp32acc"}
    if cc < (10, 0):
        out |= {"fp6", "fp4"}
    if cc >= (9, 0):
        out.add("int4")   # no INT4 rate on Hopper and later
    return out


def derived_spec(dev: RawDevice) -> tuple[GpuSpec, tuple[str, ...]]:
    """A GpuSpec built from NVML alone for a card the table does not know; with its notes."""
    notes: list[str] = []
    cc = dev.cc or (0, 0)
    derived_fields: list[str] = []

    sm = dev.sm_count
    per_sm = cores_per_sm(dev.cc) if dev.cc else None
    if sm is None and dev.cuda_cores and per_sm:
        sm = dev.cuda_cores // per_sm
        notes.append(f"SM count {sm} = {dev.cuda_cores} CUDA cores / {per_sm} per SM")
    if sm is not None:
        derived_fields.append("sm_count")

    clock = dev.max_customer_boost_mhz or dev.max_sm_clock_mhz
    if clock is not None:
        derived_fields.append("boost_clock_mhz")
        if not dev.max_customer_boost_mhz:
            notes.append(f"clock {clock} MHz is NVML's max SM clock, an upper bound: derived peaks are optimistic")

    memory_gb = round(dev.memory_total_bytes / 2**30, 1) if dev.memory_total_bytes else None
    if memory_gb is not None:
        derived_fields.append("memory_gb")
    bw = theoretical_bandwidth_gbs(dev.memory_bus_width_bits, dev.max_mem_clock_mhz)
    if bw is not None:
        derived_fields.append("bandwidth_gbs")

    peaks: dict = {k: None for k in PEAK_KEYS}
    for k in _unsupported_by_cc(cc) if dev.cc else ():
        peaks[k] = NS
    family, fam_note = _family(cc) if dev.cc else (None, "compute capability N/A")
    if fam_note:
        notes.append(fam_note)
    segment = segment_from_name(dev.name)
    if family is not None:
        table = _RATES[family]
        rates = table.get("any") or table.get(segment or "", None)
        for i, key in enumerate(_R):
            if rates is not None:
                rate = rates[i]
            elif key in _SEGMENT_FREE:  # unknown segment: only rates both segments share
                rate = table["consumer"][i]
            else:
                rate = None
            if rate is NS:
                peaks[key] = NS
            elif rate is not None and sm is not None and clock is not None:
                peaks[key] = round(sm * rate * clock / 1e6, 1)
                derived_fields.append(key)
        if rates is None and "consumer" in table:
            notes.append("GeForce or professional card unknown: FP32-accumulate rates left N/A")

    slug = re.sub(r"[^a-z0-9]+", "-", (dev.name or f"gpu-{dev.index}").lower()).strip("-")
    spec = GpuSpec(
        id=f"nvml-{slug}",
        name=dev.name or f"GPU {dev.index}",
        arch=arch_from_cc(dev.cc),
        cc=cc,
        sm_count=sm,
        boost_clock_mhz=float(clock) if clock is not None else None,
        memory_gb=memory_gb,
        memory_type=None,
        bandwidth_gbs=bw,
        l2_mb=None,
        tdp_w=dev.default_power_limit_w,
        nvlink_gbs=None,
        peaks=peaks,
        pci_device_ids=(dev.pci_device_id,) if dev.pci_device_id else (),
        segment={"consumer": "consumer", "pro": None}.get(segment or "", None),
        pcie_gen=dev.pcie_max_gen,
        pcie_lanes=dev.pcie_max_width,
        confidence="derived",
        derived=True,
        derived_fields=tuple(derived_fields + (["tdp_w"] if dev.default_power_limit_w else [])),
        sources=("nvml",),
        notes="Derived from NVML values and per-SM rates of the compute capability; not in the GPU table. "
              + " ".join(n.rstrip(".") + "." for n in notes),
    )
    return spec, tuple(notes)

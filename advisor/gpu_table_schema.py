"""The schema of profiles/gpus.yaml: pydantic models built on first use (pydantic stays out of light
imports), the first validation error in words, and a validated entry as a ``GpuSpec``."""

from __future__ import annotations

import functools
import re
from typing import Any

from advisor.gpu_spec import ARCHS, NOT_SUPPORTED, PEAK_KEYS, GpuSpec

SEGMENTS = ("consumer", "workstation", "datacenter", "embedded")
CONFIDENCES = ("high", "medium", "low")

# Entry fields that may be flagged as derived/halved besides the peak keys.
_FLAGGABLE = PEAK_KEYS + ("sm_count", "boost_clock_mhz", "tensor_peak_clock_mhz", "l2_mb", "tdp_w",
                          "bandwidth_gbs", "memory_gb")


@functools.lru_cache(maxsize=1)
def table_model():
    """Build the pydantic models on first use (keeps pydantic out of light imports)."""
    from typing import Literal, Optional

    from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

    strict = ConfigDict(extra="forbid")
    Num = Optional[float]

    class Source(BaseModel):
        model_config = strict
        title: str = Field(min_length=1)
        url: Optional[str] = None

    # every key explicit: a number, or null (unknown / not supported); pydantic's stubs cannot type fields
    # passed as a ** dict built at runtime
    Peaks = create_model(  # type: ignore[call-overload]
        "Peaks", __config__=strict, **{k: (Optional[float], Field(ge=0)) for k in PEAK_KEYS}
    )

    class Entry(BaseModel):
        model_config = strict
        id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
        name: str = Field(min_length=1)
        aliases: list[str] = []
        pci_device_ids: list[str] = []
        segment: Literal[SEGMENTS]  # type: ignore[valid-type]
        arch: Literal[ARCHS]  # type: ignore[valid-type]
        compute_capability: str = Field(strict=True, pattern=r"^\d{1,2}\.\d$")
        sm_count: Optional[int] = Field(default=None, gt=0)
        boost_clock_mhz: Num = Field(default=None, gt=0)
        tensor_peak_clock_mhz: Num = Field(default=None, gt=0)
        memory_gb: Num = Field(default=None, gt=0)
        memory_type: Optional[str] = None
        bandwidth_gbs: Num = Field(default=None, gt=0)
        l2_mb: Num = Field(default=None, gt=0)
        tdp_w: Num = Field(default=None, gt=0)
        nvlink_gbs: Num = Field(default=None, gt=0)   # null: no NVLink
        pcie_gen: Optional[int] = Field(default=None, ge=1, le=7)
        pcie_lanes: Optional[int] = Field(default=None, ge=1, le=32)
        dense_tensor_peak: Peaks  # type: ignore[valid-type]
        not_supported: list[Literal[PEAK_KEYS]] = []  # type: ignore[valid-type]
        derived_fields: list[Literal[_FLAGGABLE]] = []  # type: ignore[valid-type]
        halved_from_sparse: list[Literal[PEAK_KEYS]] = []  # type: ignore[valid-type]
        confidence: Literal[CONFIDENCES]  # type: ignore[valid-type]
        sources: list[str] = Field(min_length=1)
        notes: str = ""

        @field_validator("compute_capability")
        @classmethod
        def _cc_range(cls, v: str) -> str:
            major = int(v.split(".")[0])
            if not 7 <= major <= 12:
                raise ValueError(f"compute capability {v} is outside Turing..Blackwell (7.x-12.x)")
            return v

        @field_validator("pci_device_ids")
        @classmethod
        def _pci(cls, v: list[str]) -> list[str]:
            for d in v:
                if not re.fullmatch(r"0x[0-9A-F]{4}", d):
                    raise ValueError(f"PCI device id {d!r} must look like 0x2204 (4 upper-case hex digits)")
            return v

        @model_validator(mode="after")
        def _flags(self):
            # Peaks is a model built at runtime: mypy cannot see its BaseModel methods
            peaks = self.dense_tensor_peak.model_dump()  # type: ignore[attr-defined]
            for k in self.not_supported:
                if peaks[k] is not None:
                    raise ValueError(f"{k} is listed as not supported but has a peak ({peaks[k]})")
                if k in self.derived_fields or k in self.halved_from_sparse:
                    raise ValueError(f"{k} is not supported yet flagged derived/halved")
            for k in self.halved_from_sparse:
                if peaks[k] is None:
                    raise ValueError(f"{k} is flagged halved_from_sparse but has no value")
            return self

    class Table(BaseModel):
        model_config = strict
        sources: dict[str, Source]
        gpus: list[Entry] = Field(min_length=1)

    return Table


def first_error(err, data: Any) -> str:
    """'gpus[3] (rtx-3090).sm_count: Input should be ...' from a pydantic ValidationError."""
    e = err.errors()[0]
    loc = list(e.get("loc", ()))
    parts: list[str] = []
    if len(loc) >= 2 and loc[0] == "gpus" and isinstance(loc[1], int):
        ident = ""
        try:
            ident = f" ({data['gpus'][loc[1]]['id']})"
        except (KeyError, IndexError, TypeError):
            pass
        parts.append(f"gpus[{loc[1]}]{ident}")
        loc = loc[2:]
    parts.extend(str(p) for p in loc)
    where = ".".join(parts) or "top level"
    msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
    if e.get("type") == "extra_forbidden":
        msg = "unknown key (extra keys are not allowed)"
    elif loc and loc[-1] == "compute_capability" and e.get("type") == "string_type":
        msg += ' (write it quoted, e.g. "8.6")'
    elif e.get("type") == "missing":
        msg = "required key is missing"
    return f"{where}: {msg}"


def to_spec(e) -> GpuSpec:
    raw = e.dense_tensor_peak.model_dump()
    peaks = {k: (NOT_SUPPORTED if k in e.not_supported else raw[k]) for k in PEAK_KEYS}
    major, minor = (int(x) for x in e.compute_capability.split("."))
    return GpuSpec(
        id=e.id, name=e.name, arch=e.arch, cc=(major, minor), sm_count=e.sm_count,
        boost_clock_mhz=e.boost_clock_mhz, memory_gb=e.memory_gb, memory_type=e.memory_type,
        bandwidth_gbs=e.bandwidth_gbs, l2_mb=e.l2_mb, tdp_w=e.tdp_w, nvlink_gbs=e.nvlink_gbs,
        peaks=peaks, aliases=tuple(e.aliases), pci_device_ids=tuple(e.pci_device_ids),
        segment=e.segment, tensor_peak_clock_mhz=e.tensor_peak_clock_mhz, pcie_gen=e.pcie_gen,
        pcie_lanes=e.pcie_lanes, confidence=e.confidence, derived=False,
        derived_fields=tuple(e.derived_fields), halved_from_sparse=tuple(e.halved_from_sparse),
        sources=tuple(e.sources), notes=e.notes,
    )

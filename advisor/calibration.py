"""What `microbench` measured on one physical GPU, saved so `plan` can use it instead of table peaks.

One JSON file per GPU under the user data dir
(``platformdirs.user_data_dir("nvfp4-advisor")/calibration/<gpu_id>--<uuid>.json``).

Definitions (all rates in 10^9 bytes/s and 10^12 FLOP/s):

- ``bandwidth_gbs``: achievable DRAM bandwidth, the streaming *copy* kernel over a buffer far
  above L2: (bytes read + bytes written) / time. The denominator of every efficiency below.
- ``read_bandwidth_gbs``: the read-only streaming kernel (the access pattern of a weight GEMV).
The card-wide figures (bandwidths, ``mma_tflops``) and the ``ENGINE_KERNEL_CLASSES`` entries replace
plan's defaults; the other classes' figures are our Triton kernels' own (see ENGINE_KERNEL_CLASSES).

- ``kernel_bandwidth_eff[cls]``: for kernel class ``cls`` in ``KERNEL_CLASSES``, the best achieved
  bandwidth at M=1 on the largest benchmarked shape divided by ``bandwidth_gbs``. Achieved
  bandwidth = bytes the kernel must move (packed weights + scales + activations + output) / time.
  Can slightly exceed 1.0: a read-mostly stream can beat a copy.
- ``mma_tflops[mma]``: dense cuBLAS (torch.matmul) throughput at the largest M, keyed by the MMA
  class it issues (``advisor.kernel_path.model.MMA_CLASSES``, e.g. "wgmma_bf16" on Hopper,
  "hmma_bf16" on Ampere/Ada/sm_12x, "hmma_f16" on Turing).
- ``dequant_overhead[cls]``: extra time of the weight-only kernel class over the 16-bit baseline
  at the largest M, ``t_cls / t_baseline - 1`` (0.05 = 5 % slower than cuBLAS; negative = faster).
  A cost model multiplies compute time by ``1 + dequant_overhead``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA_VERSION = 1

# Kernel classes measured by microbench (keys of kernel_bandwidth_eff and dequant_overhead).
KERNEL_CLASSES = ("w4a16_nvfp4", "w8a16_fp8", "w4a16_int4", "bf16")
# The classes whose measured kernel is the one an engine runs, so plan may take its figures for the
# engine's: bf16 is cuBLAS (torch.matmul), what every engine's unquantized linear calls. The weight-only
# classes are this project's own Triton kernels, not the engine's Marlin/Machete/CUTLASS: their rates
# describe our kernels on this card and are shown beside the plan, never put in the engine's place (on an
# H200, 2026-12-04, our NVFP4 GEMV streamed at 43 % of copy and our GEMMs ran 2.3x cuBLAS at M = 8192,
# which as Marlin's figures cut a W4A16 plan's decode by 35 % and its prefill by 43 %).
ENGINE_KERNEL_CLASSES = ("bf16",)

_APP = "nvfp4-advisor"


@dataclass(frozen=True)
class Calibration:
    gpu_id: str                                   # advisor GPU id (table or derived), e.g. "h200-sxm"
    uuid: str | None                              # NVML/CUDA device uuid, "GPU-…"; None if unknown
    name: str                                     # device name as the driver reports it
    measured_at: str                              # ISO-8601 UTC timestamp
    bandwidth_gbs: float                          # measured copy bandwidth (see module doc)
    kernel_bandwidth_eff: dict[str, float] = field(default_factory=dict)
    mma_tflops: dict[str, float] = field(default_factory=dict)
    dequant_overhead: dict[str, float] = field(default_factory=dict)
    read_bandwidth_gbs: float | None = None
    shape: tuple[int, int] | None = None          # (K, N) the efficiencies were measured on
    software: dict[str, str] = field(default_factory=dict)   # torch / triton / driver versions
    schema_version: int = SCHEMA_VERSION


def calibration_dir(base: Path | None = None) -> Path:
    """Where calibration files live; ``base`` overrides the platform user data dir."""
    if base is not None:
        return Path(base)
    from platformdirs import user_data_dir

    return Path(user_data_dir(_APP, appauthor=False)) / "calibration"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def calibration_path(gpu_id: str, uuid: str | None, base: Path | None = None) -> Path:
    return calibration_dir(base) / f"{_slug(gpu_id)}--{_slug(uuid or 'any')}.json"


def save_calibration(cal: Calibration, base: Path | None = None) -> Path:
    """Write ``cal`` atomically; returns the file path."""
    path = calibration_path(cal.gpu_id, cal.uuid, base)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(cal), indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(path)
    return path


def _floats(value: object) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, (int, float))}


def from_dict(data: dict) -> Calibration | None:
    try:
        shape = data.get("shape")
        return Calibration(
            gpu_id=str(data["gpu_id"]),
            uuid=data.get("uuid"),
            name=str(data.get("name", "")),
            measured_at=str(data.get("measured_at", "")),
            bandwidth_gbs=float(data["bandwidth_gbs"]),
            kernel_bandwidth_eff=_floats(data.get("kernel_bandwidth_eff")),
            mma_tflops=_floats(data.get("mma_tflops")),
            dequant_overhead=_floats(data.get("dequant_overhead")),
            read_bandwidth_gbs=(float(data["read_bandwidth_gbs"])
                                if isinstance(data.get("read_bandwidth_gbs"), (int, float)) else None),
            shape=(int(shape[0]), int(shape[1])) if isinstance(shape, (list, tuple)) and len(shape) == 2 else None,
            software={str(k): str(v) for k, v in (data.get("software") or {}).items()},
            schema_version=int(data.get("schema_version", SCHEMA_VERSION)),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _read(path: Path) -> Calibration | None:
    """A damaged or foreign file is ignored (the plan falls back to table peaks), never fatal."""
    from advisor.errors import BadInput
    from advisor.textfile import JSON_LIMIT, read_bytes

    try:
        data = json.loads(read_bytes(path, limit_bytes=JSON_LIMIT, what="calibration file"))
    except (BadInput, ValueError, RecursionError):
        return None
    return from_dict(data) if isinstance(data, dict) else None


def load_calibration(gpu_id: str, uuid: str | None = None, base: Path | None = None) -> Calibration | None:
    """The calibration of this physical GPU (``uuid`` given) or, without a uuid, the most recent one
    saved for any card of this ``gpu_id``. None when nothing usable is saved."""
    if uuid is not None:
        cal = _read(calibration_path(gpu_id, uuid, base))
        return cal if cal is not None and cal.gpu_id == gpu_id else None
    directory = calibration_dir(base)
    if not directory.is_dir():
        return None
    found = [c for p in sorted(directory.glob(f"{_slug(gpu_id)}--*.json"))
             if (c := _read(p)) is not None and c.gpu_id == gpu_id]
    return max(found, key=lambda c: c.measured_at) if found else None

"""The distilled operator measurements under profiles/calibration/, as frozen records.

Written by benchmarks/distill_aiconfigurator.py from aiconfigurator-core's operator tables;
read here with the standard library only (the runtime never imports that package). The byte and
peak conventions below are shared with the distillation script, so an efficiency read here is
relative to exactly the roofline it was computed against.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "aiconfigurator-core"
PACKAGE_VERSION = "0.12.0"
SCHEMA = 1
FILES = ("systems", "gemm", "moe", "allreduce", "attention_decode", "attention_context", "linear_attention",
         "elementwise")

# Stored bytes per weight element (block scales included), per measured dtype.
WEIGHT_BYTES = {
    "bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4 / (128 * 128), "nvfp4": 0.5 + 1 / 16,
    "int4_wo": 0.5 + 2 / 128, "int8_wo": 1.0, "sq": 1.0, "w4a16_mxfp4": 0.5 + 1 / 32,
    "w4a8_mxfp4_mxfp8": 0.5 + 1 / 32,
}
# Activation bytes per element one Linear call moves: the 16-bit input, plus for 8/4-bit activations
# the quantize pass writing the quantized copy and the GEMM reading it back.
ACT_BYTES = {"fp8": 4.0, "fp8_block": 4.0, "sq": 4.0, "nvfp4": 2 + 2 * (0.5 + 1 / 16)}
# Peak (systems.json key) of the MMA each dtype issues: weight-only formats dequantize to BF16.
PEAK_KEY = {
    "bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "int4_wo": "bf16",
    "int8_wo": "bf16", "sq": "int8", "w4a16_mxfp4": "bf16", "w4a8_mxfp4_mxfp8": "fp8",
}
# systems.json peak key -> GpuSpec peak key.
GPU_PEAK = {"bf16": "bf16", "fp8": "fp8_fp32acc", "fp4": "fp4", "int8": "int8"}
KV_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0}


def calibration_dir() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "calibration" / f"aiconfigurator-{PACKAGE_VERSION}"


@dataclass(frozen=True)
class SystemRef:
    """A measured system and the GPU-table figures its efficiencies are relative to."""

    system: str                   # aiconfigurator system name, e.g. "h200_sxm"
    gpu: str                      # our GPU table id, e.g. "h200-sxm"
    cc: tuple[int, int]
    arch: str
    bandwidth_gbs: float
    peaks: dict                   # bf16 | fp8 | fp4 | int8 -> TFLOPS (None: none)
    peaks_from: str
    clock_mhz: float
    link_kind: str                # nvlink | pcie
    link_gbs: float               # per direction, theoretical

    @property
    def sm(self) -> int:
        return self.cc[0] * 10 + self.cc[1]


@dataclass(frozen=True)
class GemmTable:
    system: str
    engine: str
    version: str
    kernel: str
    dtype: str
    kernel_class: str
    src: str
    m: tuple[int, ...]
    floor_us: tuple[float, ...]           # per m
    log2_nk: tuple[int, ...]
    e: tuple[tuple[float | None, ...], ...]   # [m][log2_nk]

    def at(self, m: float, nk: float) -> tuple[float, float]:
        """(floor seconds, work efficiency) at M and N*K, interpolated in log2 on both axes."""
        lm, lnk = math.log2(max(m, 1.0)), math.log2(max(nk, 1.0))
        xs = [math.log2(v) for v in self.m]
        i, w = _bracket(xs, lm)
        floor = _lerp(self.floor_us[i], self.floor_us[i + 1] if w else 0.0, w) * 1e-6
        e = _lerp(self._e_row(i, lnk), self._e_row(i + 1, lnk) if w else 0.0, w)
        return floor, e

    def asymptote(self, m: float) -> float:
        """The work efficiency of the largest measured N*K at M: the kernel's streaming (or compute) rate once
        its fixed latencies are amortised."""
        xs = [math.log2(v) for v in self.m]
        i, w = _bracket(xs, math.log2(max(m, 1.0)))
        big = self.log2_nk[-1] + 1
        return _lerp(self._e_row(i, big), self._e_row(i + 1, big) if w else 0.0, w)

    def _e_row(self, i: int, lnk: float) -> float:
        pts = [(x, v) for x, v in zip(self.log2_nk, self.e[i]) if v is not None]
        j, w = _bracket([p[0] for p in pts], lnk)
        return _lerp(pts[j][1], pts[j + 1][1] if w else 0.0, w)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version} {self.kernel} ({self.dtype}) on {self.system}"


@dataclass(frozen=True)
class MoeTable:
    system: str
    engine: str
    version: str
    kernel: str
    dtype: str
    kernel_class: str
    gated: bool
    distribution: str
    src: str
    tokens: tuple[int, ...]
    fixed_us: tuple[float, ...]
    e: tuple[float, ...]
    n: tuple[int, ...]

    def at(self, tokens: float) -> tuple[float, float]:
        """(fixed seconds, work efficiency) at a token count, interpolated in log2."""
        i, w = _bracket([math.log2(t) for t in self.tokens], math.log2(max(tokens, 1.0)))
        j = i + 1 if w else i
        return _lerp(self.fixed_us[i], self.fixed_us[j], w) * 1e-6, _lerp(self.e[i], self.e[j], w)

    @property
    def label(self) -> str:
        gating = "" if self.gated or "nongated" in self.kernel else ", non-gated rows"
        return (f"{self.engine} {self.version} {self.kernel} ({self.dtype}, {self.distribution}{gating}) "
                f"on {self.system}")


@dataclass(frozen=True)
class CommCurve:
    system: str
    engine: str                   # nccl | vllm | sglang | trtllm
    version: str
    mode: str                     # graph | eager
    tp: int
    src: str
    log2_bytes: tuple[int, ...]
    us: tuple[float, ...]

    def seconds(self, nbytes: float) -> float:
        """Latency at ``nbytes``: log-log interpolation; past the largest size, its bandwidth."""
        lb = math.log2(max(nbytes, 1.0))
        if lb >= self.log2_bytes[-1]:
            return self.us[-1] * 1e-6 * nbytes / 2 ** self.log2_bytes[-1]
        i, w = _bracket(list(self.log2_bytes), lb)
        lo, hi = math.log(self.us[i]), math.log(self.us[i + 1] if w else self.us[i])
        return math.exp(lo + (hi - lo) * w) * 1e-6

    @property
    def latency_s(self) -> float:
        """The small-message latency: the time of the smallest measured message."""
        return self.us[0] * 1e-6

    @property
    def label(self) -> str:
        what = "nccl-tests" if self.engine == "nccl" else f"{self.engine} {self.version} custom all-reduce"
        nccl = f"NCCL {self.version} " if self.engine == "nccl" else ""
        return f"{what} {nccl}({self.mode}) TP{self.tp} on {self.system}"


@dataclass(frozen=True)
class AttnTable:
    system: str
    engine: str
    version: str
    kernel: str
    attn_dtype: str
    kv_dtype: str
    src: str
    floor_us: float
    work: str                     # kv_bytes | flops
    log2_work: tuple[int, ...]
    e: tuple[float, ...]

    def efficiency(self, work: float) -> float:
        i, w = _bracket(list(self.log2_work), math.log2(max(work, 1.0)))
        return _lerp(self.e[i], self.e[i + 1] if w else 0.0, w)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version} {self.kernel} (KV {self.kv_dtype}) on {self.system}"


@dataclass(frozen=True)
class LinearTable:
    """One Gated-DeltaNet layer in one phase (decode: conv update + recurrent step; prefill: conv + chunked
    scan), as one engine's kernels ran it on one system."""

    system: str
    engine: str
    version: str
    phase: str                    # decode | prefill
    kind: str                     # gdn
    kernels: tuple[str, ...]
    src: str
    floor_us: float
    work: str                     # decode: state_bytes (e per log2 bytes) | prefill: tokens (ns per token)
    log2_work: tuple[int, ...]
    e: tuple[float, ...]
    ns_per_token: float = 0.0         # prefill: scan latency per token of one sequence
    ns_per_token_head: float = 0.0    # prefill: and per token and value head

    def efficiency(self, work: float) -> float:
        i, w = _bracket(list(self.log2_work), math.log2(max(work, 1.0)))
        return _lerp(self.e[i], self.e[i + 1] if w else 0.0, w)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version} {' + '.join(self.kernels)} ({self.kind} {self.phase}) on {self.system}"


@dataclass(frozen=True)
class ElementwiseTable:
    """One small elementwise kernel (the stand-in for the kernels between measured operators) on one system."""

    system: str
    engine: str
    version: str
    kernel: str
    src: str
    floor_us: float
    log2_work: tuple[int, ...]    # bytes moved
    e: tuple[float, ...]

    def efficiency(self, work: float) -> float:
        i, w = _bracket(list(self.log2_work), math.log2(max(work, 1.0)))
        return _lerp(self.e[i], self.e[i + 1] if w else 0.0, w)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version} {self.kernel} on {self.system}"


def _bracket(xs: list[float], x: float) -> tuple[int, float]:
    """Index i and weight w with x between xs[i] and xs[i+1] (w = 0: clamped to an end)."""
    if x <= xs[0] or len(xs) == 1:
        return 0, 0.0
    if x >= xs[-1]:
        return len(xs) - 1, 0.0
    for i in range(len(xs) - 1):
        if xs[i] <= x <= xs[i + 1]:
            return i, (x - xs[i]) / (xs[i + 1] - xs[i])
    return len(xs) - 1, 0.0


def _lerp(a: float, b: float, w: float) -> float:
    return a if w == 0 else a + (b - a) * w


# ---------------------------------------------------------------- loading
@functools.lru_cache(maxsize=8)
def _load(name: str, folder: str) -> dict:
    from advisor.errors import BadInput

    path = Path(folder) / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise BadInput(f"cannot read measured calibration data: {err}", path=str(path)) from None
    if data.get("schema") != SCHEMA or data.get("package_version") != PACKAGE_VERSION:
        raise BadInput(f"calibration data schema {data.get('schema')} / {data.get('package_version')} is not "
                       f"{SCHEMA} / {PACKAGE_VERSION}: regenerate with benchmarks/distill_aiconfigurator.py",
                       path=str(path))
    return data


def _rows(name: str, key: str, folder: Path | None) -> list[dict]:
    return _load(name, str(folder or calibration_dir()))[key]


@functools.lru_cache(maxsize=4)
def systems(folder: Path | None = None) -> dict[str, SystemRef]:
    out = {}
    for r in _rows("systems", "systems", folder):
        out[r["system"]] = SystemRef(r["system"], r["gpu"], tuple(r["cc"]), r["arch"], float(r["bandwidth_gbs"]),
                                     dict(r["peaks_tflops"]), r["peaks_from"], float(r["clock_mhz"]),
                                     r["link"]["kind"], float(r["link"]["gbs_per_direction"]))
    return out


@functools.lru_cache(maxsize=4)
def gemm_tables(folder: Path | None = None) -> tuple[GemmTable, ...]:
    return tuple(GemmTable(r["system"], r["engine"], r["version"], r["kernel"], r["dtype"], r["kernel_class"], r["src"],
                           tuple(r["m"]), tuple(r["floor_us"]), tuple(r["log2_nk"]), tuple(tuple(x) for x in r["e"]))
                 for r in _rows("gemm", "gemm", folder))


@functools.lru_cache(maxsize=4)
def moe_tables(folder: Path | None = None) -> tuple[MoeTable, ...]:
    return tuple(MoeTable(r["system"], r["engine"], r["version"], r["kernel"], r["dtype"], r["kernel_class"],
                          r["gated"], r["distribution"], r["src"], tuple(r["tokens"]), tuple(r["fixed_us"]),
                          tuple(r["e"]), tuple(r["n"]))
                 for r in _rows("moe", "moe", folder))


@functools.lru_cache(maxsize=4)
def comm_curves(folder: Path | None = None) -> tuple[CommCurve, ...]:
    return tuple(CommCurve(r["system"], r["engine"], r["version"], r["mode"], r["tp"], r["src"],
                           tuple(r["log2_bytes"]), tuple(r["us"]))
                 for r in _rows("allreduce", "allreduce", folder))


@functools.lru_cache(maxsize=4)
def linear_tables(phase: str, folder: Path | None = None) -> tuple[LinearTable, ...]:
    return tuple(LinearTable(r["system"], r["engine"], r["version"], r["phase"], r["kind"], tuple(r["kernels"]),
                             r["src"], r["floor_us"], r["work"], tuple(r["log2_work"]), tuple(r["e"]),
                             r.get("ns_per_token", 0.0), r.get("ns_per_token_head", 0.0))
                 for r in _rows("linear_attention", "linear_attention", folder) if r["phase"] == phase)


@functools.lru_cache(maxsize=4)
def elementwise_tables(folder: Path | None = None) -> tuple[ElementwiseTable, ...]:
    return tuple(ElementwiseTable(r["system"], r["engine"], r["version"], r["kernel"], r["src"], r["floor_us"],
                                  tuple(r["log2_work"]), tuple(r["e"]))
                 for r in _rows("elementwise", "elementwise", folder))


@functools.lru_cache(maxsize=8)
def attention_tables(phase: str, folder: Path | None = None) -> tuple[AttnTable, ...]:
    return tuple(AttnTable(r["system"], r["engine"], r["version"], r["kernel"], r["attn_dtype"], r["kv_dtype"],
                           r["src"], r["floor_us"], r["work"], tuple(r["log2_work"]), tuple(r["e"]))
                 for r in _rows(f"attention_{phase}", "attention", folder))

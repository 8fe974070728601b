"""Microbenchmark results: metrics, the Doc table, the JSON payload and the calibration (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from advisor.calibration import KERNEL_CLASSES, Calibration
from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph, Table, na

# Kernel classes (advisor.calibration.KERNEL_CLASSES) -> what they are.
KERNEL_TITLES = {
    "w4a16_nvfp4": "W4A16 NVFP4 (E2M1 + E4M3/16 + FP32 global)",
    "w8a16_fp8": "W8A16 FP8 E4M3 per-channel",
    "w4a16_int4": "W4A16 INT4 g128 symmetric",
    "bf16": "16-bit baseline (torch.matmul / cuBLAS)",
}
# Weight format of each Triton kernel class (kernels.formats / kernels.weight_only).
CLASS_FORMAT = {"w4a16_nvfp4": "nvfp4", "w8a16_fp8": "fp8", "w4a16_int4": "int4"}

OVERHEAD_MIN_M = 1024   # dequant overhead is a compute-bound (prefill) quantity


@dataclass(frozen=True)
class CaseResult:
    kernel: str                     # one of KERNEL_CLASSES
    m: int
    k: int
    n: int
    path: str = ""                  # gemv | gemm | cublas
    config: str = ""                # the winning launch candidate
    time_us: float | None = None    # median per call
    bytes_moved: int = 0            # weights (+ scales) + activations + output, once each
    flops: int = 0
    gbs: float | None = None
    tflops: float | None = None
    pct_measured_bw: float | None = None   # of the measured copy bandwidth
    pct_table_bw: float | None = None      # of the table's theoretical bandwidth
    pct_table_peak: float | None = None    # of the table's dense 16-bit MMA peak
    tried: int = 0                  # candidates timed
    skipped: str | None = None      # why nothing ran (arch limit, compile error, ...)


@dataclass(frozen=True)
class Stream:
    kind: str                       # copy | read
    gbs: float
    buffer_mb: float
    config: str = ""


@dataclass(frozen=True)
class Suite:
    device_name: str
    uuid: str | None
    cc: tuple[int, int]
    sm_count: int
    gpu_id: str
    act_dtype: str                  # bf16 | fp16
    streams: tuple[Stream, ...]
    results: tuple[CaseResult, ...]
    table_bandwidth_gbs: float | None = None
    table_peak_tflops: float | None = None
    mma_class: str = "hmma_bf16"
    timing: str = ""                # how times were taken
    notes: tuple[str, ...] = ()
    software: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def copy_gbs(self) -> float | None:
        return max((s.gbs for s in self.streams if s.kind == "copy"), default=None)

    @property
    def read_gbs(self) -> float | None:
        return max((s.gbs for s in self.streams if s.kind == "read"), default=None)


def slug(name: str) -> str:
    """An id for a card the GPU table does not know, from its name."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def with_metrics(r: CaseResult, seconds: float, copy_gbs: float | None, table_bw: float | None,
                 table_tflops: float | None) -> CaseResult:
    """Fill the rate columns from one measured time per call."""
    gbs = r.bytes_moved / seconds / 1e9
    tflops = r.flops / seconds / 1e12

    def pct(x, ref):
        return 100.0 * x / ref if ref else None

    return replace(r, time_us=seconds * 1e6, gbs=gbs, tflops=tflops,
                   pct_measured_bw=pct(gbs, copy_gbs), pct_table_bw=pct(gbs, table_bw),
                   pct_table_peak=pct(tflops, table_tflops))


def gemm_bytes(m: int, k: int, n: int, weight_bytes: int, act_bytes: int, out_bytes: int) -> int:
    return weight_bytes + m * k * act_bytes + m * n * out_bytes


def mma_class_for(cc: tuple[int, int], act_dtype: str) -> str:
    """The MMA class (advisor.kernel_path.model.MMA_CLASSES) cuBLAS issues for a 16-bit GEMM."""
    if act_dtype == "fp16":
        return "hmma_f16"
    if cc[0] == 9:
        return "wgmma_bf16"
    if cc[0] == 10:
        return "tcgen05_bf16"
    return "hmma_bf16"


def _ran(results, kernel: str, m: int | None = None):
    return [r for r in results if r.kernel == kernel and r.time_us is not None and (m is None or r.m == m)]


def calibration_from(suite: Suite, measured_at: str) -> Calibration | None:
    """The calibration record (see advisor.calibration for the exact definitions); None when
    the copy bandwidth was not measured."""
    copy = suite.copy_gbs
    if not copy:
        return None
    ran = [r for r in suite.results if r.time_us is not None]
    big = max(((r.k * r.n) for r in ran), default=0)
    on_big = [r for r in ran if r.k * r.n == big]
    eff = {}
    for cls in KERNEL_CLASSES:
        m1 = _ran(on_big, cls, 1)
        if m1:
            eff[cls] = max(r.gbs for r in m1) / copy
    mma: dict[str, float] = {}
    overhead: dict[str, float] = {}
    base = _ran(on_big, "bf16")
    top_m = max((r.m for r in base), default=0)
    if top_m:
        ref = next(r for r in base if r.m == top_m)
        mma[suite.mma_class] = ref.tflops
        if top_m >= OVERHEAD_MIN_M:
            overhead["bf16"] = 0.0
            for cls in CLASS_FORMAT:
                hit = _ran(on_big, cls, top_m)
                if hit:
                    overhead[cls] = hit[0].time_us / ref.time_us - 1.0
    shape = (on_big[0].k, on_big[0].n) if on_big else None
    return Calibration(gpu_id=suite.gpu_id, uuid=suite.uuid, name=suite.device_name, measured_at=measured_at,
                       bandwidth_gbs=copy, kernel_bandwidth_eff=eff, mma_tflops=mma, dequant_overhead=overhead,
                       read_bandwidth_gbs=suite.read_gbs, shape=shape, software=dict(suite.software))


def _f(x, fmt="{:.0f}"):
    return na(x, fmt=fmt)


def result_rows(results) -> tuple[tuple[str, ...], ...]:
    rows = []
    for r in results:
        if r.time_us is None:
            rows.append((r.kernel, f"{r.k}x{r.n}", str(r.m), "-", "N/A", "N/A", "N/A", "N/A", "N/A",
                         f"skipped: {r.skipped}"))
            continue
        rows.append((r.kernel, f"{r.k}x{r.n}", str(r.m), r.path, _f(r.time_us, "{:.1f}"), _f(r.gbs),
                     _f(r.pct_measured_bw, "{:.0f}%"), _f(r.tflops, "{:.1f}"), _f(r.pct_table_peak, "{:.0f}%"),
                     r.config))
    return tuple(rows)


def to_doc(suite: Suite, calibration_path: str | None = None) -> Doc:
    kv = [
        ("GPU", f"{suite.device_name} (sm_{suite.cc[0]}{suite.cc[1]}, {suite.sm_count} SMs, id {suite.gpu_id})"),
        ("copy bandwidth", f"{_f(suite.copy_gbs)} GB/s measured; table {_f(suite.table_bandwidth_gbs)} GB/s"),
        ("read bandwidth", f"{_f(suite.read_gbs)} GB/s measured"),
        ("activations", f"{suite.act_dtype}; dense MMA class {suite.mma_class}, "
                        f"table peak {_f(suite.table_peak_tflops, '{:.0f}')} TFLOPS"),
        ("timing", suite.timing),
        ("software", ", ".join(f"{k} {v}" for k, v in sorted(suite.software.items()))),
        ("elapsed", f"{suite.elapsed_s:.0f} s"),
    ]
    blocks: list[Block] = [Heading(f"Microbenchmarks on {suite.device_name}"), KeyValues(tuple(kv))]
    rows = result_rows(suite.results)
    styles = tuple("warn" if r.time_us is None else "normal" for r in suite.results)
    blocks.append(Table(("kernel", "K x N", "M", "path", "us", "GB/s", "% meas. BW", "TFLOPS", "% peak", "config"),
                        rows, title="Best launch per kernel class, shape and M (median of repeats)",
                        row_styles=styles))
    shown = dict.fromkeys(r.kernel for r in suite.results)
    blocks.append(Bullets(tuple(f"{k}: {KERNEL_TITLES[k]}" for k in shown if k in KERNEL_TITLES),
                          title="Kernel classes", style="dim"))
    if suite.notes:
        blocks.append(Bullets(suite.notes, title="Notes", style="warn"))
    if calibration_path:
        blocks.append(Paragraph(f"Calibration saved: {calibration_path} (plan uses it for this GPU: the copy and read "
                                "bandwidth and the cuBLAS BF16 rates; the weight-only rows are our Triton kernels, "
                                "shown beside the plan, not taken for the engine's Marlin)", style="good"))
    return Doc(tuple(blocks))


def to_payload(suite: Suite, calibration: Calibration | None, calibration_path: str | None) -> dict:
    return {"available": True, "suite": suite, "copy_gbs": suite.copy_gbs, "read_gbs": suite.read_gbs,
            "calibration": calibration, "calibration_path": calibration_path}


def short_table(suite: Suite) -> str:
    """Plain-text summary for terminals without Rich (the GPU script prints this last)."""
    lines = [f"{suite.device_name}  copy {_f(suite.copy_gbs)} GB/s  read {_f(suite.read_gbs)} GB/s  "
             f"(table {_f(suite.table_bandwidth_gbs)} GB/s)  act {suite.act_dtype}"]
    head = ("kernel", "KxN", "M", "path", "us", "GB/s", "%copyBW", "TFLOPS", "%peak")
    rows = [row[:9] for row in result_rows(suite.results)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, *rows):
        lines.append("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))
    return "\n".join(lines)

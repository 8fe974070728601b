"""Run the microbenchmark suite on a device (torch + triton; import this module lazily).

Timing (GPU): warm-up (compiles), one eager estimate, then the calls are captured in a CUDA graph
(so launch overhead of ~10 us kernels is not measured) and replayed; each replay is bracketed by
CUDA events and the result is the median over replays of time / calls. Weights rotate through
enough copies to exceed 3x the L2 size, so every call streams its weights from DRAM (activations
stay hot, as in a real decode step). Data is random, never zeros. If graph capture fails, eager
launches are timed the same way and the suite says so.

Correctness first: before timing, every Triton kernel class is checked on the device against a
plain-torch dequantize + matmul; a class that disagrees is reported, not timed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable

import torch

from advisor.microbench import configs as cfgs
from advisor.microbench.results import (
    CLASS_FORMAT, CaseResult, Stream, Suite, gemm_bytes, mma_class_for, slug, with_metrics,
)
from advisor.microbench.shapes import Shape

Progress = Callable[[int, int, str], None]
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
CLASSES = ("bf16", "w4a16_nvfp4", "w8a16_fp8", "w4a16_int4")


@dataclass
class Budget:
    """Wall-clock budget: when it runs low only the first candidate per case is timed; when it is
    spent the remaining cases are reported as skipped."""

    seconds: float | None
    start: float = 0.0

    def __post_init__(self):
        self.start = time.monotonic()

    def left(self) -> float:
        return math.inf if self.seconds is None else self.seconds - (time.monotonic() - self.start)


# ----------------------------------------------------------------------------- timers
class CudaTimer:
    """Events + CUDA graphs on a GPU (see module docstring)."""

    def __init__(self, reps: int = 15, replay_s: float = 1e-3, use_graph: bool = True):
        self.reps, self.replay_s, self.use_graph = reps, replay_s, use_graph
        self.graph_failures = 0
        self.graphs = 0

    def _events(self, run_once: Callable[[], None], reps: int) -> list[float]:
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run_once()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return times

    def seconds_per_call(self, call: Callable[[int], None], variants: int) -> float:
        for i in range(variants):            # warm-up: compile, first touch
            call(i)
        torch.cuda.synchronize()
        est = min(self._events(lambda: call(0), 3))
        inner = max(variants, min(200, int(self.replay_s / max(est, 1e-7))))
        inner = max(1, inner)

        def loop():
            for j in range(inner):
                call(j % variants)

        if self.use_graph:
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    loop()
                graph.replay()
                torch.cuda.synchronize()
                self.graphs += 1
                times = self._events(graph.replay, self.reps)
                del graph
                return sorted(times)[len(times) // 2] / inner
            except Exception:               # noqa: BLE001 - any capture problem: time eagerly
                self.graph_failures += 1
                torch.cuda.synchronize()
        times = self._events(loop, self.reps)
        return sorted(times)[len(times) // 2] / inner

    def describe(self) -> str:
        how = "CUDA graphs" if self.graphs and not self.graph_failures else (
            "eager launches" if not self.graphs else f"CUDA graphs ({self.graph_failures} cases eager)")
        return (f"median of {self.reps} timed replays, {how}, CUDA events, weights rotated through "
                f"> 3x L2, random data")


class WallTimer:
    """CPU stand-in (tests under TRITON_INTERPRET=1): wall-clock, one call after one warm-up."""

    reps = 1

    def seconds_per_call(self, call: Callable[[int], None], variants: int) -> float:
        call(0)
        t = time.perf_counter()
        call(0)
        return max(time.perf_counter() - t, 1e-9)

    def describe(self) -> str:
        return "wall clock (CPU interpreter; not a performance number)"


# ----------------------------------------------------------------------------- device
@dataclass(frozen=True)
class Device:
    name: str
    uuid: str | None
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    free_bytes: int
    torch_device: str
    # (N, K) shapes and the Ms each is checked at. A ragged shape runs the masked tiles; the even one runs
    # what the timings run on large shapes: every tile inside W, the unmasked path (NVFP4's PTX block dot,
    # kernels.weight_only.gemv_even), which the ragged shape alone never reaches
    verify_shapes: tuple[tuple[int, int], ...] = ((96, 256), (512, 1024))
    verify_ms: tuple[int, ...] = (1, 3, 64)


def cuda_device(index: int = 0) -> Device:
    """Describe CUDA device `index` and make it current (Triton launches on the current device)."""
    torch.cuda.set_device(index)
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    uuid = None if uuid is None else str(uuid)
    if uuid and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"                 # NVML spelling, as the probe reports it
    free, _ = torch.cuda.mem_get_info(index)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 * 2**20
    return Device(props.name, uuid, (props.major, props.minor), props.multi_processor_count, l2, int(free),
                  f"cuda:{index}")


# ----------------------------------------------------------------------------- streams
def measure_streams(dev: Device, timer, buffer_bytes: int | None = None) -> tuple[Stream, ...]:
    from kernels import bandwidth

    size = buffer_bytes or int(min(max(16 * dev.l2_bytes, 1 << 30), dev.free_bytes // 4))
    n = max(size // 4 // 4096, 1) * 4096
    x = torch.randn(n, device=dev.torch_device, dtype=torch.float32)
    y = torch.empty_like(x)
    partials = torch.empty(n // 4096, device=dev.torch_device, dtype=torch.float32)
    out = []
    for kind, programs in (("copy", None), ("copy", dev.sm_count * 16), ("read", None), ("read", dev.sm_count * 16)):
        if kind == "copy":
            t = timer.seconds_per_call(lambda i, x=x, y=y, p=programs: bandwidth.copy(x, y, programs=p), 1)
            moved = 2 * x.numel() * 4
        else:
            t = timer.seconds_per_call(lambda i, x=x, s=partials, p=programs: bandwidth.read_sum(x, s, programs=p), 1)
            moved = x.numel() * 4
        out.append(Stream(kind, moved / t / 1e9, n * 4 / 2**20,
                          "one pass" if programs is None else f"{programs} programs"))
    del x, y, partials
    return tuple(out)


# ----------------------------------------------------------------------------- verification
def verify(dev: Device, act, paths=("gemv", "gemm")) -> dict[str, str]:
    """Kernel classes whose Triton result disagrees with plain torch on this device -> reason."""
    from kernels import formats

    bad = {}
    g = torch.Generator(device=dev.torch_device).manual_seed(1234)
    for cls, fmt in CLASS_FORMAT.items():
        try:
            for n, k in dev.verify_shapes:
                w = formats.random_weight(fmt, n, k, dev.torch_device, g, group=128)
                ref_w = formats.reference_dequantize(w)
                for m in dev.verify_ms:
                    a = formats.random_activations(m, k, act, dev.torch_device, g)
                    ref = a.float() @ ref_w.t()
                    for c in cfgs.candidates(m, k, n, dev.sm_count):
                        if c.path not in paths:
                            continue
                        out = _launch(c, a, w)
                        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                        if not err < 2e-2:
                            bad[cls] = f"wrong result on this GPU ({c.text}, {m}x{n}x{k}: rel. error {err:.1e})"
                            break
                    if cls in bad:
                        break
                if cls in bad:
                    break
        except Exception as exc:  # noqa: BLE001 - an arch limit or compile error is a finding
            bad[cls] = _reason(exc)
    return bad


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(exc).__name__}: {first[:200]}"


def _launch(c: cfgs.Candidate, a, w, out=None):
    from kernels import weight_only

    if c.path == "gemv":
        return weight_only.gemv(a, w, weight_only.GemvConfig(**c.params), out=out)
    return weight_only.gemm(a, w, weight_only.GemmConfig(**c.params), out=out)


# ----------------------------------------------------------------------------- the suite
def _variants(weight_bytes: int, dev: Device, cap: int = 8) -> int:
    want = math.ceil(3 * dev.l2_bytes / max(weight_bytes, 1))
    fit = max(1, int(dev.free_bytes * 0.3) // max(weight_bytes, 1))
    return max(1, min(want, cap, fit))


def _case_memory(m: int, k: int, n: int, act_bytes: int) -> int:
    return m * k * act_bytes + m * n * 4


def run_suite(shapes: tuple[Shape, ...], ms: tuple[int, ...], *, dev: Device | None = None, timer=None,
              spec=None, gpu_id: str | None = None, classes: tuple[str, ...] = CLASSES,
              budget_s: float | None = None, progress: Progress | None = None,
              stream_bytes: int | None = None, act_dtype: str | None = None) -> Suite:
    """Measure bandwidth, then every kernel class x shape x M (best candidate each)."""
    import triton

    from kernels import baseline, formats

    budget = Budget(budget_s)
    dev = dev or cuda_device()
    timer = timer or CudaTimer()
    default_act, arch_skip = cfgs.arch_limits(dev.cc)
    act_name = act_dtype or default_act
    act = _DTYPES[act_name]
    act_bytes = torch.empty((), dtype=act).element_size()
    notes: list[str] = []
    if act_name == "fp16" and dev.cc < (8, 0):
        notes.append(f"sm_{dev.cc[0]}{dev.cc[1]} has no BF16 tensor cores: FP16 activations and MMA throughout")
    total = 1 + len(shapes) * len(classes) * len(ms)
    done = 0

    def tick(label: str):
        nonlocal done
        done += 1
        if progress:
            progress(done, total, label)

    streams = measure_streams(dev, timer, stream_bytes)
    tick("bandwidth")
    copy_gbs = max(s.gbs for s in streams if s.kind == "copy")
    table_bw = getattr(spec, "bandwidth_gbs", None)
    table_peak = _table_peak(spec, act_name)

    paths: tuple[str, ...] = ("gemv", "gemm")
    if arch_skip is None and dev.torch_device.startswith("cuda"):
        from kernels.arch import dot_lowering

        lowering, detail = dot_lowering(dev.cc, act_name)
        if lowering == "unknown":
            arch_skip = f"Triton cannot compile for sm_{dev.cc[0]}{dev.cc[1]}: {detail}"
        elif lowering == "fma":
            paths = ("gemv",)
            notes.append(f"tl.dot path skipped: {detail}; weight-only classes measured with the GEMV "
                         f"path only (M <= {cfgs.GEMV_MAX_M})")
    broken = {} if (arch_skip or budget.left() <= 0) else verify(dev, act, paths=paths)
    for cls, why in broken.items():
        notes.append(f"{cls}: skipped, {why}")

    results: list[CaseResult] = []
    g = torch.Generator(device=dev.torch_device).manual_seed(0)
    for shape in shapes:
        k, n = shape.k, shape.n
        for cls in classes:
            skip = None if cls == "bf16" else (arch_skip or broken.get(cls))
            weights, wbytes = [], 0
            if skip is None:
                try:
                    if cls == "bf16":
                        one = baseline.random_weight(n, k, act, dev.torch_device, g)
                        wbytes = one.numel() * one.element_size()
                        weights = [one] + [baseline.random_weight(n, k, act, dev.torch_device, g)
                                           for _ in range(_variants(wbytes, dev) - 1)]
                    else:
                        one = formats.random_weight(CLASS_FORMAT[cls], n, k, dev.torch_device, g)
                        wbytes = one.nbytes()
                        weights = [one] + [formats.random_weight(CLASS_FORMAT[cls], n, k, dev.torch_device, g)
                                           for _ in range(_variants(wbytes, dev) - 1)]
                except (ValueError, RuntimeError) as exc:
                    skip = _reason(exc)
            for m in ms:
                base = CaseResult(cls, m, k, n, bytes_moved=gemm_bytes(m, k, n, wbytes, act_bytes, act_bytes),
                                  flops=2 * m * n * k)
                if skip is None and budget.left() <= 0:
                    results.append(replace(base, skipped="time budget spent"))
                elif skip is not None:
                    results.append(replace(base, skipped=skip))
                elif _case_memory(m, k, n, act_bytes) > dev.free_bytes * 0.4:
                    results.append(replace(base, skipped="activations + output do not fit in free memory"))
                elif cls != "bf16" and not any(c.path in paths for c in cfgs.candidates(m, k, n, dev.sm_count)):
                    results.append(replace(base, skipped=f"no Triton path for M={m} on this arch "
                                                         f"(tl.dot lowers to FMA)"))
                else:
                    results.append(_run_case(base, cls, weights, act, dev, timer, budget,
                                             copy_gbs, table_bw, table_peak, paths))
                tick(f"{cls} {shape.text} M={m}")
            del weights
            if dev.torch_device.startswith("cuda"):
                torch.cuda.empty_cache()
    software = {"torch": torch.__version__, "triton": triton.__version__}
    if torch.version.cuda:
        software["cuda"] = str(torch.version.cuda)
    return Suite(device_name=dev.name, uuid=dev.uuid, cc=dev.cc, sm_count=dev.sm_count,
                 gpu_id=gpu_id or slug(dev.name), act_dtype=act_name, streams=streams, results=tuple(results),
                 table_bandwidth_gbs=table_bw, table_peak_tflops=table_peak,
                 mma_class=mma_class_for(dev.cc, act_name), timing=timer.describe(), notes=tuple(notes),
                 software=software, elapsed_s=time.monotonic() - budget.start)


def _run_case(base: CaseResult, cls, weights, act, dev, timer, budget, copy_gbs, table_bw, table_peak,
              paths=("gemv", "gemm")):
    from kernels import baseline, formats

    m, k, n = base.m, base.k, base.n
    g = torch.Generator(device=dev.torch_device).manual_seed(m)
    a = formats.random_activations(m, k, act, dev.torch_device, g)
    if cls == "bf16":
        out = torch.empty((m, n), device=dev.torch_device, dtype=act)
        try:
            t = timer.seconds_per_call(lambda i: baseline.matmul(a, weights[i], out=out), len(weights))
        except Exception as exc:  # noqa: BLE001
            return replace(base, skipped=_reason(exc))
        r = replace(base, path="cublas" if dev.torch_device.startswith("cuda") else "torch",
                    config="torch.matmul", tried=1)
        return with_metrics(r, t, copy_gbs, table_bw, table_peak)
    best, tried, errors = None, 0, []
    group = weights[0].group if cls == "w4a16_int4" else 16
    for c in cfgs.candidates(m, k, n, dev.sm_count, group=group):
        if c.path not in paths:
            continue
        if tried and budget.left() < 30:
            break
        split = c.params["split_k"] > 1
        out = torch.empty((m, n), device=dev.torch_device, dtype=torch.float32 if split else act)
        try:
            t = timer.seconds_per_call(lambda i, c=c, out=out: _launch(c, a, weights[i], out=out), len(weights))
        except Exception as exc:  # noqa: BLE001 - a config the arch/compiler rejects
            errors.append(f"{c.text}: {_reason(exc)}")
            continue
        tried += 1
        if best is None or t < best[0]:
            best = (t, c)
    if best is None:
        return replace(base, skipped=errors[0] if errors else "no launch candidate", tried=0)
    t, c = best
    moved = base.bytes_moved + (m * n * (4 - act.itemsize) if c.params["split_k"] > 1 else 0)
    r = replace(base, path=c.path, config=c.text, tried=tried, bytes_moved=moved)
    return with_metrics(r, t, copy_gbs, table_bw, table_peak)


def _table_peak(spec, act_name: str) -> float | None:
    if spec is None or not getattr(spec, "peaks", None):
        return None
    v = spec.peaks.get("bf16" if act_name == "bf16" else "fp16_fp32acc")
    return float(v) if isinstance(v, (int, float)) else None

"""Streaming BF16/FP16 -> NVFP4 (ModelOpt unified HF layout) conversion, parallel over tensors.

Two passes over the quantized tensors: the first reads each once to find its amax (an integer
max over 16-bit patterns), so fused groups spread over shards get their joint global scale; the
second quantizes row chunks. Work is cut into spans (a tensor, or a row range of up to
SPAN_ELEMENTS values of a large one) that `Options.threads` workers (`--jobs`) take in any order:
a span is read through a memory map of just its bytes (`MappedRows`, unmapped when done), quantized
chunk by chunk in the worker's reusable buffers (`ChunkQuantizer`) and written with positional
writes at its final offset in the output file (`ShardFile`). Workers never wait for each other's
order, and memory is one span's pages plus a few MB per worker whatever the tensor sizes.
Unquantized tensors are copied by the kernel (copy_file_range) where it can. The output goes to a
hidden temporary folder next to DST that is renamed only when everything is written.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from advisor.convert import nvfp4_math as m
from advisor.convert.chunk_quantizer import ChunkQuantizer
from advisor.convert.destination import check_destination, remove_stale_partials, staged_output
from advisor.convert.plan import Options, Plan, build_plan
from advisor.convert.safetensors_io import MappedRows, ShardFile, TensorEntry, read_into
from advisor.convert.source import INDEX_NAME, open_checkpoint
from advisor.errors import BadInput

# progress(stage, done_bytes, total_bytes, tensor_name); stage is "scan" or "write"
Progress = Callable[[str, int, int, str], None]

SPAN_ELEMENTS = 1 << 23        # a work item: large tensors are split so every worker has work
COPY_BYTES = 8 << 20           # buffer of a copy that the kernel cannot do itself
INF_BITS = {"BF16": 0x7F80, "F16": 0x7C00}


@dataclass(frozen=True)
class ConvertResult:
    destination: Path
    plan: Plan
    input_bytes: int
    output_bytes: int
    seconds: float
    files: tuple[str, ...]


def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# ------------------------------------------------------------------ per-worker state

class _Worker(threading.local):
    """Each thread's quantizer and scratch buffer, reused for every chunk it handles."""

    def __init__(self):
        self.quantizer = ChunkQuantizer()
        self.scratch = np.empty(0, np.uint16)


class _Files:
    """Read descriptors of the source shards, shared by all workers (reads are positional)."""

    def __init__(self):
        self._fds: dict[Path, int] = {}
        self._lock = threading.Lock()

    def fd(self, path: Path) -> int:
        with self._lock:
            if path not in self._fds:
                try:
                    self._fds[path] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except OSError as err:
                    raise BadInput(f"cannot read: {err.strerror or err}", path=str(path)) from None
            return self._fds[path]

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _row_step(k: int, chunk_elements: int) -> int:
    return max(1, chunk_elements // max(k, 1))


def _spans(n: int, k: int) -> list[tuple[int, int]]:
    step = max(1, SPAN_ELEMENTS // max(k, 1))
    return [(a, min(n, a + step)) for a in range(0, n, step)] or [(0, 0)]


def _run(items: Iterable[Callable[[threading.Event], object]], threads: int,
         done: Callable[[object], None]) -> None:
    """Run the work items on `threads` workers (inline with one); `done(result)` runs in this
    thread, in submission order. On an error or an interrupt the other items stop at their next
    chunk and the error is raised here."""
    stop = threading.Event()
    if threads <= 1:
        for item in items:
            done(item(stop))
        return
    pool = ThreadPoolExecutor(threads, thread_name_prefix="convert")
    pending: deque[Future] = deque()
    try:
        for item in items:
            pending.append(pool.submit(item, stop))
            while len(pending) >= 2 * threads:
                done(pending.popleft().result())
        while pending:
            done(pending.popleft().result())
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------ per-tensor work

def _check_finite(entry: TensorEntry, mag_bits: int) -> None:
    if mag_bits >= INF_BITS[entry.dtype]:
        raise BadInput(f"tensor {entry.name} contains inf or NaN", path=str(entry.file))


def _amax_bits_of(bits: np.ndarray, worker: _Worker) -> int:
    """Largest magnitude as bit pattern (BF16 and FP16 magnitudes sort like their bits)."""
    if bits.size == 0:
        return 0
    if worker.scratch.size < bits.size:
        worker.scratch = np.empty(bits.size, np.uint16)
    mag = np.bitwise_and(bits.reshape(-1), np.uint16(0x7FFF), out=worker.scratch[: bits.size])
    return int(mag.max())


def _to_float(bits: int, dtype: str) -> float:
    return float(np.array([bits], np.uint16).view(np.float16)[0]) if dtype == "F16" else \
        float(m.bf16_to_f32(np.array([bits], np.uint16))[0])


def tensor_amax(entry: TensorEntry, chunk_elements: int = 1 << 22) -> float:
    """max |w| of a BF16/FP16 tensor (exact); non-finite values are refused."""
    files, worker = _Files(), _Worker()
    try:
        return _to_float(_scan_span(files, worker, entry, 0, entry.shape[0], chunk_elements, threading.Event()),
                         entry.dtype)
    finally:
        files.close()


def _scan_span(files: _Files, worker: _Worker, entry: TensorEntry, a: int, b: int, chunk_elements: int,
               stop: threading.Event) -> int:
    k = entry.shape[1]
    step = _row_step(k, chunk_elements)
    best = 0
    with MappedRows(files.fd(entry.file), entry, a, b) as span:
        for r in range(0, b - a, step):
            if stop.is_set():
                break
            best = max(best, _amax_bits_of(span.rows[r:r + step], worker))
    _check_finite(entry, best)
    return best


def quantize_chunks(read_rows: Callable[[int, int], np.ndarray], shape: tuple[int, int], dtype: str,
                    wsf2: np.float32, *, threads: int = 1, chunk_elements: int = 1 << 18,
                    signed_zero: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (packed, block scale bytes) per row chunk, in row order. `read_rows(a, b)` returns
    raw 16-bit patterns of rows a..b. Work is spread over threads (NumPy releases the GIL)."""
    n, k = shape
    step = _row_step(k, chunk_elements)
    local = _Worker()

    def work(start: int):
        bits = read_rows(start, min(n, start + step))
        packed, scale = local.quantizer.quantize(bits, dtype, wsf2, signed_zero=signed_zero)
        return packed.copy(), scale.copy()

    starts = range(0, n, step)
    if threads <= 1:
        for s in starts:
            yield work(s)
        return
    with ThreadPoolExecutor(threads) as pool:
        pending: deque = deque()
        for s in starts:
            pending.append(pool.submit(work, s))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# ------------------------------------------------------------------ conversion

def convert(src_dir: Path, dst_dir: Path, *, reference: Path | None = None, options: Options = Options(),
            progress: Progress | None = None) -> ConvertResult:
    src_dir, dst_dir = Path(src_dir), Path(dst_dir)
    check_destination(src_dir, dst_dir)
    src = open_checkpoint(src_dir)
    ref = open_checkpoint(Path(reference)) if reference is not None else None
    plan = build_plan(src, ref, options)
    need = plan.output_bytes + sum(p.stat().st_size for p in src.extra_files())
    free = shutil.disk_usage(dst_dir.resolve().parent).free
    if need > free:
        raise BadInput(f"not enough free space: the output needs {need / 1e9:.2f} GB, "
                       f"{free / 1e9:.2f} GB are free", path=str(dst_dir.resolve().parent))
    stale = remove_stale_partials(dst_dir)
    if stale:
        plan.notes.append(f"removed {len(stale)} partial output folder(s) of an earlier interrupted run "
                          f"({', '.join(stale[:3])})")
    t0 = time.perf_counter()
    files = _Files()
    try:
        scales = scan_global_scales(plan, progress, files)
        with staged_output(dst_dir) as tmp:
            written = _write_all(plan, scales, tmp, progress, files)
    finally:
        files.close()
    return ConvertResult(dst_dir, plan, src.total_bytes, plan.output_bytes, time.perf_counter() - t0,
                         tuple(written))


def scan_global_scales(plan: Plan, progress: Progress | None = None,
                       files: _Files | None = None) -> dict[str, np.float32]:
    """weight_scale_2 per quantized module: from the joint amax of its fused group."""
    own = files is None
    files = files or _Files()
    worker = _Worker()
    total = sum(plan.source.tensors[q.source].nbytes for q in plan.quantized.values())
    done = [0]
    amax_bits: dict[str, int] = {}

    def item(module: str, e: TensorEntry, a: int, b: int):
        def run(stop: threading.Event):
            return module, e, a, b, _scan_span(files, worker, e, a, b, plan.options.chunk_elements, stop)
        return run

    def finished(result) -> None:
        module, e, a, b, bits = result
        amax_bits[module] = max(amax_bits.get(module, 0), bits)
        done[0] += (b - a) * e.shape[1] * 2
        if progress:
            progress("scan", done[0], total, e.name)

    items = [item(q.module, e, a, b) for q in plan.quantized.values()
             for e in (plan.source.tensors[q.source],) for a, b in _spans(*e.shape)]
    try:
        _run(items, plan.options.threads, finished)
    finally:
        if own:
            files.close()
    amax = {x: _to_float(amax_bits.get(x, 0), plan.source.tensors[q.source].dtype)
            for x, q in plan.quantized.items()}
    zero = [x for x, a in amax.items() if a == 0.0]
    if zero:
        plan.notes.append(f"{len(zero)} quantized tensor(s) are all zero (e.g. {zero[0]}): ModelOpt 0.47 writes "
                          "NaN block scales for them (0/0), reproduced here; keep them in BF16 with --keep")
    out = {}
    for members in plan.groups.values():
        wsf2 = m.global_scale(max(amax[x] for x in members))
        for x in members:
            out[x] = wsf2
    return out


def _quantize_span(files: _Files, worker: _Worker, e: TensorEntry, a: int, b: int, wsf2: np.float32,
                   weight: tuple[ShardFile, str], scale: tuple[ShardFile, str], chunk_elements: int,
                   stop: threading.Event) -> None:
    k = e.shape[1]
    step = _row_step(k, chunk_elements)
    with MappedRows(files.fd(e.file), e, a, b) as span:
        for r in range(0, b - a, step):
            if stop.is_set():
                return
            packed, sc = worker.quantizer.quantize(span.rows[r:r + step], e.dtype, wsf2)
            weight[0].write(weight[1], (a + r) * (k // 2), packed)
            scale[0].write(scale[1], (a + r) * (k // m.BLOCK), sc)


def _copy_span(files: _Files, worker: _Worker, e: TensorEntry, a: int, b: int, out: ShardFile,
               stop: threading.Event) -> None:
    """Bytes a..b of a tensor, copied unchanged: in the kernel if it can, else through a buffer."""
    src = files.fd(e.file)
    pos = a
    try:
        while pos < b and not stop.is_set():
            n = os.copy_file_range(src, out.fd, min(b - pos, 1 << 30), e.offset + pos, out.offsets[e.name] + pos)
            if n <= 0:
                raise BadInput(f"tensor {e.name}: file ended early", path=str(e.file))
            pos += n
        out.note_written(e.name, a, b)
        return
    except (AttributeError, OSError) as err:
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO):
            raise
    if worker.scratch.size * 2 < COPY_BYTES:
        worker.scratch = np.empty(COPY_BYTES // 2, np.uint16)
    buf = worker.scratch.view(np.uint8)
    while pos < b and not stop.is_set():
        n = min(COPY_BYTES, b - pos)
        out.write_at_file(out.offsets[e.name] + pos, read_into(src, e, pos, buf[:n]))
        pos += n
    out.note_written(e.name, a, b)


def _write_all(plan: Plan, scales: dict[str, np.float32], tmp: Path, progress: Progress | None,
               files: _Files | None = None) -> list[str]:
    src = plan.source
    files = files or _Files()
    worker = _Worker()
    kinds: dict[str, tuple[str, str]] = {}   # output name -> (kind, module or source name)
    for q in plan.quantized.values():
        kinds[q.source] = ("weight", q.module)
        kinds[q.module + ".weight_scale"] = ("weight_scale", q.module)
        kinds[q.module + ".weight_scale_2"] = ("weight_scale_2", q.module)
        kinds[q.module + ".input_scale"] = ("input_scale", q.module)
    shard_of: dict[str, ShardFile] = {}
    opened: list[ShardFile] = []
    try:
        for fname, specs in plan.shards.items():
            f = ShardFile(tmp / fname, specs, {"format": "pt"})
            opened.append(f)
            for spec in specs:
                shard_of[spec.name] = f
        items = []
        for name, f in shard_of.items():
            kind, who = kinds.get(name, ("copy", name))
            if kind == "weight_scale_2":
                f.write(name, 0, scales[who].tobytes())
            elif kind == "input_scale":
                f.write(name, 0, plan.quantized[who].input_scale)
            elif kind == "weight":
                q = plan.quantized[who]
                e = src.tensors[q.source]
                for a, b in _spans(*q.shape):
                    items.append((e, (b - a) * e.shape[1] * 2, _quantize_item(
                        files, worker, e, a, b, scales[who], (f, name),
                        (shard_of[who + ".weight_scale"], who + ".weight_scale"), plan.options.chunk_elements)))
            elif kind == "copy":
                e = src.tensors[name]
                step = max(COPY_BYTES, SPAN_ELEMENTS * 2)
                for a in range(0, e.nbytes, step) or [0]:
                    b = min(e.nbytes, a + step)
                    items.append((e, b - a, _copy_item(files, worker, e, a, b, f)))
        total = src.total_bytes
        done = [0]

        def finished(result) -> None:
            e, nbytes = result
            done[0] += nbytes
            if progress:
                progress("write", done[0], total, e.name)

        _run([_tagged(e, nbytes, run) for e, nbytes, run in items], plan.options.threads, finished)
        for f in opened:
            f.close()
    except BaseException:
        for f in opened:
            f.abort()
        raise
    names = list(plan.shards)
    if len(plan.shards) > 1:
        metadata: dict = {"total_size": plan.output_bytes}
        if plan.reference is not None and plan.reference.index_metadata.get("total_parameters") is not None:
            # transformers' count; our tensors equal the reference's, so its count is ours
            metadata = {"total_parameters": plan.reference.index_metadata["total_parameters"], **metadata}
        index = {"metadata": metadata,
                 "weight_map": {s.name: f for f, specs in plan.shards.items()
                                for s in sorted(specs, key=lambda x: x.name)}}
        index["weight_map"] = dict(sorted(index["weight_map"].items()))
        _write_json(tmp / INDEX_NAME, index, indent=2)
        names.append(INDEX_NAME)
    for p in src.extra_files():
        shutil.copyfile(p, tmp / p.name)
        names.append(p.name)
    _write_json(tmp / "hf_quant_config.json", plan.hf_quant_config, indent=4)
    config = dict(src.config)
    config["quantization_config"] = plan.quantization_config
    _write_json(tmp / "config.json", config, indent=4)     # written last: a complete folder has it
    names += ["hf_quant_config.json", "config.json"]
    return names


def _quantize_item(files, worker, e, a, b, wsf2, weight, scale, chunk_elements):
    return lambda stop: _quantize_span(files, worker, e, a, b, wsf2, weight, scale, chunk_elements, stop)


def _copy_item(files, worker, e, a, b, out):
    return lambda stop: _copy_span(files, worker, e, a, b, out, stop)


def _tagged(e: TensorEntry, nbytes: int, run):
    def item(stop: threading.Event):
        run(stop)
        return e, nbytes
    return item


def _write_json(path: Path, data: dict, indent: int) -> None:
    with open(path, "x") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())


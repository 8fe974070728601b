"""Streaming BF16/FP16 -> NVFP4 (ModelOpt unified HF layout) conversion.

Two passes over the quantized tensors: the first reads each once to find its amax (integer max
over BF16 bit patterns), so fused groups spread over shards get their joint global scale; the
second quantizes row chunks and writes them straight to the output. Memory holds one chunk per
worker plus one tensor's block scales, far below "2x the largest tensor + 0.5 GB". The output
goes to a hidden temporary folder next to DST that is renamed only when everything is written.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from advisor.convert import nvfp4_math as m
from advisor.convert.plan import Options, Plan, build_plan
from advisor.convert.safetensors_io import RowReader, ShardWriter, TensorEntry, read_bytes
from advisor.convert.source import INDEX_NAME, open_checkpoint
from advisor.errors import BadInput

# progress(stage, done_bytes, total_bytes, tensor_name); stage is "scan" or "write"
Progress = Callable[[str, int, int, str], None]


@dataclass(frozen=True)
class ConvertResult:
    destination: Path
    plan: Plan
    input_bytes: int
    output_bytes: int
    seconds: float
    files: tuple[str, ...]


# ------------------------------------------------------------------ per-tensor work

def _row_step(k: int, chunk_elements: int) -> int:
    return max(1, chunk_elements // max(k, 1))


def tensor_amax(entry: TensorEntry, chunk_elements: int = 1 << 22) -> float:
    """max |w| of a BF16/FP16 tensor (exact), read in row chunks; non-finite values are refused."""
    n, k = entry.shape
    best = 0.0
    with RowReader(entry) as rd:
        for start in range(0, n, _row_step(k, chunk_elements)):
            bits = rd.rows(start, min(n, start + _row_step(k, chunk_elements)))
            if entry.dtype == "BF16":
                mag = int(m.amax_of_bf16(bits))
                if mag >= 0x7F80:
                    raise BadInput(f"tensor {entry.name} contains inf or NaN", path=str(entry.file))
                best = max(best, float(m.bf16_to_f32(np.array([mag], np.uint16))[0]))
            else:
                vals = bits.view(np.float16)
                if not np.isfinite(vals).all():
                    raise BadInput(f"tensor {entry.name} contains inf or NaN", path=str(entry.file))
                best = max(best, float(np.abs(vals).max()) if vals.size else 0.0)
    return best


def quantize_chunks(read_rows: Callable[[int, int], np.ndarray], shape: tuple[int, int], dtype: str,
                    wsf2: np.float32, *, threads: int = 1, chunk_elements: int = 1 << 16,
                    signed_zero: bool = False) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (packed, block scale bytes) per row chunk, in row order. `read_rows(a, b)` returns
    raw 16-bit patterns of rows a..b. Work is spread over threads (NumPy releases the GIL)."""
    n, k = shape
    step = _row_step(k, chunk_elements)

    def work(start: int):
        bits = read_rows(start, min(n, start + step))
        if dtype == "BF16":
            return m.quantize_bf16_rows(bits, wsf2, signed_zero=signed_zero)
        return m.quantize_f32_rows(bits.view(np.float16).astype(np.float32), wsf2, signed_zero=signed_zero)

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


# ------------------------------------------------------------------ destination handling

def check_destination(src: Path, dst: Path) -> None:
    """Everything that would make the final rename fail, checked before hours of work."""
    src_r, dst_r = src.resolve(), dst.resolve()
    if dst_r == src_r or src_r in dst_r.parents:
        raise BadInput("destination is the source or inside it; the source is never written", path=str(dst))
    if dst.is_symlink():
        raise BadInput("destination is a symbolic link; give the folder it points to (the finished output "
                       "is moved into place by a rename)", path=str(dst))
    cwd = Path.cwd().resolve()
    if dst_r == cwd or dst_r in cwd.parents:
        raise BadInput("destination is the current folder or contains it; name a new folder "
                       "(the finished output is moved into place by a rename)", path=str(dst))
    if dst.exists():
        if not dst.is_dir():
            raise BadInput("destination exists and is not a folder", path=str(dst))
        if any(dst.iterdir()):
            raise BadInput("destination folder is not empty; refusing to overwrite", path=str(dst))
    if not dst_r.parent.is_dir():
        raise BadInput("parent folder of the destination does not exist", path=str(dst))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: alive, someone else's
        return True
    return True


def remove_stale_partials(dst: Path) -> list[str]:
    """Partial folders of DST left by a killed run (SIGKILL, power loss) whose process is gone."""
    removed = []
    prefix = f".{dst.name}.partial-"
    for p in dst.resolve().parent.iterdir():      # not glob(): DST may contain [ or *
        if not p.name.startswith(prefix):
            continue
        pid = p.name[len(prefix):]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def _temp_dir(dst: Path) -> Path:
    tmp = dst.resolve().parent / f".{dst.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


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
    scales = scan_global_scales(plan, progress)
    try:
        tmp = _temp_dir(dst_dir)
    except OSError as err:
        raise BadInput(f"cannot create the temporary output folder next to the destination: "
                       f"{err.strerror or err}", path=str(dst_dir.resolve().parent)) from None
    try:
        files = _write_all(plan, scales, tmp, progress)
        if dst_dir.exists():
            dst_dir.rmdir()            # empty (checked above); rename needs the name free
        os.rename(tmp, dst_dir)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        what = "disk full" if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else "write failed"
        raise BadInput(f"{what}: {err.strerror or err}; nothing was written", path=str(dst_dir)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ConvertResult(dst_dir, plan, src.total_bytes, plan.output_bytes, time.perf_counter() - t0, tuple(files))


def scan_global_scales(plan: Plan, progress: Progress | None = None) -> dict[str, np.float32]:
    """weight_scale_2 per quantized module: from the joint amax of its fused group."""
    total = sum(plan.source.tensors[q.source].nbytes for q in plan.quantized.values())
    done = 0
    amax: dict[str, float] = {}
    for q in plan.quantized.values():
        e = plan.source.tensors[q.source]
        amax[q.module] = tensor_amax(e)
        done += e.nbytes
        if progress:
            progress("scan", done, total, q.source)
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


def _write_all(plan: Plan, scales: dict[str, np.float32], tmp: Path, progress: Progress | None) -> list[str]:
    src = plan.source
    total = src.total_bytes
    done = 0
    by_output: dict[str, tuple[str, str]] = {}   # output name -> (kind, module or source name)
    for q in plan.quantized.values():
        by_output[q.source] = ("weight", q.module)
        by_output[q.module + ".weight_scale"] = ("weight_scale", q.module)
        by_output[q.module + ".weight_scale_2"] = ("weight_scale_2", q.module)
        by_output[q.module + ".input_scale"] = ("input_scale", q.module)
    pending_scale: dict[str, np.ndarray] = {}
    for fname, specs in plan.shards.items():
        writer = ShardWriter(tmp / fname, specs, {"format": "pt"})
        try:
            for spec in specs:
                kind, who = by_output.get(spec.name, ("copy", spec.name))
                if kind == "weight":
                    q = plan.quantized[who]
                    e = src.tensors[q.source]
                    parts = []
                    with RowReader(e) as rd:
                        for packed, sc in quantize_chunks(rd.rows, q.shape, e.dtype, scales[who],
                                                          threads=plan.options.threads,
                                                          chunk_elements=plan.options.chunk_elements):
                            writer.write(spec.name, packed)
                            parts.append(sc)
                    pending_scale[who] = np.concatenate(parts) if parts else np.zeros((0, 0), np.uint8)
                    done += e.nbytes
                elif kind == "weight_scale":
                    writer.write(spec.name, pending_scale.pop(who))
                elif kind == "weight_scale_2":
                    writer.write(spec.name, scales[who].tobytes())
                elif kind == "input_scale":
                    writer.write(spec.name, plan.quantized[who].input_scale)
                else:
                    e = src.tensors[spec.name]
                    step = 64 << 20
                    for start in range(0, e.nbytes, step):
                        writer.write(spec.name, read_bytes(e, start, min(step, e.nbytes - start)))
                    done += e.nbytes
                if progress and kind in ("weight", "copy"):
                    progress("write", done, total, spec.name)
            writer.close()
        except BaseException:
            writer.abort()
            raise
    files = list(plan.shards)
    if len(plan.shards) > 1:
        metadata: dict = {"total_size": plan.output_bytes}
        if plan.reference is not None and plan.reference.index_metadata.get("total_parameters") is not None:
            # transformers' count; our tensors equal the reference's, so its count is ours
            metadata = {"total_parameters": plan.reference.index_metadata["total_parameters"], **metadata}
        index = {"metadata": metadata,
                 "weight_map": {s.name: f for f, specs in plan.shards.items() for s in sorted(specs, key=lambda x: x.name)}}
        index["weight_map"] = dict(sorted(index["weight_map"].items()))
        _write_json(tmp / INDEX_NAME, index, indent=2)
        files.append(INDEX_NAME)
    for p in src.extra_files():
        shutil.copyfile(p, tmp / p.name)
        files.append(p.name)
    _write_json(tmp / "hf_quant_config.json", plan.hf_quant_config, indent=4)
    config = dict(src.config)
    config["quantization_config"] = plan.quantization_config
    _write_json(tmp / "config.json", config, indent=4)     # written last: a complete folder has it
    files += ["hf_quant_config.json", "config.json"]
    return files


def _write_json(path: Path, data: dict, indent: int) -> None:
    with open(path, "x") as f:
        json.dump(data, f, indent=indent)
        f.flush()
        os.fsync(f.fileno())


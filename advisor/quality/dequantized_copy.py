"""`convert SRC DST --dequantized`: a BF16 copy of a quantized checkpoint ("fake quant").

Every quantized weight is replaced by its dequantized values (advisor.quality.layouts: our own
math for NVFP4, MXFP4, FP8, INT4/INT8), rounded to BF16 (round to nearest even); its scales, zero
points, g_idx and activation/KV scales are dropped; everything else is copied byte for byte, and
config.json loses its quantization_config. Any engine can then serve the *quantized weights* in
plain BF16 kernels: a reference for checking a quantized kernel path (`bench --reference-url`).
Activations are not quantized in the copy, so for W4A4/W8A8 checkpoints it reproduces the weight
error only.

Streaming like the converter: one chunk of rows at a time (a whole expert for gpt-oss stacks,
which are stored transposed), into a hidden folder renamed at the end. It lives beside the dequantization
it writes (quality/) and uses convert's shard writer and staged output, so convert never imports quality.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from advisor.convert import nvfp4_math as m
from advisor.convert.converter import Progress, _write_json
from advisor.convert.destination import check_destination, remove_stale_partials, staged_output
from advisor.convert.plan import _assign_shards
from advisor.convert.safetensors_io import OutSpec, ShardWriter, read_bytes
from advisor.convert.source import INDEX_NAME, open_checkpoint
from advisor.errors import BadInput
from advisor.quality.dequantize import Reader, chunk_rows
from advisor.quality.layouts import QuantTensor, detect, quant_config

# configs of quantizers that would make a loader treat the BF16 copy as quantized again
QUANT_CONFIG_FILES = ("quantize_config.json", "quant_config.json", "hf_quant_config.json")


def _plain_config(config: dict) -> dict:
    out = {k: v for k, v in config.items() if k != "quantization_config"}
    if isinstance(out.get("text_config"), dict):
        out["text_config"] = {k: v for k, v in out["text_config"].items() if k != "quantization_config"}
    for key in ("torch_dtype", "dtype"):
        if key in out:
            out[key] = "bfloat16"
    return out


def _write_weight(writer: ShardWriter, qt: QuantTensor) -> None:
    reader = Reader(qt)
    try:
        if qt.layout.producer == "gpt-oss":           # stored [E, out, in/32, 16]; BF16 is [E, in, out]
            per = qt.rows // qt.stack
            for e in range(qt.stack):
                vals = reader.rows(e * per, (e + 1) * per).values
                writer.write(qt.name, m.f32_to_bf16(np.ascontiguousarray(vals.T)))
            return
        step = chunk_rows(qt, reader)
        for a in range(0, qt.rows, step):
            vals = reader.rows(a, min(qt.rows, a + step)).values
            writer.write(qt.name, m.f32_to_bf16(vals))
    finally:
        reader.close()


def dequantize_checkpoint(src_dir: Path, dst_dir: Path, *, max_shard_bytes: int = 10 * 10**9,
                          progress: Progress | None = None) -> dict:
    """Write the BF16 copy; returns a summary (tensors dequantized, formats, files, bytes, notes)."""
    src_dir, dst_dir = Path(src_dir), Path(dst_dir)
    check_destination(src_dir, dst_dir)
    src = open_checkpoint(src_dir)
    qts, _kept = detect(src)
    if not qts:
        raise BadInput("nothing to dequantize: every weight is already BF16/FP16/F32", path=str(src_dir))
    owner = {name: qt for qt in qts for name in qt.stored_names}
    specs: list[OutSpec] = []
    emitted: set[str] = set()
    for name, e in src.tensors.items():          # source order; a weight takes its first part's place
        qt = owner.get(name)
        if qt is None:
            specs.append(OutSpec(name, e.dtype, e.shape))
        elif qt.name not in emitted:
            emitted.add(qt.name)
            specs.append(OutSpec(qt.name, "BF16", qt.out_shape))
    names = [s.name for s in specs]
    if len(names) != len(set(names)):
        dup = next(n for n in names if names.count(n) > 1)
        raise BadInput(f"tensor {dup} exists both quantized and unquantized", path=str(src_dir))
    notes: list[str] = []
    shards = _assign_shards(specs, None, max_shard_bytes, notes)
    out_bytes = sum(s.nbytes for f in shards.values() for s in f)
    free = shutil.disk_usage(dst_dir.resolve().parent).free
    if out_bytes > free:
        raise BadInput(f"not enough free space: the BF16 copy needs {out_bytes / 1e9:.2f} GB, {free / 1e9:.2f} GB "
                       "are free", path=str(dst_dir.resolve().parent))
    remove_stale_partials(dst_dir)
    t0 = time.perf_counter()
    by_name = {qt.name: qt for qt in qts}
    total, done = out_bytes, 0
    with staged_output(dst_dir) as tmp:
        for fname, file_specs in shards.items():
            writer = ShardWriter(tmp / fname, file_specs, {"format": "pt"})
            try:
                for spec in file_specs:
                    qt = by_name.get(spec.name)
                    if qt is not None:
                        _write_weight(writer, qt)
                    else:
                        e = src.tensors[spec.name]
                        for start in range(0, e.nbytes, 64 << 20):
                            writer.write(spec.name, read_bytes(e, start, min(64 << 20, e.nbytes - start)))
                    done += spec.nbytes
                    if progress:
                        progress("write", done, total, spec.name)
                writer.close()
            except BaseException:
                writer.abort()
                raise
        files = list(shards)
        if len(shards) > 1:
            index = {"metadata": {"total_size": out_bytes},
                     "weight_map": dict(sorted((s.name, f) for f, ss in shards.items() for s in ss))}
            _write_json(tmp / INDEX_NAME, index, indent=2)
            files.append(INDEX_NAME)
        for p in src.extra_files():
            if p.name not in QUANT_CONFIG_FILES:
                shutil.copyfile(p, tmp / p.name)
                files.append(p.name)
        _write_json(tmp / "config.json", _plain_config(src.config), indent=2)
        files.append("config.json")
    formats = sorted({qt.layout.label for qt in qts})
    if any("input_scale" in qt.parts or "input_global_scale" in qt.parts for qt in qts) or \
            any(isinstance(g, dict) and g.get("input_activations")
                for g in (quant_config(src).get("config_groups") or {}).values()):
        notes.append("the source quantizes activations too (W4A4/W8A8): the BF16 copy reproduces the weight error "
                     "only, its activations stay BF16")
    return {"source": str(src_dir), "destination": str(dst_dir), "dequantized": len(qts), "formats": formats,
            "tensors": [qt.name for qt in qts], "output_bytes": out_bytes, "files": files,
            "seconds": time.perf_counter() - t0, "notes": notes}

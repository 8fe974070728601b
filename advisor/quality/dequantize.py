"""Dequantization of the layouts advisor.quality.layouts detects: row ranges of a module's logical
matrix [rows, K] (3-D expert stacks flattened to rows = experts x out) to float32, one chunk at a time.

Math per layout (w = dequantized weight; codes unpacked with advisor.quality.codecs):
- NVFP4, ModelOpt:           w = e2m1[code] * (f32(e4m3 weight_scale) * weight_scale_2)      (§2.5)
- NVFP4, compressed-tensors: w = e2m1[code] * (f32(e4m3 weight_scale) / weight_global_scale) (§3.4,
                             compressed_tensors forward_helpers._dequantize: scale / global_scale)
- MXFP4 (CT, gpt-oss):       w = e2m1[code] * 2^(e8m0 - 127)                                  (§3.3, §4.5)
- FP8 E4M3/E5M2:             w = fp8[code] * scale, scale per tensor / row / 2-D block / group (§2.7, §4.1)
- INT, compressed-tensors:   w = ((code - 2^(b-1)) - zero_point) * scale[group]                (§3.3)
- INT8 (I8 weight):          w = (q - zero_point) * scale
- GPTQ:                      w = scale[g_idx[k]] * (code - (zero[g_idx[k]] + 1)); v2 drops the +1 (§4.2)
- AWQ (gemm):                w = (code - zero[k // g]) * scale[k // g], AWQ column order       (§4.3)
- INT4, ModelOpt W4A16_AWQ:  w = q * weight_scale[k // g], q signed 4-bit paired along rows (§2.4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from advisor.convert.safetensors_io import NUMPY_VIEW, TensorEntry
from advisor.errors import BadInput
from advisor.quality import codecs as c
from advisor.quality.layouts import (QuantTensor, read_small)


@dataclass(frozen=True)
class Dequant:
    values: np.ndarray      # float32 [r, K]
    at_limit: np.ndarray    # bool [r, K]: code at the format's largest magnitude (clipping possible)
    half_step: np.ndarray   # float32 [r, K]: half the spacing below that largest magnitude



def _rows2d(e: TensorEntry) -> np.ndarray:
    """Memory map of a tensor as a 2-D matrix [leading dims, last dim] (no copy)."""
    if e.nbytes == 0:
        return np.zeros((0, e.shape[-1] if e.shape else 0), NUMPY_VIEW[e.dtype])
    cols = e.shape[-1]
    return np.memmap(e.file, dtype=NUMPY_VIEW[e.dtype], mode="r", offset=e.offset,
                     shape=(math.prod(e.shape[:-1]), cols))


class Reader:
    """Row ranges of one quantized weight, dequantized. Small parts (global scales, zero points,
    g_idx) are read once; large ones are memory maps."""

    def __init__(self, qt: QuantTensor):
        self.qt = qt
        p, kind, prod = qt.parts, qt.layout.kind, qt.layout.producer
        self.per = qt.rows // qt.stack
        if kind == "nvfp4":
            self.main, self.scale = _rows2d(p.get("weight_packed") or p["weight"]), _rows2d(p["weight_scale"])
            if prod == "modelopt":
                self.glob = c.floats(read_small(p["weight_scale_2"]), p["weight_scale_2"].dtype).reshape(-1)
            else:
                self.glob = c.floats(read_small(p["weight_global_scale"]), p["weight_global_scale"].dtype).reshape(-1)
        elif kind == "mxfp4":
            if prod == "gpt-oss":
                b = p["blocks"]
                e, n, g, half = b.shape
                self.main = np.memmap(b.file, np.uint8, "r", offset=b.offset, shape=(e * n, g * half))
                self.scale = np.memmap(p["scales"].file, np.uint8, "r", offset=p["scales"].offset, shape=(e * n, g))
            else:
                self.main, self.scale = _rows2d(p.get("weight_packed") or p["weight"]), _rows2d(p["weight_scale"])
        elif kind == "fp8":
            self.main = _rows2d(p["weight"])
            sc = p.get("weight_scale_inv") or p["weight_scale"]
            self.scale = c.floats(read_small(sc), sc.dtype)
            self.table, _, self.half = c.FP8_TABLES[p["weight"].dtype]
            self.limit_code = int(np.argmax(np.where(np.isfinite(self.table[:0x80]), self.table[:0x80], -1)))
        elif prod in ("compressed-tensors", "modelopt"):
            main = p.get("weight_packed") or p["weight"]
            self.main = _rows2d(main)
            self.scale = c.floats(read_small(p["weight_scale"]), p["weight_scale"].dtype)
            self.bits = qt.layout.bits
            self.zero = None
            if "weight_zero_point" in p:
                z = p["weight_zero_point"]
                raw = read_small(z)
                if z.dtype == "I32" and self.bits < 8:     # packed along dim 0, with the 2^(b-1) offset
                    cols = raw.shape[-1]
                    self.zero = (c.unpack_dense(raw.reshape(-1, cols).T, self.bits, qt.rows).T
                                 - (1 << (self.bits - 1))).astype(np.float32)
                else:
                    self.zero = raw.astype(np.float32).reshape(qt.rows, -1)
            self.g_idx = read_small(p["weight_g_idx"]).astype(np.int64) if "weight_g_idx" in p else None
            self.pqs = c.floats(read_small(p["pre_quant_scale"]), p["pre_quant_scale"].dtype).reshape(-1) \
                if "pre_quant_scale" in p else None
        else:                                                          # gptq / awq
            self.qweight = _rows2d(p["qweight"])
            self.scale = c.floats(read_small(p["scales"]), p["scales"].dtype)
            bits = qt.params["bits"]
            order = c.AWQ_ORDER if prod == "awq" else None
            self.zero = c.unpack_cols(read_small(p["qzeros"]), bits, order).astype(np.float32)
            if prod == "gptq":
                self.zero += qt.params["zero_offset"]
                gi = p.get("g_idx")
                self.g_idx = read_small(gi).astype(np.int64) if gi is not None else np.arange(qt.cols) // qt.group
                if self.g_idx.shape != (qt.cols,) or self.g_idx.min() < 0 or self.g_idx.max() >= self.scale.shape[0]:
                    raise BadInput(f"{qt.module}: g_idx does not map {qt.cols} columns to {self.scale.shape[0]} groups",
                                   path=str(gi.file if gi is not None else qt.parts['qweight'].file))
            else:
                self.g_idx = np.arange(qt.cols) // qt.group

    # a chunk must not split what one stored row holds: AWQ packs 8 output rows per word column,
    # ModelOpt INT4 two rows per byte, FP8 blocks share a scale over 128 rows
    @property
    def row_multiple(self) -> int:
        prod = self.qt.layout.producer
        if prod == "awq":
            return 8
        if self.qt.layout.kind == "int" and prod == "modelopt":
            return 2
        return self.qt.row_block

    def rows(self, a: int, b: int) -> Dequant:
        qt = self.qt
        kind, prod = qt.layout.kind, qt.layout.producer
        if kind in ("nvfp4", "mxfp4"):
            codes = c.fp4_nibbles(np.asarray(self.main[a:b]))
            raw = np.asarray(self.scale[a:b])
            if kind == "nvfp4":
                glob = self.glob[np.arange(a, b) // self.per] if self.glob.size > 1 else self.glob[0]
                glob = np.asarray(glob, np.float32).reshape(-1, 1) if np.ndim(glob) else np.float32(glob)
                with np.errstate(divide="ignore", invalid="ignore"):
                    den = (c.E4M3_VALUES[raw] * glob if prod == "modelopt" else c.E4M3_VALUES[raw] / glob)
            else:
                den = c.e8m0_values(raw)
            den = np.repeat(den.astype(np.float32), qt.group, axis=1)
            vals = (c.fp4_values(codes) * den).astype(np.float32)
            return Dequant(vals, (codes & 7) == 7, (c.E2M1_HALF_TOP_STEP * den).astype(np.float32))
        if kind == "fp8":
            codes = np.asarray(self.main[a:b])
            scale = self._fp8_scale(a, b)
            vals = (self.table[codes] * scale).astype(np.float32)
            return Dequant(vals, (codes & 0x7F) == self.limit_code,
                           np.broadcast_to(np.float32(self.half) * scale, vals.shape).astype(np.float32))
        if prod in ("gptq", "awq"):
            return self._gptq_awq(a, b)
        return self._int(a, b)

    def _fp8_scale(self, a: int, b: int) -> np.ndarray:
        qt, s = self.qt, self.scale
        if qt.layout.granularity == "tensor":
            if s.size == 1:
                return np.float32(s.reshape(-1)[0])
            return s.reshape(-1)[np.arange(a, b) // self.per].reshape(-1, 1)
        if qt.layout.granularity == "channel":
            return s.reshape(-1)[a:b].reshape(-1, 1)
        if qt.layout.granularity == "group":
            return np.repeat(s.reshape(qt.rows, -1)[a:b], qt.group, axis=1)
        br, bc = qt.params["block"]
        n = self.per
        idx = np.arange(a, b)
        blocks = s.reshape(qt.stack, -1, s.shape[-1])[idx // n, (idx % n) // br]
        return np.repeat(blocks, bc, axis=1)[:, :qt.cols]

    def _int(self, a: int, b: int) -> Dequant:
        qt = self.qt
        bits = self.bits
        if qt.layout.producer == "modelopt":                      # two signed nibbles per byte along rows
            raw = np.asarray(self.main[a // 2:(b + 1) // 2])    # chunks start on even rows (row_multiple)
            q = np.empty((raw.shape[0] * 2, qt.cols), np.int32)
            q[0::2], q[1::2] = raw & 0xF, raw >> 4
            q = np.where(q >= 8, q - 16, q)[: b - a]
        elif qt.parts.get("weight_packed") is not None:
            q = c.unpack_dense(np.asarray(self.main[a:b]), bits, qt.cols) - (1 << (bits - 1))
        else:
            q = np.asarray(self.main[a:b]).astype(np.int32)
        qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        at_limit = (q == qmin) | (q == qmax)
        if self.scale.size == 1:
            scale = np.full((b - a, qt.cols), self.scale.reshape(-1)[0], np.float32)
        else:
            s = self.scale.reshape(qt.rows, -1)[a:b]
            gi = self.g_idx if self.g_idx is not None else (np.arange(qt.cols) // qt.group if s.shape[1] > 1 else
                                                             np.zeros(qt.cols, np.int64))
            scale = s[:, gi]
        qf = q.astype(np.float32)
        if self.zero is not None:
            z = self.zero[a:b]
            gi = self.g_idx if self.g_idx is not None else (np.arange(qt.cols) // qt.group if z.shape[1] > 1 else
                                                             np.zeros(qt.cols, np.int64))
            qf = qf - z[:, gi]
        vals = (qf * scale).astype(np.float32)
        if self.pqs is not None:                                  # AWQ smoothing kept beside the weight
            vals *= self.pqs[None, :]
            scale = scale * np.abs(self.pqs)[None, :]
        return Dequant(vals, at_limit, (0.5 * np.abs(scale)).astype(np.float32))

    def _gptq_awq(self, a: int, b: int) -> Dequant:
        qt = self.qt
        bits = qt.params["bits"]
        if qt.layout.producer == "gptq":
            q = c.unpack_rows(np.asarray(self.qweight[:, a:b]), bits)          # [K, r]
        else:
            q = c.unpack_cols(np.asarray(self.qweight[:, a // 8:b // 8]), 4, c.AWQ_ORDER)
        assert self.zero is not None, "GPTQ/AWQ always carry qzeros (set in __init__)"
        s = self.scale[:, a:b][self.g_idx]                                     # [K, r]
        z = self.zero[:, a:b][self.g_idx]
        vals = ((q - z) * s).T.astype(np.float32)
        at_limit = ((q == 0) | (q == (1 << bits) - 1)).T
        return Dequant(np.ascontiguousarray(vals), np.ascontiguousarray(at_limit),
                       np.ascontiguousarray((0.5 * np.abs(s)).T.astype(np.float32)))

    def close(self) -> None:
        for name in ("main", "scale", "qweight"):
            if isinstance(getattr(self, name, None), np.memmap):
                setattr(self, name, None)


def chunk_rows(qt: QuantTensor, reader: Reader, elements: int = 1 << 18) -> int:
    """Rows per chunk: about `elements` values, a multiple of what a stored row group holds."""
    mult = reader.row_multiple
    step = max(1, elements // max(qt.cols, 1))
    return max(mult, step // mult * mult)

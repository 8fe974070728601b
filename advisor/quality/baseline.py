"""Round-to-nearest quantization of the reference in the candidate's own format and granularity:
the error a plain, correct quantizer makes on these very weights. It is the yardstick of the
verdict, because weight error depends on the weights (outliers, tails) as much as on the format.

- NVFP4: ModelOpt 0.47's exact arithmetic (advisor.convert.nvfp4_math), global scale from the
  fused group's joint amax, as ModelOpt and llm-compressor both do.
- MXFP4: OCP MX v1.0 §6.3: shared exponent floor(log2(block amax)) - 2 (E2M1's largest exponent),
  elements round to nearest E2M1, clamped to +-6.
- FP8: scale = amax / fp8 max per tensor / row / block / group, elements round to nearest.
- INT: symmetric scale = amax / (2^(b-1) - 0.5) (compressed-tensors' and GPTQ's (max-min)/(2^b-1)
  with min = -max), asymmetric scale = (max - min) / (2^b - 1) with a rounded zero point;
  contiguous groups (GPTQ act-order permutations are not reproduced).
"""

from __future__ import annotations

import numpy as np

from advisor.convert import nvfp4_math as m
from advisor.quality import codecs as c
from advisor.quality.layouts import QuantTensor


def _grid_round(x: np.ndarray, scale: np.ndarray, grid: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale > 0, x / scale, 0.0)
    return (c.rne_to_grid(q, grid) * scale).astype(np.float32)


def _grouped(x: np.ndarray, g: int) -> np.ndarray:
    r, k = x.shape
    return x.reshape(r, k // g, g)


def rtn(qt: QuantTensor, ref: np.ndarray, *, global_amax: np.ndarray | float, row0: int) -> np.ndarray:
    """Round-to-nearest values of reference rows [row0, row0 + len(ref)) (float32 [r, K]).
    `global_amax` is the per-tensor amax the format's global scale comes from (one value, or one
    per expert for stacks)."""
    kind, lay = qt.layout.kind, qt.layout
    r, k = ref.shape
    per = qt.rows // qt.stack
    if np.ndim(global_amax):
        amax_rows = np.asarray(global_amax, np.float32)[(row0 + np.arange(r)) // per].reshape(-1, 1)
    else:
        amax_rows = np.full((r, 1), global_amax, np.float32)
    if kind == "nvfp4":
        out = np.empty_like(ref)
        for a in np.unique(amax_rows):
            sel = amax_rows[:, 0] == a
            wsf2 = m.global_scale(float(a))
            packed, scale = m.quantize_f32_rows(ref[sel], wsf2)
            with np.errstate(invalid="ignore"):
                out[sel] = m.dequantize(packed, scale, wsf2)
        return out
    if kind == "mxfp4":
        blocks = _grouped(ref, 32)
        amax = np.abs(blocks).max(axis=2, keepdims=True)
        with np.errstate(divide="ignore"):
            exp = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2, 0)
        scale = np.ldexp(np.float32(1.0), exp.astype(np.int32)).astype(np.float32)
        return _grid_round(blocks, scale, c.E2M1_GRID).reshape(r, k)
    if kind == "fp8":
        fmax = c.E4M3_MAX if qt.parts["weight"].dtype == "F8_E4M3" else c.E5M2_MAX
        grid = c.E4M3_GRID if qt.parts["weight"].dtype == "F8_E4M3" else c.E5M2_GRID
        if lay.granularity == "tensor":
            scale = amax_rows / np.float32(fmax)
        elif lay.granularity == "channel":
            scale = np.abs(ref).max(axis=1, keepdims=True) / np.float32(fmax)
        elif lay.granularity == "group":
            groups = _grouped(ref, qt.group)
            return _grid_round(groups, np.abs(groups).max(axis=2, keepdims=True) / np.float32(fmax),
                               grid).reshape(r, k)
        else:
            br, bc = qt.params["block"]
            out = np.empty_like(ref)
            for s in range(0, r, br):                      # chunks start on block rows (row_multiple)
                blk = ref[s:s + br]
                kk = -(-k // bc) * bc
                pad = np.zeros((blk.shape[0], kk), np.float32)
                pad[:, :k] = blk
                amax = np.abs(pad.reshape(blk.shape[0], -1, bc)).max(axis=(0, 2))
                scale = np.repeat(amax / np.float32(fmax), bc)[:k][None, :]
                out[s:s + br] = _grid_round(blk, scale, grid)
            return out
        return _grid_round(ref, scale, grid)
    bits = lay.bits
    g = qt.group if lay.granularity == "group" else k
    blocks = _grouped(ref, g) if k % g == 0 else ref.reshape(r, 1, k)
    if lay.granularity == "tensor":
        blocks = ref.reshape(r, 1, k)
    symmetric = qt.params.get("symmetric", "weight_zero_point" not in qt.parts)
    qmax = (1 << bits) - 1
    if symmetric:
        amax = (amax_rows.reshape(r, 1, 1) if lay.granularity == "tensor"
                else np.abs(blocks).max(axis=2, keepdims=True))
        scale = amax / np.float32((1 << (bits - 1)) - 0.5)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.clip(np.rint(np.where(scale > 0, blocks / scale, 0)), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return (q * scale).astype(np.float32).reshape(r, k)
    lo = np.minimum(blocks.min(axis=2, keepdims=True), 0)
    hi = np.maximum(blocks.max(axis=2, keepdims=True), 0)
    scale = (hi - lo) / np.float32(qmax)
    with np.errstate(divide="ignore", invalid="ignore"):
        zp = np.where(scale > 0, np.rint(-lo / scale), 0)
        q = np.clip(np.rint(np.where(scale > 0, blocks / scale, 0)) + zp, 0, qmax)
    return ((q - zp) * scale).astype(np.float32).reshape(r, k)

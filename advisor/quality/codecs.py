"""Number formats of quantized weights as lookup tables and bit unpacking, in NumPy.

Every table maps a stored code to its exact float32 value; every unpacker returns the stored
integer codes. Sources: checkpoint-formats.md §2.5 (E2M1, E4M3), §3.3 (compressed-tensors dense
packing with a 2^(b-1) offset), §4.2 (GPTQ rows packed along K), §4.3 (AWQ column order
[0,2,4,6,1,3,5,7]), §4.5 (E8M0 exponent biased by 127).
"""

from __future__ import annotations

import numpy as np

from advisor.convert.nvfp4_math import E2M1_VALUES, E4M3_VALUES, bf16_to_f32

E2M1_MAX = 6.0
E2M1_HALF_TOP_STEP = 1.0        # codes 4.0 and 6.0: values past 7.0 are clipped, not rounded
E4M3_MAX = 448.0
E4M3_HALF_TOP_STEP = 16.0       # 416 -> 448
E5M2_MAX = 57344.0
E5M2_HALF_TOP_STEP = 4096.0     # 49152 -> 57344

# AutoAWQ packs the 8 columns of a word in the order [0,2,4,6,1,3,5,7] (vLLM quant_utils.awq_pack):
# nibble i holds column AWQ_ORDER[i].
AWQ_ORDER = np.array([0, 2, 4, 6, 1, 3, 5, 7])


def _e5m2_values() -> np.ndarray:
    vals = np.empty(256, np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 2) & 0x1F, code & 3
        if e == 0x1F:
            vals[code] = np.nan if m else sign * np.inf
        elif e == 0:
            vals[code] = sign * (m / 4) * 2.0**-14
        else:
            vals[code] = sign * (1 + m / 4) * 2.0 ** (e - 15)
    return vals


E5M2_VALUES = _e5m2_values()
FP8_TABLES = {"F8_E4M3": (E4M3_VALUES, E4M3_MAX, E4M3_HALF_TOP_STEP),
              "F8_E5M2": (E5M2_VALUES, E5M2_MAX, E5M2_HALF_TOP_STEP)}


def e8m0_values(codes: np.ndarray) -> np.ndarray:
    """E8M0 scale bytes -> 2^(code-127) as float32 (255 is NaN in the OCP MX spec)."""
    out = np.ldexp(np.float32(1.0), codes.astype(np.int32) - 127).astype(np.float32)
    out[codes == 255] = np.nan
    return out


def floats(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Raw stored values (the memmap view of a tensor) -> float32, for scale and weight dtypes."""
    if dtype == "BF16":
        return bf16_to_f32(np.ascontiguousarray(raw))
    if dtype == "F16":
        return np.asarray(raw).view(np.float16).astype(np.float32)
    if dtype in ("F32", "F64"):
        return np.asarray(raw, np.float32)
    if dtype in FP8_TABLES:
        return FP8_TABLES[dtype][0][np.asarray(raw)]
    if dtype in ("U8", "F8_E8M0"):
        return e8m0_values(np.asarray(raw))
    raise ValueError(f"no float reading for dtype {dtype}")


def fp4_nibbles(packed: np.ndarray) -> np.ndarray:
    """uint8 [R, C] with two E2M1 codes per byte (low nibble first) -> codes uint8 [R, 2C]."""
    rows, half = packed.shape
    codes = np.empty((rows, half * 2), np.uint8)
    codes[:, 0::2] = packed & 0xF
    codes[:, 1::2] = packed >> 4
    return codes


def fp4_values(codes: np.ndarray) -> np.ndarray:
    return E2M1_VALUES[codes]


def unpack_dense(words: np.ndarray, bits: int, count: int) -> np.ndarray:
    """compressed-tensors dense packing: element i of a row sits at bit i*bits of the row's int32
    words (little end first, crossing word boundaries). Returns unsigned codes int32 [R, count]."""
    w = np.ascontiguousarray(words).view(np.uint32).astype(np.uint64)
    rows = w.shape[0]
    w = np.concatenate([w, np.zeros((rows, 1), np.uint64)], axis=1)
    pos = np.arange(count, dtype=np.int64) * bits
    word, off = pos // 32, (pos % 32).astype(np.uint64)
    pair = w[:, word] | (w[:, word + 1] << np.uint64(32))
    return ((pair >> off) & np.uint64((1 << bits) - 1)).astype(np.int32)


def unpack_rows(words: np.ndarray, bits: int) -> np.ndarray:
    """GPTQ: int32 [K*bits/32, C] packed along rows (element k at bits (k % per)*bits of word k // per)
    -> unsigned codes int32 [K, C]."""
    per = 32 // bits
    w = np.ascontiguousarray(words).view(np.uint32)
    out = np.empty((w.shape[0] * per, w.shape[1]), np.int32)
    mask = np.uint32((1 << bits) - 1)
    for i in range(per):
        out[i::per] = ((w >> np.uint32(i * bits)) & mask).astype(np.int32)
    return out


def unpack_cols(words: np.ndarray, bits: int, order: np.ndarray | None = None) -> np.ndarray:
    """int32 [R, C*bits/32] packed along columns -> unsigned codes int32 [R, C]. `order[i]` is the
    column (within a word's group) that slot i holds (AWQ); None: slot i holds column i (GPTQ qzeros)."""
    per = 32 // bits
    w = np.ascontiguousarray(words).view(np.uint32)
    out = np.empty((w.shape[0], w.shape[1] * per), np.int32)
    mask = np.uint32((1 << bits) - 1)
    for i in range(per):
        col = i if order is None else int(order[i])
        out[:, col::per] = ((w >> np.uint32(i * bits)) & mask).astype(np.int32)
    return out


def rne_to_grid(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Nearest value of a sorted non-negative grid for |x| (ties to the even index), sign kept;
    beyond the grid's end saturates. Used by the round-to-nearest baselines."""
    a = np.abs(x).astype(np.float64)
    hi = np.clip(np.searchsorted(grid, a, side="left"), 0, len(grid) - 1)
    lo = np.clip(hi - 1, 0, len(grid) - 1)
    dlo, dhi = a - grid[lo], grid[hi] - a
    pick_lo = (lo != hi) & ((dlo < dhi) | ((dlo == dhi) & (lo % 2 == 0)))
    idx = np.where(grid[hi] <= a, hi, np.where(pick_lo, lo, hi))
    return np.copysign(grid[idx], x).astype(np.float32)


E2M1_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)
E4M3_GRID = np.array(sorted(float(v) for v in E4M3_VALUES[:0x7F]), np.float64)   # 0 .. 448
E5M2_GRID = np.array(sorted(float(v) for v in E5M2_VALUES[:0x7C]), np.float64)   # 0 .. 57344

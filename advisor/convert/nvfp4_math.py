"""NVFP4 quantization exactly as ModelOpt 0.47 computes it, vectorised with NumPy.

The procedure (checkpoint-formats.md §2.5, verified against `NVFP4QTensor` in tests):

    wsf2  = f32(f32(amax) / 2688)                 global scale, `weight_scale_2`
    d     = f32(6 * wsf2)
    s     = f32(block_amax / d); s[s == 0] = 1; clamp to [2^-9, 448]   (clamp: ModelOpt >= 0.45)
    scale = e4m3fn round-to-nearest-even(s)       `weight_scale`
    q     = f32(w / f32(e4m3(scale) * wsf2))
    code  = (q < 0) << 3 | e2m1_rne(|q|)          saturates at 6.0; NaN -> 7
    byte  = code[2j] | code[2j+1] << 4            element 2j in the low nibble

All arithmetic is float32 with IEEE rounding, which is what torch does on CPU.

E2M1 rounding uses a 4096-entry table indexed by the float32 bit pattern: every rounding
threshold of E2M1 (0.25, 0.75, 1.25, ... 5) has at most two mantissa bits, so the top 11 bits
of |q| (sign, exponent, two mantissa bits) plus one flag "are the lower 21 bits non-zero"
decide the code. ``(b >> 21) + ((b + 0x1FFFFF) >> 21)`` encodes exactly those (2f or 2f+1).
"""

from __future__ import annotations

import numpy as np

E2M1_MAX = 6.0
E4M3_MAX = 448.0
GLOBAL_DIVISOR = np.float32(E2M1_MAX * E4M3_MAX)  # 2688, exact
BLOCK = 16
SCALE_MIN = np.float32(2.0**-9)   # smallest e4m3fn subnormal; ModelOpt >= 0.45 clamps to it
SCALE_MAX = np.float32(E4M3_MAX)

E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
_E2M1_BOUNDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_E2M1_TIES_UP = (0.75, 1.75, 3.5)   # ModelOpt adds 1 at these exact values (ties to even code)


def _e4m3fn_values() -> np.ndarray:
    """float32 value of every e4m3fn byte (0x7F / 0xFF are NaN)."""
    vals = np.empty(256, np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 7
        if e == 0xF and m == 7:
            vals[code] = np.nan
        elif e == 0:
            vals[code] = sign * (m / 8) * 2.0**-6
        else:
            vals[code] = sign * (1 + m / 8) * 2.0 ** (e - 7)
    return vals


E4M3_VALUES = _e4m3fn_values()


def _classify(value: float, *, signed_zero: bool) -> int:
    """E2M1 code of one float32 value, ModelOpt semantics (`_cast_fp4`)."""
    if np.isnan(value):
        mag = 7
    else:
        a = abs(value)
        mag = int(np.searchsorted(_E2M1_BOUNDS, a, side="left")) + (1 if a in _E2M1_TIES_UP else 0)
    negative = value < 0 or (signed_zero and value == 0 and np.signbit(value))
    return (int(negative) << 3) | mag


def _e2m1_table(*, signed_zero: bool) -> np.ndarray:
    table = np.empty(4096, np.uint8)
    for idx in range(4096):
        f = idx // 2
        bits = (f << 21) + (idx & 1)   # exactly on the grid, or strictly inside the next cell
        value = float(np.array([bits], np.uint32).view(np.float32)[0])
        table[idx] = _classify(value, signed_zero=signed_zero)
    return table


# ModelOpt: sign from q < 0, so an input of exactly -0.0 gives code 0 and a small negative value
# that rounds to zero gives 0x8. The signed-zero table maps -0.0 to 0x8: used when re-quantizing
# dequantized data, where -0.0 stands for a stored FP4 negative zero.
_TABLE = _e2m1_table(signed_zero=False)
_TABLE_SIGNED_ZERO = _e2m1_table(signed_zero=True)
_TABLES = {
    False: (_TABLE, (_TABLE << 4).astype(np.uint8)),
    True: (_TABLE_SIGNED_ZERO, (_TABLE_SIGNED_ZERO << 4).astype(np.uint8)),
}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """BF16 raw bits (uint16) -> exact float32 values."""
    out = np.zeros(bits.shape, np.float32)
    out.view(np.uint16).reshape(*bits.shape, 2)[..., 1] = bits
    return out


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> BF16 raw bits, round-to-nearest-even (NaN kept quiet); what torch .to(bf16) does."""
    b = np.ascontiguousarray(values, np.float32).view(np.uint32)
    rounded = ((b + np.uint32(0x7FFF) + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def amax_of_bf16(bits: np.ndarray) -> np.uint16:
    """Largest |x| as BF16 magnitude bits. Non-negative BF16 bit patterns sort like their values,
    so the integer maximum of the magnitudes is the float maximum (>= 0x7F80 means inf/NaN)."""
    if bits.size == 0:
        return np.uint16(0)
    return np.bitwise_and(bits, np.uint16(0x7FFF)).max()


def global_scale(amax: float) -> np.float32:
    """`weight_scale_2` from the (group) amax: f32(amax) / 2688 in float32."""
    return np.float32(np.float32(amax) / GLOBAL_DIVISOR)


def e4m3_rne(s: np.ndarray) -> np.ndarray:
    """float32 in [2^-9, 448] (or NaN) -> e4m3fn bytes, round-to-nearest-even."""
    s = np.ascontiguousarray(s, np.float32)
    b = s.view(np.uint32)
    # normal range: round the f32 mantissa to 3 bits (RNE); (exp << 3 | mant) - (120 << 3) is the code
    r = b + np.uint32(0x7FFFF)
    r += (b >> 20) & 1
    r >>= 20
    r -= np.uint32(120 << 3)
    sub = s < np.float32(2.0**-6)
    if sub.any():                                   # subnormals: multiples of 2^-9, RNE; 8 -> 0x08
        r[sub] = np.rint(s[sub] * np.float32(512.0)).astype(np.uint32)
    code = r.astype(np.uint8)
    nan = np.isnan(s)
    if nan.any():   # all-zero tensor: 0/0. torch's cast keeps the NaN's sign; x86's default NaN is negative
        code[nan] = np.where(np.signbit(s[nan]), 0xFF, 0x7F)
    return code


def block_scales(block_amax: np.ndarray, wsf2: np.float32) -> np.ndarray:
    """Per-block `weight_scale` bytes from block amax (float32) and the global scale."""
    d = np.float32(np.float32(E2M1_MAX) * wsf2)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.divide(block_amax, d, dtype=np.float32)
    s[s == 0] = np.float32(1.0)
    np.clip(s, SCALE_MIN, SCALE_MAX, out=s)                 # NaN stays NaN, as torch.clamp
    return e4m3_rne(s)


def _block_max_bits(bits: np.ndarray) -> np.ndarray:
    """Per-16-block max of BF16 magnitudes (as bits). Transposing first lets NumPy reduce along
    contiguous rows, several times faster than a max over a short last axis."""
    rows, k = bits.shape
    mag = np.bitwise_and(bits, np.uint16(0x7FFF)).reshape(rows * (k // BLOCK), BLOCK).T.copy()
    return mag.max(axis=0).reshape(rows, k // BLOCK)


def quantize_bf16_rows(bits: np.ndarray, wsf2: np.float32, *, signed_zero: bool = False):
    """Quantize BF16 rows [R, K] (raw uint16 bits) against a global scale.

    Returns (packed uint8 [R, K/2], weight_scale e4m3 bytes uint8 [R, K/16]).
    """
    scale = block_scales(bf16_to_f32(_block_max_bits(bits)), wsf2)
    return _encode(bf16_to_f32(bits), scale, wsf2, signed_zero), scale


def quantize_f32_rows(w: np.ndarray, wsf2: np.float32, *, signed_zero: bool = False):
    """Same as :func:`quantize_bf16_rows` for float32 values (exact FP16 inputs)."""
    rows, k = w.shape
    bamax = np.abs(w).reshape(rows, k // BLOCK, BLOCK).max(axis=2)
    scale = block_scales(bamax.astype(np.float32), wsf2)
    return _encode(np.ascontiguousarray(w, np.float32), scale, wsf2, signed_zero), scale


def _encode(w: np.ndarray, scale: np.ndarray, wsf2: np.float32, signed_zero: bool) -> np.ndarray:
    rows, k = w.shape
    nb = k // BLOCK
    den = (E4M3_VALUES[scale] * wsf2).astype(np.float32)
    q = np.empty((rows, nb, BLOCK), np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(w.reshape(rows, nb, BLOCK), den[:, :, None], out=q)
    qb = q.reshape(rows, k).view(np.uint32)
    idx = qb >> 21
    qb += np.uint32(0x1FFFFF)               # wraps only for negative NaNs, which land on 2047 (-> 7)
    qb >>= 21
    idx += qb
    codes = np.take(_TABLES[signed_zero][0], idx.astype(np.uint16))   # 12-bit index
    packed = codes[:, 1::2] << 4
    packed |= codes[:, 0::2]
    return packed


def dequantize(packed: np.ndarray, scale: np.ndarray, wsf2: np.float32) -> np.ndarray:
    """ModelOpt dequantization to float32: e2m1[code] * (f32(scale) * wsf2). -0 stays -0.0."""
    rows, half = packed.shape
    codes = np.empty((rows, half * 2), np.uint8)
    codes[:, 0::2] = packed & 0xF
    codes[:, 1::2] = packed >> 4
    den = (E4M3_VALUES[scale] * np.float32(wsf2)).astype(np.float32)
    vals = E2M1_VALUES[codes].reshape(rows, -1, BLOCK)
    return (vals * den[:, :, None]).astype(np.float32).reshape(rows, half * 2)

"""NVFP4 quantization of BF16/FP16 row chunks, ModelOpt-exact, in about 40 NumPy passes over
reusable buffers (one `ChunkQuantizer` per worker thread).

Same results as `nvfp4_math.quantize_bf16_rows` / `quantize_f32_rows` (the reference, checked
bit-exact against ModelOpt), computed differently so that every pass is a contiguous, vectorised
NumPy loop into a preallocated buffer (a fresh temporary costs page faults on every call):

- Layout. The 16 values of a block are read as four uint64 words and transposed to 4 rows, so
  row r holds values 4r..4r+3 of every block side by side. A per-block quantity repeated 4 times
  then lines up with every row, and block maxima are row maxima. Packed bytes and scales go back
  to the checkpoint's order at the end (4 strided uint16 row copies).
- Scale. `weight_scale` is a function of the block max's 16 bits: a 32768-entry table per
  tensor (`block_scale_codes`), looked up per block; the divisor per scale code another.
- Values. q = |w| / (f32(e4m3 * wsf2) / 8) is 8 x ModelOpt's |q|, exactly (a power-of-two
  scale commutes with rounding while nothing is subnormal). Its E2M1 code is the number of the
  constants 2+, 6, 10+, 14, 20+, 28, 40+ that it reaches (x+ = the next float32 above x): the
  rounding thresholds 0.25 ... 5 times 8; ties at 0.25, 1.25, 2.5, 5 go down (even code),
  at 0.75, 1.75, 3.5 up. (Seven compares and six byte adds beat every shorter formula tried:
  a table lookup costs a gather per value, rint tricks need wider temporaries.)
- Sign. ModelOpt's sign is `q < 0`: a negative w gives a negative q unless q underflows to -0.
  With |w| >= 2^-133 (bf16's smallest subnormal) and every divisor below 2^17 (wsf2 <= 256),
  q never underflows, so the sign is `bits > 0x8000` (-0.0 itself keeps code 0), or
  `bits >= 0x8000` with `signed_zero`.

Outside those conditions (wsf2 outside [2^-100, 256], which needs |w| above 6.8e5 or a tensor
amax below 2e-27, or any inf/NaN) the chunk goes to the reference.
"""

from __future__ import annotations

import numpy as np

from advisor.convert import nvfp4_math as m

FAST_WSF2_MIN = np.float32(2.0**-100)
FAST_WSF2_MAX = np.float32(256.0)
INF_BITS = {"BF16": 0x7F80, "F16": 0x7C00}

# the E2M1 code of 8|q| is the number of these it reaches: ModelOpt's rounding thresholds 0.25,
# 0.75, ..., 5 times 8; where a tie rounds down (to the even code) nudged to the next float32
_TIES_DOWN, _TIES_UP = (0.25, 1.25, 2.5, 5.0), (0.75, 1.75, 3.5)
CODE_BOUNDS = tuple(sorted([np.nextafter(np.float32(8 * t), np.float32(np.inf)) for t in _TIES_DOWN]
                           + [np.float32(8 * t) for t in _TIES_UP]))
_ROW4 = np.dtype((np.void, 16))          # four float32 divisors of one block


def divisor_table(wsf2: np.float32) -> np.ndarray:
    """(256,) rows of four equal float32: f32(e4m3[code] * wsf2) / 8, by scale code."""
    den = (m.E4M3_VALUES * np.float32(wsf2)).astype(np.float32) / np.float32(8)
    return np.ascontiguousarray(np.repeat(den[:, None], 4, axis=1)).view(_ROW4).reshape(256)


def block_scale_codes(bmax: np.ndarray, dtype: str, wsf2: np.float32) -> np.ndarray:
    """E4M3 `weight_scale` codes of block maxima given as magnitude bits (finite), as ModelOpt:
    s = f32(amax / f32(6 wsf2)), 0 -> 1, clamp to [2^-9, 448], round to nearest even. The
    rounding adds 2^(max(e,-6)+20), a float32 whose ulp is E4M3's step in s's binade; the
    steps above that power of two plus 8 per binade are the code."""
    if dtype == "BF16":
        s = np.left_shift(bmax, np.uint32(16), dtype=np.uint32).view(np.float32)
    else:
        s = bmax.view(np.float16).astype(np.float32)
    with np.errstate(over="ignore"):                       # maxima above the tensor's amax: unused
        np.divide(s, np.float32(np.float32(m.E2M1_MAX) * np.float32(wsf2)), out=s)
    s[s == 0] = np.float32(1.0)
    np.clip(s, m.SCALE_MIN, m.SCALE_MAX, out=s)
    sb = s.view(np.uint32)
    magic = np.maximum(sb, np.uint32(0x3C800000))          # 2^-6: e4m3's smallest normal
    magic &= np.uint32(0x7F800000)
    magic += np.uint32(20 << 23)
    s += magic.view(np.float32)                            # rounded to an e4m3 step (RNE), exact
    sb -= magic                                            # steps above 2^(e+20)
    sb += (magic >> np.uint32(20)) - np.uint32(8 * 141)     # + 8 * (max(e, -6) + 6)
    return sb.astype(np.uint8)


class ChunkQuantizer:
    """Quantizes chunks of up to `elements` values; results are views into its own buffers,
    valid until the next call. Not thread-safe: one per worker."""

    def __init__(self, elements: int = 1 << 18):
        self._size = 0
        self._cached: tuple | None = None
        self._grow(max(16, elements))

    def _grow(self, n: int) -> None:
        n = -(-n // 16) * 16
        if n <= self._size:
            return
        b = n // 16
        self._size = n
        self._words = np.empty(n // 4, np.uint64)     # raw values, transposed (4, B) words
        self._mag = np.empty(n, np.uint16)
        self._rowmax = np.empty(4 * b, np.uint16)
        self._bmax = np.empty(b, np.uint16)
        self._scale = np.empty(b, np.uint8)
        self._div = np.empty(b, _ROW4)
        self._q = np.empty(n, np.float32)
        self._code = np.empty(n, np.uint8)
        self._flag = np.empty(n, np.bool_)
        self._tmp = np.empty(n // 4, np.uint32)
        self._packed = np.empty(n // 2, np.uint8)

    def quantize(self, bits: np.ndarray, dtype: str, wsf2: np.float32, *, signed_zero: bool = False):
        """bits: raw 16-bit patterns [R, K] (K a multiple of 16). Returns (packed uint8 [R, K/2],
        weight_scale e4m3 bytes uint8 [R, K/16])."""
        rows, k = bits.shape
        wsf2 = np.float32(wsf2)
        if not (dtype in INF_BITS and FAST_WSF2_MIN <= wsf2 <= FAST_WSF2_MAX) or bits.size == 0:
            return self._reference(bits, dtype, wsf2, signed_zero)
        n = rows * k
        self._grow(n)
        b = n // 16
        raw = np.ascontiguousarray(bits).reshape(n)
        words = self._words[: n // 4].reshape(4, b)
        np.copyto(words, raw.view(np.uint64).reshape(b, 4).T)
        x16 = words.view(np.uint16)                               # (4, 4B): row r = values 4r..4r+3
        mag = np.bitwise_and(x16, np.uint16(0x7FFF), out=self._mag[:n].reshape(4, 4 * b))
        r4 = np.max(mag, axis=0, out=self._rowmax[: 4 * b]).reshape(b, 4)
        bmax = np.maximum(r4[:, 0], r4[:, 1], out=self._bmax[:b])
        np.maximum(bmax, r4[:, 2], out=bmax)
        np.maximum(bmax, r4[:, 3], out=bmax)
        if int(bmax.max()) >= INF_BITS[dtype]:
            return self._reference(bits, dtype, wsf2, signed_zero)
        scales, divisors = self._tables(dtype, wsf2)
        scale = np.take(scales, bmax, out=self._scale[:b])
        div = np.take(divisors, scale, out=self._div[:b])
        q = self._q[:n].reshape(4, 4 * b)
        if dtype == "BF16":
            np.copyto(q.view(np.uint32), mag)             # widen, then shift (faster than a casting shift)
            np.left_shift(q.view(np.uint32), np.uint32(16), out=q.view(np.uint32))
        else:
            np.copyto(q, mag.view(np.float16))
        np.divide(q, div.view(np.float32), out=q)                # 8 x ModelOpt's |q|
        code = self._code[:n].reshape(4, 4 * b)
        flag = self._flag[:n].reshape(4, 4 * b)
        np.greater_equal(q, CODE_BOUNDS[0], out=code.view(np.bool_))
        for bound in CODE_BOUNDS[1:]:
            np.greater_equal(q, bound, out=flag)
            np.add(code, flag.view(np.uint8), out=code)
        if signed_zero:
            np.greater(x16, np.uint16(0x7FFF), out=flag)
        else:
            np.greater(x16, np.uint16(0x8000), out=flag)
        # four codes per uint32 (bytes c0 c1 c2 c3) -> the sign is bit 3 of each byte
        sign = flag.view(np.uint32)
        np.left_shift(sign, np.uint32(3), out=sign)
        quad = code.view(np.uint32)                                # (4, B)
        np.bitwise_or(quad, sign, out=quad)
        tmp = self._tmp[: n // 4].reshape(4, b)
        np.right_shift(quad, np.uint32(4), out=tmp)
        np.bitwise_or(quad, tmp, out=quad)                         # byte 0: c0|c1<<4, byte 2: c2|c3<<4
        np.bitwise_and(quad, np.uint32(0x00FF00FF), out=quad)
        np.multiply(quad, np.uint32(0x101), out=quad)              # bytes 1-2: the two packed bytes
        np.right_shift(quad, np.uint32(8), out=quad)
        pairs = quad.view(np.uint16)[:, ::2]                       # (4, B): packed bytes 2r, 2r+1
        out = self._packed[: n // 2].view(np.uint16).reshape(b, 4)
        for r in range(4):
            out[:, r] = pairs[r]
        return self._packed[: n // 2].reshape(rows, k // 2), scale.reshape(rows, k // 16)

    def _tables(self, dtype: str, wsf2: np.float32) -> tuple[np.ndarray, np.ndarray]:
        """Scale code by block-max bits (every finite 16-bit magnitude), and the four-fold
        divisor by scale code; kept for the next chunk (a tensor's chunks share wsf2)."""
        if self._cached is None or self._cached[0] != (dtype, wsf2):
            mags = np.arange(INF_BITS[dtype], dtype=np.uint16)
            self._cached = ((dtype, wsf2), block_scale_codes(mags, dtype, wsf2), divisor_table(wsf2))
        return self._cached[1], self._cached[2]

    @staticmethod
    def _reference(bits: np.ndarray, dtype: str, wsf2: np.float32, signed_zero: bool):
        if dtype == "BF16":
            return m.quantize_bf16_rows(bits, wsf2, signed_zero=signed_zero)
        return m.quantize_f32_rows(bits.view(np.float16).astype(np.float32), wsf2, signed_zero=signed_zero)

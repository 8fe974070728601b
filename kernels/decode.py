"""Weight decode in registers: packed low-bit weight tiles -> exact fp16 tiles (Triton @jit helpers).

Tensor-layout contract (every weight is W[N, K], N = output features, K = input features,
row-major and contiguous along K). The packed bytes are passed as int32 words (the host views
them with `.view(torch.int32)`, little-endian), `stride_wn` in words, `stride_sn` in elements:

  FORMAT 0  NVFP4   wq [N, K//2] bytes = [N, K//8] words: E2M1 codes, two per byte along K,
                                        low nibble = even k (ModelOpt `weight`); K % 16 == 0
                    ws uint8 [N, K//16] E4M3 (float8_e4m3fn bytes) scale per 16 consecutive k,
                                        linear (not swizzled; ModelOpt `weight_scale`)
                    tile value = e2m1 * e4m3 * 2**-14      (epilogue multiplies gs * 2**14)
  FORMAT 1  FP8     wq [N, K] bytes = [N, K//4] words: E4M3 (float8_e4m3fn); K % 4 == 0
                    tile value = e4m3 * 2**-8              (epilogue multiplies ws[n] * 2**8)
  FORMAT 2  INT4    wq [N, K//2] bytes = [N, K//8] words: unsigned 4-bit q, low nibble = even k,
                                        W = (q - 8) * s (symmetric "uint4b8", the GPTQ math; byte
                                        layout as NVFP4, not GPTQ's int32 [K//8, N] on disk)
                    ws fp16  [N, K//GROUP], K % GROUP == 0
                    tile value = (q - 8) * s rounded once to fp16

Why the 2**-14 / 2**-8 offsets: an E2M1 or E4M3 bit pattern shifted into the fp16 exponent and
mantissa fields *is* the value times a power of two, including zero, negative zero and subnormals,
so decode is and/shift/or + bitcast with no table, branch or fp8 hardware (works on sm_75+ and in
the interpreter). E2M1 x E4M3 products have <= 6 significant bits and are multiples of 2**-10,
so `e2m1 * e4m3 * 2**-14` is exact in fp16 (subnormals included) and in bf16. The power of two
goes back into the fp32 epilogue scale, so the accumulated result is unchanged.

Why 32-bit words: two fp16 patterns are built in one 32-bit register per shift/mask (nibbles j and
j+4, or bytes 0/2 and 1/3), which cut the SASS per weight element by about a third against
per-byte decode (kernels/NOTES.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

# FORMAT constexpr values (the host side names them in kernels.weight_only).
NVFP4, FP8, INT4 = 0, 1, 2


@triton.jit
def e4m3_to_f16_scaled(byte):
    """int32 E4M3 bytes -> fp16 equal to e4m3(byte) * 2**-8 (NaN code 0x7F is not expected in weights)."""
    bits = ((byte & 0x80) << 8) | ((byte & 0x7F) << 7)
    return bits.to(tl.uint16).to(tl.float16, bitcast=True)


@triton.jit
def _group_scale(w, s, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    """w [BN, BK] * s [BN, BK // GROUP] broadcast over each GROUP of consecutive k."""
    w = tl.reshape(w, (BLOCK_N, BLOCK_K // GROUP, GROUP)) * s[:, :, None]
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _f16_pair(f):
    """uint32 holding two fp16 bit patterns -> (low half, high half) as fp16."""
    lo = (f & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (f >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return lo, hi


@triton.jit
def _nibble_pair(x, J: tl.constexpr, FORMAT: tl.constexpr):
    """Nibbles J and J + 4 of every uint32 word (k = 8w + J, 8w + J + 4) decoded two at a time:
    both land in one 32-bit word as two fp16 patterns, so each shift/mask serves two values."""
    if FORMAT == 0:
        # sign: bit 4J+3 -> bit 15 (and +16); magnitude bits 4J..4J+2 -> bits 9..11 (and +16)
        sign = (x << (12 - 4 * J)) & 0x80008000
        if J == 3:
            mag = (x >> 3) & 0x0E000E00
        else:
            mag = (x << (9 - 4 * J)) & 0x0E000E00
        lo, hi = _f16_pair(sign | mag)
    else:
        # 0x6400 | q is fp16 1024 + q exactly; - 1032 leaves q - 8.
        lo, hi = _f16_pair(((x >> (4 * J)) & 0x000F000F) | 0x64006400)
        lo = lo - 1032.0
        hi = hi - 1032.0
    return lo, hi


@triton.jit
def _words_to_f16(x, FORMAT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN, BK//8] uint32 words of 8 nibbles -> [BN, BK] fp16 in k order (low nibble first)."""
    t0, t4 = _nibble_pair(x, 0, FORMAT)
    t1, t5 = _nibble_pair(x, 1, FORMAT)
    t2, t6 = _nibble_pair(x, 2, FORMAT)
    t3, t7 = _nibble_pair(x, 3, FORMAT)
    # Nested joins put u_q at position bitreverse(q) of the new minor [2, 2, 2] block, so feeding
    # u = (t0, t4, t2, t6, t1, t5, t3, t7) yields t0..t7 in order; all within one thread's registers.
    w = tl.join(tl.join(tl.join(t0, t4), tl.join(t2, t6)), tl.join(tl.join(t1, t5), tl.join(t3, t7)))
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _e4m3_words_to_f16(x, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN, BK//4] uint32 words of 4 E4M3 bytes -> [BN, BK] fp16 (value * 2**-8) in k order.
    Bytes 0 and 2 (k = 4w, 4w + 2) and bytes 1 and 3 are decoded two at a time."""
    e0, e2 = _f16_pair(((x & 0x00800080) << 8) | ((x & 0x007F007F) << 7))
    e1, e3 = _f16_pair((x & 0x80008000) | ((x >> 1) & 0x3F803F80))
    w = tl.join(tl.join(e0, e2), tl.join(e1, e3))        # positions bit-reversed: e0 e1 e2 e3
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                FORMAT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP: tl.constexpr):
    """Decoded [BLOCK_N, BLOCK_K] fp16 tile of W starting at column k0 (k >= K reads as 0).

    The packed bytes are read as uint32 words (stride_wn in words): 4 E4M3 or 8 nibbles each."""
    if FORMAT == 1:
        offs_w = k0 // 4 + tl.arange(0, BLOCK_K // 4)
        x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :],
                    mask=mask_n[:, None] & (offs_w < tl.cdiv(K, 4))[None, :], other=0)
        w = _e4m3_words_to_f16(x.to(tl.uint32, bitcast=True), BLOCK_N, BLOCK_K)
    else:
        offs_w = k0 // 8 + tl.arange(0, BLOCK_K // 8)
        x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :],
                    mask=mask_n[:, None] & (offs_w < K // 8)[None, :], other=0)
        w = _words_to_f16(x.to(tl.uint32, bitcast=True), FORMAT, BLOCK_N, BLOCK_K)
        if FORMAT == 0:
            offs_s = k0 // 16 + tl.arange(0, BLOCK_K // 16)
            sb = tl.load(ws_ptr + offs_n[:, None] * stride_sn + offs_s[None, :],
                         mask=mask_n[:, None] & (offs_s < K // 16)[None, :], other=0)
            s = e4m3_to_f16_scaled(sb.to(tl.int32)) * 256.0   # exact: e4m3 <= 448
            w = _group_scale(w, s, BLOCK_N, BLOCK_K, 16)
        else:
            if BLOCK_K >= GROUP:
                offs_g = k0 // GROUP + tl.arange(0, BLOCK_K // GROUP)
                s = tl.load(ws_ptr + offs_n[:, None] * stride_sn + offs_g[None, :],
                            mask=mask_n[:, None] & (offs_g < K // GROUP)[None, :], other=0.0)
                w = _group_scale(w, s.to(tl.float16), BLOCK_N, BLOCK_K, GROUP)
            else:
                in_k = (offs_n * 0 + k0) < K
                s = tl.load(ws_ptr + offs_n * stride_sn + k0 // GROUP, mask=mask_n & in_k, other=0.0)
                w = w * s.to(tl.float16)[:, None]
    return w


@triton.jit
def epilogue_factor(gs_ptr, ws_ptr, offs_n, mask_n, FORMAT: tl.constexpr):
    """fp32 [BN] factor for the accumulator columns: the per-tensor (NVFP4) or per-channel (FP8)
    scale times the power of two taken out in decode; applied once, after the K loop."""
    one = (offs_n * 0).to(tl.float32) + 1.0
    if FORMAT == 0:
        f = one * (tl.load(gs_ptr) * 16384.0)
    elif FORMAT == 1:
        f = tl.load(ws_ptr + offs_n, mask=mask_n, other=0.0) * 256.0
    else:
        f = one
    return f

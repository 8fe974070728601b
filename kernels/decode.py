"""Weight decode in registers: packed low-bit weight tiles -> exact fp16 tiles (Triton @jit helpers).

Tensor-layout contract (every weight is W[N, K], N = output features, K = input features,
row-major and contiguous along K; `stride_wn` / `stride_sn` are the row strides in elements):

  FORMAT 0  NVFP4   wq uint8 [N, K//2]  E2M1 codes, two per byte along K, low nibble = even k
                                        (ModelOpt `weight`); K % 16 == 0
                    ws uint8 [N, K//16] E4M3 (float8_e4m3fn bytes) scale per 16 consecutive k,
                                        linear (not swizzled; ModelOpt `weight_scale`)
                    tile value = e2m1 * e4m3 * 2**-14      (epilogue multiplies gs * 2**14)
  FORMAT 1  FP8     wq uint8 [N, K]     E4M3 bytes (float8_e4m3fn viewed as uint8)
                    tile value = e4m3 * 2**-8              (epilogue multiplies ws[n] * 2**8)
  FORMAT 2  INT4    wq uint8 [N, K//2]  unsigned 4-bit q, low nibble = even k, W = (q - 8) * s
                                        (symmetric "uint4b8", the GPTQ math; byte layout as NVFP4)
                    ws fp16  [N, K//GROUP]
                    tile value = (q - 8) * s rounded once to fp16

Why the 2**-14 / 2**-8 offsets: an E2M1 or E4M3 bit pattern shifted into the fp16 exponent and
mantissa fields *is* the value times a power of two, including zero, negative zero and subnormals,
so decode is and/shift/or + bitcast with no table, branch or fp8 hardware (works on sm_75+ and in
the interpreter). E2M1 x E4M3 products have <= 6 significant bits and are multiples of 2**-10,
so `e2m1 * e4m3 * 2**-14` is exact in fp16 (subnormals included) and in bf16. The power of two
goes back into the fp32 epilogue scale, so the accumulated result is unchanged.
"""

from __future__ import annotations

import triton
import triton.language as tl

# FORMAT constexpr values (the host side names them in kernels.weight_only).
NVFP4, FP8, INT4 = 0, 1, 2


@triton.jit
def e2m1_to_f16_scaled(nib):
    """int32 codes 0..15 -> fp16 equal to e2m1(code) * 2**-14 (sign bit kept: 0x8 is -0)."""
    bits = ((nib & 0x8) << 12) | ((nib & 0x7) << 9)
    return bits.to(tl.uint16).to(tl.float16, bitcast=True)


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
def weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                FORMAT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP: tl.constexpr):
    """Decoded [BLOCK_N, BLOCK_K] fp16 tile of W starting at column k0 (k >= K reads as 0)."""
    if FORMAT == 1:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        b = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=mask_n[:, None] & (offs_k < K)[None, :], other=0)
        w = e4m3_to_f16_scaled(b.to(tl.int32))
    else:
        offs_kp = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        b = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_kp[None, :],
                    mask=mask_n[:, None] & (offs_kp < K // 2)[None, :], other=0).to(tl.int32)
        if FORMAT == 0:
            lo = e2m1_to_f16_scaled(b & 0xF)
            hi = e2m1_to_f16_scaled(b >> 4)
        else:
            # 0x6400 | q is fp16 1024 + q exactly; - 1032 leaves q - 8.
            lo = ((b & 0xF) | 0x6400).to(tl.uint16).to(tl.float16, bitcast=True) - 1032.0
            hi = ((b >> 4) | 0x6400).to(tl.uint16).to(tl.float16, bitcast=True) - 1032.0
        w = tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K))     # interleave: low nibble = even k
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

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

v3 additions (kernels/NOTES.md, "v3"):
- NVFP4 straight to bf16 for bf16 MMAs (`weight_tile(..., BF16=True)`): the E2M1 code in the bf16
  sign/exponent/mantissa fields is e2m1 * 2**-126 exactly (code 1, 0.5, is the bf16 subnormal
  2**-127), the E4M3 scale becomes the bf16 e4m3 * 2**110, and their bf16 product
  e2m1 * e4m3 * 2**-16 is exact (<= 6 significant bits, within [2**-26, 2**-4.6], all bf16 normals).
  That drops the fp16 -> bf16 convert per element; the epilogue multiplies gs * 2**16.
- NVFP4 GEMV decode `e2m1_f16x2_pairs`: the nibbles of a word are first spread to bytes in the
  E5M2 pattern (the top byte of an fp16: sign, 5 exponent bits, 2 mantissa bits), four at a time,
  so one shift/mask serves four values; each fp16 is then one byte moved to the top of a half.

v4 (kernels/NOTES.md, "v4"): the NVFP4 GEMV on tiles inside W runs one PTX block per 16-block
(`nvfp4_block_dot`: that decode with `prmt` byte moves, the widening and two FMA chains, FFMA2 on
sm_100+) and reads its E4M3 scales as words (`e4m3_words_to_f32`); the interpreter runs the same
math in plain Triton, and tests/kernels/test_kernels_decode_v4.py executes the PTX text on CPU.

v5 (kernels/NOTES.md, "v5"; `nvfp4_gemv_step_h2`): the same decode feeds `fma.rn.f16x2` (HFMA2, two
products per instruction, no widening per weight). The activations of each 16-block are scaled by a
power of two (from the block's largest |a|: exact) and packed to fp16 pairs once per thread; the
fp16 block sum is widened once per 16 weights and the power of two undone in fp32. Not exact: fp16
rounding of the running sums, bound in NOTES.md; the v4 step stays for `f16_block_sums=False`.
INT4 likewise (`int4_gemv_step_h2`: magic decode, one fp16 subtract per pair, HFMA2); there the group
scale multiplies each 16-block sum in fp32, so that GEMV does not round (q - 8) * s to fp16 per weight
as the FORMAT 2 tile contract above says (the GEMMs and `f16_block_sums=False` still do).

One module over ~400 lines on purpose: every helper here reads the one tensor-layout contract above
(bit positions, scale strides, the 2**-14 bias), and the GEMV steps inline each other's helpers;
split, a layout change would have to be made in several files in step.
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
def _half_pair(f, DT: tl.constexpr):
    """uint32 holding two 16-bit float patterns -> (low half, high half) as DT (fp16 or bf16)."""
    lo = (f & 0xFFFF).to(tl.uint16).to(DT, bitcast=True)
    hi = (f >> 16).to(tl.uint16).to(DT, bitcast=True)
    return lo, hi


@triton.jit
def _f16_pair(f):
    return _half_pair(f, tl.float16)


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
def e2m1_bf16_pair(x, J: tl.constexpr):
    """uint32 words -> uint32 holding two bf16 bit patterns: nibble J (low half) and J + 4 (high
    half), each e2m1 * 2**-126 exactly (sign -> bit 15, magnitude bits -> bits 6..8)."""
    sign = (x << (12 - 4 * J)) & 0x80008000
    if J < 2:
        mag = (x << (6 - 4 * J)) & 0x01C001C0
    else:
        mag = (x >> (4 * J - 6)) & 0x01C001C0
    return sign | mag


@triton.jit
def _bf16_pair(f):
    return _half_pair(f, tl.bfloat16)


@triton.jit
def _words_to_bf16(x, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN, BK//8] uint32 words of 8 E2M1 nibbles -> [BN, BK] bf16 (e2m1 * 2**-126) in k order."""
    t0, t4 = _bf16_pair(e2m1_bf16_pair(x, 0))
    t1, t5 = _bf16_pair(e2m1_bf16_pair(x, 1))
    t2, t6 = _bf16_pair(e2m1_bf16_pair(x, 2))
    t3, t7 = _bf16_pair(e2m1_bf16_pair(x, 3))
    w = tl.join(tl.join(tl.join(t0, t4), tl.join(t2, t6)), tl.join(tl.join(t1, t5), tl.join(t3, t7)))
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def e4m3_to_bf16_scaled(byte):
    """int32 E4M3 bytes -> bf16 equal to e4m3(byte) * 2**110 (exact: 4 significant bits, and
    2**-9 * 2**110 .. 448 * 2**110 are bf16 normals). fp32 only in between, no bf16 arithmetic."""
    return (e4m3_to_f16_scaled(byte).to(tl.float32) * 2.0**118).to(tl.bfloat16)


@triton.jit
def e2m1_f16x2_pairs(x):
    """uint32 words of 8 E2M1 nibbles (low nibble first) -> 4 uint32 words, each two fp16 bit
    patterns (low half, high half): nibbles (0, 4), (2, 6), (1, 5), (3, 7). Every value is
    e2m1 * 2**-14 exactly (code 1 is the fp16 subnormal 2**-15).

    Nibbles 0, 2, 4, 6 go to the four bytes of `u` and 1, 3, 5, 7 to those of `v` as E5M2 bytes
    (sign -> bit 7, magnitude -> bits 1..3): one shift/mask per four values. A byte moved to the
    top of a 16-bit half (low byte zero) is the fp16 value."""
    u = ((x << 4) & 0x80808080) | ((x << 1) & 0x0E0E0E0E)
    v = (x & 0x80808080) | ((x >> 3) & 0x0E0E0E0E)
    return (u << 8) & 0xFF00FF00, u & 0xFF00FF00, (v << 8) & 0xFF00FF00, v & 0xFF00FF00


@triton.jit
def _split8(a):
    """[B, 8] -> the 8 columns as [B] tensors (register-only splits: the 8 sit in one thread)."""
    B: tl.constexpr = a.shape[0]
    e, o = tl.split(tl.reshape(a, (B, 2, 2, 2)))
    e0, e1 = tl.split(e)
    o0, o1 = tl.split(o)
    a0, a4 = tl.split(e0)
    a2, a6 = tl.split(e1)
    a1, a5 = tl.split(o0)
    a3, a7 = tl.split(o1)
    return a0, a1, a2, a3, a4, a5, a6, a7


@triton.jit
def f16x2_to_f32(f, ASM: tl.constexpr):
    """uint32 holding two fp16 bit patterns -> (low, high) as fp32 (exact widening).

    ASM (GPU only; the interpreter has no inline asm): the same conversion as one PTX block on the
    32-bit word. Written in Triton, LLVM narrows the masks before it to 16-bit lanes and re-pairs
    halves of different words with PRMT; the opaque word keeps the decode at 32-bit ops
    (about 0.45 SASS per weight element fewer, kernels/NOTES.md v3)."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            "{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; cvt.f32.f16 $1, h; }",
            "=r,=r,r", [f], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
    else:
        lo16, hi16 = _f16_pair(f)
        lo = lo16.to(tl.float32)
        hi = hi16.to(tl.float32)
    return lo, hi


@triton.jit
def _dot8(x, a, p, ASM: tl.constexpr):
    """p + sum_j e2m1(nibble j of x) * 2**-14 * a_j: one fp32 FMA per weight (a: [BKW, 8] fp32,
    the activations of the 8 k of each word; x: [BN, BKW] words)."""
    p04, p26, p15, p37 = e2m1_f16x2_pairs(x)
    t0, t4 = f16x2_to_f32(p04, ASM)
    t2, t6 = f16x2_to_f32(p26, ASM)
    t1, t5 = f16x2_to_f32(p15, ASM)
    t3, t7 = f16x2_to_f32(p37, ASM)
    a0, a1, a2, a3, a4, a5, a6, a7 = _split8(a)
    p += t0 * a0[None, :]
    p += t1 * a1[None, :]
    p += t2 * a2[None, :]
    p += t3 * a3[None, :]
    p += t4 * a4[None, :]
    p += t5 * a5[None, :]
    p += t6 * a6[None, :]
    p += t7 * a7[None, :]
    return p


@triton.jit
def nvfp4_gemv_step(acc, wq_ptr, ws_ptr, a, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr):
    """acc [BN, BK//16] fp32 += per 16-block partial dot products times the block scale.

    The E4M3 block scale multiplies the fp32 sum of its 16 products (one FMA per 16 weights)
    instead of every weight; each word's 8 products are an FMA chain inside one thread and the two
    words of a block are added in-thread, so nothing is reduced across threads inside the K loop.
    a: [BK] fp32 activations of k0 .. k0 + BK. Value scale: acc is e2m1 * e4m3 * a * 2**-22.
    ASM: see `f16x2_to_f32` (True on GPUs, False in the interpreter)."""
    BKW: tl.constexpr = BLOCK_K // 8
    BKH: tl.constexpr = BLOCK_K // 16
    offs_w = k0 // 8 + tl.arange(0, BKW)
    x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :],
                mask=mask_n[:, None] & (offs_w < K // 8)[None, :], other=0).to(tl.uint32, bitcast=True)
    p = _dot8(x, tl.reshape(a, (BKW, 8)), tl.zeros((BLOCK_N, BKW), dtype=tl.float32), ASM)
    p = tl.sum(tl.reshape(p, (BLOCK_N, BKH, 2)), axis=2)
    offs_s = k0 // 16 + tl.arange(0, BKH)
    sb = tl.load(ws_ptr + offs_n[:, None] * stride_sn + offs_s[None, :],
                 mask=mask_n[:, None] & (offs_s < K // 16)[None, :], other=0)
    return acc + p * e4m3_to_f16_scaled(sb.to(tl.int32)).to(tl.float32)


# ----------------------------------------------------------------------------- v4: NVFP4 GEMV block dot
def _block_dot_ptx(f32x2: bool) -> str:
    """PTX of one NVFP4 16-block dot product: two words (k 0..7, 8..15) and their 16 fp32
    activations in, the fp32 sum out. Per word: E5M2 bytes of the even nibbles (u) and of the odd
    ones (v), 3 shifts and 4 masks for 8 values; `prmt` 0x2404 puts bytes 0 and 2 on top of each
    half (pairs (0, 4), (1, 5)) and a mask keeps bytes 1 and 3 (pairs (2, 6), (3, 7)): 11 ops per
    word where v3 needed 13. Products go into two chains, even k and odd k, added at the end;
    with `f32x2` (sm_100+) each pair of products is one `fma.rn.f32x2` (FFMA2), half the FMAs.
    Operands: $0 the sum, $1 and $2 the words, $3..$18 the activations in k order."""
    lines = ["{", ".reg .b32 t1, t2, u, v, p;", ".reg .b16 l, h;",
             ".reg .f32 w0, w1, w2, w3, w4, w5, w6, w7, e, o;", ".reg .b64 acc, wa, aa;",
             "mov.b64 acc, 0;" if f32x2 else "mov.f32 e, 0f00000000; mov.f32 o, 0f00000000;"]
    for word, first in (("$1", 3), ("$2", 11)):
        lines += [f"shl.b32 t1, {word}, 4; and.b32 t1, t1, 0x80808080;",
                  f"shl.b32 t2, {word}, 1; and.b32 t2, t2, 0x0E0E0E0E; or.b32 u, t1, t2;",
                  f"shr.b32 t1, {word}, 3; and.b32 t1, t1, 0x0E0E0E0E;",
                  f"and.b32 t2, {word}, 0x80808080; or.b32 v, t1, t2;"]
        for _src, op, lo, hi in (("u", "prmt.b32 p, u, 0, 0x2404;", 0, 4), ("u", "and.b32 p, u, 0xFF00FF00;", 2, 6),
                                ("v", "prmt.b32 p, v, 0, 0x2404;", 1, 5), ("v", "and.b32 p, v, 0xFF00FF00;", 3, 7)):
            lines.append(f"{op} mov.b32 {{l, h}}, p; cvt.f32.f16 w{lo}, l; cvt.f32.f16 w{hi}, h;")
        for j in range(0, 8, 2):
            a, b = f"${first + j}", f"${first + j + 1}"
            if f32x2:
                lines.append(f"mov.b64 wa, {{w{j}, w{j + 1}}}; mov.b64 aa, {{{a}, {b}}}; "
                             "fma.rn.f32x2 acc, wa, aa, acc;")
            else:
                lines.append(f"fma.rn.f32 e, w{j}, {a}, e; fma.rn.f32 o, w{j + 1}, {b}, o;")
    if f32x2:
        lines.append("mov.b64 {e, o}, acc;")
    lines += ["add.f32 $0, e, o;", "}"]
    return "\n".join(lines)


BLOCK_DOT_PTX = tl.constexpr(_block_dot_ptx(False))
BLOCK_DOT_PTX_F32X2 = tl.constexpr(_block_dot_ptx(True))


@triton.jit
def _split16(a):
    """[B, 16] -> the 16 columns as [B] tensors (register-only: the 16 sit in one thread)."""
    B: tl.constexpr = a.shape[0]
    lo, hi = tl.split(tl.permute(tl.reshape(a, (B, 2, 8)), (0, 2, 1)))
    a0, a1, a2, a3, a4, a5, a6, a7 = _split8(lo)
    a8, a9, a10, a11, a12, a13, a14, a15 = _split8(hi)
    return a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15


@triton.jit
def nvfp4_block_dot(x0, x1, a, ASM: tl.constexpr, F32X2: tl.constexpr):
    """[BN, BKH] fp32 sums of 16 products e2m1 * 2**-14 * a_k per 16-block: x0, x1 [BN, BKH]
    uint32 words (k 0..7 and 8..15 of each block), a [BKH, 16] fp32 activations.

    ASM (GPU): one PTX block per 16-block (`_block_dot_ptx`). Otherwise the same decode and the
    same two FMA chains (even k, odd k; both words) in plain Triton: what the interpreter runs."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15 = _split16(a)
    if ASM:
        args = [x0, x1, a0[None, :], a1[None, :], a2[None, :], a3[None, :], a4[None, :], a5[None, :],
                a6[None, :], a7[None, :], a8[None, :], a9[None, :], a10[None, :], a11[None, :], a12[None, :],
                a13[None, :], a14[None, :], a15[None, :]]
        if F32X2:
            s = tl.inline_asm_elementwise(BLOCK_DOT_PTX_F32X2, "=r" + ",r" * 18, args, dtype=tl.float32,
                                          is_pure=True, pack=1)
        else:
            s = tl.inline_asm_elementwise(BLOCK_DOT_PTX, "=r" + ",r" * 18, args, dtype=tl.float32,
                                          is_pure=True, pack=1)
    else:
        p04, p26, p15, p37 = e2m1_f16x2_pairs(x0)
        w0, w4 = f16x2_to_f32(p04, False)
        w2, w6 = f16x2_to_f32(p26, False)
        w1, w5 = f16x2_to_f32(p15, False)
        w3, w7 = f16x2_to_f32(p37, False)
        e = w0 * a0[None, :]
        o = w1 * a1[None, :]
        e += w2 * a2[None, :]
        o += w3 * a3[None, :]
        e += w4 * a4[None, :]
        o += w5 * a5[None, :]
        e += w6 * a6[None, :]
        o += w7 * a7[None, :]
        p04, p26, p15, p37 = e2m1_f16x2_pairs(x1)
        w0, w4 = f16x2_to_f32(p04, False)
        w2, w6 = f16x2_to_f32(p26, False)
        w1, w5 = f16x2_to_f32(p15, False)
        w3, w7 = f16x2_to_f32(p37, False)
        e += w0 * a8[None, :]
        o += w1 * a9[None, :]
        e += w2 * a10[None, :]
        o += w3 * a11[None, :]
        e += w4 * a12[None, :]
        o += w5 * a13[None, :]
        e += w6 * a14[None, :]
        o += w7 * a15[None, :]
        s = e + o
    return s


@triton.jit
def e4m3_words_to_f32(sw, ASM: tl.constexpr):
    """uint32 words of 4 E4M3 scales -> the 4 scales (bytes 0..3) as fp32 e4m3 * 2**-8, two per
    mask/shift: bytes 0 and 2 (sign -> 15, the rest -> 7..13) and bytes 1 and 3 (sign in place,
    the rest shifted right by one) land as fp16 pairs, as in `_e4m3_words_to_f16`."""
    p02 = ((sw & 0x00800080) << 8) | ((sw & 0x007F007F) << 7)
    p13 = (sw & 0x80008000) | ((sw >> 1) & 0x3F803F80)
    s0, s2 = f16x2_to_f32(p02, ASM)
    s1, s3 = f16x2_to_f32(p13, ASM)
    return s0, s1, s2, s3


@triton.jit
def nvfp4_gemv_step_even(acc, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr, F32X2: tl.constexpr):
    """`nvfp4_gemv_step` for a tile wholly inside W (N % BLOCK_N == 0, K % BLOCK_K == 0: no masks)
    with the v4 block dot, the E4M3 scales read as words (stride_sn % 4 == 0) and decoded two per
    op. a: [BK] fp32. acc [BN, BK//16] += block sum * e4m3 * 2**-8 (value e2m1*e4m3*a*2**-22)."""
    BKW: tl.constexpr = BLOCK_K // 8
    BKH: tl.constexpr = BLOCK_K // 16
    offs_w = k0 // 8 + tl.arange(0, BKW)
    x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :]).to(tl.uint32, bitcast=True)
    x0, x1 = tl.split(tl.reshape(x, (BLOCK_N, BKH, 2)))
    p = nvfp4_block_dot(x0, x1, tl.reshape(a, (BKH, 16)), ASM, F32X2)
    offs_s = k0 // 64 + tl.arange(0, BLOCK_K // 64)
    sw = tl.load(ws_ptr.to(tl.pointer_type(tl.uint32)) + offs_n[:, None] * (stride_sn // 4) + offs_s[None, :])
    s0, s1, s2, s3 = e4m3_words_to_f32(sw, ASM)
    s = tl.reshape(tl.join(tl.join(s0, s2), tl.join(s1, s3)), (BLOCK_N, BKH))   # bytes back in k order
    return acc + p * s


# ----------------------------------------------------------------------------- v5: fp16x2 block sums
def _block_dot_h2_ptx() -> str:
    """PTX of one NVFP4 16-block dot product with packed fp16 products: two words (k 0..7, 8..15)
    and 8 fp16x2 activation words in, the fp32 block sum out. The decode is v4's (11 ops per
    word, pairs (0, 4), (2, 6), (1, 5), (3, 7)); each pair meets its activation pair in one
    `fma.rn.f16x2` (HFMA2: two products per instruction, no widening per weight) on one chain of
    8; the two fp16 lanes are widened and added in fp32 once per block.
    Operands: $0 the sum, $1 and $2 the words, $3..$10 the activation words of
    `act_f16x2_blocks` in its column order: $3 + 4w + j holds k = 8w + j and 8w + j + 4."""
    lines = ["{", ".reg .b32 t1, t2, u, v, p, acc;", ".reg .b16 l, h;", ".reg .f32 fl, fh;"]
    first = True
    for w, word in enumerate(("$1", "$2")):
        lines += [f"shl.b32 t1, {word}, 4; and.b32 t1, t1, 0x80808080;",
                  f"shl.b32 t2, {word}, 1; and.b32 t2, t2, 0x0E0E0E0E; or.b32 u, t1, t2;",
                  f"shr.b32 t1, {word}, 3; and.b32 t1, t1, 0x0E0E0E0E;",
                  f"and.b32 t2, {word}, 0x80808080; or.b32 v, t1, t2;"]
        # u's bytes are nibbles 0, 2, 4, 6 and v's 1, 3, 5, 7: pairs (j, j + 4) for j = 0, 2, 1, 3
        for j, op in ((0, "prmt.b32 p, u, 0, 0x2404;"), (2, "and.b32 p, u, 0xFF00FF00;"),
                      (1, "prmt.b32 p, v, 0, 0x2404;"), (3, "and.b32 p, v, 0xFF00FF00;")):
            c = f"${3 + 4 * w + j}"
            if first:
                lines.append(f"{op} mul.rn.f16x2 acc, p, {c};")
                first = False
            else:
                lines.append(f"{op} fma.rn.f16x2 acc, p, {c}, acc;")
    lines += ["mov.b32 {l, h}, acc; cvt.f32.f16 fl, l; cvt.f32.f16 fh, h; add.f32 $0, fl, fh;", "}"]
    return "\n".join(lines)


BLOCK_DOT_H2_PTX = tl.constexpr(_block_dot_h2_ptx())
PACK_F16X2_PTX = tl.constexpr("cvt.rn.f16x2.f32 $0, $2, $1;")     # $0 = {hi: fp16($2), lo: fp16($1)}


@triton.jit
def _f32_to_f16x2(lo, hi, ASM: tl.constexpr):
    """fp32 pairs -> uint32 words of two fp16 (lo in the low half), each rounded to nearest even."""
    if ASM:
        w = tl.inline_asm_elementwise(PACK_F16X2_PTX, "=r,r,r", [lo, hi], dtype=tl.uint32, is_pure=True, pack=1)
    else:
        w = lo.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32) | \
            (hi.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32) << 16)
    return w


@triton.jit
def act_f16x2_blocks(a, BKH: tl.constexpr, ASM: tl.constexpr, T: tl.constexpr = 14):
    """a [BKH * 16] fp32 -> (c [BKH, 8] uint32, undo [BKH] fp32): per 16-block, the activations
    times 2**e (e from the block's largest |a|, so that it lands in [2**T, 2**(T + 1)); T = 14 for
    NVFP4, 8 for INT4) as fp16 pairs (k, k + 4): column 4w + j holds k = 8w + j (low half) and
    8w + j + 4 (high half); undo = 2**-e. Blocks whose largest |a| is below 2**(T - 126) get the
    scale of that value (the exponent fields stay in range). The scaling is exact in fp32; the fp16
    rounding is exact for bf16 and fp16 inputs unless a scaled value falls below 2**-14 (an fp16
    subnormal: |a| < 2**-(T + 14) of the block's max)."""
    SCALE_BITS: tl.constexpr = (254 + T) << 23                         # minus E's field: 2**(T + 127 - E)
    UNDO_BITS: tl.constexpr = T << 23                                  # E's field minus it: 2**(E - 127 - T)
    a2 = tl.reshape(a, (BKH, 16))
    amax = tl.maximum(tl.max(tl.abs(a2), axis=1), 2.0 ** (T - 126))   # exponent field >= T + 1
    eb = amax.to(tl.uint32, bitcast=True) & 0x7F800000
    scale = (SCALE_BITS - eb).to(tl.float32, bitcast=True)
    undo = (eb - UNDO_BITS).to(tl.float32, bitcast=True)
    s = tl.reshape(a2 * scale[:, None], (BKH, 2, 2, 4))               # [block, word, k >= 4, k % 4]
    lo, hi = tl.split(tl.permute(s, (0, 1, 3, 2)))
    c = _f32_to_f16x2(lo, hi, ASM)                                    # [BKH, 2, 4]
    return tl.reshape(c, (BKH, 8)), undo


@triton.jit
def _h2_fma_v(acc_lo, acc_hi, w_lo, w_hi, c, FIRST: tl.constexpr):
    """One `fma.rn.f16x2` (or `mul.rn.f16x2` when FIRST) of fp16 weights (w_lo, w_hi) and the
    activation word c, in plain Triton: computed in fp64, then rounded once to fp16. Exact there for
    these operands: a weight (<= 4 significant bits) times an fp16 has <= 15 bits, and its sum with
    an fp16 partial is inexact in fp64 only if one is below 2**-38 of the other, which needs a
    product above 2**14 (the kernels keep products below 2**12); so this is the fused rounding."""
    a_lo, a_hi = _f16_pair(c)
    if FIRST:
        acc_lo = (w_lo.to(tl.float64) * a_lo.to(tl.float64)).to(tl.float16)
        acc_hi = (w_hi.to(tl.float64) * a_hi.to(tl.float64)).to(tl.float16)
    else:
        acc_lo = (w_lo.to(tl.float64) * a_lo.to(tl.float64) + acc_lo.to(tl.float64)).to(tl.float16)
        acc_hi = (w_hi.to(tl.float64) * a_hi.to(tl.float64) + acc_hi.to(tl.float64)).to(tl.float16)
    return acc_lo, acc_hi


@triton.jit
def _h2_fma(acc_lo, acc_hi, p, c, FIRST: tl.constexpr):
    """`_h2_fma_v` with the weights as a word of two fp16 bit patterns (the NVFP4 decode's pairs)."""
    w_lo, w_hi = _f16_pair(p)
    return _h2_fma_v(acc_lo, acc_hi, w_lo, w_hi, c, FIRST)


@triton.jit
def nvfp4_block_dot_h2(x0, x1, c, ASM: tl.constexpr):
    """[BN, BKH] fp32 block sums of e2m1 * 2**-14 * (a_k * 2**e) with fp16 products and fp16
    sums (one chain per lane, lanes widened and added in fp32): x0, x1 [BN, BKH] words, c [BKH, 8]
    from `act_f16x2_blocks`. ASM: one PTX block per 16-block (`_block_dot_h2_ptx`); otherwise the
    same operations in the same order in plain Triton (the interpreter)."""
    c0, c1, c2, c3, c4, c5, c6, c7 = _split8(c)
    if ASM:
        s = tl.inline_asm_elementwise(BLOCK_DOT_H2_PTX, "=r" + ",r" * 10,
                                      [x0, x1, c0[None, :], c1[None, :], c2[None, :], c3[None, :],
                                       c4[None, :], c5[None, :], c6[None, :], c7[None, :]],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        lo, hi = _nvfp4_word_h2(0, 0, x0, c0, c1, c2, c3, True)
        lo, hi = _nvfp4_word_h2(lo, hi, x1, c4, c5, c6, c7, False)
        s = lo.to(tl.float32) + hi.to(tl.float32)
    return s


@triton.jit
def _nvfp4_word_h2(lo, hi, x, cj0, cj1, cj2, cj3, FIRST: tl.constexpr):
    """One word's four `fma.rn.f16x2` of `_block_dot_h2_ptx`, in its order: pairs (0, 4), (2, 6), (1, 5),
    (3, 7) with the activation columns j = 0, 2, 1, 3 (cjN: column 4w + N)."""
    p04, p26, p15, p37 = e2m1_f16x2_pairs(x)
    lo, hi = _h2_fma(lo, hi, p04, cj0[None, :], FIRST)
    lo, hi = _h2_fma(lo, hi, p26, cj2[None, :], False)
    lo, hi = _h2_fma(lo, hi, p15, cj1[None, :], False)
    return _h2_fma(lo, hi, p37, cj3[None, :], False)


@triton.jit
def nvfp4_gemv_step_h2(acc, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ASM: tl.constexpr):
    """`nvfp4_gemv_step_even` with fp16x2 block sums (v5, kernels/NOTES.md): same loads and scale
    decode; acc [BN, BK//16] += block sum * e4m3 * 2**-8 * 2**-e (value e2m1*e4m3*a*2**-22)."""
    BKW: tl.constexpr = BLOCK_K // 8
    BKH: tl.constexpr = BLOCK_K // 16
    c, undo = act_f16x2_blocks(a, BKH, ASM)
    offs_w = k0 // 8 + tl.arange(0, BKW)
    x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :]).to(tl.uint32, bitcast=True)
    x0, x1 = tl.split(tl.reshape(x, (BLOCK_N, BKH, 2)))
    p = nvfp4_block_dot_h2(x0, x1, c, ASM)
    offs_s = k0 // 64 + tl.arange(0, BLOCK_K // 64)
    sw = tl.load(ws_ptr.to(tl.pointer_type(tl.uint32)) + offs_n[:, None] * (stride_sn // 4) + offs_s[None, :])
    s0, s1, s2, s3 = e4m3_words_to_f32(sw, ASM)
    s = tl.reshape(tl.join(tl.join(s0, s2), tl.join(s1, s3)), (BLOCK_N, BKH))   # bytes back in k order
    return acc + (p * s) * undo[None, :]


def _int4_block_dot_h2_ptx() -> str:
    """PTX of one INT4 16-block dot product with packed fp16 products (v5): two words of 8 unsigned
    nibbles q (k 0..7, 8..15) and 8 fp16x2 activation words in, the fp32 sum of (q - 8) * a out.
    Per pair (j, j + 4): `(w >> 4j) & 0x000F000F | 0x64006400` is fp16 (1024 + q, 1024 + q'), minus
    1032 in one `sub.rn.f16x2` is (q - 8, q' - 8) exactly; then one `fma.rn.f16x2` as for NVFP4.
    Operands as `_block_dot_h2_ptx`."""
    lines = ["{", ".reg .b32 t, m, k, acc;", ".reg .b16 l, h;", ".reg .f32 fl, fh;", "mov.b32 k, 0x64086408;"]
    first = True
    for w, word in enumerate(("$1", "$2")):
        for j in range(4):
            shift = f"shr.b32 t, {word}, {4 * j}; and.b32 t, t, 0x000F000F;" if j else f"and.b32 t, {word}, 0x000F000F;"
            c = f"${3 + 4 * w + j}"
            fma = f"mul.rn.f16x2 acc, m, {c};" if first else f"fma.rn.f16x2 acc, m, {c}, acc;"
            first = False
            lines.append(f"{shift} or.b32 m, t, 0x64006400; sub.rn.f16x2 m, m, k; {fma}")
    lines += ["mov.b32 {l, h}, acc; cvt.f32.f16 fl, l; cvt.f32.f16 fh, h; add.f32 $0, fl, fh;", "}"]
    return "\n".join(lines)


INT4_BLOCK_DOT_H2_PTX = tl.constexpr(_int4_block_dot_h2_ptx())


@triton.jit
def int4_block_dot_h2(x0, x1, c, ASM: tl.constexpr):
    """[BN, BKH] fp32 block sums of (q - 8) * (a_k * 2**e) with fp16 products and sums: x0, x1
    [BN, BKH] words of 8 nibbles, c [BKH, 8] from `act_f16x2_blocks(..., T=8)` (so |products| <
    2**12 and a lane's 8-term sum < 2**15: no fp16 overflow). ASM: `_int4_block_dot_h2_ptx`;
    otherwise the same operations in the same order in plain Triton."""
    c0, c1, c2, c3, c4, c5, c6, c7 = _split8(c)
    if ASM:
        s = tl.inline_asm_elementwise(INT4_BLOCK_DOT_H2_PTX, "=r" + ",r" * 10,
                                      [x0, x1, c0[None, :], c1[None, :], c2[None, :], c3[None, :],
                                       c4[None, :], c5[None, :], c6[None, :], c7[None, :]],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        lo, hi = _int4_word_h2(0, 0, x0, c0, c1, c2, c3, True)
        lo, hi = _int4_word_h2(lo, hi, x1, c4, c5, c6, c7, False)
        s = lo.to(tl.float32) + hi.to(tl.float32)
    return s


@triton.jit
def _int4_word_h2(lo, hi, x, cj0, cj1, cj2, cj3, FIRST: tl.constexpr):
    """One word's four `fma.rn.f16x2` of `_int4_block_dot_h2_ptx`, in its order: pair (j, j + 4) with the
    activation column j = 0..3 (cjN: column 4w + N); q - 8 as fp16 (magic 1024 + q, minus 1032)."""
    w0, w4 = _nibble_pair(x, 0, 2)
    lo, hi = _h2_fma_v(lo, hi, w0, w4, cj0[None, :], FIRST)
    w1, w5 = _nibble_pair(x, 1, 2)
    lo, hi = _h2_fma_v(lo, hi, w1, w5, cj1[None, :], False)
    w2, w6 = _nibble_pair(x, 2, 2)
    lo, hi = _h2_fma_v(lo, hi, w2, w6, cj2[None, :], False)
    w3, w7 = _nibble_pair(x, 3, 2)
    return _h2_fma_v(lo, hi, w3, w7, cj3[None, :], False)


@triton.jit
def int4_gemv_step_h2(acc, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP: tl.constexpr, ASM: tl.constexpr):
    """INT4 GEMV step for a tile inside W (no masks) with fp16x2 block sums (v5): acc [BN, BK//16]
    += (sum_k (q - 8) * a_k) * s_group, the block sum in fp16, times the fp32 group scale once per
    16 weights. Unlike the INT4 tile contract ((q - 8) * s rounded to fp16 per weight) the scale
    multiplies the sum: GROUP % 16 == 0 and BLOCK_K, GROUP divide one another."""
    BKW: tl.constexpr = BLOCK_K // 8
    BKH: tl.constexpr = BLOCK_K // 16
    c, undo = act_f16x2_blocks(a, BKH, ASM, 8)
    offs_w = k0 // 8 + tl.arange(0, BKW)
    x = tl.load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :]).to(tl.uint32, bitcast=True)
    x0, x1 = tl.split(tl.reshape(x, (BLOCK_N, BKH, 2)))
    p = int4_block_dot_h2(x0, x1, c, ASM)
    if BLOCK_K >= GROUP:
        offs_g = k0 // GROUP + tl.arange(0, BLOCK_K // GROUP)
        s = tl.load(ws_ptr + offs_n[:, None] * stride_sn + offs_g[None, :]).to(tl.float32)
        s = tl.reshape(tl.broadcast_to(s[:, :, None], (BLOCK_N, BLOCK_K // GROUP, GROUP // 16)), (BLOCK_N, BKH))
    else:
        s = tl.load(ws_ptr + offs_n * stride_sn + k0 // GROUP).to(tl.float32)[:, None]
    return acc + (p * s) * undo[None, :]


@triton.jit
def _e4m3_words_to_f16(x, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """[BN, BK//4] uint32 words of 4 E4M3 bytes -> [BN, BK] fp16 (value * 2**-8) in k order.
    Bytes 0 and 2 (k = 4w, 4w + 2) and bytes 1 and 3 are decoded two at a time."""
    e0, e2 = _f16_pair(((x & 0x00800080) << 8) | ((x & 0x007F007F) << 7))
    e1, e3 = _f16_pair((x & 0x80008000) | ((x >> 1) & 0x3F803F80))
    w = tl.join(tl.join(e0, e2), tl.join(e1, e3))        # positions bit-reversed: e0 e1 e2 e3
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


@triton.jit
def _tile_load(ptrs, mask, other, EVEN: tl.constexpr):
    """A tile load; EVEN (the tile lies wholly inside the tensor): without the mask."""
    if EVEN:
        return tl.load(ptrs)
    else:
        return tl.load(ptrs, mask=mask, other=other)


@triton.jit
def weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                FORMAT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP: tl.constexpr, BF16: tl.constexpr = False, EVEN: tl.constexpr = False):
    """Decoded [BLOCK_N, BLOCK_K] fp16 tile of W starting at column k0 (k >= K reads as 0); with
    BF16 (NVFP4 only) a bf16 tile of e2m1 * e4m3 * 2**-16 (never in the interpreter: bf16 math).
    EVEN: the caller guarantees the tile is inside W (no masks).

    The packed bytes are read as uint32 words (stride_wn in words): 4 E4M3 or 8 nibbles each."""
    if FORMAT == 1:
        offs_w = k0 // 4 + tl.arange(0, BLOCK_K // 4)
        x = _tile_load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :],
                       mask_n[:, None] & (offs_w < tl.cdiv(K, 4))[None, :], 0, EVEN)
        w = _e4m3_words_to_f16(x.to(tl.uint32, bitcast=True), BLOCK_N, BLOCK_K)
    else:
        offs_w = k0 // 8 + tl.arange(0, BLOCK_K // 8)
        x = _tile_load(wq_ptr + offs_n[:, None] * stride_wn + offs_w[None, :],
                       mask_n[:, None] & (offs_w < K // 8)[None, :], 0, EVEN)
        if FORMAT == 0:
            offs_s = k0 // 16 + tl.arange(0, BLOCK_K // 16)
            sb = _tile_load(ws_ptr + offs_n[:, None] * stride_sn + offs_s[None, :],
                            mask_n[:, None] & (offs_s < K // 16)[None, :], 0, EVEN)
            if BF16:
                w = _words_to_bf16(x.to(tl.uint32, bitcast=True), BLOCK_N, BLOCK_K)
                w = _group_scale(w, e4m3_to_bf16_scaled(sb.to(tl.int32)), BLOCK_N, BLOCK_K, 16)
            else:
                w = _words_to_f16(x.to(tl.uint32, bitcast=True), FORMAT, BLOCK_N, BLOCK_K)
                s = e4m3_to_f16_scaled(sb.to(tl.int32)) * 256.0   # exact: e4m3 <= 448
                w = _group_scale(w, s, BLOCK_N, BLOCK_K, 16)
        else:
            w = _words_to_f16(x.to(tl.uint32, bitcast=True), FORMAT, BLOCK_N, BLOCK_K)
        if FORMAT == 2:
            if BLOCK_K >= GROUP:
                offs_g = k0 // GROUP + tl.arange(0, BLOCK_K // GROUP)
                s = _tile_load(ws_ptr + offs_n[:, None] * stride_sn + offs_g[None, :],
                               mask_n[:, None] & (offs_g < K // GROUP)[None, :], 0.0, EVEN)
                w = _group_scale(w, s.to(tl.float16), BLOCK_N, BLOCK_K, GROUP)
            else:
                in_k = (offs_n * 0 + k0) < K
                s = _tile_load(ws_ptr + offs_n * stride_sn + k0 // GROUP, mask_n & in_k, 0.0, EVEN)
                w = w * s.to(tl.float16)[:, None]
    return w


@triton.jit
def epilogue_factor(gs_ptr, ws_ptr, offs_n, mask_n, FORMAT: tl.constexpr, BF16: tl.constexpr = False):
    """fp32 [BN] factor for the accumulator columns: the per-tensor (NVFP4) or per-channel (FP8)
    scale times the power of two taken out in decode; applied once, after the K loop."""
    one = (offs_n * 0).to(tl.float32) + 1.0
    if FORMAT == 0:
        if BF16:
            f = one * (tl.load(gs_ptr) * 65536.0)
        else:
            f = one * (tl.load(gs_ptr) * 16384.0)
    elif FORMAT == 1:
        f = tl.load(ws_ptr + offs_n, mask=mask_n, other=0.0) * 256.0
    else:
        f = one
    return f

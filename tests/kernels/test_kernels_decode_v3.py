"""The v3 NVFP4 decode routines are exact, exhaustively: every byte value in every byte position of
a 32-bit word (so every E2M1 code, -0 included, in every nibble position), every finite E4M3 scale.

The bf16 routines are checked as bit patterns (the interpreter holds bf16 as raw uint16 and its bf16
arithmetic is wrong), and the bf16 product the GPU forms from them is checked with torch's CPU bf16
multiply, which rounds like the GPU's mul.bf16x2 (IEEE, subnormals kept)."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl
from kernels_reference import E2M1, e4m3_to_f64

from kernels.decode import _words_to_bf16, e2m1_bf16_pair, e2m1_f16x2_pairs, e4m3_to_bf16_scaled, f16x2_to_f32


@triton.jit
def _f16x2_kernel(x_ptr, bits_ptr, val_ptr, BLOCK: tl.constexpr):
    """Per word: the 4 fp16-pair words, and their 8 values widened to fp32 (nibble order 0, 4, 2,
    6, 1, 5, 3, 7: low then high half of each pair word)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.uint32, bitcast=True)
    p04, p26, p15, p37 = e2m1_f16x2_pairs(x)
    tl.store(bits_ptr + offs * 4 + 0, p04.to(tl.int32, bitcast=True))
    tl.store(bits_ptr + offs * 4 + 1, p26.to(tl.int32, bitcast=True))
    tl.store(bits_ptr + offs * 4 + 2, p15.to(tl.int32, bitcast=True))
    tl.store(bits_ptr + offs * 4 + 3, p37.to(tl.int32, bitcast=True))
    lo, hi = f16x2_to_f32(p04, False)
    tl.store(val_ptr + offs * 8 + 0, lo)
    tl.store(val_ptr + offs * 8 + 1, hi)
    lo, hi = f16x2_to_f32(p26, False)
    tl.store(val_ptr + offs * 8 + 2, lo)
    tl.store(val_ptr + offs * 8 + 3, hi)
    lo, hi = f16x2_to_f32(p15, False)
    tl.store(val_ptr + offs * 8 + 4, lo)
    tl.store(val_ptr + offs * 8 + 5, hi)
    lo, hi = f16x2_to_f32(p37, False)
    tl.store(val_ptr + offs * 8 + 6, lo)
    tl.store(val_ptr + offs * 8 + 7, hi)


@triton.jit
def _bf16_pairs_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.uint32, bitcast=True)
    tl.store(out_ptr + offs * 4 + 0, e2m1_bf16_pair(x, 0).to(tl.int32, bitcast=True))
    tl.store(out_ptr + offs * 4 + 1, e2m1_bf16_pair(x, 1).to(tl.int32, bitcast=True))
    tl.store(out_ptr + offs * 4 + 2, e2m1_bf16_pair(x, 2).to(tl.int32, bitcast=True))
    tl.store(out_ptr + offs * 4 + 3, e2m1_bf16_pair(x, 3).to(tl.int32, bitcast=True))


@triton.jit
def _bf16_tile_kernel(x_ptr, out_ptr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.arange(0, BN)
    x = tl.load(x_ptr + rows[:, None] * (BK // 8) + tl.arange(0, BK // 8)[None, :]).to(tl.uint32, bitcast=True)
    w = _words_to_bf16(x, BN, BK)
    tl.store(out_ptr + rows[:, None] * BK + tl.arange(0, BK)[None, :], w.to(tl.int16, bitcast=True))


@triton.jit
def _scale_kernel(b_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    s = e4m3_to_bf16_scaled(tl.load(b_ptr + offs).to(tl.int32))
    tl.store(out_ptr + offs, s.to(tl.int16, bitcast=True))


def _all_byte_words() -> np.ndarray:
    """256 int32 words; byte position p of word i holds (i + 64 p) % 256: every byte value in
    every position, so every E2M1 code sits in every nibble position of a word."""
    i = np.arange(256, dtype=np.uint32)
    words = sum(((i + 64 * p) % 256) << (8 * p) for p in range(4)).astype(np.uint32)
    return words.view(np.int32)


def _codes(words: np.ndarray) -> np.ndarray:
    """[W, 8] E2M1 code of nibble j (j = 0 is the lowest nibble, the even k)."""
    u = words.view(np.uint32)[:, None]
    return ((u >> (4 * np.arange(8, dtype=np.uint32))) & 0xF).astype(np.int64)


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """bf16 bit patterns of float64 values that are exactly bf16 (checked)."""
    f32 = values.astype(np.float32)
    assert np.array_equal(f32.astype(np.float64), values)
    bits = f32.view(np.uint32)
    assert not np.any(bits & 0xFFFF)                    # nothing below the bf16 mantissa
    return (bits >> 16).astype(np.uint16)


def test_f16x2_pair_decode_every_nibble_position_exact():
    words = _all_byte_words()
    bits = torch.empty(256 * 4, dtype=torch.int32)
    vals = torch.empty(256 * 8, dtype=torch.float32)
    _f16x2_kernel[(1,)](torch.from_numpy(words), bits, vals, BLOCK=256)
    pairs = bits.numpy().view(np.uint32).reshape(256, 4)
    got = np.stack([pairs & 0xFFFF, pairs >> 16], axis=-1).reshape(256, 8).astype(np.uint16)
    codes = _codes(words)[:, [0, 4, 2, 6, 1, 5, 3, 7]]            # the pair words' nibble order
    assert set(np.unique(codes)) == set(range(16))
    exact = E2M1[codes] * 2.0 ** -14
    want = exact.astype(np.float16)                                 # exact: 2**-15 is an fp16 subnormal
    assert np.array_equal(want.astype(np.float64), exact)
    assert np.array_equal(got, want.view(np.uint16))               # bit-equal: -0 keeps its sign
    assert np.all(got[codes == 8] == 0x8000)
    # the plain-Triton widening (the interpreter's side of f16x2_to_f32) is exact, -0 included
    widened = vals.numpy().reshape(256, 8)
    assert np.array_equal(widened.view(np.uint32), exact.astype(np.float32).view(np.uint32))


def test_bf16_pair_decode_every_nibble_position_exact():
    words = _all_byte_words()
    out = torch.empty(256 * 4, dtype=torch.int32)
    _bf16_pairs_kernel[(1,)](torch.from_numpy(words), out, BLOCK=256)
    pairs = out.numpy().view(np.uint32).reshape(256, 4)
    got = np.concatenate([pairs & 0xFFFF, pairs >> 16], axis=1).astype(np.uint16)   # nibbles 0-3, 4-7
    codes = _codes(words)
    want = _bf16_bits(E2M1[codes] * 2.0 ** -126)                # code 1: the bf16 subnormal 2**-127
    assert np.array_equal(got, want)
    assert np.all(got[codes == 1] == 0x0040) and np.all(got[codes == 8] == 0x8000)


def test_bf16_tile_is_in_k_order(rng):
    bn, bk = 4, 64
    wq = rng.integers(0, 256, (bn, bk // 2), dtype=np.uint8)
    out = torch.empty(bn, bk, dtype=torch.int16)
    _bf16_tile_kernel[(1,)](torch.from_numpy(wq.view(np.int32).copy()), out, BN=bn, BK=bk)
    codes = np.stack([wq & 0xF, wq >> 4], axis=-1).reshape(bn, bk).astype(np.int64)   # low nibble = even k
    assert np.array_equal(out.numpy().view(np.uint16), _bf16_bits(E2M1[codes] * 2.0 ** -126))


def test_bf16_scale_every_finite_e4m3_byte_exact():
    finite = np.array([b for b in range(256) if (b & 0x7F) != 0x7F], dtype=np.uint8)     # 254 bytes
    out = torch.empty(256, dtype=torch.int16)
    _scale_kernel[(1,)](torch.from_numpy(np.resize(finite, 256)), out, BLOCK=256)
    got = out.numpy().view(np.uint16)[: len(finite)]
    assert np.array_equal(got, _bf16_bits(e4m3_to_f64(finite) * 2.0 ** 110))


def test_bf16_block_scaled_weight_is_exact_for_every_code_and_scale():
    """What the GEMM's bf16 multiply forms: (e2m1 * 2**-126) * (e4m3 * 2**110) = e2m1 * e4m3 * 2**-16,
    exact in bf16 for all 16 codes x all 254 finite scales (no rounding, no underflow)."""
    finite = np.array([b for b in range(256) if (b & 0x7F) != 0x7F], dtype=np.uint8)
    w_bits = _bf16_bits(E2M1 * 2.0 ** -126)
    out = torch.empty(256, dtype=torch.int16)
    _scale_kernel[(1,)](torch.from_numpy(np.resize(finite, 256)), out, BLOCK=256)
    s_bits = out.numpy()[: len(finite)]
    w = torch.from_numpy(w_bits.view(np.int16)).view(torch.bfloat16)
    s = torch.from_numpy(s_bits).view(torch.bfloat16)
    prod = (w[:, None] * s[None, :]).float().double().numpy()      # one bf16 rounding, as mul.bf16x2
    exact = E2M1[:, None] * e4m3_to_f64(finite)[None, :] * 2.0 ** -16
    assert np.array_equal(prod, exact)
    assert np.array_equal(np.signbit(prod), np.signbit(exact))
    nonzero = np.abs(exact[exact != 0])
    assert nonzero.min() >= 2.0 ** -126                           # every product a bf16 normal

"""In-register decode is exact: every E2M1 code (incl. -0), every finite E4M3 byte, INT4 math."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kernels_reference import E2M1, e4m3_to_f64, unpack_nibbles

from kernels import formats
from kernels.weight_only import Weight, dequantize


def _bits_equal(got: np.ndarray, want: np.ndarray) -> bool:
    """Same float32 bit patterns (so -0 differs from +0)."""
    return np.array_equal(got.astype(np.float32).view(np.uint32), want.astype(np.float32).view(np.uint32))


def test_nvfp4_decode_all_codes_exact_including_negative_zero(rng):
    n, k = 16, 64
    # Every byte 0..255 appears: each of the 16 codes in both nibble positions, incl. 0x8 (-0).
    wq = rng.permutation(np.arange(256, dtype=np.uint8)).reshape(8, 32)
    wq = np.concatenate([wq, rng.integers(0, 256, (n - 8, k // 2), dtype=np.uint8)])
    sb = rng.integers(0x01, 0x7F, (n, k // 16), dtype=np.uint8)          # all finite positive scales incl. subnormals
    gs = np.float32(rng.uniform(0.001, 0.1))
    w = Weight("nvfp4", torch.from_numpy(wq), torch.from_numpy(sb).view(torch.float8_e4m3fn),
               torch.tensor([gs]), group=16)
    out = dequantize(w, block_n=16, block_k=64).numpy()

    codes = unpack_nibbles(wq)
    exact = E2M1[codes] * np.repeat(e4m3_to_f64(sb), 16, axis=1) * np.float64(gs)
    assert _bits_equal(out, exact.astype(np.float32))             # one rounding, like the reference
    assert set(np.unique(codes)) == set(range(16))
    neg_zero = codes == 8
    assert neg_zero.any() and np.all(np.signbit(out[neg_zero])) and np.all(out[neg_zero] == 0)
    assert not np.any(np.signbit(out[codes == 0]))


def test_nvfp4_decode_in_fp16_is_exact_for_every_code_and_scale():
    """e2m1 x e4m3 is representable in fp16: decoding with gs = 1 into fp16 loses nothing."""
    codes = np.arange(16)
    scales = np.arange(0x01, 0x7F, dtype=np.uint8)                 # 126 finite positive E4M3 values
    n, k = len(scales), 32
    code_row = np.tile(codes, k // 16)
    wq = (code_row[0::2] | (code_row[1::2] << 4)).astype(np.uint8)
    w = Weight("nvfp4", torch.from_numpy(np.tile(wq, (n, 1))),
               torch.from_numpy(np.repeat(scales[:, None], k // 16, axis=1)).view(torch.float8_e4m3fn),
               torch.tensor([1.0]), group=16)
    out = dequantize(w, dtype=torch.float16, block_n=32, block_k=32).numpy()
    exact = E2M1[np.tile(code_row, (n, 1))] * e4m3_to_f64(scales)[:, None]
    assert np.array_equal(out.astype(np.float64), exact)
    assert np.array_equal(np.signbit(out), np.signbit(exact))


def test_fp8_decode_every_finite_byte_exact(rng):
    finite = np.array([b for b in range(256) if (b & 0x7F) != 0x7F], dtype=np.uint8)   # 254 codes
    n, k = 2, 128
    wq = rng.permutation(np.concatenate([finite, rng.choice(finite, 2)])).reshape(n, k)
    ws = rng.uniform(0.5, 2.0, n).astype(np.float32)
    w = Weight("fp8", torch.from_numpy(wq).view(torch.float8_e4m3fn), torch.from_numpy(ws), group=1)
    out = dequantize(w, block_n=2, block_k=128).numpy()
    exact = e4m3_to_f64(wq) * ws.astype(np.float64)[:, None]
    assert _bits_equal(out, exact.astype(np.float32))


@pytest.mark.parametrize("group", [16, 128])
def test_int4_decode_matches_fp16_rounded_reference(rng, group):
    n, k = 8, 256
    wq = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    ws = rng.uniform(0.001, 0.05, (n, k // group)).astype(np.float16)
    w = Weight("int4", torch.from_numpy(wq), torch.from_numpy(ws), group=group)
    out = dequantize(w, block_n=8, block_k=64).numpy()
    q = unpack_nibbles(wq) - 8
    assert set(np.unique(q)) == set(range(-8, 8))
    # (q - 8) * s: exact product (<= 15 significant bits) rounded once to fp16, as the kernel does.
    want = (q.astype(np.float32) * np.repeat(ws.astype(np.float32), group, axis=1)).astype(np.float16)
    assert np.array_equal(out, want.astype(np.float32))


def test_reference_dequantize_agrees_with_the_triton_decode(torch_gen):
    for fmt in ("nvfp4", "fp8", "int4"):
        w = formats.random_weight(fmt, 24, 256, generator=torch_gen, group=128)
        a = dequantize(w).numpy()
        b = formats.reference_dequantize(w).numpy()
        tol = 1e-3 if fmt == "int4" else 0          # int4: the kernel rounds (q-8)*s to fp16 first
        assert np.allclose(a, b, rtol=tol, atol=0), fmt

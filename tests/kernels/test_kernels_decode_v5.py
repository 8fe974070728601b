"""The v5 NVFP4 GEMV block dot (packed fp16 block sums, kernels/NOTES.md "v5") on CPU:

- the plain-Triton twin's fp16 FMA (what the interpreter runs) is the fused, correctly rounded
  `fma.rn.f16` of the GPU: checked against exact rational arithmetic, on cases where rounding the
  product first would differ;
- the activation blocks: power-of-two scaling from the block's largest |a|, fp16 pairs (k, k + 4),
  exact for fp16-representable inputs; the PTX pack (`cvt.rn.f16x2.f32`) equals the twin's;
- the block dot in both forms (twin, and the PTX run by test_kernels_decode_v4's interpreter of
  it, extended by the f16x2 instructions): every code in every position meets its own activation
  exactly, both forms agree bit for bit on random activations, and stay within the stated bound;
- the GEMV with `f16_block_sums` within the bound of float64 for activations from 2**-60 to
  2**60 (which fp16 alone cannot hold), and not equal to v4's exact path (so v5 really ran)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from kernels_reference import E2M1, e4m3_to_f64, reference_weight
from test_kernels_decode_v4 import VALUES, WORDS0, WORDS1, _Ptx

from kernels import formats
from kernels.decode import (PACK_F16X2_PTX, _block_dot_h2_ptx, _f32_to_f16x2, _h2_fma, act_f16x2_blocks,
                            nvfp4_block_dot_h2)
from kernels.weight_only import GemvConfig, gemv

U16 = 2.0**-11                  # fp16 unit roundoff
CHAIN = 8                       # fp16 roundings per lane (one chain of 8 HFMA2 per 16-block)


def bound_per_block(terms_abs_sum, block_max, scale_abs, fp32_input: bool):
    """|error| of one block's contribution (kernels/NOTES.md v5): CHAIN roundings of fp16 partial
    sums no larger than the sum of |terms|, one more if fp32 activations are rounded to fp16, and
    the absolute fp16 subnormal error (2**-25 per step, 16 steps) mapped back through the scaling
    (2**-e <= max|a| * 2**-14): 2**-21 * max|a| * |scale|; plus fp32 slack."""
    n = CHAIN + (1 if fp32_input else 0)
    return (n * U16 / (1 - n * U16) + 2.0**-20) * terms_abs_sum + 2.0**-20 * block_max * scale_abs


# ----------------------------------------------------------------------------- fp16 numbers
def _f16_bits(x) -> np.ndarray:
    return np.asarray(x, np.float16).view(np.uint16).astype(np.uint32)


def _pack(lo, hi) -> np.ndarray:
    return _f16_bits(lo) | (_f16_bits(hi) << np.uint32(16))


def _unpack(w) -> tuple[np.ndarray, np.ndarray]:
    w = np.asarray(w, np.uint32)
    return ((w & 0xFFFF).astype(np.uint16).view(np.float16),
            (w >> np.uint32(16)).astype(np.uint16).view(np.float16))


def _round_f16(x: Fraction) -> float:
    """Round-to-nearest-even of an exact rational to fp16 (subnormals, overflow to inf)."""
    if x == 0:
        return 0.0
    ax = abs(x)
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    if Fraction(2) ** e > ax:
        e -= 1
    ulp = Fraction(2) ** (max(e, -14) - 10)
    m = ax / ulp
    n = m.numerator // m.denominator
    r = m - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    v = n * ulp
    out = float("inf") if v > 65504 else float(v)
    return -out if x < 0 else out


@triton.jit
def _fma_kernel(p_ptr, c_ptr, acc_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    p = tl.load(p_ptr + i).to(tl.uint32, bitcast=True)
    c = tl.load(c_ptr + i).to(tl.uint32, bitcast=True)
    acc_lo = tl.load(acc_ptr + 2 * i)
    acc_hi = tl.load(acc_ptr + 2 * i + 1)
    lo, hi = _h2_fma(acc_lo, acc_hi, p, c, False)
    tl.store(out_ptr + 2 * i, lo)
    tl.store(out_ptr + 2 * i + 1, hi)


def test_twin_fp16_fma_is_the_fused_correctly_rounded_operation(rng):
    """Weights (e2m1 * 2**-14) x any finite fp16 + any finite fp16, one rounding: the interpreter's
    twin must equal exact rational arithmetic rounded once, including where the product alone is
    an fp16 tie and a tiny addend decides it (rounding the product first fails there)."""
    n = 4096
    w = E2M1[rng.integers(0, 16, (n, 2))] * 2.0**-14
    c_bits = rng.integers(0, 0x7C00, (n, 2)) | (rng.integers(0, 2, (n, 2)) << 15)     # finite fp16
    acc_bits = rng.integers(0, 0x7C00, (n, 2)) | (rng.integers(0, 2, (n, 2)) << 15)
    # ties: w = 1.5 * 2**-14 times an odd 11-bit significand is a 12/13-bit product; add +-2**-24
    t = n // 4
    w[:t] = 1.5 * 2.0**-14 * np.where(rng.integers(0, 2, (t, 2)) == 1, 1, -1)
    c_bits[:t] = (rng.integers(15, 29, (t, 2)) << 10) | (rng.integers(0, 512, (t, 2)) * 2 + 1)
    acc_bits[:t] = 1 | (rng.integers(0, 2, (t, 2)) << 15)
    c = c_bits.astype(np.uint16).view(np.float16)
    acc = acc_bits.astype(np.uint16).view(np.float16)
    out = torch.empty(2 * n, dtype=torch.float16)
    _fma_kernel[(1,)](torch.from_numpy(_pack(w[:, 0], w[:, 1]).view(np.int32)),
                      torch.from_numpy(_pack(c[:, 0], c[:, 1]).view(np.int32)),
                      torch.from_numpy(acc.reshape(-1).copy()), out, N=n)
    got = out.numpy().astype(np.float64).reshape(n, 2)
    exact = np.array([[_round_f16(Fraction(float(w[i, j])) * Fraction(float(c[i, j])) + Fraction(float(acc[i, j])))
                       for j in range(2)] for i in range(n)])
    assert np.array_equal(got, exact)
    unfused = (w.astype(np.float16) * c).astype(np.float16).astype(np.float64) + acc
    unfused = unfused.astype(np.float16).astype(np.float64)
    assert (unfused[:t] != exact[:t]).sum() > t // 8          # the tie cases do tell fused from unfused


# ----------------------------------------------------------------------------- activation blocks
@triton.jit
def _act_kernel(a_ptr, c_ptr, undo_ptr, BKH: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, BKH * 16))
    c, undo = act_f16x2_blocks(a, BKH, False)
    tl.store(c_ptr + tl.arange(0, BKH)[:, None] * 8 + tl.arange(0, 8)[None, :], c.to(tl.int32, bitcast=True))
    tl.store(undo_ptr + tl.arange(0, BKH), undo)


def _act(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bkh = len(a) // 16
    c = torch.empty(bkh * 8, dtype=torch.int32)
    undo = torch.empty(bkh, dtype=torch.float32)
    _act_kernel[(1,)](torch.from_numpy(a.astype(np.float32)), c, undo, BKH=bkh)
    return c.numpy().view(np.uint32).reshape(bkh, 8), undo.numpy()


def _blocks(rng, bkh: int, lo: int, hi: int, bits: int | None) -> np.ndarray:
    """bkh blocks of 16 activations, each block at its own power of two in [lo, hi]; with `bits`,
    significands of that many bits (bf16: 8, fp16: 11), so fp16 holds them exactly once scaled."""
    a = rng.standard_normal((bkh, 16))
    if bits is not None:
        m, e = np.frexp(a)
        a = np.ldexp(np.round(m * 2.0**bits) / 2.0**bits, e)
    return (a * 2.0 ** rng.integers(lo, hi + 1, (bkh, 1))).astype(np.float32).reshape(-1)


def test_activation_blocks_are_scaled_by_a_power_of_two_into_fp16_pairs(rng):
    a = _blocks(rng, 16, -60, 60, bits=8)                  # bf16-like values over 2**-60 .. 2**60
    a[16 * 3:16 * 4] = 0.0                                 # an all-zero block
    a[16 * 5:16 * 6] *= 2.0**-70                           # below the clamp (max |a| < 2**-112)
    a[16 * 7 + 3] = 2.0**50                                # one huge value among ordinary ones
    c, undo = _act(a)
    blocks = a.reshape(16, 16).astype(np.float64)
    amax = np.abs(blocks).max(axis=1)
    e = np.log2(undo.astype(np.float64))
    assert np.array_equal(e, np.round(e))                  # powers of two
    scaled_max = amax / undo
    normal = amax >= 2.0**-112
    assert np.all((scaled_max[normal] >= 2.0**14) & (scaled_max[normal] < 2.0**15))
    assert np.all(undo[~normal] == np.float32(2.0**-126))
    lo, hi = _unpack(c)                                    # column 4w + j: k = 8w + j, 8w + j + 4
    k = (8 * (np.arange(8) // 4) + np.arange(8) % 4)
    want_lo = (blocks[:, k] / undo[:, None]).astype(np.float32).astype(np.float16)
    want_hi = (blocks[:, k + 4] / undo[:, None]).astype(np.float32).astype(np.float16)
    assert np.array_equal(_f16_bits(lo), _f16_bits(want_lo)) and np.array_equal(_f16_bits(hi), _f16_bits(want_hi))
    # 8-bit significands: exact in fp16 wherever the scaled value is an fp16 normal
    back = np.concatenate([lo.astype(np.float64), hi.astype(np.float64)], axis=1) * undo[:, None]
    orig = np.concatenate([blocks[:, k], blocks[:, k + 4]], axis=1)
    exact_range = np.abs(orig) / undo[:, None] >= 2.0**-14
    assert np.array_equal(back[exact_range], orig[exact_range])
    assert exact_range[normal].mean() > 0.9


@triton.jit
def _pack_kernel(lo_ptr, hi_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    w = _f32_to_f16x2(tl.load(lo_ptr + i), tl.load(hi_ptr + i), False)
    tl.store(out_ptr + i, w.to(tl.int32, bitcast=True))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_ptx_pack_equals_the_twin_pack(rng):
    """`cvt.rn.f16x2.f32 $0, $2, $1`: $1 rounds into the low half and $2 into the high one, as the
    twin's casts do; both round to nearest even (ties, subnormals, past 65504 to inf)."""
    x = np.concatenate([rng.standard_normal(2024) * 2.0 ** rng.integers(-30, 17, 2024),
                        (np.arange(1, 2049) + 0.5) * 2.0**-10,        # fp16 ties between 1 and 3
                        np.full(8, 65520.0), np.full(8, 2.0**-25), np.full(8, 3 * 2.0**-26)]).astype(np.float32)
    lo, hi = x, np.roll(x, 1)
    out = torch.empty(len(x), dtype=torch.int32)
    _pack_kernel[(1,)](torch.from_numpy(lo), torch.from_numpy(hi), out, N=len(x))
    twin = out.numpy().view(np.uint32)
    ptx = _PtxH2("{" + PACK_F16X2_PTX.value + "}", {"$1": lo, "$2": hi}).run()["$0"]
    assert np.array_equal(twin, ptx)
    t_lo, t_hi = _unpack(twin)
    exact = np.array([_round_f16(Fraction(float(v))) for v in x])
    assert np.array_equal(t_lo.astype(np.float64), exact) and np.array_equal(t_hi.astype(np.float64), np.roll(exact, 1))


# ----------------------------------------------------------------------------- the block dot
class _PtxH2(_Ptx):
    """test_kernels_decode_v4's PTX interpreter plus the f16x2 instructions of the v5 block.
    fp16 x fp16 + fp16 with these operands is exact in float64 (products have <= 13 significant
    bits, sums span < 53), so one cast to fp16 is the fused rounding."""

    def op_mul_rn_f16x2(self, d, a, b):
        (al, ah), (bl, bh) = _unpack(self.val(a)), _unpack(self.val(b))
        self.r[d] = _pack(al.astype(np.float64) * bl, ah.astype(np.float64) * bh)

    def op_fma_rn_f16x2(self, d, a, b, c):
        (al, ah), (bl, bh), (cl, ch) = _unpack(self.val(a)), _unpack(self.val(b)), _unpack(self.val(c))
        self.r[d] = _pack(al.astype(np.float64) * bl + cl, ah.astype(np.float64) * bh + ch)

    def op_cvt_rn_f16x2_f32(self, d, a, b):            # d = {hi: a, lo: b}
        self.r[d] = _pack(np.asarray(self.val(b), np.float32), np.asarray(self.val(a), np.float32))


@triton.jit
def _block_h2_kernel(x0_ptr, x1_ptr, a_ptr, out_ptr, ROWS: tl.constexpr):
    r = tl.arange(0, ROWS)
    x0 = tl.load(x0_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    x1 = tl.load(x1_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    c, undo = act_f16x2_blocks(tl.load(a_ptr + tl.arange(0, 16)), 1, False)
    s = nvfp4_block_dot_h2(x0, x1, c, False) * undo[None, :]
    tl.store(out_ptr + r, tl.reshape(s, (ROWS,)))


def _twin_block(a: np.ndarray) -> np.ndarray:
    out = torch.empty(256, dtype=torch.float32)
    _block_h2_kernel[(1,)](torch.from_numpy(WORDS0.view(np.int32)), torch.from_numpy(WORDS1.view(np.int32)),
                           torch.from_numpy(a.astype(np.float32)), out, ROWS=256)
    return out.numpy()


def _ptx_block(a: np.ndarray) -> np.ndarray:
    c, undo = _act(a)                                   # the activation words the kernel passes
    ops = {"$1": WORDS0, "$2": WORDS1}
    ops.update({f"${3 + i}": np.full(len(WORDS0), c[0, i], np.uint32) for i in range(8)})
    s = _PtxH2(_block_dot_h2_ptx(), ops).run()["$0"]
    return (s * undo[0]).astype(np.float32)


FORMS = {"triton": _twin_block, "ptx": _ptx_block}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_code_in_every_position_meets_its_own_activation(form):
    """One activation at a time (scaled to 2**14: the sole product is exact, the rest are zeros):
    the block sum is nibble k's value times it, for every code of both words."""
    for k in range(16):
        a = np.zeros(16)
        a[k] = 2.0 ** (3 * k - 20)
        got = FORMS[form](a)
        assert np.array_equal(got, (VALUES[:, k] * a[k]).astype(np.float32)), (form, k)


def test_ptx_and_twin_agree_bit_for_bit_and_within_the_bound(rng):
    for _ in range(4):
        a = _blocks(rng, 1, -40, 40, bits=None)
        twin, ptx = _twin_block(a), _ptx_block(a)
        assert np.array_equal(twin, ptx)
        ref = VALUES @ a.astype(np.float64)
        bound = bound_per_block(np.abs(VALUES) @ np.abs(a.astype(np.float64)), np.abs(a).max() * 2.0**-14, 1.0,
                                fp32_input=True)
        err = np.abs(twin.astype(np.float64) - ref)
        assert np.all(err <= bound)
        assert err.max() > 0                             # fp16 sums: not the exact v4 result


# ----------------------------------------------------------------------------- the GEMV
def _gemv_case(rng, torch_gen, act, lo, hi, n=64, k=512):
    w = formats.random_weight("nvfp4", n, k, generator=torch_gen)
    bits = 11 if act == torch.float16 else None
    a = _blocks(rng, k // 16, lo, hi, bits).reshape(1, k)
    a = torch.from_numpy(a).to(act)
    wd = reference_weight(w)
    ad = a.double().numpy()
    ref = ad @ wd.T
    scale = np.abs(e4m3_to_f64(w.ws.view(torch.uint8).numpy())) * float(w.gs.item())        # [n, k/16]
    terms = np.abs(wd * ad).reshape(n, k // 16, 16).sum(axis=2)                              # [n, k/16]
    bmax = np.abs(ad).reshape(k // 16, 16).max(axis=1)
    bound = bound_per_block(terms, bmax[None, :], scale, act == torch.float32).sum(axis=1)
    return a, w, ref, bound, terms.sum(axis=1)


@pytest.mark.parametrize("act,lo,hi", [(torch.float16, -12, 2), (torch.float32, -60, 60), (torch.float32, -3, 3)],
                         ids=["fp16", "fp32-wide", "fp32"])
def test_gemv_f16_block_sums_within_the_bound(act, lo, hi, rng, torch_gen):
    a, w, ref, bound, total = _gemv_case(rng, torch_gen, act, lo, hi)
    k16 = a.shape[1] // 16
    for cfg in (GemvConfig(block_n=32, block_k=128, split_k=2, f16_block_sums=True),
                GemvConfig(block_n=16, block_k=256, split_k=1, num_warps=2, f16_block_sums=True)):
        out = gemv(a, w, cfg)
        err = np.abs(out.double().numpy()[0] - ref[0])
        # output rounding, and the fp32 sum of K / 16 block contributions (as in v4)
        slack = np.abs(ref[0]) * (2.0**-11 if out.dtype == torch.float16 else 2.0**-23) + k16 * 2.0**-24 * total
        assert np.all(err <= bound + slack), (cfg, (err / (bound + slack)).max())
        exact = gemv(a, w, GemvConfig(block_n=cfg.block_n, block_k=cfg.block_k, split_k=cfg.split_k,
                                      num_warps=cfg.num_warps))
        assert not torch.equal(out, exact), cfg             # the v5 path ran, not v4's exact one

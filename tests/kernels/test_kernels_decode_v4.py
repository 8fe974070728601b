"""The v4 NVFP4 GEMV block dot is exact, on CPU, in both of its forms:

- the plain-Triton form (what the interpreter runs) for every byte value in every byte position
  of both words of a 16-block, one activation at a time (each product alone: exact), and with
  random activations against float64;
- the inline PTX the GPU runs (both variants: FFMA chains, and FFMA2 for sm_100+), executed here
  by a small interpreter of the instructions it uses, on the same inputs. The PTX never runs on a
  GPU in this project's CI; this is what checks it: which nibble meets which activation, the
  E5M2-byte decode, the prmt selectors, the two chains.
Also the E4M3 scale words, every finite byte in every position."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from kernels_reference import E2M1, e4m3_to_f64

from kernels.decode import _block_dot_ptx, e4m3_words_to_f32, nvfp4_block_dot


def _all_byte_words() -> np.ndarray:
    i = np.arange(256, dtype=np.uint32)
    return sum(((i + 64 * p) % 256) << (8 * p) for p in range(4)).astype(np.uint32)


def _codes(words: np.ndarray) -> np.ndarray:
    return ((words[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF).astype(np.int64)


WORDS0 = _all_byte_words()
WORDS1 = np.roll(WORDS0, 97) ^ np.uint32(0x5A5A5A5A)   # a different word in the block's second half
CODES = np.concatenate([_codes(WORDS0), _codes(WORDS1)], axis=1)          # [256, 16], k order
VALUES = E2M1[CODES] * 2.0**-14


@triton.jit
def _block_kernel(x0_ptr, x1_ptr, a_ptr, out_ptr, ROWS: tl.constexpr):
    r = tl.arange(0, ROWS)
    x0 = tl.load(x0_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    x1 = tl.load(x1_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    a = tl.load(a_ptr + tl.arange(0, 16))
    s = nvfp4_block_dot(x0, x1, tl.reshape(a, (1, 16)), False, False)
    tl.store(out_ptr + r, tl.reshape(s, (ROWS,)))


def _triton_block(a: np.ndarray) -> np.ndarray:
    out = torch.empty(256, dtype=torch.float32)
    _block_kernel[(1,)](torch.from_numpy(WORDS0.view(np.int32)), torch.from_numpy(WORDS1.view(np.int32)),
                        torch.from_numpy(a.astype(np.float32)), out, ROWS=256)
    return out.numpy()


# ----------------------------------------------------------------------------- a PTX interpreter
def _f32(x):
    return np.asarray(x, dtype=np.float32)


class _Ptx:
    """Executes the straight-line PTX of `_block_dot_ptx` on numpy arrays (one lane per row)."""

    def __init__(self, text: str, operands: dict[str, np.ndarray]):
        self.r = dict(operands)
        body = text.strip()[1:-1]
        self.ins = [s.strip() for s in body.replace("\n", " ").split(";") if s.strip()]

    def val(self, tok: str):
        tok = tok.strip()
        if tok.startswith("0f"):
            return _f32(np.array([int(tok[2:], 16)], np.uint32).view(np.float32)[0])
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", tok):
            return np.uint32(int(tok, 0) & 0xFFFFFFFF)
        return self.r[tok]

    def run(self) -> dict[str, np.ndarray]:
        for ins in self.ins:
            op, _, rest = ins.partition(" ")
            if op == ".reg":              # declarations
                continue
            args = [a.strip() for a in re.split(r",(?![^{]*})", rest)]
            getattr(self, "op_" + op.replace(".", "_"))(*args)
        return self.r

    def op_shl_b32(self, d, a, n):
        self.r[d] = (self.val(a).astype(np.uint64) << int(n)).astype(np.uint32)

    def op_shr_b32(self, d, a, n):
        self.r[d] = self.val(a) >> np.uint32(int(n))

    def op_and_b32(self, d, a, b):
        self.r[d] = self.val(a) & self.val(b)

    def op_or_b32(self, d, a, b):
        self.r[d] = self.val(a) | self.val(b)

    def op_prmt_b32(self, d, a, b, sel):
        src = np.stack([(self.val(a) >> np.uint32(8 * i)) & 0xFF for i in range(4)]
                       + [(np.broadcast_to(self.val(b), self.val(a).shape) >> np.uint32(8 * i)) & 0xFF
                          for i in range(4)])
        s = int(sel, 0)
        out = np.zeros_like(self.val(a))
        for i in range(4):
            nib = (s >> (4 * i)) & 0xF
            assert nib < 8, "sign-replicate mode is not used"
            out |= src[nib].astype(np.uint32) << np.uint32(8 * i)
        self.r[d] = out

    def op_mov_b32(self, dst, src):
        lo, hi = (x.strip() for x in dst.strip("{} ").split(","))
        v = self.val(src)
        self.r[lo], self.r[hi] = (v & 0xFFFF).astype(np.uint16), (v >> np.uint32(16)).astype(np.uint16)

    def op_cvt_f32_f16(self, d, h):
        self.r[d] = self.r[h].view(np.float16).astype(np.float32)

    def op_mov_f32(self, d, a):
        self.r[d] = self.val(a)

    def op_fma_rn_f32(self, d, a, b, c):          # exact in float64, one rounding to float32
        self.r[d] = (self.val(a).astype(np.float64) * self.val(b) + self.val(c)).astype(np.float32)

    def op_add_f32(self, d, a, b):
        self.r[d] = (self.val(a) + self.val(b)).astype(np.float32)

    def op_mov_b64(self, d, s):
        if d.startswith("{"):                      # unpack a pair
            lo, hi = (x.strip() for x in d.strip("{} ").split(","))
            self.r[lo], self.r[hi] = self.r[s]
        elif s.startswith("{"):
            lo, hi = (x.strip() for x in s.strip("{} ").split(","))
            self.r[d] = (self.val(lo), self.val(hi))
        else:                                      # mov.b64 acc, 0
            z = np.zeros(len(WORDS0), np.float32)
            self.r[d] = (z, z)

    def op_fma_rn_f32x2(self, d, a, b, c):
        self.r[d] = tuple((np.asarray(x, np.float64) * y + z).astype(np.float32)
                          for x, y, z in zip(self.r[a], self.r[b], self.r[c]))


def _ptx_block(a: np.ndarray, f32x2: bool) -> np.ndarray:
    ops = {"$1": WORDS0, "$2": WORDS1}
    ops.update({f"${3 + k}": np.full(len(WORDS0), a[k], np.float32) for k in range(16)})
    return _Ptx(_block_dot_ptx(f32x2), ops).run()["$0"]


FORMS = {"triton": _triton_block, "ptx": lambda a: _ptx_block(a, False), "ptx-f32x2": lambda a: _ptx_block(a, True)}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_code_in_every_position_meets_its_own_activation(form):
    """One activation at a time (2^(k-8), so the sole product is exact): the block sum must be
    the decoded value of nibble k times it, for every code of every word (-0 adds up to +0
    with the other, zero products: only its value can be checked here)."""
    for k in range(16):
        a = np.zeros(16)
        a[k] = 2.0 ** (k - 8)
        got = FORMS[form](a)
        assert np.array_equal(got, (VALUES[:, k] * a[k]).astype(np.float32)), (form, k)


@pytest.mark.parametrize("form", list(FORMS))
def test_random_activations_match_float64(form, rng):
    a = rng.standard_normal(16).astype(np.float32)
    ref = VALUES @ a.astype(np.float64)
    got = FORMS[form](a).astype(np.float64)
    assert np.abs(got - ref).max() <= 1e-6 * np.abs(VALUES).sum(axis=1).max() * np.abs(a).max()


def test_ptx_forms_agree_with_the_triton_form_bit_for_bit(rng):
    """Same decode, same chains (even k, odd k, then their sum): the interpreter's FMAs round
    like the GPU's, so with fp32 products that are exact (activations with few bits) all agree."""
    a = (rng.integers(-64, 64, 16) / 8).astype(np.float32)
    t = _triton_block(a)
    assert np.array_equal(t, _ptx_block(a, False))
    assert np.array_equal(t, _ptx_block(a, True))


@triton.jit
def _scale_kernel(w_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    s0, s1, s2, s3 = e4m3_words_to_f32(tl.load(w_ptr + offs).to(tl.uint32, bitcast=True), False)
    tl.store(out_ptr + offs * 4 + 0, s0)
    tl.store(out_ptr + offs * 4 + 1, s1)
    tl.store(out_ptr + offs * 4 + 2, s2)
    tl.store(out_ptr + offs * 4 + 3, s3)


def test_scale_words_every_finite_byte_in_every_position():
    words = WORDS0
    out = torch.empty(256 * 4, dtype=torch.float32)
    _scale_kernel[(1,)](torch.from_numpy(words.view(np.int32)), out, BLOCK=256)
    got = out.numpy().reshape(256, 4).astype(np.float64)
    b = ((words[:, None] >> (8 * np.arange(4, dtype=np.uint32))) & 0xFF).astype(np.int64)
    ref = e4m3_to_f64(b) * 2.0**-8
    finite = (b & 0x7F) != 0x7F
    assert np.array_equal(got[finite], ref[finite])
    assert np.array_equal(np.signbit(got[finite]), np.signbit(ref[finite]))

"""The v5 INT4 GEMV block dot (packed fp16 block sums, kernels/NOTES.md "v5") on CPU, as for NVFP4
in test_kernels_decode_v5.py: the PTX (run by the v4 tests' PTX interpreter, extended) and the
plain-Triton twin meet every code in every position with its own activation exactly and agree bit
for bit on random activations; the GEMV stays within the fp16 bound of float64 with the exact
weights (q - 8) * s (v5 scales each 16-block sum, not each weight in fp16) for group sizes 16, 32,
128 and 256 (BLOCK_K below, equal to and above the group), and differs from the v4 path (so v5 ran)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from kernels_reference import unpack_nibbles
from test_kernels_decode_v4 import WORDS0, WORDS1
from test_kernels_decode_v5 import _blocks, _PtxH2, _unpack, bound_per_block

from kernels import formats
from kernels.decode import _int4_block_dot_h2_ptx, act_f16x2_blocks, int4_block_dot_h2
from kernels.weight_only import GemvConfig, gemv

CODES = np.concatenate([((WORDS0[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF),
                        ((WORDS1[:, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF)], axis=1).astype(np.int64)
VALUES = (CODES - 8).astype(np.float64)                  # [256, 16] in k order


class _PtxInt4(_PtxH2):
    def op_mov_b32(self, dst, src):
        if dst.strip().startswith("{"):
            return super().op_mov_b32(dst, src)
        self.r[dst] = np.uint32(self.val(src))

    def op_sub_rn_f16x2(self, d, a, b):
        (al, ah), (bl, bh) = _unpack(self.val(a)), _unpack(np.broadcast_to(self.val(b), np.shape(self.val(a))))
        lo = (al.astype(np.float64) - bl).astype(np.float16)
        hi = (ah.astype(np.float64) - bh).astype(np.float16)
        self.r[d] = lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << np.uint32(16))


def _act8(a: np.ndarray):
    out_c = torch.empty(8, dtype=torch.int32)
    out_u = torch.empty(1, dtype=torch.float32)
    _act8_kernel[(1,)](torch.from_numpy(a.astype(np.float32)), out_c, out_u)
    return out_c.numpy().view(np.uint32).reshape(1, 8), out_u.numpy()


@triton.jit
def _act8_kernel(a_ptr, c_ptr, undo_ptr):
    c, undo = act_f16x2_blocks(tl.load(a_ptr + tl.arange(0, 16)), 1, False, 8)
    tl.store(c_ptr + tl.arange(0, 8)[None, :], c.to(tl.int32, bitcast=True))
    tl.store(undo_ptr + tl.arange(0, 1), undo)


@triton.jit
def _block_kernel(x0_ptr, x1_ptr, a_ptr, out_ptr, ROWS: tl.constexpr):
    r = tl.arange(0, ROWS)
    x0 = tl.load(x0_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    x1 = tl.load(x1_ptr + r).to(tl.uint32, bitcast=True)[:, None]
    c, undo = act_f16x2_blocks(tl.load(a_ptr + tl.arange(0, 16)), 1, False, 8)
    s = int4_block_dot_h2(x0, x1, c, False) * undo[None, :]
    tl.store(out_ptr + r, tl.reshape(s, (ROWS,)))


def _twin_block(a):
    out = torch.empty(256, dtype=torch.float32)
    _block_kernel[(1,)](torch.from_numpy(WORDS0.view(np.int32)), torch.from_numpy(WORDS1.view(np.int32)),
                        torch.from_numpy(a.astype(np.float32)), out, ROWS=256)
    return out.numpy()


def _ptx_block(a):
    c, undo = _act8(a)
    ops = {"$1": WORDS0, "$2": WORDS1}
    ops.update({f"${3 + i}": np.full(len(WORDS0), c[0, i], np.uint32) for i in range(8)})
    return (_PtxInt4(_int4_block_dot_h2_ptx(), ops).run()["$0"] * undo[0]).astype(np.float32)


FORMS = {"triton": _twin_block, "ptx": _ptx_block}


def test_activation_scaling_for_int4_lands_in_2_to_the_8():
    a = np.zeros(16)
    a[5] = 3.0 * 2.0**-30
    c, undo = _act8(a)
    assert undo[0] == np.float32(2.0**-37)                 # 3 * 2**-30 * 2**37 = 384 in [2**8, 2**9)
    assert _unpack(c)[1][0, 1] == 384.0                    # column 1 high half: k = 5


@pytest.mark.parametrize("form", list(FORMS))
def test_every_code_in_every_position_meets_its_own_activation(form):
    for k in range(16):
        a = np.zeros(16)
        a[k] = 2.0 ** (2 * k - 15)
        got = FORMS[form](a)
        assert np.array_equal(got, (VALUES[:, k] * a[k]).astype(np.float32)), (form, k)


def test_ptx_and_twin_agree_bit_for_bit_and_within_the_bound(rng):
    for _ in range(4):
        a = _blocks(rng, 1, -40, 40, bits=None)
        twin, ptx = _twin_block(a), _ptx_block(a)
        assert np.array_equal(twin, ptx)
        ref = VALUES @ a.astype(np.float64)
        bound = bound_per_block(np.abs(VALUES) @ np.abs(a.astype(np.float64)), np.abs(a).max(), 1.0, fp32_input=True)
        err = np.abs(twin.astype(np.float64) - ref)
        assert np.all(err <= bound) and err.max() > 0


@pytest.mark.parametrize("group,cfg", [
    (128, GemvConfig(block_n=32, block_k=128, split_k=2, f16_block_sums=True)),
    (16, GemvConfig(block_n=16, block_k=256, split_k=1, num_warps=2, f16_block_sums=True)),
    (256, GemvConfig(block_n=32, block_k=128, split_k=4, f16_block_sums=True)),      # BLOCK_K < group
    (128, GemvConfig(block_n=32, block_k=256, split_k=2, f16_block_sums=True)),      # 2 groups of 8 blocks
    (32, GemvConfig(block_n=16, block_k=128, split_k=1, f16_block_sums=True)),       # 4 groups of 2 blocks
], ids=["g128", "g16", "g256", "g128-bk256", "g32"])
@pytest.mark.parametrize("act,lo,hi", [(torch.float16, -12, 2), (torch.float32, -60, 60)], ids=["fp16", "fp32-wide"])
def test_gemv_f16_block_sums_within_the_bound(group, cfg, act, lo, hi, rng, torch_gen):
    n, k = 64, 512
    w = formats.random_weight("int4", n, k, generator=torch_gen, group=group)
    a = torch.from_numpy(_blocks(rng, k // 16, lo, hi, 11 if act == torch.float16 else None).reshape(1, k)).to(act)
    s = np.repeat(w.ws.double().numpy(), group // 16, axis=1)                          # [n, k/16]
    wd = (unpack_nibbles(w.wq.numpy()) - 8) * np.repeat(w.ws.double().numpy(), group, axis=1)
    ad = a.double().numpy()
    ref = (ad @ wd.T)[0]
    terms = np.abs(wd * ad).reshape(n, k // 16, 16).sum(axis=2)
    bmax = np.abs(ad).reshape(k // 16, 16).max(axis=1)
    bound = bound_per_block(terms, bmax[None, :], np.abs(s), act == torch.float32).sum(axis=1)
    out = gemv(a, w, cfg)
    err = np.abs(out.double().numpy()[0] - ref)
    slack = np.abs(ref) * (2.0**-11 if out.dtype == torch.float16 else 2.0**-23) + (k // 16) * 2.0**-24 * terms.sum(1)
    assert np.all(err <= bound + slack), (err / (bound + slack)).max()
    v4 = gemv(a, w, GemvConfig(block_n=cfg.block_n, block_k=cfg.block_k, split_k=cfg.split_k))
    assert not torch.equal(out, v4)

"""The converter's fast chunk quantizer against the reference arithmetic (nvfp4_math, itself
checked bit-exact against ModelOpt 0.47 in test_convert_math / the oracle tests): every finite
BF16 value as an element, scales across E4M3's whole range (subnormal codes, the 448 clamp,
zero blocks), ties, -0.0, signed-zero mode, FP16 input, and the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.convert import chunk_quantizer as cq
from advisor.convert import nvfp4_math as m

ALL_BF16 = np.arange(0x7F80, dtype=np.uint16)          # every finite non-negative BF16 pattern
ALL_BF16_VALUES = m.bf16_to_f32(ALL_BF16)


def _reference(bits, dtype, wsf2, signed_zero=False):
    if dtype == "BF16":
        return m.quantize_bf16_rows(bits, wsf2, signed_zero=signed_zero)
    return m.quantize_f32_rows(bits.view(np.float16).astype(np.float32), wsf2, signed_zero=signed_zero)


def _assert_same(bits, dtype, wsf2, signed_zero=False, quantizer=None):
    packed, scale = (quantizer or cq.ChunkQuantizer(64)).quantize(bits, dtype, wsf2, signed_zero=signed_zero)
    ref_packed, ref_scale = _reference(bits, dtype, wsf2, signed_zero)
    assert np.array_equal(scale, ref_scale), np.argwhere(scale != ref_scale)[:5]
    assert np.array_equal(packed, ref_packed), np.argwhere(packed != ref_packed)[:5]


@pytest.fixture
def fast_path_calls(monkeypatch):
    """Counts chunks that fell back to the reference, so a test knows which path it checked."""
    calls = []
    original = cq.ChunkQuantizer._reference

    def counted(*args):
        calls.append(args[1:])
        return original(*args)
    monkeypatch.setattr(cq.ChunkQuantizer, "_reference", staticmethod(counted))
    return calls


@pytest.mark.parametrize("amax,group_factor", [(a, f) for a in (1.0, 0.0123, 7.7e-5, 1e-20, 3e-27)
                                                for f in (1.0, 1.5, 1e4)] + [(6.8e5, 1.0)])
def test_every_bf16_value_in_every_arrangement(amax, group_factor, fast_path_calls):
    """All BF16 magnitudes up to amax, both signs, shuffled (mixed block scales) and sorted
    (similar values per block: tiny blocks get subnormal E4M3 scales); the group factor makes
    the tensor a member of a group with a larger amax (its blocks reach smaller codes)."""
    rng = np.random.default_rng(int(amax * 1e6) % 2**32)
    wsf2 = m.global_scale(np.float32(amax * group_factor))
    values = ALL_BF16[ALL_BF16_VALUES <= amax]
    values = np.concatenate([values, rng.choice(values, -len(values) % 64)])
    for arrangement in (rng.permutation(values), np.sort(values), np.sort(values)[::-1]):
        signed = arrangement | (rng.random(arrangement.size) < 0.5).astype(np.uint16) << 15
        for signed_zero in (False, True):
            _assert_same(np.ascontiguousarray(signed).reshape(-1, 64), "BF16", wsf2, signed_zero)
    assert not fast_path_calls


def test_exact_ties_and_negative_zero(fast_path_calls):
    """wsf2 = 2^-8 and a block max of 6 give the E4M3 scale 256 and the divisor exactly 1, so q
    is the value itself: every E2M1 tie (0.25, 0.75, ... 5) and its BF16 neighbours are hit
    exactly; -0.0 keeps code 0 (ModelOpt's sign is q < 0) except in signed-zero mode."""
    ties = m.f32_to_bf16(np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]))
    near = np.concatenate([ties, ties - 1, ties + 1])
    vals = np.concatenate([near, near | 0x8000, m.f32_to_bf16(np.float32([0.0, -0.0, -6.0]))])
    vals = np.concatenate([vals, np.zeros(-len(vals) % 15, np.uint16)]).reshape(-1, 15)
    six = np.full((len(vals), 1), m.f32_to_bf16(np.float32([6.0]))[0], np.uint16)
    bits = np.concatenate([six, vals], axis=1).reshape(1, -1)        # every block's max is 6
    for signed_zero in (False, True):
        _assert_same(bits, "BF16", np.float32(2.0**-8), signed_zero)
    assert not fast_path_calls


def test_zero_blocks_and_subnormal_inputs(fast_path_calls):
    rng = np.random.default_rng(3)
    bits = rng.integers(1, 0x0080, (8, 64), dtype=np.uint16)       # BF16 subnormals
    bits[::2, :16] = 0                                              # all-zero blocks: scale 1.0
    bits[1::2, 16:32] = 0x8000                                      # blocks of -0.0
    bits[:, 40] = 0x3F80                                            # a normal value beside them
    for signed_zero in (False, True):
        _assert_same(bits, "BF16", m.global_scale(1.0), signed_zero)
        _assert_same(bits, "BF16", m.global_scale(1e-26), signed_zero)     # wsf2 near the 2^-100 bound
    assert not fast_path_calls


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 12), blocks=st.integers(1, 9),
       spread=st.sampled_from([0.0, 5.0, 20.0, 60.0]), extra=st.floats(1.0, 1e3),
       dtype=st.sampled_from(["BF16", "F16"]), signed_zero=st.booleans())
def test_random_tensors_match_the_reference(seed, rows, blocks, spread, extra, dtype, signed_zero):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, blocks * 16)) * np.exp(rng.uniform(-spread, 0, (rows, blocks * 16)))
    x[rng.random(x.shape) < 0.05] = 0.0
    x[rng.random(x.shape) < 0.02] = -0.0
    if dtype == "BF16":
        bits = m.f32_to_bf16(x.astype(np.float32))
        amax = float(np.abs(m.bf16_to_f32(bits)).max())
    else:
        bits = (x * 100).astype(np.float16).view(np.uint16)
        amax = float(np.abs(bits.view(np.float16)).max())
    if amax == 0:
        return
    _assert_same(bits, dtype, m.global_scale(amax * extra), signed_zero)


def test_every_fp16_value(fast_path_calls):
    rng = np.random.default_rng(5)
    values = np.arange(0x7C00, dtype=np.uint16)
    for amax, factor in ((1.0, 1.0), (60000.0, 1.0), (6e-5, 37.0)):
        sel = values[values.view(np.float16).astype(np.float32) <= amax]
        sel = np.concatenate([rng.permutation(sel), np.zeros(-len(sel) % 32, np.uint16)])
        sel |= (rng.random(sel.size) < 0.5).astype(np.uint16) << 15
        for signed_zero in (False, True):
            _assert_same(sel.reshape(-1, 32), "F16", m.global_scale(np.float32(amax * factor)), signed_zero)
    assert not fast_path_calls


def test_fallbacks(fast_path_calls):
    """Outside the conditions the module docstring proves exactness for, the reference runs:
    inf/NaN values, wsf2 of 0 (an all-zero tensor: NaN scales as ModelOpt), wsf2 above 256
    (values beyond 6.8e5, where a tiny negative value could round to -0) or below 2^-100."""
    q = cq.ChunkQuantizer(64)
    bits = np.full((1, 32), 0x3F80, np.uint16)
    bits[0, 3] = 0x7FC0
    _assert_same(bits, "BF16", m.global_scale(1.0), quantizer=q)
    bits[0, 3] = 0xFF80
    _assert_same(bits, "BF16", m.global_scale(1.0), quantizer=q)
    _assert_same(np.zeros((2, 32), np.uint16), "BF16", np.float32(0.0), quantizer=q)
    huge = np.array([[0x4A00, 0x8001] + [0x4900] * 14], np.uint16)   # 2.1e6 and a -subnormal
    _assert_same(huge, "BF16", m.global_scale(2.1e6), quantizer=q)
    _assert_same(np.full((1, 16), 0x0010, np.uint16), "BF16", m.global_scale(1e-36), quantizer=q)
    assert len(fast_path_calls) == 5


def test_large_chunks_reuse_buffers_and_views_are_independent_of_layout():
    """A quantizer grows for a larger chunk and keeps working for smaller ones; a strided
    input (a column slice) gives the same result as its contiguous copy."""
    rng = np.random.default_rng(9)
    q = cq.ChunkQuantizer(16)
    big = m.f32_to_bf16((rng.standard_normal((40, 512)) * 0.02).astype(np.float32))
    wsf2 = m.global_scale(float(np.abs(m.bf16_to_f32(big)).max()))
    for rows in (40, 3, 17, 40):
        _assert_same(big[:rows], "BF16", wsf2, quantizer=q)
    _assert_same(big[:, 64:192], "BF16", wsf2, quantizer=q)

"""The vectorised quantizer against the plain NumPy reference of checkpoint-formats.md §2.8
(itself checked bit-exact against ModelOpt 0.47); runs without the oracle venv."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.convert import nvfp4_math as m

E4M3 = np.array([(mm / 8) * 2.0**-6 if e == 0 else (1 + mm / 8) * 2.0 ** (e - 7)
                 for e in range(16) for mm in range(8)][:0x7F])
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])


def _rne_to_table(x, table):
    x = x.astype(np.float64)
    hi = np.clip(np.searchsorted(table, x, side="left"), 0, len(table) - 1)
    lo = np.clip(hi - 1, 0, len(table) - 1)
    dlo, dhi = x - table[lo], table[hi] - x
    pick_lo = (lo != hi) & ((dlo < dhi) | ((dlo == dhi) & (lo % 2 == 0)))
    return np.where(table[hi] == x, hi, np.where(pick_lo, lo, hi))


def reference(w: np.ndarray, amax: float):
    """§2.8 `nvfp4_modelopt` for one member of a group with joint amax."""
    wsf2 = np.float32(np.float32(amax) / np.float32(2688.0))
    d = np.float32(np.float32(6.0) * wsf2)
    n, k = w.shape
    wb = w.reshape(n, k // 16, 16)
    s = (np.abs(wb).max(-1).astype(np.float32) / d).astype(np.float32)
    s[s == 0] = np.float32(1.0)
    s = np.clip(s, np.float32(2.0**-9), np.float32(448.0))
    sc = _rne_to_table(s, E4M3).astype(np.uint8)
    den = (E4M3[sc].astype(np.float32) * wsf2).astype(np.float32)
    q = (wb / den[..., None]).astype(np.float32).reshape(n, k)
    a = np.abs(q).astype(np.float64)
    mag = np.where(np.isnan(a) | (a >= 6), 7, _rne_to_table(a, E2M1)).astype(np.uint8)
    code = ((q < 0).astype(np.uint8) << 3) | mag
    return code[:, 0::2] | (code[:, 1::2] << 4), sc, wsf2


def _case(seed: int, rows: int, blocks: int, log_spread: float):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, blocks * 16)) * np.exp(rng.uniform(-log_spread, 0, (rows, blocks * 16)))
    x[rng.random(x.shape) < 0.05] = 0.0
    return m.f32_to_bf16(x.astype(np.float32))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 9), blocks=st.integers(1, 6),
       spread=st.sampled_from([0.0, 5.0, 20.0, 40.0]), extra=st.floats(1.0, 1e3))
def test_matches_reference_procedure(seed, rows, blocks, spread, extra):
    bits = _case(seed, rows, blocks, spread)
    w = m.bf16_to_f32(bits)
    amax = float(np.abs(w).max()) * extra          # as a member of a group with a larger amax
    amax = float(np.float32(amax))
    if amax == 0:
        return
    packed, scale = m.quantize_bf16_rows(bits, m.global_scale(amax))
    rp, rs, rw = reference(w, amax)
    assert m.global_scale(amax) == rw
    assert np.array_equal(scale, rs)
    assert np.array_equal(packed, rp)


def test_every_e4m3_value_round_trips_and_ties_go_even():
    vals = m.E4M3_VALUES[:0x7F]
    assert np.array_equal(m.e4m3_rne(vals[1:]), np.arange(1, 0x7F, dtype=np.uint8))
    mids = ((vals[1:0x7E].astype(np.float64) + vals[2:0x7F]) / 2).astype(np.float32)
    got = m.e4m3_rne(mids)
    assert np.array_equal(got, _rne_to_table(mids, E4M3).astype(np.uint8))
    assert all(c % 2 == 0 for c in got)


@pytest.mark.parametrize("value,code", [(0.25, 0), (0.2500001, 1), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4),
                                        (3.5, 6), (5.0, 6), (5.0000005, 7), (1e9, 7), (-0.0, 0), (-1e-9, 8),
                                        (-0.75, 10), (-6.0, 15), (float("nan"), 7)])
def test_e2m1_codes_at_the_edges(value, code):
    # one block whose max makes the block scale exactly 1.0 * wsf2 (wsf2 = 1/448 gives den 1/448*448=1)
    row = np.zeros((1, 16), np.float32)
    row[0, 0] = 6.0
    row[0, 1] = value
    packed = m._encode(row, np.array([[0x38]], np.uint8), np.float32(1.0), False)
    assert packed[0, 0] >> 4 == code


def test_signed_zero_table_only_changes_negative_zero():
    row = np.array([[6.0, -0.0, 0.0, -1e-9] + [0.0] * 12], np.float32)
    plain = m._encode(row, np.array([[0x38]], np.uint8), np.float32(1.0), False)
    signed = m._encode(row, np.array([[0x38]], np.uint8), np.float32(1.0), True)
    assert plain[0, 0] >> 4 == 0 and signed[0, 0] >> 4 == 8
    assert plain[0, 1] == signed[0, 1] == 0x80


def test_dequantize_inverts_exact_values():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 16, (4, 32)).astype(np.uint8)
    codes[:, 0] = 7                                     # each block reaches 6.0 -> scale recovered
    codes[:, 16] = 15
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    scale = rng.integers(0x30, 0x50, (4, 2)).astype(np.uint8)
    wsf2 = np.float32(0.001)
    w = m.dequantize(packed, scale, wsf2)
    p2, s2 = m.quantize_bf16_rows(m.f32_to_bf16(w), wsf2, signed_zero=True)
    assert np.array_equal(s2, scale)
    assert np.array_equal(p2, packed)

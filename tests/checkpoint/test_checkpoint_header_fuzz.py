"""Fuzz the safetensors header parser: whatever the bytes, it returns a header or raises BadInput."""

from __future__ import annotations

import io
import json
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.checkpoint.safetensors_header import DTYPE_BITS, parse_header
from advisor.errors import BadInput


def _parse(blob: bytes):
    try:
        h = parse_header(io.BytesIO(blob), len(blob), "fuzz.safetensors")
    except BadInput as err:
        assert str(err).startswith("fuzz.safetensors: ") and "\n" not in str(err)
        return None
    # accepted headers are consistent: every tensor inside the data buffer, sizes match dtype x shape
    buf = len(blob) - 8 - h.header_size
    for t in h.tensors.values():
        assert 0 <= t.begin <= t.end <= buf
        assert (t.end - t.begin) * 8 == t.numel * DTYPE_BITS[t.dtype]
    return h


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
def test_random_bytes(blob):
    _parse(blob)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2**64 - 1))
def test_random_header_length(body, n):
    _parse(struct.pack("<Q", n) + body)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=20)

_entry = st.fixed_dictionaries({
    "dtype": st.sampled_from(sorted(DTYPE_BITS) + ["F13", "", "bf16"]) | _json,
    "shape": st.lists(st.integers(-2, 9), max_size=3) | _json,
    "data_offsets": st.lists(st.integers(-4, 80), min_size=0, max_size=3) | _json,
})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=5), _entry | _json, max_size=5), st.integers(0, 80),
       st.sampled_from([b"", b"   ", b"\xff", b"}"]))
def test_structured_headers(entries, data_len, tail):
    body = json.dumps(entries).encode() + tail
    _parse(struct.pack("<Q", len(body)) + body + b"\0" * data_len)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["F32", "BF16", "U8", "F8_E4M3", "I32"]),
                          st.lists(st.integers(0, 5), max_size=2)), min_size=1, max_size=5))
def test_valid_headers_roundtrip(specs):
    """Well-formed headers (built the way the writer lays them out) always parse, padded or not."""
    hdr, pos = {}, 0
    for i, (dt, shape) in enumerate(specs):
        n = 1
        for d in shape:
            n *= d
        size = n * DTYPE_BITS[dt] // 8
        hdr[f"t{i}"] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + size]}
        pos += size
    body = json.dumps(hdr).encode()
    body += b" " * (-len(body) % 8)
    h = _parse(struct.pack("<Q", len(body)) + body + b"\0" * pos)
    assert h is not None and len(h.tensors) == len(specs)

"""The header reader's limits (issue 21 points 9, 10, 12): each refusal is one BadInput line naming
the file, reached without the time or memory the header asks for. Timing and linearity below the
limits are measured by benchmarks/header_limits.py, not here."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from advisor.checkpoint import safetensors_header as sh
from advisor.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]


def parse(header: bytes | str, data: bytes = b""):
    raw = header.encode() if isinstance(header, str) else header
    blob = struct.pack("<Q", len(raw)) + raw + data
    return sh.parse_header(io.BytesIO(blob), len(blob), "x.safetensors")


def refused(header, data=b"") -> str:
    with pytest.raises(BadInput) as exc:
        parse(header, data)
    msg = str(exc.value)
    assert msg.startswith("x.safetensors: ") and "\n" not in msg
    return msg


@pytest.mark.parametrize("name", ["a\\ud800", "\\udfff", "x\\udc80y", "\\ud800\\ud800"])
def test_lone_surrogate_in_a_name_is_refused_like_the_official_reader(name):
    msg = refused('{"%s": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}' % name, b"x")
    assert "lone surrogate" in msg


def test_surrogate_pair_is_a_valid_name():
    h = parse('{"\\ud83d\\ude00": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"x")
    assert list(h.tensors) == ["\U0001F600"]


@pytest.mark.parametrize("where", ["metadata key", "metadata value", "ignored field"])
def test_lone_surrogate_anywhere_is_refused(where):
    t = '"dtype": "U8", "shape": [1], "data_offsets": [0, 1]'
    header = {"metadata key": '{"__metadata__": {"\\ud800": "x"}, "a": {%s}}' % t,
              "metadata value": '{"__metadata__": {"k": "\\udc00"}, "a": {%s}}' % t,
              "ignored field": '{"a": {%s, "note": ["\\ud800"]}}' % t}[where]
    assert "lone surrogate" in refused(header, b"x")


def test_a_hundred_thousand_dimensions_are_refused_at_the_rank_limit():
    # the old reader multiplied 100,000 twos into a 100,000-bit integer (quadratic) and then failed
    # with a bare ValueError formatting it
    header = json.dumps({"a": {"dtype": "U8", "shape": [2] * 100_000, "data_offsets": [0, 1]}})
    msg = refused(header, b"x")
    assert "100,000 dimensions (limit 64)" in msg and len(msg) < 300


def test_element_count_overflow_is_refused_at_the_first_overflowing_dimension():
    # usize::checked_mul in safetensors: [2**32, 2**32, 0] overflows before the 0 makes it empty
    msg = refused(json.dumps({"a": {"dtype": "U8", "shape": [2**32, 2**32, 0], "data_offsets": [0, 0]}}))
    assert "overflows a 64-bit element count" in msg
    assert parse(json.dumps({"a": {"dtype": "U8", "shape": [0, 2**32, 2**32], "data_offsets": [0, 0]}})).tensors


def test_more_tensors_than_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(sh, "MAX_TENSORS", 1000)
    entries = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(1001)}
    msg = refused(json.dumps(entries), b"x" * 1001)
    assert "1,001 tensors" in msg and "limit of 1,000" in msg
    del entries["t1000"]
    assert len(parse(json.dumps(entries), b"x" * 1000).tensors) == 1000


MEMORY_PROBE = textwrap.dedent("""
    import resource, struct, sys
    sys.path.insert(0, {root!r})
    from advisor.checkpoint.safetensors_header import read_header
    from advisor.errors import BadInput
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        read_header(sys.argv[1])
        print("accepted")
    except BadInput as err:
        print("refused", err)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
""")


@pytest.mark.parametrize("kind", ["empty-lists", "tiny-tensors"])
def test_a_100_mb_hostile_header_stays_within_bounded_memory(tmp_path, kind):
    """A header of 33 M empty lists (several GB once parsed) or 2.6 M tiny tensors: refused, and the
    reader's peak memory stays near the header's own size."""
    if kind == "empty-lists":
        raw = b'{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":[' + b"[]," * 33_000_000 + b"[]]}}"
    else:
        raw = b"{" + b",".join(b'"t%d":["U8",[],[%d,%d]]' % (i, i, i + 1) for i in range(2_600_000)) + b"}"
    assert len(raw) <= sh.MAX_HEADER_SIZE
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE.format(root=str(ROOT)), str(path)],
                         capture_output=True, text=True, timeout=120)
    verdict, peak_mb = out.stdout.splitlines()
    assert verdict.startswith("refused") and "JSON separators and brackets: more than this tool's limit" in verdict, \
        out.stdout + out.stderr
    assert int(peak_mb) < 3 * len(raw) / 2**20, peak_mb

"""The compact split (header_tokens) matches names and dtypes as [^"]* and dimensions as [0-9,]* and refuses
after the split what those classes let through: a backslash or control character, an empty dimension or one
with a leading zero, more than 64 dimensions. Its columns are checked in header order (the ends the running
sum of the sizes where each tensor begins where the previous ended). Each case here is a compact header with
one such spelling; the fast path must read it as json.loads and the full check read it, or leave it to them."""

from __future__ import annotations

import json
import random
import struct

import pytest

from advisor.checkpoint import header_tokens, safetensors_header as sh
from advisor.errors import BadInput

_ENTRY = '"{name}":{{"dtype":"{dtype}","shape":[{dims}],"data_offsets":[{begin},{end}]}}'


def _parse(raw: bytes, buf: int | None):
    try:
        h = sh.parse_header_bytes(raw, buf, "x.safetensors")
        return "ok", list(h.tensors.items()), h.metadata
    except BadInput as err:
        return "error", str(err)


def _both(monkeypatch, text: str, buf: int | None):
    """(fast path result, full check result) of one header."""
    raw = text.encode()
    fast = _parse(raw, buf)
    monkeypatch.setattr(sh, "_plain_header", lambda *a: None)
    full = _parse(raw, buf)
    monkeypatch.undo()
    return fast, full


def _header(entries, *, meta: str | None = None, pad: str = "", at: int = 0) -> str:
    members = [_ENTRY.format(**e) for e in entries]
    if meta is not None:
        members.insert(at, f'"__metadata__":{meta}')
    return "{" + ",".join(members) + "}" + pad


def _entries(n: int = 3) -> tuple[list[dict], int]:
    out, pos = [], 0
    for i in range(n):
        out.append({"name": f"m.{i}.weight", "dtype": "U8", "dims": "2,3", "begin": pos, "end": pos + 6})
        pos += 6
    return out, pos


# spellings of one tensor's dims, name, dtype or offsets that the classes let through or that json reads
_DIMS = ["", "6", "0", "00", "06", "6,", ",6", "6,,1", "1,6", "1,06", "3,2", "6,1,1", ",", "1," * 63 + "6",
         "1," * 64 + "6", "9" * 5000, "18446744073709551616,1"]
_NAMES = ["m.1.weight", "m.1.\tweight", "m.1.weight\x00", "m.1.\x1fx", "a\x7fb", "\u00e9.weight", "m.1.w\u2028",
          "x", "", "__metadata__", "m.0.weight", "m.1.weight ", " "]
_DTYPES = ["U8", "u8", "I8", "U8 ", "", "U8\x01", "F8_E4M3", "BOOL", "F4", "X"]


@pytest.mark.parametrize("dims", _DIMS)
def test_dimension_spellings_read_as_the_full_check_reads_them(monkeypatch, dims):
    entries, buf = _entries()
    entries[1]["dims"] = dims
    fast, full = _both(monkeypatch, _header(entries), buf)
    assert fast == full
    if dims in ("6", "6,1,1", "3,2", "1," * 63 + "6"):      # a valid 6-byte shape: read, by the fast path too
        assert fast[0] == "ok"
        assert sh._plain_header(_header(entries).encode(), _header(entries), buf) is not None


@pytest.mark.parametrize("name", _NAMES)
def test_name_spellings_read_as_the_full_check_reads_them(monkeypatch, name):
    entries, buf = _entries()
    entries[1]["name"] = name
    text = _header(entries)
    fast, full = _both(monkeypatch, text, buf)
    assert fast == full
    took = sh._plain_header(text.encode(), text, buf) is not None
    assert took is (name in ("m.1.weight", "\u00e9.weight", "m.1.w\u2028", "x", "", "m.1.weight ", " ", "a\x7fb"))


@pytest.mark.parametrize("dtype", _DTYPES)
def test_dtype_spellings_read_as_the_full_check_reads_them(monkeypatch, dtype):
    entries, buf = _entries()
    entries[2]["dtype"] = dtype
    fast, full = _both(monkeypatch, _header(entries), buf)
    assert fast == full


@pytest.mark.parametrize("pad", ["", "   ", "\n", " \t\r\n ", "\x00", " \x0b"])
@pytest.mark.parametrize("meta", [None, '{"format":"pt"}', '{"a":\n"b"}', '{"a":"b\tc"}', '{"a":"\\n"}'])
def test_padding_and_metadata_read_as_the_full_check_reads_them(monkeypatch, pad, meta):
    entries, buf = _entries()
    text = _header(entries, meta=meta, pad=pad)
    fast, full = _both(monkeypatch, text, buf)
    assert fast == full
    if meta in (None, '{"format":"pt"}') and pad.strip(" \t\r\n") == "":
        assert sh._plain_header(text.encode(), text, buf) is not None, repr(text)
        assert header_tokens.compact_columns(text) is not None, repr(text)     # the split, not json.loads


@pytest.mark.parametrize("offsets", [
    [(0, 6), (6, 12), (12, 18)],            # in header order: ends the running sum
    [(12, 18), (0, 6), (6, 12)],            # tiled, another order
    [(0, 6), (6, 12), (12, 19)],            # a size off by one
    [(0, 6), (7, 13), (13, 19)],            # a hole
    [(0, 6), (5, 11), (12, 18)],            # an overlap
    [(0, 6), (6, 12), (6, 12)],             # the same bytes twice
    [(1, 7), (7, 13), (13, 19)],            # not from 0
    [(0, 6), (6, 12), (12, 18)],
    [("00", 6), (6, 12), (12, 18)],         # leading zeros: invalid JSON
    [(0, "06"), ("06", 12), (12, 18)],
    [(0, 6), (6, 12), (12, "0018")],
])
@pytest.mark.parametrize("buf", [18, 17, 19, None])
def test_offsets_read_as_the_full_check_reads_them(monkeypatch, offsets, buf):
    entries, _ = _entries()
    for e, (b, end) in zip(entries, offsets):
        e["begin"], e["end"] = b, end
    fast, full = _both(monkeypatch, _header(entries), buf)
    assert fast == full


def _random_header(rng: random.Random) -> tuple[str, int]:
    """A compact header of 1-40 tensors, offsets in header order or shuffled, with 0-2 spellings from above."""
    entries, pos = [], 0
    for i in range(rng.randint(1, 40)):
        dt = rng.choice(["F32", "BF16", "U8", "F8_E4M3", "F4"])
        shape = [rng.randint(1, 12) for _ in range(rng.randint(0, 3))] + ([2] if dt == "F4" else [])
        nb = sh._prod(shape) * sh.DTYPE_BITS[dt] // 8
        entries.append({"name": f"model.layers.{i // 4}.x{i % 4}.weight", "dtype": dt,
                        "dims": ",".join(map(str, shape)), "begin": pos, "end": pos + nb})
        pos += nb
    if rng.random() < 0.3:
        rng.shuffle(entries)            # the names move with their offsets: still a valid header, not in order
    elif rng.random() < 0.2 and len(entries) > 1:
        i = rng.choice([0, len(entries) - 2, rng.randrange(len(entries) - 1)])    # one pair swapped: in order but there
        entries[i], entries[i + 1] = entries[i + 1], entries[i]
    for _ in range(rng.choice((0, 0, 1, 2))):
        e = rng.choice(entries)
        k = rng.randrange(4)
        if k == 0:
            e["dims"] = rng.choice(_DIMS[:14])
        elif k == 1:
            e["name"] = rng.choice(_NAMES)
        elif k == 2:
            e["dtype"] = rng.choice(_DTYPES)
        else:
            e[rng.choice(("begin", "end"))] = rng.choice(["0", "00", "01", str(pos), str(pos + 1), "7"])
    meta = rng.choice([None, None, '{"format":"pt"}', '{}', '{"a":"},{","b":"]},"}', '{"a":"[0,"}'])
    at = rng.choice([0, 0, len(entries), rng.randint(0, len(entries))])
    text = _header(entries, meta=meta, pad=" " * rng.randint(0, 7), at=at)
    if rng.random() < 0.05:
        text = text[:-1] + ',"__metadata__":{}}'         # a second member
    return text, rng.choice([pos, pos, pos - 1, pos + 1])


def test_random_compact_headers_read_as_the_full_check_reads_them(monkeypatch):
    rng = random.Random(2323)
    taken = 0
    for _ in range(1500):
        text, buf = _random_header(rng)
        fast, full = _both(monkeypatch, text, buf)
        assert fast == full, text
        taken += sh._plain_header(text.encode(), text, buf) is not None
    assert 400 < taken < 1500        # both paths taken


def test_compact_columns_are_what_json_loads_reads():
    rng = random.Random(2324)
    for _ in range(800):
        text, _ = _random_header(rng)
        cols = header_tokens.compact_columns(text)
        if cols is None:
            continue
        names, kinds, kind_of, begins, ends, meta = cols
        if len(set(names)) < len(names) or "__metadata__" in names:
            continue                    # json.loads keeps the last of a repeat; _unique refuses both
        obj = json.loads(text)          # accepted: json.loads reads it to the same values
        assert meta == obj.pop("__metadata__", None)
        assert names == list(obj)
        assert [kind_of[k][0] for k in kinds] == [v["dtype"] for v in obj.values()]
        assert [list(kind_of[k][1]) for k in kinds] == [v["shape"] for v in obj.values()]
        if begins is None:              # each where the previous ended, the first at 0
            begins = ["0", *ends[:-1]]
        assert list(map(int, begins)) == [v["data_offsets"][0] for v in obj.values()]
        assert list(map(int, ends)) == [v["data_offsets"][1] for v in obj.values()]


def test_read_header_columns_are_the_full_checks_columns(tmp_path, monkeypatch):
    """The file path: columns of the fast path (_columns_of) or of read_header's full check, the same."""
    rng = random.Random(2325)
    for i in range(300):
        text, buf = _random_header(rng)
        raw = text.encode()
        path = tmp_path / f"{i}.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * max(buf, 0))
        try:
            fast = sh.read_header_columns(str(path))
        except BadInput as err:
            fast = str(err)
        monkeypatch.setattr(sh, "_columns_of", lambda *a: None)
        monkeypatch.setattr(sh, "_plain_header", lambda *a: None)
        try:
            full = sh.read_header_columns(str(path))
        except BadInput as err:
            full = str(err)
        monkeypatch.undo()
        assert fast == full, text

"""summarize_index reads model.safetensors.index.json a chunk at a time (issue 23 point 1). Where it answers,
json.loads of the same file succeeds and gives the same shards, pair count, fingerprint and metadata; where
the plain read must decide (invalid JSON or UTF-8, escapes in the weight map, a FIFO...) it gives None.
Checked on generated indexes in the writers' three layouts, a chunk of one character up to the default,
on each None case, and on byte-mutated and random JSON documents (hypothesis)."""

from __future__ import annotations

import json
import os
import random
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.checkpoint import index_summary as ix
from advisor.checkpoint.index_summary import IndexSummary, pairs_fingerprint, summarize_index

# how writers lay the index out: transformers' save_pretrained (indent=2, sort_keys=True, "\n"), json.dump
# with its default separators, compact; ensure_ascii=False keeps non-ASCII names raw (escaped: see below)
LAYOUTS = {
    "indent2": lambda obj, sort: json.dumps(obj, indent=2, sort_keys=sort, ensure_ascii=False) + "\n",
    "default": lambda obj, sort: json.dumps(obj, sort_keys=sort, ensure_ascii=False),
    "compact": lambda obj, sort: json.dumps(obj, sort_keys=sort, separators=(",", ":"), ensure_ascii=False),
}
CHUNKS = [1, 5, 64, ix.CHUNK]
AWKWARD = "ab.-_09 }{[]:,/'+=!#$%&*()<>?@^`|~\x7f\u00e9\u4e2d\U0001f642"


def _write(folder, content: str | bytes) -> str:
    path = os.path.join(folder, "model.safetensors.index.json")
    with open(path, "wb") as f:
        f.write(content.encode() if isinstance(content, str) else content)
    return path


def _expected(path: str) -> tuple | None:
    """json.loads' answer as (shards, count, fingerprint, metadata), over the weight map's pairs as written
    (a repeated name counts each time); None where it fails or the weight map is not an object of strings."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        index = json.loads(text)
        written = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except (ValueError, RecursionError):
        return None
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        return None
    if not all(type(v) is str for v in index["weight_map"].values()):
        return None
    pairs = [v for k, v in written if k == "weight_map"][-1]
    return frozenset(v for _, v in pairs), len(pairs), sum(map(hash, pairs)), index.get("metadata")


def _fields(s: IndexSummary) -> tuple:
    return s.shards, s.count, s.fingerprint, s.metadata


def _same(a: tuple, b: tuple) -> bool:
    # metadata compared as JSON text: a NaN in it equals itself
    return a[:3] == b[:3] and json.dumps(a[3]) == json.dumps(b[3])


def _agrees(path: str) -> IndexSummary | None:
    """The contract: a summary only where json.loads gives one, and then the same one."""
    s = summarize_index(path)
    if s is not None:
        want = _expected(path)
        assert want is not None, open(path, "rb").read()[:300]
        assert _same(_fields(s), want)
    return s


def _names(rng: random.Random, n: int, alphabet: str) -> list[str]:
    names = {f"model.layers.{i}.mlp.experts.{rng.randint(0, 9)}.down_proj.weight" for i in range(n // 2)}
    while len(names) < n:
        names.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
    return sorted(names, key=lambda _: rng.random())


def _index(rng: random.Random, n: int, alphabet: str, metadata: object = ...) -> dict:
    shards = [f"model-0000{i}-of-00003.safetensors" for i in range(1, 4)] + ["sub dir/a,b}:c.safetensors"]
    wm = {name: rng.choice(shards) for name in _names(rng, n, alphabet)}
    index: dict = {"metadata": {"total_size": 12345 * n}} if metadata is ... else {"metadata": metadata}
    if rng.random() < 0.5:                       # weight_map first or last, other keys around it
        index = {"weight_map": wm, **index, "other": [1, "x", {"y": None}]}
    else:
        index = {"format": "pt", **index, "weight_map": wm}
    return index


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("sort", [True, False])
@pytest.mark.parametrize("alphabet", ["abc.0123456789_", AWKWARD])
def test_summary_is_what_json_loads_gives(tmp_path, monkeypatch, chunk, layout, sort, alphabet):
    monkeypatch.setattr(ix, "CHUNK", chunk)
    rng = random.Random(f"{chunk}{layout}{sort}{alphabet}")
    for n in (0, 1, 2, 7, 60, 400):
        for metadata in (..., None, 7, 1.5e300, "x", [1, {"a": [True, None]}], {"total_size": 10**30}):
            index = _index(rng, n, alphabet, metadata)
            if metadata is None and rng.random() < 0.5:
                del index["metadata"]            # absent, not null: still None
            path = _write(tmp_path, LAYOUTS[layout](index, sort))
            s = summarize_index(path)
            wm = index["weight_map"]
            assert s == IndexSummary(frozenset(wm.values()), len(wm), sum(map(hash, wm.items())),
                                     index.get("metadata")), (n, metadata)


def test_the_transformers_layout_of_a_real_index_is_read(tmp_path):
    # save_pretrained writes json.dumps(index, indent=2, sort_keys=True) + "\n" with ensure_ascii on
    rng = random.Random(0)
    index = _index(rng, 3000, "abc.0123456789_")
    path = _write(tmp_path, json.dumps(index, indent=2, sort_keys=True) + "\n")
    assert _agrees(path) is not None


def test_several_chunks_are_parsed_and_one_for_a_small_index(tmp_path, monkeypatch):
    calls = []

    class Spy:
        def raw_decode(self, text):
            calls.append(len(text))
            return json.JSONDecoder(object_pairs_hook=lambda p: p).raw_decode(text)

    monkeypatch.setattr(ix, "_PAIRS", Spy())
    index = _index(random.Random(1), 200, AWKWARD)
    path = _write(tmp_path, json.dumps(index, ensure_ascii=False))
    assert _agrees(path) is not None and len(calls) == 1
    monkeypatch.setattr(ix, "CHUNK", 200)
    calls.clear()
    assert _agrees(path) is not None and len(calls) > 10


def test_repeated_names_count_as_written(tmp_path, monkeypatch):
    pairs = ['"a": "s1"', '"b": "s2"', '"a": "s3"', '"a": "s1"'] * 30
    for chunk in CHUNKS:
        monkeypatch.setattr(ix, "CHUNK", chunk)
        s = _agrees(_write(tmp_path, '{"weight_map": {' + ", ".join(pairs) + "}}"))
        assert s is not None and s.count == 120 and s.shards == {"s1", "s2", "s3"}
        assert s.fingerprint == 30 * (2 * hash(("a", "s1")) + hash(("b", "s2")) + hash(("a", "s3")))


def test_escaped_top_level_keys_and_large_numbers_are_read_as_json_does(tmp_path, monkeypatch):
    for chunk in (1, 3, ix.CHUNK):
        monkeypatch.setattr(ix, "CHUNK", chunk)
        text = ('{"weight\\u005fmap": {"x": "s"}, "meta\\u0064ata": {"k\\n": "v\\"}"}, "o": "\\\\",'
                ' "metadata": 123456789012345678901234567890e-5}')
        s = _agrees(_write(tmp_path, text))
        assert s is not None and s.shards == {"s"} and s.count == 1
        assert s.metadata == json.loads(text)["metadata"] == 123456789012345678901234567890e-5   # the last


def test_a_number_cut_by_a_block_boundary_is_read_whole(tmp_path, monkeypatch):
    # a value that ends where the buffer ends may go on (a number): read on before taking it
    for chunk in (1, 2, 3, 5, 8):
        monkeypatch.setattr(ix, "CHUNK", chunk)
        for pad in range(12):
            text = '{"weight_map": {"x": "s"},' + " " * pad + '"metadata": 98765432109876.5e+3, "m": [1]}'
            s = _agrees(_write(tmp_path, text))
            assert s is not None and s.metadata == 98765432109876.5e+3


def test_an_empty_weight_map(tmp_path):
    for text in ('{"weight_map": {}}', '{"weight_map": { \n }, "metadata": null}'):
        assert summarize_index(_write(tmp_path, text)) == IndexSummary(frozenset(), 0, 0, None)


# Invalid for json.loads, or not an object of strings: the plain read words the error
INVALID = [
    b"", b"  \n", b"[]", b"null", b'"weight_map"', b"{}", b'{"metadata": {}}',
    b"\xef\xbb\xbf" + b'{"weight_map": {"a": "s"}}',                                   # BOM
    b'{"weight_map": []}', b'{"weight_map": "s"}', b'{"weight_map": null}', b'{"weight_map": 1}',
    b'{"weight_map": {"a": 1}}', b'{"weight_map": {"a": null}}', b'{"weight_map": {"a": ["s"]}}',
    b'{"weight_map": {"a": {"b": "c"}}}', b'{"weight_map": {"a": true}}', b'{"weight_map": {"a": "s", "b": 2}}',
    b'{"weight_map": {"a": "s", "b": {"c": "d}"}, "e": "f"}}', b'{"weight_map": {"a": ["s", "t"], "b": "s"}}',
    b'{"weight_map": {"\xed\xa0\x80": "s"}}',                                          # a surrogate in UTF-8
    b'{"weight_map": {"\xff": "s"}}', b'{"weight_map": {"a": "s"}}\xe4',                 # not UTF-8
    b'{"weight_map": {"a\tb": "s"}}', b'{"weight_map": {"a": "s\x00"}}',                 # control characters
    b'{"weight_map": {"a": "s",}}', b'{"weight_map": {"a": "s",, "b": "s"}}', b'{"weight_map": {, "a": "s"}}',
    b'{"weight_map": {"a" "s"}}', b'{"weight_map": {"a": "s" "b": "s"}}', b'{"weight_map": {"a": "s"},}',
    b'{"weight_map": {"a": "s"}} x', b'{"weight_map": {"a": "s"}}{}', b'{"weight_map": {"a": "s"',
    b'{"weight_map": {"a": "s"}', b'{"weight_map": {"a": "s}"', b"{'weight_map': {'a': 's'}}",
    b'// index\n{"weight_map": {"a": "s"}}', b'{"metadata": 01, "weight_map": {"a": "s"}}',
    b'{"metadata": [1, 2,], "weight_map": {"a": "s"}}', b'{"metadata": tru, "weight_map": {"a": "s"}}',
    b'{"metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b', "weight_map": {"a": "s"}}',
    b'{"weight_map": {"a": "s"}, "metadata": 1.}', b'{"weight_map": {"a": "s"} "metadata": 1}',
    b'{"weight_map": {"a": NaN}}', b'{"weight_map": {"a": "s"}, "metadata" 1}',
    # separators far apart: a chunk of only whitespace between two cuts
    b'{"weight_map": {"a": "s",' + b" " * 200 + b"}}",
    b'{"weight_map": {"a": "s",' + b" " * 200 + b"," + b" " * 200 + b'"b": "s"}}',
    b'{"weight_map": {' + b" " * 200 + b', "a": "s"}}', b'{"weight_map": {"a": "s"' + b" " * 200 + b',}}',
]
# Valid JSON that the plain read takes anyway: escapes in the weight map, a repeated "weight_map" key
LEFT_TO_THE_PLAIN_READ = [
    b'{"weight_map": {"a\\"b": "s"}}', b'{"weight_map": {"a": "s\\u0041"}}', b'{"weight_map": {"a\\\\": "s"}}',
    b'{"weight_map": {"\\ud800": "s"}}', b'{"weight_map": {"a": "s"}, "weight_map": {"b": "t"}}',
    json.dumps({"weight_map": {"caf\u00e9": "s"}}).encode(),        # ensure_ascii: non-ASCII names escaped
]


@pytest.mark.parametrize("content", INVALID + LEFT_TO_THE_PLAIN_READ)
@pytest.mark.parametrize("chunk", [1, 4, ix.CHUNK])
def test_none_where_the_plain_read_must_decide(tmp_path, monkeypatch, content, chunk):
    monkeypatch.setattr(ix, "CHUNK", chunk)
    path = _write(tmp_path, content)
    assert summarize_index(path) is None
    assert (_expected(path) is None) == (content in INVALID)


def test_none_for_what_is_not_a_readable_regular_file(tmp_path, monkeypatch):
    fifo = str(tmp_path / "fifo.json")
    os.mkfifo(fifo)                                          # a FIFO is never opened (it could block)
    opened, real_open = [], os.open
    with mock.patch.object(ix.os, "open", lambda *a: opened.append(a) or real_open(*a)):
        assert summarize_index(fifo) is None and not opened
    assert summarize_index(str(tmp_path)) is None
    assert summarize_index(str(tmp_path / "missing.json")) is None
    os.symlink("loop", tmp_path / "loop")
    assert summarize_index(str(tmp_path / "loop")) is None
    path = _write(tmp_path, '{"weight_map": {"a": "s"}}')
    assert summarize_index(path) is not None
    monkeypatch.setattr(ix, "JSON_LIMIT", 20)               # larger than read_json reads
    assert summarize_index(path) is None
    real = os.fstat                                         # ... or grown past it after the fstat
    monkeypatch.setattr(ix.os, "fstat", lambda fd: os.stat_result((*real(fd)[:6], 0, *real(fd)[7:10])))
    assert summarize_index(path) is None
    monkeypatch.setattr(ix, "JSON_LIMIT", 26)
    assert summarize_index(path) is not None


def test_the_fingerprint_matches_the_headers_exactly_when_the_pairs_agree():
    rng = random.Random(3)
    headers = {f"s{i}.safetensors": [f"{i}.{n}" for n in _names(rng, 50, AWKWARD)] for i in range(3)}
    headers["s3.safetensors"] = ["3" + n[1:] for n in headers["s0.safetensors"]]   # s0's, renamed
    wm = {n: s for s, names in headers.items() for n in names}
    assert len(wm) == 200
    index_fp = sum(map(hash, wm.items()))

    def header_side(h: dict) -> int:
        return sum(pairs_fingerprint(names, shard) for shard, names in h.items())

    assert header_side(headers) == index_fp
    shuffled = {s: sorted(names, key=lambda _: rng.random()) for s, names in reversed(headers.items())}
    assert header_side(shuffled) == index_fp                # order-free
    name = headers["s1.safetensors"][7]
    moved = {s: [n for n in names if n != name] for s, names in headers.items()}
    moved["s2.safetensors"].append(name)
    missing = {s: [n for n in names if n != name] for s, names in headers.items()}
    extra = {**headers, "s2.safetensors": headers["s2.safetensors"] + ["not.in.the.index"]}
    swapped = {**headers, "s0.safetensors": headers["s3.safetensors"], "s3.safetensors": headers["s0.safetensors"]}
    for changed in (moved, missing, extra, swapped):
        assert header_side(changed) != index_fp


# ---------------------------------------------------------------- properties

@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("index_summary"))


_SMALL = {"weight_map": {"model.a.weight": "m-1.safetensors", "b}: ,{x": "m-2.safetensors",
                         "\u4e2d \U0001f642": "m-1.safetensors", "": "m-3.safetensors"},
          "metadata": {"total_size": 1234, "k": [1.5, None, "v"]}}
_BYTES = (st.sampled_from(list(b'"\\{}[],: \n\t0-.1eE+atrufnlsN\x00') + [0xff, 0xe4, 0xb8, 0xef, 0x7f])
          | st.integers(0, 255))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(LAYOUTS)), st.booleans(), st.sampled_from([1, 2, 7, 30, ix.CHUNK]),
       st.lists(st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, 10**6), _BYTES),
                min_size=1, max_size=4))
def test_mutated_indexes_give_a_summary_only_where_json_loads_agrees(scratch, layout, sort, chunk, edits):
    blob = bytearray(LAYOUTS[layout](_SMALL, sort).encode())
    for op, at, byte in edits:
        if not blob and op != "insert":
            continue
        at %= len(blob) + (op == "insert")
        if op == "set":
            blob[at] = byte
        elif op == "insert":
            blob.insert(at, byte)
        else:
            del blob[at]
    with mock.patch.object(ix, "CHUNK", chunk):
        _agrees(_write(scratch, bytes(blob)))


_text = st.text(st.characters(codec="utf-8", exclude_characters="\\\""), max_size=8)
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_text | st.text(max_size=8), _text | _json, max_size=12), _json, st.booleans(),
       st.sampled_from(sorted(LAYOUTS)), st.booleans(), st.booleans(), st.sampled_from([1, 3, 40, ix.CHUNK]))
def test_random_indexes_are_read_whenever_the_weight_map_has_no_escape(scratch, wm, metadata, with_metadata,
                                                                       layout, sort, ascii_only, chunk):
    index = {"weight_map": wm, **({"metadata": metadata} if with_metadata else {})}
    dump = LAYOUTS[layout]
    text = json.dumps(index, indent=2, sort_keys=sort) + "\n" if ascii_only else dump(index, sort)
    with mock.patch.object(ix, "CHUNK", chunk):
        s = _agrees(_write(scratch, text))
    wm_text = json.dumps(wm, ensure_ascii=ascii_only)
    if all(type(v) is str for v in wm.values()) and "\\" not in wm_text:
        assert s is not None                              # the fast path is taken wherever it can be

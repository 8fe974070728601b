"""The C-speed paths `inspect` takes on large checkpoints (issue 23 point 1) give what the plain code
they replace gives: natural order, group names, the plain-header check, the scalar reads, the index
and duplicate checks. Each is compared with its reference on generated input, fast path taken or not."""

from __future__ import annotations

import json
import random
import struct

import pytest

from advisor.checkpoint import modules, name_columns, roles, safetensors_header as sh, scalar_reads
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.errors import BadInput

from ckpt_builders import LLAMA_CONFIG, write_with_floats


class _Row:
    __slots__ = ("name", "i")

    def __init__(self, name: str, i: int):
        self.name, self.i = name, i


def _names(rng: random.Random, alphabet: str) -> list[str]:
    names: list[str] = []
    for _ in range(rng.randint(0, 30)):
        if names and rng.random() < 0.3:        # near neighbours: a prefix, a longer run, a zero-padded run
            names.append(rng.choice(names) + rng.choice(["", "0", "1", "a", ".", "00", "-", "7"]))
        else:
            head = rng.choice(["", "", "embed.", "lm_head.", "mtp.", "model.embed_tokens", "x"])
            names.append(head + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return names


@pytest.mark.parametrize("chunk", [1, 3, 2048])
@pytest.mark.parametrize("alphabet", ["ab.-_~ 0123456789", "ab.07\u0663\n\x00"])
def test_sort_naturally_orders_as_natural_order(monkeypatch, chunk, alphabet):
    monkeypatch.setattr(name_columns, "_CHUNK", chunk)
    rng = random.Random(chunk)
    for _ in range(300):
        rows = [_Row(n, i) for i, n in enumerate(_names(rng, alphabet))]
        want = [r.i for r in sorted(rows, key=lambda r: name_columns.natural_order(r.name))]
        modules.sort_naturally(rows)
        assert [r.i for r in rows] == want


@pytest.mark.parametrize("run", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 63, 64, 65, 300])
def test_the_longest_digit_run_is_what_findall_finds(run):
    # sort_naturally pads every digit run to the longest: found by searching a digit mask for doubling, then
    # bisected, run lengths, so each length around a power of two is checked, in the first and a later chunk
    rng = random.Random(run)
    for _ in range(20):
        chunks = ["\n".join(rng.choice(["a.1.b", "x22", "", "q.333.r7", "7" * rng.randint(0, run)]) for _ in range(4))
                  for _ in range(3)]
        want = max((max(map(len, name_columns._NUM.findall(c)), default=0) for c in chunks), default=0)
        assert name_columns._longest_digit_run(chunks) == want
    rows = [_Row(f"m.{'9' * run}.a", 0), _Row(f"m.{'1' + '0' * run}.a", 1), _Row("m.8.a", 2)]
    want = [r.i for r in sorted(rows, key=lambda r: name_columns.natural_order(r.name))]
    modules.sort_naturally(rows)
    assert [r.i for r in rows] == want


def test_group_names_is_group_name_of_each():
    rng = random.Random(5)
    for _ in range(2000):
        names = ["".join(rng.choice("ab.01\u0663x") for _ in range(rng.randint(0, 12)))
                 for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.1:
            names.append("a.1\n.2")                 # a newline in a name: one group_name per name instead
        assert roles.group_names(names) == [roles.group_name(n) for n in names]


def test_layer_indexes_is_layer_index_of_each():
    rng = random.Random(7)
    parts = ["layers", "h", "blocks", "block", "decoder_layers", "layer", ".", ".", "1", "23", "07", "x", "\u0663", ""]
    for _ in range(3000):
        names = ["".join(rng.choice(parts) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.1:
            names.append("a.layers.1\n.layers.2")      # a newline in a name: one layer_index per name instead
        assert roles.layer_indexes(names) == [roles.layer_index(n) for n in names], names
    two = ["model.layers.1.blocks.2.x", "h.3.h.4", "a.layers.5x.layers.6", "layers.7", "x.h.8.", "h.9", ""]
    assert roles.layer_indexes(two) == [1, 3, 6, 7, 8, 9, None]     # the first match of each, as search() finds


def _header(rng: random.Random) -> tuple[str, int]:
    """A plain header, then zero to two mutations of the kind the fast path must refuse or get right."""
    ents, pos = [], 0
    for i in range(rng.randint(1, 6)):
        dt = rng.choice(["F32", "BF16", "U8", "F8_E4M3", "F4", "I32"])
        shape = [rng.randint(1, 5) for _ in range(rng.randint(0, 3))] + ([2] if dt == "F4" else [])
        n = 1
        for d in shape:
            n *= d
        nb = n * sh.DTYPE_BITS[dt] // 8
        ents.append([f"m.{i}.w", {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}])
        pos += nb
    rng.shuffle(ents)
    buf = pos
    odd = [0, 1, -1, "", "1", [], {}, [1], 2**64, 2**64 - 1, 7, True, False, None]
    for _ in range(rng.choice((0, 1, 1, 2))):
        e = rng.choice(ents)[1]
        k = rng.randint(0, 9)
        if k == 0:
            e["dtype"] = rng.choice(["X", 1, [], "F64", "BOOL"])
        elif k == 1:
            e["shape"] = rng.choice(odd)
        elif k == 2 and isinstance(e.get("shape"), list) and e["shape"]:
            e["shape"][0] = rng.choice(odd)
        elif k == 3:
            e["data_offsets"] = rng.choice(odd)
        elif k == 4 and isinstance(e.get("data_offsets"), list) and len(e["data_offsets"]) == 2:
            e["data_offsets"][rng.randrange(2)] += rng.choice((-1, 1, 3))
        elif k == 5:
            e["extra"] = 1
        elif k == 6:
            del e[rng.choice(list(e))]
        elif k == 7:
            buf += rng.choice((-1, 1))
        elif k == 8 and isinstance(e.get("shape"), list):
            e["shape"] = e["shape"] + [0]
        elif k == 9 and len(ents) > 1:
            a, b = rng.sample(range(len(ents)), 2)
            ents[a][1]["data_offsets"], ents[b][1]["data_offsets"] = \
                ents[b][1].get("data_offsets", [0, 1]), ents[a][1].get("data_offsets", [0, 1])
    text = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in ents) + "}"
    return text, buf


def _parse(raw: bytes, buf: int):
    try:
        h = sh.parse_header_bytes(raw, buf, "x.safetensors")
        return "ok", list(h.tensors.items()), h.metadata
    except BadInput as err:
        return "error", str(err)


def test_the_plain_header_fast_path_agrees_with_the_full_check(monkeypatch):
    rng = random.Random(11)
    fast = 0
    for _ in range(3000):
        text, buf = _header(rng)
        raw = text.encode()
        fast += sh._plain_header(raw, text, buf) is not None
        with_fast = _parse(raw, buf)
        monkeypatch.setattr(sh, "_plain_header", lambda *a: None)
        assert _parse(raw, buf) == with_fast, text
        monkeypatch.undo()
    assert 500 < fast < 3000        # both paths taken


@pytest.mark.parametrize("literal", ["true", "false", "null", "-0"])
def test_json_literals_in_a_shape_are_refused_as_the_full_check_refuses_them(monkeypatch, literal):
    # the fast path no longer searches the text for true/false/null: a True after a 1 in the same place
    # must not pass as the shape [1, 4] already seen (True == 1 and hashes alike)
    text = ('{"a":{"dtype":"U8","shape":[1,4],"data_offsets":[0,4]},'
            f'"b":{{"dtype":"U8","shape":[{literal},4],"data_offsets":[4,8]}}}}')
    raw = text.encode()
    assert sh._plain_header(raw, text, 8) is None
    with pytest.raises(BadInput, match="shape"):
        sh.parse_header_bytes(raw, 8, "x.safetensors")


def _compact_variant(rng: random.Random) -> tuple[str, int]:
    """A header of _header, often written compact with a metadata member anywhere, then perhaps one
    change of its separators or spelling that the compact split must refuse or read as json.loads does."""
    text, buf = _header(rng)
    if rng.random() < 0.7:
        members = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in json.loads(text).items()]
        if rng.random() < 0.6:
            meta = rng.choice(['{"format":"pt"}', '{}', '{"a":"b","c":"d:e"}', '{"a":1}', '{"a":"b","a":"c"}',
                               '{"a":"\\u00e9"}', '{"x":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}'])
            members.insert(rng.randint(0, len(members)), f'"__metadata__":{meta}')
        if rng.random() < 0.1:
            members.insert(rng.randint(0, len(members)), rng.choice(members))    # a member given twice
        text = "{" + ",".join(members) + "}" + " " * rng.randint(0, 7)
    for _ in range(rng.choice((0, 0, 1))):
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice([" ", ",", "0", "x", "\n", '"', "{", "}", ":", "\\", "\x01"]) + text[i:]
    return text, buf


def _compact_columns(text: str):
    """(names, dtypes, shapes, begins, ends, metadata) of a compact header as header_tokens reads it, before
    _compact_checked's checks; None for any other."""
    from advisor.checkpoint.header_tokens import compact_columns

    cols = compact_columns(text)
    if cols is None or len(cols[0]) > sh.MAX_TENSORS:
        return None
    names, kinds, kind_of, begins, ends, meta = cols
    try:
        kind_of = sh._dtypes_of(kind_of)
        ends = list(map(int, ends))
        begins = [0, *ends[:-1]] if begins is None else list(map(int, begins))
        return names, [kind_of[k][0] for k in kinds], [kind_of[k][1] for k in kinds], begins, ends, meta or {}
    except (KeyError, ValueError):
        return None


def test_the_compact_split_reads_what_json_loads_reads():
    """compact_columns reads a header as json.loads does, or refuses it; the separator checks matter: a
    stray character between two entries must not pass."""
    rng = random.Random(23)
    taken = 0
    for _ in range(4000):
        text, buf = _compact_variant(rng)
        compact = _compact_columns(text)
        if compact is None:
            continue
        taken += 1
        raw = text.encode()
        names = compact[0]
        if len(set(names)) < len(names) or "__metadata__" in names:    # left to _plain_header's dict of the names
            assert sh._plain_header(raw, text, buf) is None, text
        else:
            obj = json.loads(text)
            meta = obj.pop("__metadata__", {})
            assert compact == (list(obj), [v["dtype"] for v in obj.values()],
                               [tuple(v["shape"]) for v in obj.values()],
                               [v["data_offsets"][0] for v in obj.values()],
                               [v["data_offsets"][1] for v in obj.values()], meta), text
            assert sh._json_columns(raw, text) in (compact, None)     # json.loads' path: the same, or the full check
    assert 1000 < taken < 4000
    entry = '"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}'
    for text in ("{" + entry + ",x" + entry.replace('"a"', '"b"') + "}",
                 "{" + entry + "} x", "{" + entry + ",}", "{" + entry + "," + entry + "}",
                 '{"__metadata__":{}x' + entry + "}", "{" + entry + 'x"__metadata__":{}}',
                 "{" + entry + ',"__metadata__":{}x,' + entry.replace('"a"', '"b"') + "}"):
        assert sh._plain_header(text.encode(), text, None) is None, text


def test_every_compact_variant_parses_as_the_full_check_parses_it(monkeypatch):
    rng = random.Random(29)
    for _ in range(1500):
        text, buf = _compact_variant(rng)
        raw = text.encode()
        with_fast = _parse(raw, buf)
        monkeypatch.setattr(sh, "_plain_header", lambda *a: None)
        assert _parse(raw, buf) == with_fast, text
        monkeypatch.undo()


@pytest.mark.parametrize("dims", [64, 65, 100_000])
def test_the_compact_split_takes_shapes_up_to_the_rank_limit(dims):
    # a longer shape does not match the split's bounded repeat, and the json.loads path leaves it to the full
    # check before reading its dimensions (benchmarks/header_limits.py: refused within 4x a bare json.loads)
    from advisor.checkpoint import header_tokens

    assert header_tokens._MAX_DIMS == sh.MAX_RANK
    text = json.dumps({"a": {"dtype": "U8", "shape": [1] * dims, "data_offsets": [0, 1]}}, separators=(",", ":"))
    raw = text.encode()
    assert (_compact_columns(text) is not None) is (dims <= sh.MAX_RANK)
    assert sh._json_columns(raw, text) is None or dims <= sh.MAX_RANK
    if dims > sh.MAX_RANK:
        with pytest.raises(BadInput, match=f"shape has {dims:,} dimensions"):
            sh.parse_header_bytes(raw, 1, "x.safetensors")
    else:
        assert sh.parse_header_bytes(raw, 1, "x.safetensors").tensors["a"].shape == (1,) * dims


def test_a_dash_or_backslash_in_a_name_keeps_the_fast_path():
    text = ('{"a-1.w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
            '"b\\\\c":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}')
    assert json.loads(text).keys() == {"a-1.w", "b\\c"}
    fast = sh._plain_header(text.encode(), text, 8)
    assert fast is not None and list(fast[0]) == ["a-1.w", "b\\c"]


def _linear(pos: int, prefix: str, scale_at: int | None = None):
    """ModelOpt NVFP4 tensors of one 4x16 linear; the F32 scalars start at ``pos`` (+ scale_at padding)."""
    out, parts = {}, [("weight", "U8", [4, 8], 32), ("weight_scale", "F8_E4M3", [4, 1], 4)]
    for suffix, dt, shape, nb in parts:
        out[f"{prefix}.{suffix}"] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}
        pos += nb
    if scale_at:
        out[f"{prefix}.pad"] = {"dtype": "U8", "shape": [scale_at], "data_offsets": [pos, pos + scale_at]}
        pos += scale_at
    for suffix in ("weight_scale_2", "input_scale"):
        out[f"{prefix}.{suffix}"] = {"dtype": "F32", "shape": [], "data_offsets": [pos, pos + 4]}
        pos += 4
    return out, pos


@pytest.mark.parametrize("pad", [0, 1])           # scalars 4-byte aligned in the file, or not
def test_fused_scales_read_in_batches_find_the_differing_group(tmp_path, pad):
    tensors, pos, values = {}, 0, {}
    for layer in range(3):
        for proj in ("q_proj", "k_proj", "v_proj"):
            prefix = f"model.layers.{layer}.self_attn.{proj}"
            more, end = _linear(pos, prefix, pad)
            tensors.update(more)
            values[end - 8] = 2.0 if (layer, proj) == (1, "k_proj") else 1.0
            values[end - 4] = 0.5
            pos = end
    write_with_floats(tmp_path / "model.safetensors", tensors, pos, values)
    cfg = dict(LLAMA_CONFIG, num_hidden_layers=3)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    info = inspect_checkpoint(str(tmp_path))
    found = [f for f in info.findings if f.code == "fused-global-scale-mismatch"]
    assert len(found) == 1 and "1 fused group" in found[0].message
    assert "model.layers.1.self_attn weight: k_proj=2, q_proj=1, v_proj=1" in found[0].detail


def test_read_scalars_stops_at_a_short_read(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(struct.pack("<3f", 1.5, 2.5, 3.5) + b"\x01")
    reads = [(str(p), off, f"m{off}", "input_scale", 1.0) for off in (8, 0, 4, 12)]
    assert scalar_reads.read_scalars(reads) == {("m0", "input_scale"): 1.5, ("m4", "input_scale"): 2.5,
                                           ("m8", "input_scale"): 3.5}


def _sharded(tmp_path, wm_edit=None, dup=False, metadata=None):
    """Two shards with an index; ``dup`` puts one tensor in both files."""
    cfg = dict(LLAMA_CONFIG, num_hidden_layers=1)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    wm = {}
    for s, layer in ((1, 0), (2, 0)):
        names = [f"model.layers.{layer}.mlp.{'down' if s == 1 else 'up'}_proj.weight"]
        if dup or s == 1:
            names.append("model.norm.weight")
        hdr, pos = {}, 0
        for n in names:
            hdr[n] = {"dtype": "BF16", "shape": [2, 2], "data_offsets": [pos, pos + 8]}
            pos += 8
            wm.setdefault(n, f"model-0000{s}-of-00002.safetensors")
        body = json.dumps(hdr).encode()
        (tmp_path / f"model-0000{s}-of-00002.safetensors").write_bytes(struct.pack("<Q", len(body)) + body
                                                                       + bytes(pos))
    if wm_edit:
        wm_edit(wm)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": metadata or {}, "weight_map": wm}))
    return str(tmp_path)


def test_a_tensor_in_two_indexed_shards_is_named(tmp_path):
    with pytest.raises(BadInput, match="'model.norm.weight' is in both model-00001-of-00002.safetensors and "
                                       "model-00002-of-00002.safetensors"):
        inspect_checkpoint(_sharded(tmp_path, dup=True))


@pytest.mark.parametrize("edit, says", [
    (lambda wm: wm.update({"model.norm.weight": "model-00002-of-00002.safetensors"}), "1 tensor(s) in a different"),
    (lambda wm: wm.update({"ghost.weight": "model-00001-of-00002.safetensors"}), "1 indexed tensor(s) absent"),
    (lambda wm: wm.pop("model.norm.weight"), "1 tensor(s) in the shards but not in the index"),
])
def test_index_mismatches_are_found(tmp_path, edit, says):
    info = inspect_checkpoint(_sharded(tmp_path, edit))
    assert any(f.code == "index-header-mismatch" and says in f.message for f in info.findings)


def test_a_consistent_index_has_no_mismatch(tmp_path):
    info = inspect_checkpoint(_sharded(tmp_path))
    assert not any(f.code == "index-header-mismatch" for f in info.findings)


@pytest.mark.parametrize("edit", [None, lambda wm: wm.update({"model.norm.weight": "model-00002-of-00002.safetensors"}),
                                  lambda wm: wm.update({"ghost.weight": "model-00001-of-00002.safetensors"}),
                                  lambda wm: wm.pop("model.norm.weight")])
def test_load_says_whether_the_index_matches_the_headers(tmp_path, edit):
    # the doctor skips its own index check where load() found every name in its indexed shard
    from advisor.checkpoint.sources import load

    assert load(_sharded(tmp_path, edit)).index_matches is (edit is None)


@pytest.mark.parametrize("declared, found", [(24, False), (25, True)])
def test_the_index_total_size_is_checked_against_the_shards_data(tmp_path, declared, found):
    # three 2x2 BF16 tensors: 24 bytes of data in the two shards (taken from the file sizes, not summed per tensor)
    info = inspect_checkpoint(_sharded(tmp_path, metadata={"total_size": declared}))
    said = [f.message for f in info.findings if f.code == "index-total-size-mismatch"]
    assert said == (["index metadata.total_size is 25 bytes but the shard headers hold 24"] if found else [])


@pytest.mark.parametrize("k_scale", [1.0, 2.0])
def test_scalars_of_a_module_split_across_shards_are_read_from_their_own_shard(tmp_path, k_scale):
    # q/k/v's weights in shard 1, their F32 scalars in shard 2 (behind 64 bytes of padding, so an offset read
    # from the wrong shard lands in shard 2's padding or shard 1's weights): the fused-scale check and the
    # input-scale sample must read shard 2 at each scalar's own offset
    cfg = dict(LLAMA_CONFIG, num_hidden_layers=1)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None}}))
    first, second, pos1, pos2, data2 = {}, {"pad": {"dtype": "U8", "shape": [64], "data_offsets": [0, 64]}}, 0, 64, []
    for proj in ("q_proj", "k_proj", "v_proj"):
        prefix = f"model.layers.0.self_attn.{proj}"
        for suffix, dt, shape, nb in (("weight", "U8", [4, 8], 32), ("weight_scale", "F8_E4M3", [4, 1], 4)):
            first[f"{prefix}.{suffix}"] = {"dtype": dt, "shape": shape, "data_offsets": [pos1, pos1 + nb]}
            pos1 += nb
        for suffix, v in (("weight_scale_2", k_scale if proj == "k_proj" else 1.0), ("input_scale", 1.0)):
            second[f"{prefix}.{suffix}"] = {"dtype": "F32", "shape": [], "data_offsets": [pos2, pos2 + 4]}
            data2.append(struct.pack("<f", v))
            pos2 += 4
    wm = {}
    for i, (hdr, data) in enumerate(((first, bytes(range(pos1))), (second, bytes(range(64)) + b"".join(data2))), 1):
        name = f"model-0000{i}-of-00002.safetensors"
        body = json.dumps(hdr).encode()
        (tmp_path / name).write_bytes(struct.pack("<Q", len(body)) + body + data)
        wm.update(dict.fromkeys(hdr, name))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    info = inspect_checkpoint(str(tmp_path))
    codes = {f.code: f for f in info.findings}
    assert "uncalibrated-input-scales" in codes
    if k_scale == 1.0:
        assert "fused-global-scale-mismatch" not in codes
    else:
        assert "model.layers.0.self_attn weight: k_proj=2, q_proj=1, v_proj=1" in codes[
            "fused-global-scale-mismatch"].detail


"""A seeded generator of safetensors files, valid and mutated, for the header oracle suite.

Headers are written by our own emitter so that mutations can hold what ``json.dumps`` never writes:
repeated keys, ``-0``, ``NaN``, integers past 2**64, lone surrogate escapes, deep nesting, the
sequence form of a tensor entry. Each case is the whole file (length prefix, header, data buffer).
"""

from __future__ import annotations

import json
import random
import struct
from dataclasses import dataclass

DTYPES = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
          "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
          "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}


@dataclass(frozen=True)
class Raw:
    """A JSON token written as is (``-0``, ``NaN``, ``1e400``, a string with raw escapes)."""

    text: str


class Obj(list):
    """A JSON object as a list of (key, value) pairs: keys may repeat. Keys are written raw."""


def emit(v, rng: random.Random | None = None) -> str:
    sp = (lambda: rng.choice(("", "", "", " ", "\n", "\t", "  "))) if rng else (lambda: "")
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, Obj):
        return "{" + ",".join(f"{sp()}{k}{sp()}:{sp()}{emit(x, rng)}" for k, x in v) + sp() + "}"
    if isinstance(v, dict):
        return emit(Obj((json.dumps(k), x) for k, x in v.items()), rng)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(sp() + emit(x, rng) for x in v) + sp() + "]"
    return json.dumps(v)


def key(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


# ------------------------------------------------------------------ valid files

NAME_PARTS = ("model", "layers", "0", "17", "self_attn", "q_proj", "mlp", "experts", "weight", "weight_scale",
              "input_scale", "lm_head", "embed_tokens", "ünï", "层", "x-y", "a b", "[bold]x[/]", "\\", "\"q\"")


def _name(rng: random.Random) -> str:
    return ".".join(rng.choice(NAME_PARTS) for _ in range(rng.randint(1, 4)))


def _shape(rng: random.Random, bits: int) -> list[int]:
    while True:
        rank = rng.choice((0, 1, 1, 2, 2, 2, 3, 4))
        shape = [rng.choice((0, 1, 2, 3, 4, 8, 16)) if rng.random() < 0.9 else rng.randint(1, 40) for _ in range(rank)]
        n = 1
        for d in shape:
            n *= d
        if n * bits % 8 == 0 and n * bits // 8 <= 512:
            return shape


def valid(rng: random.Random) -> tuple[Obj, int]:
    """A valid header (as an Obj) and its data buffer size."""
    tensors, pos, names = [], 0, set()
    for _ in range(rng.randint(0, 6)):
        name = _name(rng)
        if name in names:
            continue
        names.add(name)
        dtype = rng.choice(list(DTYPES))
        shape = _shape(rng, DTYPES[dtype])
        size = _numel(shape) * DTYPES[dtype] // 8
        tensors.append((name, dtype, shape, [pos, pos + size]))
        pos += size
    rng.shuffle(tensors)
    obj = Obj()
    if rng.random() < 0.5:
        meta = rng.choice(({"format": "pt"}, {}, {"a": "b", "ü": "层"}, None))
        obj.append((key("__metadata__"), meta))
    for name, dtype, shape, offs in tensors:
        form = rng.random()
        if form < 0.08:                       # serde reads a struct from a sequence too
            entry = [dtype, shape, offs]
        elif form < 0.12:
            entry = Obj([(key("dtype"), Obj([(key(dtype), None)])), (key("shape"), shape),
                         (key("data_offsets"), offs)])
        else:
            fields = [(key("dtype"), dtype), (key("shape"), shape), (key("data_offsets"), offs)]
            if rng.random() < 0.1:
                fields.append((key("extra"), rng.choice((1, "x", [1, {"k": None}], {"n": [True, 2.5]}))))
            rng.shuffle(fields)
            entry = Obj(fields)
        obj.append((key(name), entry))
    return obj, pos


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def file_bytes(header_text: str, buffer_size: int, *, length_delta: int = 0, rng=None) -> bytes:
    raw = header_text.encode("utf-8", "surrogatepass")
    data = bytes(rng.randrange(256) for _ in range(min(buffer_size, 64))) + b"\0" * max(0, buffer_size - 64) \
        if rng else b"\0" * buffer_size
    return struct.pack("<Q", max(0, len(raw) + length_delta)) + raw + data


# ------------------------------------------------------------------ mutations

NUMBERS = ("-0", "-1", "0", "1", "2", "1.0", "1e2", "1e400", "-1e400", "1e-400", "NaN", "Infinity", "-Infinity",
           "18446744073709551615", "18446744073709551616", "9223372036854775808", "-9223372036854775809",
           "4294967296", "true", "null", '"4"', "[]", "{}", "9" * 320, "01", "0x10", "+1", ".5")
STRINGS = ('"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"\\ud800\\u0041"', '"\\u0000"', '"a\\nb"', '"\u202e"',
           '"\\u001b[31m"', '"\\x"', '"unterminated', '""', '"F16"', '"F16 "', '"f16"', '"BF16"', '"F13"')


def _rand_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if r < 0.3 or depth > 3:
        return Raw(rng.choice(NUMBERS + STRINGS))
    if r < 0.6:
        return [_rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return Obj((rng.choice(('"k"', '"dtype"', '"shape"', '"data_offsets"', '"\\ud800"')), _rand_value(rng, depth + 1))
               for _ in range(rng.randint(0, 3)))


def _nested(depth: int, rng: random.Random):
    v = Raw("1")
    for _ in range(depth):
        v = [v] if rng.random() < 0.5 else Obj([('"k"', v)])
    return v


def _entries(obj: Obj):
    return [i for i, (k, v) in enumerate(obj) if k != key("__metadata__")]


def mutate_structure(obj: Obj, buf: int, rng: random.Random) -> tuple[Obj, int]:
    """One structural mutation of a valid header (a copy); returns it and a (maybe changed) buffer size."""
    obj = Obj(obj)
    ents = _entries(obj)
    op = rng.randrange(22)
    if op == 0 and ents:                                   # a field of an entry gets another value
        i = rng.choice(ents)
        k, v = obj[i]
        if isinstance(v, Obj) and v:
            v = Obj(v)
            j = rng.randrange(len(v))
            v[j] = (v[j][0], _rand_value(rng))
            obj[i] = (k, v)
        elif isinstance(v, list) and v:
            v = list(v)
            v[rng.randrange(len(v))] = _rand_value(rng)
            obj[i] = (k, v)
    elif op == 1 and ents:                                 # a dimension changes
        i = rng.choice(ents)
        k, v = obj[i]
        shape_holder = _field(v, "shape")
        if isinstance(shape_holder, list):
            shape = list(shape_holder)
            if shape and rng.random() < 0.6:
                shape[rng.randrange(len(shape))] = Raw(rng.choice(NUMBERS))
            else:
                shape.append(Raw(rng.choice(("0", "1", "2", "-0", "18446744073709551616"))))
            obj[i] = (k, _with_field(v, "shape", shape))
    elif op == 2 and ents:                                 # offsets move
        i = rng.choice(ents)
        k, v = obj[i]
        offs = _field(v, "data_offsets")
        if isinstance(offs, list) and len(offs) == 2 and all(type(x) is int for x in offs):
            d = rng.choice((-2, -1, 1, 2, 8))
            new = rng.choice(([offs[0] + d, offs[1] + d], [offs[0], offs[1] + d], [offs[1], offs[0]],
                              [offs[0], offs[1], offs[1]], [offs[0]], [Raw("-0"), offs[1]]))
            obj[i] = (k, _with_field(v, "data_offsets", new))
    elif op == 3:                                          # the data buffer is longer or shorter
        buf = max(0, buf + rng.choice((-3, -1, 1, 2, 16)))
    elif op == 4 and ents:                                 # a repeated tensor name
        obj.append(obj[rng.choice(ents)])
    elif op == 5 and ents:                                 # a repeated field inside an entry
        i = rng.choice(ents)
        k, v = obj[i]
        if isinstance(v, Obj) and v:
            v = Obj(v)
            v.append(rng.choice(list(v)) if rng.random() < 0.7 else ('"extra"', 1))
            v.append(('"extra"', 2))
            obj[i] = (k, v)
    elif op == 6:                                          # a repeated or odd __metadata__
        obj.append((key("__metadata__"), rng.choice(({}, None, {"k": 1}, [], "x", Obj([('"k"', "a"), ('"k"', "b")])))))
    elif op == 7 and ents:                                 # a lone or paired surrogate in a name
        i = rng.choice(ents)
        obj[i] = ('"' + rng.choice(("\\ud800", "\\udfff", "\\ud83d\\ude00", "x\\udc80y", "\\ud800\\ud800")) + '"',
                  obj[i][1])
    elif op == 8:                                          # a surrogate in metadata
        obj.insert(0, (key("__metadata__"), Obj([(rng.choice(('"k"', '"\\ud800"')),
                                                  Raw(rng.choice(('"\\udc00"', '"ok"', '"\\ud83d\\ude00"')))) ])))
    elif op == 9 and ents:                                 # deep nesting in an ignored field
        i = rng.choice(ents)
        k, v = obj[i]
        if isinstance(v, Obj):
            v = Obj(v)
            v.append(('"extra"', _nested(rng.choice((1, 60, 124, 125, 126, 127, 200)), rng)))
            obj[i] = (k, v)
    elif op == 10 and ents:                                # rank near and past the limit
        i = rng.choice(ents)
        k, v = obj[i]
        rank = rng.choice((63, 64, 65, 100))
        fill = rng.choice((0, 1))
        offs = _field(v, "data_offsets")
        if isinstance(offs, list) and len(offs) == 2 and all(type(x) is int for x in offs):
            obj[i] = (k, _with_field(v, "shape", [fill] * rank))
    elif op == 11 and ents:                                # a field goes missing
        i = rng.choice(ents)
        k, v = obj[i]
        if isinstance(v, Obj) and v:
            v = Obj(v)
            del v[rng.randrange(len(v))]
            obj[i] = (k, v)
    elif op == 12 and ents:                                # sequence-form entries of other lengths
        i = rng.choice(ents)
        k, v = obj[i]
        seq = [_field(v, f) for f in ("dtype", "shape", "data_offsets")]
        obj[i] = (k, rng.choice((seq, seq[:2], seq + [1], [], seq[::-1])))
    elif op == 13 and ents:                                # map-form dtype variants
        i = rng.choice(ents)
        k, v = obj[i]
        dt = _field(v, "dtype")
        dt = dt if isinstance(dt, str) else "F16"
        obj[i] = (k, _with_field(v, "dtype", rng.choice((Obj([(key(dt), None)]), Obj([(key(dt), 1)]),
                                                          Obj([(key(dt), None), ('"U8"', None)]), Obj()))))
    elif op == 14:                                         # overflowing element counts
        obj.append((key("big"), Obj([('"dtype"', rng.choice(("U8", "F64", "F4"))),
                                     ('"shape"', rng.choice(([4294967296, 4294967296, 0], [0, 4294967296, 4294967296],
                                                             [2**62], [2**61], [2**63 - 1, 2], [3, 2**62]))),
                                     ('"data_offsets"', [buf, buf])])))
    elif op == 15:                                         # a zero-size tensor somewhere
        obj.append((key("zero"), Obj([('"dtype"', "U8"), ('"shape"', [0]),
                                      ('"data_offsets"', [p := rng.randint(0, buf + 1), p])])))
    elif op == 16 and ents:                                # the entry becomes another JSON value
        i = rng.choice(ents)
        obj[i] = (obj[i][0], _rand_value(rng))
    elif op == 17 and ents:                                # a dtype whose size does not fill bytes
        i = rng.choice(ents)
        k, v = obj[i]
        obj[i] = (k, _with_field(v, "dtype", rng.choice(("F4", "F6_E2M3", "BOOL", "C64"))))
    elif op == 18:                                         # odd numbers in an ignored field
        if ents:
            i = rng.choice(ents)
            k, v = obj[i]
            if isinstance(v, Obj):
                v = Obj(v)
                v.append(('"x"', Raw(rng.choice(NUMBERS))))
                obj[i] = (k, v)
    elif op == 19 and len(ents) >= 2:                      # two entries swap offsets (overlap or hole)
        a, b = rng.sample(ents, 2)
        oa, ob = _field(obj[a][1], "data_offsets"), _field(obj[b][1], "data_offsets")
        if oa is not None and ob is not None:
            obj[a] = (obj[a][0], _with_field(obj[a][1], "data_offsets", ob))
    elif op == 20:                                         # the top level is not an object
        return Obj([("__array__", None)]), buf
    else:                                                  # escapes in keys that decode to field names
        if ents:
            i = rng.choice(ents)
            k, v = obj[i]
            if isinstance(v, Obj) and v:
                v = Obj((('"\\u0064type"' if kk == '"dtype"' else kk), vv) for kk, vv in v)
                obj[i] = (k, v)
    return obj, buf


def _field(entry, name: str):
    if isinstance(entry, Obj):
        for k, v in entry:
            if k == key(name):
                return v
        return None
    if isinstance(entry, list) and len(entry) == 3:
        return entry[("dtype", "shape", "data_offsets").index(name)]
    return None


def _with_field(entry, name: str, value):
    if isinstance(entry, Obj):
        return Obj((k, value if k == key(name) else v) for k, v in entry)
    if isinstance(entry, list) and len(entry) == 3:
        out = list(entry)
        out[("dtype", "shape", "data_offsets").index(name)] = value
        return out
    return entry


def mutate_bytes(blob: bytes, rng: random.Random) -> bytes:
    """Byte-level damage: flips, inserts, deletions, truncation, a wrong length prefix."""
    b = bytearray(blob)
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(7)
        if op == 0 and len(b) > 8:
            b[rng.randrange(8, len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and len(b) >= 8:
            b.insert(rng.randrange(8, len(b) + 1), rng.choice(b'{}[]",:0-\\u \xff\xc3\x00'))
        elif op == 2 and len(b) > 9:
            del b[rng.randrange(8, len(b))]
        elif op == 3:
            del b[rng.randrange(0, len(b) + 1):]
        elif op == 4:
            n = struct.unpack("<Q", bytes(b[:8]).ljust(8, b"\0"))[0] if len(b) >= 8 else 0
            b[:8] = struct.pack("<Q", max(0, n + rng.choice((-2, -1, 1, 5, 2**40, 2**63))) % 2**64)
        elif op == 5 and len(b) > 8:
            i = rng.randrange(8, len(b))
            b[i:i] = rng.choice((b"\xed\xa0\x80", b"\xc0\xaf", b"\xef\xbb\xbf", b"\x0c", b"\x0b", b"\\ud800"))
        else:
            b += rng.choice((b"\0", b" ", b"x" * 3))
    return bytes(b)


def cases(seed: int, count: int):
    """``count`` files: a tenth valid, the rest mutated (structure, bytes, or both)."""
    rng = random.Random(seed)
    for _ in range(count):
        obj, buf = valid(rng)
        kind = rng.random()
        if kind < 0.1:
            yield file_bytes(emit(obj, rng), buf, rng=rng)
            continue
        if kind < 0.75 or kind >= 0.9:
            for _ in range(rng.choice((1, 1, 2))):
                obj, buf = mutate_structure(obj, buf, rng)
        text = emit(obj, rng) if not (obj and obj[0][0] == "__array__") else emit([1, 2], rng)
        blob = file_bytes(text, buf, rng=rng)
        yield mutate_bytes(blob, rng) if kind >= 0.75 else blob

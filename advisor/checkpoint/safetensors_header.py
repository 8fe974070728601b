"""A strict reader of safetensors headers: the JSON table of contents, never the tensor data.

Layout (huggingface/safetensors README, tensor.rs@24b0b28): 8-byte little-endian u64 N, then N
bytes of UTF-8 JSON ``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``,
then the data buffer. Offsets are relative to the buffer. We accept exactly what the official
reader accepts (``safetensors.deserialize``, the oracle of tests/reliability/) and report any
violation as :class:`BadInput` naming the file, with three limits of our own that bound time and
memory (README "Limits"): MAX_TENSORS, MAX_RANK and MAX_JSON_ITEMS.

serde_json's behaviour, reproduced here (tensor.rs:390-423, 540-575, 627-662@24b0b28): lone
surrogate escapes, NaN/Infinity, numbers out of f64 range and nesting deeper than 127 are invalid
JSON; integers outside u64 are floats (so ``-0`` and 2**64 are not sizes); a repeated tensor name or
``__metadata__`` key keeps the last value, a repeated ``__metadata__`` or field of a tensor entry is
an error; a tensor entry may also be the sequence ``[dtype, shape, data_offsets]`` and a dtype the map
``{"F16": null}``; element and bit counts overflow at 2**64; entries sorted by offsets must tile the
buffer exactly (zero-size ones included).

One module a little over ~400 lines on purpose: the fast path (_plain_header) and the strict
JSON syntax (_Syntax) must accept exactly the same headers, and side by side they are checked
against each other line by line.
"""

from __future__ import annotations

import json
import math
import operator
import os
import stat
import struct
from itertools import accumulate, chain, repeat
from dataclasses import dataclass
from typing import BinaryIO, NamedTuple

from advisor.checkpoint.header_tokens import compact_columns
from advisor.errors import BadInput

MAX_HEADER_SIZE = 100_000_000  # safetensors tensor.rs:10 MAX_HEADER_SIZE
# Ours. The largest real files hold a few thousand tensors (a whole 235B MoE in one file: ~150k);
# 2**18 keeps a header at the limit to a few seconds and ~200 MB (benchmarks/header_limits.py).
MAX_TENSORS = 262_144
# numpy's limit (NPY_MAXDIMS): safetensors' numpy loader cannot create a deeper array.
MAX_RANK = 64
# Commas, colons and opening brackets bound how many objects json.loads builds (a 100 MB header of
# empty lists would take several GB); a real header needs about 14 per tensor.
MAX_JSON_ITEMS = 6_000_000
_JSON_DEPTH = 127              # serde_json's recursion limit: 128 nested containers fail
_U64 = 2**64 - 1
_FIELDS = ("dtype", "shape", "data_offsets")


# advisor.untrusted on first use: only error messages and the full check of a header with \u escapes need it,
# and its import (two regexes over large classes) is ~1 ms of every fresh `inspect` that reads headers
def quoted(text: str, limit: int = 120) -> str:
    from advisor.untrusted import quoted
    return quoted(text, limit)


def one_line(text: str, limit: int | None = None) -> str:
    from advisor.untrusted import one_line
    return one_line(text, limit)


def has_surrogate(text: str) -> bool:
    from advisor.untrusted import has_surrogate
    return has_surrogate(text)


# Bits per element of every dtype string the format defines (tensor.rs:811-891).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


class TensorEntry(NamedTuple):
    """Immutable; a tuple because a 100k-tensor checkpoint builds 100k of them and a frozen
    dataclass costs ~10x a tuple to construct."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class SafetensorsHeader:
    path: str
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]
    header_size: int
    file_size: int


def read_header(path: str, *, names: dict[str, str] | None = None) -> SafetensorsHeader:
    """Read and validate the header of a local .safetensors file (reads 8 + N bytes only). ``names``: the
    string object to keep for each tensor name (an index's names: one string per name, not two)."""
    try:
        # a FIFO or device would block open() or read() forever: only regular files are opened
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError
        if not stat.S_ISREG(mode):
            raise BadInput("not a regular file (FIFO, socket or device)", path=path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return parse_header(f, size, path, names=names)
    except IsADirectoryError:
        raise BadInput("is a directory, expected a .safetensors file", path=path) from None
    except PermissionError:
        raise BadInput("cannot read file (permission denied)", path=path) from None
    except FileNotFoundError:
        raise BadInput("file not found", path=path) from None
    except OSError as err:
        raise BadInput(f"cannot read file ({err.strerror or err})", path=path) from None


def parse_header(f: BinaryIO, file_size: int, path: str, *, names: dict[str, str] | None = None) -> SafetensorsHeader:
    head = f.read(8)
    if len(head) < 8:
        raise BadInput(f"not a safetensors file (only {len(head)} bytes, need an 8-byte header length)", path=path)
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_SIZE:
        raise BadInput(f"safetensors header length {n} exceeds the 100 MB limit", path=path)
    if 8 + n > file_size:
        raise BadInput(f"safetensors header length {n} is larger than the file ({file_size} bytes)", path=path)
    raw = f.read(n)
    if len(raw) != n:
        raise BadInput(f"file ends inside the safetensors header ({len(raw)} of {n} bytes)", path=path)
    return parse_header_bytes(raw, file_size - 8 - n, path, header_size=n, file_size=file_size, names=names)


def parse_header_bytes(raw: bytes, buffer_size: int | None, path: str, *, header_size: int | None = None,
                       file_size: int | None = None, names: dict[str, str] | None = None) -> SafetensorsHeader:
    """Validate a header given as bytes; ``buffer_size`` is None when the data size is unknown (hub)."""
    # each separator or bracket is one byte: a header shorter than the limit cannot pass it (the four counts
    # are four passes over the bytes, ~15 ms at 100 k tensors)
    items = raw.count(b",") + raw.count(b":") + raw.count(b"[") + raw.count(b"{") if len(raw) > MAX_JSON_ITEMS else 0
    if items > MAX_JSON_ITEMS:
        raise BadInput(f"safetensors header has {items:,} JSON separators and brackets: more than this tool's "
                       f"limit of {MAX_JSON_ITEMS:,}", path=path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"safetensors header is not UTF-8 (byte {err.start})", path=path) from None
    fast = _plain_header(raw, text, buffer_size, names)
    if fast is not None:
        tensors, meta, covered = fast
        if not covered:
            _check_coverage(tensors, buffer_size, path)
        return SafetensorsHeader(path=path, tensors=tensors, metadata=meta,
                                 header_size=header_size if header_size is not None else len(raw),
                                 file_size=file_size if file_size is not None else -1)
    try:
        # the integer hook costs a call per number: only when a "-0" (a float to serde) may be there
        parse_int = _int if b"-0" in raw else None
        obj = json.loads(text, object_pairs_hook=_object, parse_float=_float, parse_constant=_constant,
                         parse_int=parse_int)
    except (ValueError, RecursionError) as err:
        raise BadInput(f"safetensors header is not valid JSON ({_short(err)})", path=path) from None
    if not isinstance(obj, dict):
        raise BadInput("safetensors header is not a JSON object", path=path)
    check = _Syntax(path, escapes=b"\\u" in raw)      # lone surrogates can only come from \u escapes
    if type(obj) is _Repeated:                          # serde reads every value, also those a later key replaces
        for name, info in obj.shadowed:
            if name == "__metadata__":
                raise BadInput("safetensors header has __metadata__ twice", path=path)
            check.name(name)
            check.fields(name, info)
    meta = obj.pop("__metadata__", None)
    check.metadata(meta)
    if len(obj) > MAX_TENSORS:
        raise BadInput(f"safetensors header lists {len(obj):,} tensors: more than this tool's limit of "
                       f"{MAX_TENSORS:,} per file", path=path)
    tensors = {}
    for name, info in obj.items():
        check.name(name)
        tensors[name] = _entry(name, *check.fields(name, info), buffer_size, path)
    _check_coverage(tensors, buffer_size, path)
    return SafetensorsHeader(path=path, tensors=tensors, metadata=meta or {},
                             header_size=header_size if header_size is not None else len(raw),
                             file_size=file_size if file_size is not None else -1)


_new_entry = tuple.__new__
_BY_OFFSETS = operator.itemgetter(3, 4)   # (begin, end) of a TensorEntry
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_DTYPE, _SHAPE, _OFFSETS = (operator.itemgetter(k) for k in _FIELDS)
_DTYPES = {d: d for d in DTYPE_BITS}      # one string per dtype, not one per tensor as json.loads builds them
_prod = math.prod


def _no_float(s: str):
    raise ValueError("a float: not the plain form")


def _plain_header(raw: bytes, text: str, buffer_size: int | None, known: dict[str, str] | None = None):
    """(tensors, metadata, covered) of a header in the plain form every writer produces (_plain_columns); None
    for anything else, which then goes through the full check below with its exact message."""
    cols = _plain_columns(raw, text, buffer_size)
    if cols is None:
        return None
    names, dtypes, shapes, begins, ends, meta, covered = cols
    if known:
        names = list(map(known.get, names, names))
    return dict(zip(names, map(_new_entry, repeat(TensorEntry), zip(names, dtypes, shapes, begins, ends)))), meta, \
        covered


def _plain_columns(raw: bytes, text: str, buffer_size: int | None):
    """(names, dtypes, shapes, begins, ends, metadata, covered) of a header in the plain form every writer
    produces, checked in a few C-speed passes; None for anything else (a failed check included). The compact
    form is split into columns by one regex pass (header_tokens); any other plain form is parsed by
    json.loads without the per-object duplicate-key hook of the full check (a Python call per tensor): there
    repeated keys are caught by counting instead, each key is followed by one ':', so as many ':' in the
    text as keys in the parsed objects means no key was repeated (and no ':' sits inside a string). Every
    check runs column by column through map/set/min/max, never a Python statement per tensor
    (benchmarks/inspect_speed.py: that loop cost ~3 us a tensor, twice the parse). ``covered``: the entries
    tile the buffer (False: the caller runs _check_coverage for its message)."""
    compact = compact_columns(text)
    if compact is not None:
        return _compact_checked(compact, buffer_size)
    cols = _json_columns(raw, text)
    if cols is None:
        return None
    names, dtypes, shapes, begins, ends, meta = cols
    if not names:
        return names, dtypes, shapes, begins, ends, meta, False
    try:
        # bytes each distinct (dtype, shape) needs; zero-size tensors take the full check, which bounds the
        # running product dimension by dimension
        kinds = list(zip(dtypes, shapes))       # (dtype, shape) of each tensor, built once for both passes
        need_of = {kind: _need(*kind) for kind in set(kinds)}
        if None in need_of.values():
            return None
        if min(begins) < 0 or (buffer_size is not None and max(ends) > buffer_size) \
                or list(map(operator.sub, ends, begins)) != list(map(need_of.__getitem__, kinds)):
            return None
    except (TypeError, KeyError, AttributeError, ValueError):
        return None
    if not _unique(names):
        return None
    return names, dtypes, shapes, begins, ends, meta, _covers(begins, ends, buffer_size)


def _need(dtype: str, shape: tuple) -> int | None:
    """Bytes a tensor of this dtype and shape needs; None for a zero-size tensor (the full check bounds its
    running product dimension by dimension), one over the rank limit or an overflow (the full check words it)."""
    if len(shape) > MAX_RANK or not all(type(d) is int and d > 0 for d in shape):
        return None
    nbits = _prod(shape) * DTYPE_BITS[dtype]
    return None if nbits > _U64 or nbits % 8 else nbits // 8


def _unique(names: list[str]) -> bool:
    """No name given twice (compact columns keep a repeat) and no tensor called "__metadata__"."""
    distinct = set(names)
    return len(distinct) == len(names) and "__metadata__" not in distinct


def _covers(begins: list[int], ends: list[int], buffer_size: int | None) -> bool:
    """_check_coverage in C. Every tensor here has at least one byte, so sorted by offsets each starts where
    the previous ended exactly when the sorted begins are 0 followed by all the sorted ends but the last
    (each byte below the last end is then covered once). Sorted copies: the columns keep header order."""
    sb, se = sorted(begins), sorted(ends)
    return sb[0] == 0 and sb[1:] == se[:-1] and (buffer_size is None or se[-1] == buffer_size)


def _compact_checked(compact: tuple, buffer_size: int | None):
    """_plain_columns of a compact header (header_tokens.compact_columns' columns); None where the full check
    must decide (as json.loads' path would: an unknown dtype, a number int() does not read, a wrong size).
    A writer lays the data out in header order, each tensor where the previous ended: then header_tokens gives
    no begins (its in-order split), or they are "0" and the ends' texts, and the ends are the running sum of
    the sizes, checked without a begin as an int."""
    names, kinds, kind_of, begins, ends_text, meta = compact
    if len(names) > MAX_TENSORS:
        return None
    try:
        kind_of = _dtypes_of(kind_of)
        ends = list(map(int, ends_text))
    except (KeyError, ValueError):          # not a safetensors dtype; more digits than int() reads
        return None
    need_of = {k: _need(*v) for k, v in kind_of.items()}
    if None in need_of.values():
        return None
    needs = list(map(need_of.__getitem__, kinds))
    if begins is None or begins[0] == "0" and begins[1:] == ends_text[:-1]:       # each where the previous ended
        del ends_text
        if ends != list(accumulate(needs)) or buffer_size is not None and ends[-1] > buffer_size:
            return None
        begins = [0, *ends[:-1]]                    # the ends' own int objects (one int per offset)
        # sizes of at least one byte laid end to end from 0: they tile [0, last end)
        covered = buffer_size is None or ends[-1] == buffer_size
    else:
        del ends_text
        try:
            begins = list(map(int, begins))
        except ValueError:
            return None
        if buffer_size is not None and max(ends) > buffer_size or list(map(operator.sub, ends, begins)) != needs:
            return None
        covered = _covers(begins, ends, buffer_size)
    del needs
    if not _unique(names):
        return None
    dtypes = list(map({k: v[0] for k, v in kind_of.items()}.__getitem__, kinds))
    shapes = list(map({k: v[1] for k, v in kind_of.items()}.__getitem__, kinds))
    return names, dtypes, shapes, begins, ends, meta or {}, covered


def _dtypes_of(kind_of: dict[str, tuple[str, tuple]]) -> dict[str, tuple[str, tuple]]:
    """header_tokens' (dtype, shape) of each kind with the dtype as the module's own string (one per dtype, not
    one per kind); KeyError: not a safetensors dtype."""
    return {k: (_DTYPES[dtype], shape) for k, (dtype, shape) in kind_of.items()}


class HeaderColumns(NamedTuple):
    """A validated header as columns, in header order: what `inspect` keeps of a shard (no object per tensor)."""

    path: str
    header_size: int
    file_size: int
    metadata: dict[str, str]
    names: list[str]
    dtypes: list[str]
    shapes: list[tuple[int, ...]]
    begins: list[int]
    ends: list[int]


def read_header_columns(path: str) -> HeaderColumns:
    """read_header as columns: the same checks and messages (a header the fast path cannot take goes through
    read_header's full check and is turned into columns)."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                head = f.read(8)
                if len(head) == 8:
                    (n,) = struct.unpack("<Q", head)
                    if n <= min(MAX_HEADER_SIZE, MAX_JSON_ITEMS, size - 8):
                        raw = f.read(n)
                        cols = _columns_of(raw, size - 8 - n) if len(raw) == n else None
                        if cols is not None:
                            return HeaderColumns(path, n, size, *cols)
    except OSError:
        pass            # read_header words it
    h = read_header(path)
    tensors = h.tensors.values()
    return HeaderColumns(h.path, h.header_size, h.file_size, h.metadata, list(h.tensors),
                         [e.dtype for e in tensors], [e.shape for e in tensors], [e.begin for e in tensors],
                         [e.end for e in tensors])


def _columns_of(raw: bytes, buffer_size: int):
    """(metadata, names, dtypes, shapes, begins, ends) of a plain header whose entries tile the buffer; None: the
    full check decides (a header under MAX_JSON_ITEMS bytes cannot exceed that many items)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cols = _plain_columns(raw, text, buffer_size)
    if cols is None or not cols[6]:
        return None
    names, dtypes, shapes, begins, ends, meta, _ = cols
    return meta, names, dtypes, shapes, begins, ends


def _json_columns(raw: bytes, text: str):
    """The columns of any other plain header (as _compact_checked gives a compact one), through json.loads; None
    where the full check must decide."""
    # lone surrogates and serde's float -0: the full check. A one-byte search is a memchr, a longer one a
    # slower scan (~0.6 ms per 450 KB shard), so each looks for its rare first byte first
    if b"\\" in raw and b"\\u" in raw or b"-" in raw and b"-0" in raw:
        return None
    try:
        obj = json.loads(text, parse_float=_no_float, parse_constant=_constant)
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict:
        return None
    meta = obj.pop("__metadata__", None)
    keys = len(obj)
    if keys > MAX_TENSORS:
        return None
    if meta is not None:
        if type(meta) is not dict or not all(type(v) is str for v in meta.values()):
            return None
        keys += 1 + len(meta)
    if keys + 3 * len(obj) != raw.count(b":"):
        return None
    if not obj:
        return [], [], [], [], [], (meta or {})
    names, infos = list(obj), list(obj.values())
    del obj
    try:                        # a value of another type fails a comparison or lookup: the full check
        # no floats, true/false/null reach here: every number is an int, every other value a str, list or dict
        if set(map(type, infos)) != {dict} or set(map(len, infos)) != {3}:
            return None
        dtypes = list(map(_DTYPES.__getitem__, map(_DTYPE, infos)))   # KeyError: unknown, TypeError: not a str
        shapes = list(map(_SHAPE, infos))
        offs = list(map(_OFFSETS, infos))
        del infos
        if set(map(type, shapes)) != {list} or set(map(type, offs)) != {list} or set(map(len, offs)) != {2} \
                or max(map(len, shapes)) > MAX_RANK:     # over the rank limit: the full check words it, no dims read
            return None
        shapes = list(map(tuple, shapes))
        # true/false/null are not searched for in the text: json.loads makes them True/False/None, which every
        # check below rejects by type (dtype lookup, list and int types, the metadata's str values) except
        # in a shape, where the dict below would take True for 1: so every dimension is checked to be an int
        if not {int} >= set(map(type, chain.from_iterable(shapes))):
            return None
        shape_of: dict[tuple, tuple] = {}         # one tuple per distinct shape: a big MoE repeats a handful
        shapes = list(map(shape_of.setdefault, shapes, shapes))      # TypeError: a list or object in a shape
        begins, ends = list(map(_FIRST, offs)), list(map(_SECOND, offs))
        del offs
        if set(map(type, begins)) != {int} or set(map(type, ends)) != {int}:
            return None
    except (TypeError, KeyError, AttributeError, ValueError):
        return None
    return names, dtypes, shapes, begins, ends, (meta or {})


# ------------------------------------------------------------------ serde_json's number and key rules

class _Repeated(dict):
    """A JSON object that repeated a key: the last value kept (as serde's maps do), the others in
    ``shadowed`` (serde still parsed and type-checked them)."""

    shadowed: list = []
    repeated: frozenset = frozenset()


def _object(pairs):
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    out = _Repeated(d)
    latest: dict = {}
    out.shadowed = []
    for k, v in pairs:
        if k in latest:
            out.shadowed.append((k, latest[k]))
        latest[k] = v
    out.repeated = frozenset(k for k, _ in out.shadowed)
    return out


def _int(s: str):
    v = int(s)
    if s[0] == "-" and v == 0 or not -2**63 <= v <= _U64:   # serde_json reads these as floats
        return _float(s)
    return v


def _float(s: str) -> float:
    v = float(s)
    if math.isinf(v):
        raise ValueError("number out of range")
    return v


def _fits_f64(v: int) -> bool:
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _constant(s: str):
    raise ValueError(f"{s} is not JSON")


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:120] if str(err) else type(err).__name__


class _Syntax:
    """What serde's deserialization checks: types of every value it reads into a struct or map
    (shadowed duplicates included), and for the values it skips, depth and valid Unicode."""

    def __init__(self, path: str, escapes: bool):
        self.path = path
        self.escapes = escapes

    def name(self, name: str) -> None:
        if self.escapes and has_surrogate(name):
            raise BadInput(f"tensor name {quoted(name)} holds a lone surrogate escape (not valid Unicode)",
                           path=self.path)

    def metadata(self, meta) -> None:
        if meta is None:
            return
        if not isinstance(meta, dict):
            raise BadInput("safetensors __metadata__ must map strings to strings", path=self.path)
        values = [*meta.values(), *(v for _, v in meta.shadowed)] if type(meta) is _Repeated else meta.values()
        if not all(isinstance(v, str) for v in values):
            raise BadInput("safetensors __metadata__ must map strings to strings", path=self.path)
        if self.escapes and any(has_surrogate(s) for s in (*meta, *values)):
            raise BadInput("safetensors __metadata__ holds a lone surrogate escape (not valid Unicode)", path=self.path)

    def fields(self, name: str, info) -> tuple[str, list, list]:
        """(dtype, shape, data_offsets) of a TensorInfo, type-checked as serde does."""
        path = self.path
        if isinstance(info, list) and len(info) == 3:      # serde also reads a struct from a sequence
            dtype, shape, offs = info
        elif isinstance(info, dict):
            shadowed = info.shadowed if type(info) is _Repeated else ()
            if any(k in _FIELDS for k, _ in shadowed):
                raise BadInput(f"tensor {quoted(name)}: a field is given twice", path=path)
            try:
                dtype, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
            except KeyError as err:
                raise BadInput(f"tensor {quoted(name)}: missing field {err.args[0]!r}", path=path) from None
            if len(info) > 3 or shadowed:
                self.ignored(name, [kv for kv in info.items() if kv[0] not in _FIELDS] + list(shadowed))
        else:
            raise BadInput(f"tensor {quoted(name)}: entry is not an object", path=path)
        if isinstance(dtype, dict) and len(dtype) == 1 and next(iter(dtype.values())) is None \
                and type(dtype) is not _Repeated:
            (dtype,) = dtype                               # the map form of an enum variant: {"F16": null}
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise BadInput(f"tensor {quoted(name)}: unknown dtype {quoted(str(dtype), 40)}", path=path)
        if not isinstance(shape, list):
            raise BadInput(f"tensor {quoted(name)}: shape must be a list of non-negative integers", path=path)
        for d in shape:
            if type(d) is not int or d < 0 or d > _U64:
                raise BadInput(f"tensor {quoted(name)}: shape must be a list of non-negative integers", path=path)
        if not (type(offs) is list and len(offs) == 2 and type(offs[0]) is int and type(offs[1]) is int
                and 0 <= offs[0] <= _U64 and 0 <= offs[1] <= _U64):
            raise BadInput(f"tensor {quoted(name)}: data_offsets {one_line(repr(offs), 60)} are invalid (need "
                           "[begin, end], non-negative integers)", path=path)
        return dtype, shape, offs

    def ignored(self, name: str, fields) -> None:
        """Fields serde skips are still parsed: no lone surrogates, at most 127 nested containers,
        numbers within f64 range."""
        todo = [(v, 3) for _, v in fields]                 # top level = 1, the entry = 2
        strings = [k for k, _ in fields]
        while todo:
            v, depth = todo.pop()
            if isinstance(v, (dict, list)):
                if depth > _JSON_DEPTH:
                    raise BadInput(f"tensor {quoted(name)}: JSON nested deeper than {_JSON_DEPTH} levels",
                                   path=self.path)
                if isinstance(v, dict):
                    strings += v.keys()
                    if type(v) is _Repeated:
                        todo += ((x, depth + 1) for _, x in v.shadowed)
                    v = v.values()
                todo += ((x, depth + 1) for x in v)
            elif isinstance(v, str):
                strings.append(v)
            elif type(v) is int and not -2**63 <= v <= _U64 and not _fits_f64(v):   # a float to serde
                raise BadInput(f"tensor {quoted(name)}: a number is out of range", path=self.path)
        if any(has_surrogate(s) for s in strings):
            raise BadInput(f"tensor {quoted(name)}: holds a lone surrogate escape (not valid Unicode)", path=self.path)


# ------------------------------------------------------------------ one tensor

def _entry(name: str, dtype: str, shape: list, offs: list, buffer_size: int | None, path: str) -> TensorEntry:
    """The sizes serde's validate() checks (tensor.rs:627-662), plus our rank limit."""
    if len(shape) > MAX_RANK:
        raise BadInput(f"tensor {quoted(name)}: shape has {len(shape):,} dimensions (limit {MAX_RANK})", path=path)
    numel = 1
    for d in shape:
        numel *= d
        if numel > _U64:                                   # usize::checked_mul, dimension by dimension
            raise BadInput(f"tensor {quoted(name)}: shape {_dims(shape)} overflows a 64-bit element count",
                           path=path)
    begin, end = offs
    if end < begin:
        raise BadInput(f"tensor {quoted(name)}: data_offsets {offs} are invalid", path=path)
    if buffer_size is not None and end > buffer_size:
        raise BadInput(f"tensor {quoted(name)}: data_offsets {offs} lie outside the file (data buffer is "
                       f"{buffer_size} bytes: truncated file?)", path=path)
    bits = numel * DTYPE_BITS[dtype]
    if bits > _U64:
        raise BadInput(f"tensor {quoted(name)}: {dtype}{_dims(shape)} overflows a 64-bit bit count", path=path)
    if bits % 8:
        raise BadInput(f"tensor {quoted(name)}: {numel} x {dtype} does not fill whole bytes", path=path)
    if end - begin != bits // 8:
        raise BadInput(f"tensor {quoted(name)}: data_offsets span {end - begin} bytes but {dtype}{_dims(shape)} "
                       f"needs {bits // 8}", path=path)
    return TensorEntry(name, dtype, tuple(shape), begin, end)


def _dims(shape: list) -> str:
    return str(shape) if len(shape) <= 8 else f"[{', '.join(map(str, shape[:8]))}, …] ({len(shape)} dims)"


def _check_coverage(tensors: dict[str, TensorEntry], buffer_size: int | None, path: str) -> None:
    """Sorted by (begin, end), every tensor starts where the previous ended (tensor.rs:627-640);
    with a known buffer size they must cover it exactly (no holes, no trailing bytes)."""
    pos = 0
    for t in sorted(tensors.values(), key=_BY_OFFSETS):
        if t.begin < pos:
            raise BadInput(f"tensor {quoted(t.name)}: data_offsets [{t.begin}, {t.end}] overlap another tensor",
                           path=path)
        if t.begin > pos:
            raise BadInput(f"tensor {quoted(t.name)}: data_offsets [{t.begin}, {t.end}] leave a hole at byte {pos}",
                           path=path)
        pos = t.end
    if buffer_size is not None and pos != buffer_size:
        if pos < buffer_size:
            raise BadInput(f"data buffer has {buffer_size - pos} bytes not covered by any tensor "
                           f"(truncated header or trailing garbage)", path=path)

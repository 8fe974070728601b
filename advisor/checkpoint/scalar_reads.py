"""Reading 4-byte F32 scalars (NVFP4 global and input scales) out of local safetensors files.

The doctor's only reads of tensor *data*: a 100k-tensor MoE holds ~33k such scalars, and one seek and read
each would cost more than parsing every header. So the reads of a shard are batched: close scalars (a span of
at most _DENSE bytes, one scalar per 4 KiB at least) in one read looked up through a float view in C, the
others in offset order with neighbours within _SPAN in one read (benchmarks/inspect_speed.py).
"""

from __future__ import annotations

import operator
import struct
import sys
from bisect import bisect_left, bisect_right
from itertools import compress, repeat

_SPAN = 1 << 16     # scalars closer than this to the first of a run are read with it in one call
_F32 = struct.Struct("<f")
_LITTLE = sys.byteorder == "little"         # a memoryview cast reads native floats, the files hold "<f"
_PATH, _OFFSET = operator.itemgetter(0), operator.itemgetter(1)    # of a read


def read_scalars(reads) -> dict[tuple[str, str], float]:
    """(name, suffix) -> value of the reads (path, offset, name, suffix, ...) that could be read, in reading
    order (by shard as first named, then by offset)."""
    got = read_values(list(map(_PATH, reads)), list(map(_OFFSET, reads)))
    rank: dict[str, int] = {}
    for r in reads:
        rank.setdefault(r[0], len(rank))
    order = sorted(range(len(reads)), key=lambda k: (rank[reads[k][0]], reads[k][1]))
    return {(reads[k][2], reads[k][3]): got[k] for k in order if got[k] is not None}


def read_values(paths: list[str], offsets: list[int]) -> list:
    """The 4-byte little-endian floats at (paths[k], offsets[k]), one per k (None: not read); a shard that
    cannot be read leaves its values None. A 100k-tensor MoE holds ~33k of them, and one seek and read each
    cost more than the whole header parse: a shard's reads that lie close together (a span of at most
    _DENSE bytes, a scalar per 4 KiB at least) are one read of that span, looked up in C through a float
    view; others are read in offset order, neighbours within _SPAN in one read."""
    n = len(paths)
    distinct = set(paths)
    if len(distinct) == 1:
        groups: list[tuple[str, list[int] | None]] = [(paths[0], None)]     # None: every read, in order
    elif len(distinct) <= 8:
        groups = [(p, list(compress(range(n), map(p.__eq__, paths)))) for p in sorted(distinct)]
    else:
        order = sorted(range(n), key=paths.__getitem__)
        in_order = list(map(paths.__getitem__, order))
        groups = [(p, order[bisect_left(in_order, p):bisect_right(in_order, p)]) for p in sorted(distinct)]
    got: dict[int, float | None] = {}
    for path, ks in groups:
        vals = read_shard(path, offsets if ks is None else list(map(offsets.__getitem__, ks)))
        if ks is None:
            return vals
        got.update(zip(ks, vals))
    return list(map(got.get, range(n)))


def read_shard(path: str, offsets: list[int]) -> list:
    """read_values of one file: the floats at ``offsets`` (any order), one per offset (None: not read)."""
    try:
        vals = _read_dense(path, offsets)
    except OSError:
        vals = None
    return vals if vals is not None else _read_sparse(path, offsets)


def _read_dense(path: str, offs: list[int]) -> list | None:
    """The values at ``offs`` read as one span, or None where they are not dense (or not aligned alike)."""
    lo, hi = min(offs), max(offs) + 4
    if hi - lo > _DENSE or hi - lo > 4096 * len(offs) or not _LITTLE or len(set(map(operator.mod, offs,
                                                                                     repeat(4)))) != 1:
        return None
    with open(path, "rb", buffering=0) as f:
        f.seek(lo)
        buf = f.read(hi - lo)
    if len(buf) != hi - lo:
        return None                                 # a short read: offset by offset
    view = memoryview(buf).cast("f")
    return list(map(view.__getitem__, map(operator.sub, map(operator.floordiv, offs, repeat(4)), repeat(lo // 4))))


def _read_sparse(path: str, offs: list[int]) -> list:
    """The values at ``offs`` (None past a short read or an error), read in offset order, neighbours within _SPAN
    in one read."""
    ks = sorted(range(len(offs)), key=offs.__getitem__)
    ordered = list(map(offs.__getitem__, ks))
    out: list = [None] * len(offs)
    try:
        with open(path, "rb", buffering=0) as f:
            i, count = 0, len(ordered)
            while i < count:
                start = ordered[i]
                j = bisect_right(ordered, start + _SPAN - 4, i + 1)   # offsets within _SPAN of the first
                f.seek(start)
                buf = f.read(ordered[j - 1] + 4 - start)
                m = bisect_right(ordered, start + len(buf) - 4, i, j)  # a short read: not those past its end
                for k, o in zip(ks[i:m], ordered[i:m]):
                    out[k] = _F32.unpack_from(buf, o - start)[0]
                i = j
    except OSError:
        pass                    # the values read before the error stand
    return out


_DENSE = 1 << 20    # bytes read at once, at most, for close scalars

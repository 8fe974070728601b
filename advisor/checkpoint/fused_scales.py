"""The fused-global-scale check: NVFP4 members of one fused GEMM whose global scales differ.

Engines fuse q/k/v, gate/up, GDN in_proj_* and each expert's gate/up into one GEMM and take the max of the
members' global scales (vllm modelopt.py process_weights_after_loading), so unequal scales silently lose
precision on the other members. Reads only the F32 scalars (``weight_scale_2`` / ``weight_global_scale`` /
``input_scale`` / ``input_global_scale``: 4 bytes each) of local files. A first pass (_agree) reads every
candidate's scalars and compares each with the first of its group through one dict, which proves most
checkpoints consistent; only where it cannot does the exact check (_differing) group the members and word
the findings.
"""

from __future__ import annotations

import operator
from collections import Counter, defaultdict
from itertools import compress, repeat
from math import prod as _prod
from typing import cast

from advisor.checkpoint.model import Finding
from advisor.checkpoint.modules import layout_flags
from advisor.checkpoint.roles import FUSED_SETS
from advisor.checkpoint.scalar_reads import read_shard, read_values

_FIRST = operator.itemgetter(0)
_SCALARS = (("weight_scale_2", 1.0), ("weight_global_scale", -1.0), ("input_scale", 1.0),
            ("input_global_scale", -1.0))

_FUSED_SET_OF = {last: i for i, fused in reversed(list(enumerate(FUSED_SETS))) for last in fused}


def fused_scale_mismatch(files, mods) -> list[Finding]:
    start = {h.path: 8 + h.header_size for h in files.headers}    # where each shard's data buffer begins
    cands, sets = _candidates(mods)
    if not cands or _agree(cands, sets, start):
        return []
    members: dict[tuple[str, int], list] = defaultdict(list)
    parents = map(_HEAD, map(str.rpartition, map(_NAME, cands), repeat(".")))
    for key, m in zip(zip(parents, sets), cands):
        members[key].append(m)
    fused = [(parent, ms) for (parent, _), ms in members.items() if len(ms) >= 2]
    del members, cands, sets, parents
    # Groups are checked a batch at a time (their modules' reads in offset order, neighbours in one call): the
    # values of all ~17k members of a 100k-tensor MoE at once were most of the peak memory of `inspect`
    bad: list[tuple[str, tuple]] = []
    scalars_of: dict[int, tuple] = {}      # the F32 scalars of a tensor layout (the rows' shared layout object)
    lo = 0
    while lo < len(fused):
        hi, n = lo, 0
        while hi < len(fused) and n < _SCALAR_BATCH:
            n += len(fused[hi][1])
            hi += 1
        bad += _differing(fused[lo:hi], start, scalars_of)
        lo = hi
    if not bad:
        return []
    return [Finding("fused-global-scale-mismatch", "warn",
                    f"{len(bad)} fused group(s) have differing NVFP4 global scales: engines take the max, "
                    "so the other members lose precision",
                    detail="; ".join(b[0] for b in bad[:4]),
                    modules=tuple(n for b in bad[:20] for n in b[1]))]


def _candidates(mods) -> tuple[list, list[int]]:
    """The rows that can be members of a fused group, and each one's fused set (FUSED_SETS index), in order."""
    # A row is a member by its name's last part (a fused set's) and its tensor layout (NVFP4, one module): the
    # first is read off its name pattern once per pattern (a pattern ends as its names do, unless a name ends
    # in a collapsed index, which no fused set holds), the second once per layout object (layout_flags)
    patterns = list(map(_GROUP, mods))
    set_of = {p: _FUSED_SET_OF.get(p.rpartition(".")[2]) for p in set(patterns) if p is not None}
    sets = list(map(set_of.get, patterns))
    if None in patterns:                # a row without its pattern
        sets = [set_of[p] if p is not None else _FUSED_SET_OF.get(m.name.rpartition(".")[2])
                for m, p in zip(mods, patterns)]
    del patterns
    keep = list(map(operator.is_not, sets, repeat(None)))
    cands, sets = list(compress(mods, keep)), list(compress(sets, keep))
    keep = layout_flags(cands, _nvfp4_module)
    return list(compress(cands, keep)), list(compress(cast(list[int], sets), keep))


def _nvfp4_module(m) -> bool:
    return m.layout is not None and m.tensors is not None and m.count == 1 and m.weight.format == "nvfp4"


def _agree(cands: list, sets: list[int], start: dict[str, int]) -> bool:
    """True when no fused group can hold differing global scales: in each group (parent, fused set) every
    scalar of a kind read (weight or input, in _differing's terms) equals the first one read, compared in C
    through a dict of each group's first value. False sends the exact check (_differing), which words the
    findings: any value that differs, a NaN, a scalar not read. Groups are keyed by a hash of their parent's
    pattern, layer and expert number and the fused set, plus the kind: every member of a group has its key,
    and two groups sharing one can only add a difference, never hide one. A 100k-tensor MoE's ~17k
    members cost ~29 ms here against ~55 ms for the exact check (benchmarks/inspect_speed.py)."""
    firsts: dict[int, float | None] = {}        # group key + kind -> the first value read
    parent_of: dict[str, str] = {}              # a member's pattern -> its parent's
    scalars_of: dict[int, tuple] = {}           # the F32 scalars of a tensor layout (the rows' shared layout object)
    for lo in range(0, len(cands), _SCALAR_BATCH):
        reads: dict[str, tuple[list, list, list]] = {}     # shard -> its offsets, their group keys, its flips
        for m, fused_set in zip(cands[lo:lo + _SCALAR_BATCH], sets[lo:lo + _SCALAR_BATCH]):
            scalars = scalars_of.get(id(m.layout))
            if scalars is None:
                scalars = scalars_of[id(m.layout)] = _scalars(m.tensors)
            # the group: its parent's pattern with the layer and expert numbers (a parent's other numbers left
            # out, two groups share a key: that only merges them), the name's own parent without a pattern
            pattern = m.group
            if pattern is None:
                key = hash((m.name.rpartition(".")[0], fused_set))
            else:
                parent = parent_of.get(pattern)
                if parent is None:
                    parent = parent_of[pattern] = pattern.rpartition(".")[0]
                key = hash((parent, m.layer, m.expert, fused_set))
            tensors, path, moved = m.tensors, m.path, m.shards
            for suffix, sign, kind in scalars:
                at = moved.get(suffix, path) if moved else path     # a module split over shards: its own
                shard = reads.get(at)
                if shard is None:
                    if at not in start:
                        return False            # a shard not read here: the exact check skips its scalars
                    shard = reads[at] = ([], [], [])
                offsets, keys, flips = shard
                if sign < 0:                    # compressed-tensors' global scales: global_scale = 1 / scale_2
                    flips.append(len(offsets))
                offsets.append(start[at] + tensors[suffix][3])
                keys.append(key + kind)
        for at, (offsets, keys, flips) in reads.items():
            got = read_shard(at, offsets)       # a batch's scalars of every kind in one shard share a span
            for i in flips:
                v = got[i]
                got[i] = (1.0 / v) if v else v
            if any(map(operator.ne, map(firsts.setdefault, keys, got), got)):
                return False
    return True


def _scalars(tensors: dict[str, tuple]) -> tuple:
    """(suffix, sign, kind) of a module's F32 scalar global scales, in _SCALARS order; kind True: input."""
    return tuple((suffix, sign, suffix[0] == "i") for suffix, sign in _SCALARS
                 if (t := tensors.get(suffix)) is not None and t[1] == "F32" and _prod(t[2]) == 1)


_GROUP, _TENSORS, _PATH_OF, _NAME = (operator.attrgetter(a) for a in ("group", "tensors", "path", "name"))
_HEAD = operator.itemgetter(0)      # of a str.rpartition
_BEGIN = operator.itemgetter(3)     # of a module tensor


def _differing(fused: list[tuple[str, list]], start: dict[str, int], scalars_of: dict[int, tuple]) -> list[tuple]:
    """(text, members) of each of these fused groups whose members' global scales differ, in order."""
    ms = [m for _, group in fused for m in group]
    n = len(ms)
    # Per kind (weight, input), each member's value: the last of the kind's scalars present, in _SCALARS order.
    # The members sharing a layout share its scalars: their offsets are read off as columns, a scalar at a time
    by_scalars: dict[tuple, list[int]] = defaultdict(list)      # scalars -> the members (indexes) holding them
    for j, m in enumerate(ms):
        key = id(m.layout)
        scalars = scalars_of.get(key) if m.layout is not None else None
        if scalars is None:
            scalars = _scalars(m.tensors)
            if m.layout is not None:
                scalars_of[key] = scalars
        by_scalars[scalars].append(j)
    paths: list[str] = []
    offsets: list[int] = []
    pieces = []                         # (members, kind, sign) of each run of reads, in reading-list order
    for scalars, idx in by_scalars.items():
        sub = list(map(ms.__getitem__, idx))
        tensors = list(map(_TENSORS, sub))
        where = list(map(_PATH_OF, sub))
        moved = list(compress(range(len(sub)), map(_SHARDS, sub)))     # members split over shards
        for suffix, sign, kind in scalars:
            at = where
            if moved:                                   # a module split over shards: its tensor's own shard
                at = list(where)
                for k in moved:
                    at[k] = sub[k].shard_of(suffix)
            keep = [p in start for p in at] if not start.keys() >= set(at) else None
            got = list(map(_BEGIN, map(operator.itemgetter(suffix), tensors)))
            js = idx
            if keep is not None:                        # a shard not read here (not local): no value
                js, at, got = (list(compress(c, keep)) for c in (idx, at, got))
            paths += at
            offsets += map(operator.add, map(start.__getitem__, at), got)
            pieces.append((js, kind, sign))
    got = read_values(paths, offsets)      # per read, its value (None: not read)
    values: dict[int, float] = {}           # kind * n + member -> value
    pos = 0
    for js, kind, sign in pieces:           # in _SCALARS order per member: the kind's last value read wins
        read = got[pos:pos + len(js)]
        pos += len(js)
        if sign < 0:                        # compressed-tensors' global scales: global_scale = 1 / scale_2
            read = [(1.0 / v) if v else v for v in read]
        slots = map(operator.add, js, repeat(n if kind else 0))
        values.update(compress(zip(slots, read), map(operator.is_not, read, repeat(None))))
    del paths, offsets, got
    weight, inputs = list(map(values.get, range(n))), list(map(values.get, range(n, 2 * n)))
    # a group can only differ where its members hold more than one distinct value (None: no value), counted
    # per group in C; the loop below, which words the finding, only visits those
    group_of = [g for g, (_, group) in enumerate(fused) for _ in group]
    suspects: set[int] = set()
    for of in (weight, inputs):     # equal values round equal: more than one raw value is the suspicion
        per_group = Counter(map(_FIRST, set(zip(group_of, of))))
        suspects.update(g for g, distinct in per_group.items() if distinct > 1)
    first = [0]                     # each group's first member
    for _, group in fused:
        first.append(first[-1] + len(group))
    bad = []
    for g in sorted(suspects):
        parent, group = fused[g]
        for kind, of in (("weight", weight), ("input", inputs)):
            vals = {m.name: v for m, v in zip(group, of[first[g]:first[g + 1]]) if v is not None}
            if len(vals) >= 2 and len({round(v, 12) if v == v else "nan" for v in vals.values()}) > 1:
                short = ", ".join(f"{name.rsplit('.', 1)[-1]}={v:.6g}" for name, v in vals.items())
                bad.append((f"{parent} {kind}: {short}", tuple(vals)))
    return bad


_SHARDS = operator.attrgetter("shards")


_SCALAR_BATCH = 512         # modules whose global scales are read together (a span of ~0.5 MB at 100k tensors)

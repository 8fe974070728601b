"""The compact safetensors header every writer produces, split into columns by one regex pass.

The safetensors library (serde_json) and json.dumps(separators=(",", ":")) write a header as
``{"name":{"dtype":"F32","shape":[4,8],"data_offsets":[0,128]},...}`` with at most one
``"__metadata__":{...}`` member and trailing spaces for alignment. ``compact_columns`` reads that
form without json.loads: ``re.split`` with one pattern per tensor entry leaves the separators
between the matches, and the header is in the compact form exactly when those are one ``{``, then
``,`` between every two entries, then ``}`` and whitespace (one of them may also hold the metadata
member, which json.loads reads on its own). Where each tensor begins where the previous one ended (the
layout every writer uses) the split is at the boundaries between entries instead, each begin a
backreference to the end before it (_in_order). On the 25 shards of a 100k-tensor checkpoint the split
takes ~0.03 s, json.loads alone ~0.07 s and the column checks of its result ~0.1 s more
(benchmarks/inspect_speed.py); the split builds no dict, list or int per tensor to throw away.

Anything else (whitespace between tokens, another key order, an escape in a string, a control
character, a leading zero) gives None and goes through json.loads as before. What this accepts
json.loads reads to the same values: a JSON string without a backslash or control character is its
text, and the numbers are non-negative integers without leading zeros. A name given twice, or
"__metadata__" as a tensor, the caller finds in its dict of the names (the full check words them).
"""

from __future__ import annotations

import json
import re

# safetensors_header.MAX_RANK (numpy's limit): a longer shape is not compact, and json.loads' path words the error
_MAX_DIMS = 64
# name, kind, begin, end. The kind is the dtype and the shape's dimensions as one string, ``U8","shape":[32,4``
# (_KIND_SEP between them): one string per tensor fewer than two groups, and a MoE repeats a handful of kinds,
# each checked and read once. Names and dtypes are [^"]* and dimensions [0-9,]*, classes sre runs in a tight
# loop where [^"\\\x00-\x1f]* and (?:0|[1-9][0-9]*) repeats step an opcode per character or number (the split of
# the 25 shards of a 100k-tensor checkpoint: 33 ms instead of 56); what they let through is refused after it:
# a backslash anywhere in the text, a control character in a name (one search each), and per distinct kind a
# dimension that is empty or has a leading zero, or more than _MAX_DIMS of them
_ENTRY = re.compile(r'"([^"]*)":\{"dtype":"([^"]*","shape":\[[0-9,]*)\],"data_offsets":\[(0|[1-9][0-9]*),'
                    r'(0|[1-9][0-9]*)\]\}')
_KIND_SEP = '","shape":['      # a dtype holds no '"': the first one in a kind ends it
_GROUPS = 4
_WHITESPACE = " \t\n\r"        # what json.loads skips around a value
_CONTROL = tuple(map(chr, range(32)))   # json.loads refuses them in a string


def compact_columns(text: str):
    """(names, kinds, (dtype, shape) of each distinct kind, begin texts, end texts, metadata) of a compact
    header, the metadata None when absent; None for any other header (then json.loads decides). A kind is
    ``dtype + _KIND_SEP + dims``: ``F32","shape":[`` for a scalar, ``U8","shape":[32,4`` for a 32x4 tensor; its
    dtype is the text (any string: the caller looks it up), its shape a tuple of ints. The begins are None
    where the text gives each tensor's begin as the previous one's end and the first's as 0 (_in_order)."""
    if "\\" in text:
        return None
    cols = _in_order(text) or _any_order(text)
    if cols is None:
        return None
    names, kinds, begins, ends, meta = cols
    # a control character: only a name can hold one here (a separator is checked whole, a dtype looked up, the
    # metadata read by json.loads); the names joined are half the text
    joined = "".join(names)
    if any(map(joined.__contains__, _CONTROL)):
        return None
    del joined
    # a name given twice or "__metadata__" as a tensor: the caller's dict of the names tells (json.loads
    # would keep the last of a repeated name, and the full check must word both)
    kind_of = _kinds(kinds)
    if kind_of is None:
        return None
    return names, kinds, kind_of, begins, ends, meta


def _any_order(text: str):
    """(names, kinds, begin texts, end texts, metadata) of a compact header; None for any other."""
    parts = _ENTRY.split(text)
    n = len(parts) // (_GROUPS + 1)
    if n == 0:
        return None
    gaps = parts[::_GROUPS + 1]                    # n + 1 separators around and between the n entries
    first, last = gaps[0], gaps[-1].rstrip(_WHITESPACE)
    inner_commas = gaps.count(",")                 # an end that is a lone "," is refused below
    members = []        # the metadata member, where a separator holds one ("": not one, _metadata refuses it)
    if inner_commas == n - 1:                      # a member can only be at an end: "{META," or ",META}"
        if first != "{":
            members.append(first[1:-1] if first[:1] == "{" and first[-1:] == "," else "")
        if last != "}":
            members.append(last[1:-1] if last[:1] == "," and last[-1:] == "}" else "")
    elif inner_commas == n - 2 and first == "{" and last == "}":       # ",META," between two entries
        g = next(g for g in gaps[1:-1] if g != ",")
        members.append(g[1:-1] if g[:1] == "," and g[-1:] == "," else "")
    else:
        return None
    meta = _member(members)
    if meta is False:
        return None
    step = _GROUPS + 1
    return parts[1::step], parts[2::step], parts[3::step], parts[4::step], meta


# The layout every writer uses (safetensors' Metadata serializes the tensors in data order, the metadata first):
# each tensor begins where the previous one ended, the first at 0. Split at the boundaries between entries,
# "END]},"NAME":{"dtype":"KIND],"data_offsets":[END," with the begin a backreference to the end before it: no
# begin is captured or compared (the split of the 25 shards of a 100k-tensor checkpoint: 27 ms instead of 33,
# and no pass comparing the begins with the ends). An end is never 0 here (every size is at least one byte).
_BOUNDARY = re.compile(r'([1-9][0-9]*)\]\},"([^"]*)":\{"dtype":"([^"]*","shape":\[[0-9,]*)\],"data_offsets":\[\1,')
# the first entry, up to its begin 0, after "{" and perhaps the metadata member (the shortest: its value is an object
# of strings, which cannot hold '{"dtype"'; _metadata refuses anything else)
_HEAD = re.compile(r'\{(?:("__metadata__":\{.*?\}),)?"([^"]*)":\{"dtype":"([^"]*","shape":\[[0-9,]*)\],'
                   r'"data_offsets":\[0,', re.S)
_TAIL = re.compile(r'([1-9][0-9]*)\]\}(.*)', re.S)        # the last end, then "}" or ',MEMBER}', and whitespace


def _in_order(text: str):
    """_any_order of a compact header of two or more tensors laid out in header order from 0, begins None;
    None for any other (a tensor out of order, a member between entries: _any_order reads it)."""
    head = _HEAD.match(text)
    if head is None or _BOUNDARY.match(text, head.end()) is None:
        return None
    # the head, then END, NAME, KIND and the separator after them per boundary: "" but after the last, the tail
    # (the whole text is split, not text[head.end():]: a second copy of a large header costs a page fault per
    # 4 KB, ~4,700 over the 25 shards of a 100k-tensor checkpoint, where the text's own pages are reused)
    parts = _BOUNDARY.split(text)
    if len(parts[0]) != head.end() or any(parts[4:-1:4]):
        return None
    tail = _TAIL.fullmatch(parts[-1])
    if tail is None:
        return None
    members = [] if head.group(1) is None else [head.group(1)]
    rest = tail.group(2).rstrip(_WHITESPACE)
    if rest != "}":
        members.append(rest[1:-1] if rest[:1] == "," and rest[-1:] == "}" else "")
    meta = _member(members)
    if meta is False:
        return None
    ends = parts[1::4]
    ends.append(tail.group(1))
    return [head.group(2), *parts[2::4]], [head.group(3), *parts[3::4]], None, ends, meta


def _member(members: list[str]) -> dict | None | bool:
    """The metadata of the members found between or around the entries (at most one, "" where a separator
    is not one): None for none, False where they are not exactly one valid metadata member."""
    if not members:
        return None
    if len(members) > 1:
        return False
    meta = _metadata(members[0])
    return False if meta is None else meta


def _kinds(kinds: list[str]) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """{kind: (dtype, shape)} of the distinct kinds; None where the dtype holds a character that is not
    printable (a control character among them), or a dimension is not a JSON number as
    (0|[1-9][0-9]*) reads it (empty: "[,1]", "[1,]"; a leading zero), there are more than _MAX_DIMS of them,
    or one has more digits than int() reads."""
    of = {}
    for kind in set(kinds):
        dtype, _, dims = kind.partition(_KIND_SEP)
        if not dtype.isprintable():         # a control character (json.loads refuses it; no dtype has one)
            return None
        if dims:
            if dims.count(",") >= _MAX_DIMS:
                return None
            ds = dims.split(",")
            if not all(ds) or any(d[0] == "0" and d != "0" for d in ds):
                return None
            try:
                shape = tuple(map(int, ds))
            except ValueError:
                return None
        else:
            shape = ()
        of[kind] = (dtype, shape)
    return of


def _metadata(member: str) -> dict | None:
    """The value of a ``"__metadata__":{...}`` member: a dict of str to str, each key once; else None."""
    if not member.startswith('"__metadata__":{') or "\\" in member:
        return None
    try:
        obj = json.loads("{" + member + "}")
    except (ValueError, RecursionError):
        return None
    meta = obj.get("__metadata__") if type(obj) is dict and len(obj) == 1 else None
    if type(meta) is not dict or not all(type(v) is str for v in meta.values()):
        return None
    # each key is followed by one ':': as many as keys means none repeated (and none inside a string)
    return meta if member.count(":") == 1 + len(meta) else None

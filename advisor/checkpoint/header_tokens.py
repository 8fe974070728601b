"""The compact safetensors header every writer produces, split into columns by one regex pass.

The safetensors library (serde_json) and json.dumps(separators=(",", ":")) write a header as
``{"name":{"dtype":"F32","shape":[4,8],"data_offsets":[0,128]},...}`` with at most one
``"__metadata__":{...}`` member and trailing spaces for alignment. ``compact_columns`` reads that
form without json.loads: ``re.split`` with one pattern per tensor entry leaves the separators
between the matches, and the header is in the compact form exactly when those are one ``{``, then
``,`` between every two entries, then ``}`` and whitespace (one of them may also hold the metadata
member, which json.loads reads on its own). On the 25 shards of a 100k-tensor checkpoint the split
takes ~0.07 s, json.loads alone about as long and the column checks of its result ~0.1 s more
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

# safetensors_header.MAX_RANK (numpy's limit): a longer shape does not match, and json.loads' path words the error
# (an unbounded repeat would cost ~10 ms for a 100,000-dimension shape before that path even starts)
_MAX_DIMS = 64
# name, dtype, shape (its bracketed text), begin, end; strings without '"', '\' or control characters
_ENTRY = re.compile(r'"([^"\\\x00-\x1f]*)":\{"dtype":"([^"\\\x00-\x1f]*)","shape":(\[(?:(?:0|[1-9][0-9]*)'
                    r'(?:,(?:0|[1-9][0-9]*)){0,%d})?\]),"data_offsets":\[(0|[1-9][0-9]*),(0|[1-9][0-9]*)\]\}'
                    % (_MAX_DIMS - 1))
_GROUPS = 5
_WHITESPACE = " \t\n\r"        # what json.loads skips around a value


def compact_columns(text: str):
    """(names, dtypes, shape texts, begin texts, end texts, metadata) of a compact header, the
    metadata None when absent; None for any other header (then json.loads decides)."""
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
    if len(members) > 1:
        return None
    meta = _metadata(members[0]) if members else None
    if members and meta is None:
        return None
    # a name given twice or "__metadata__" as a tensor: the caller's dict of the names tells (json.loads
    # would keep the last of a repeated name, and the full check must word both)
    step = _GROUPS + 1
    return parts[1::step], parts[2::step], parts[3::step], parts[4::step], parts[5::step], meta


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

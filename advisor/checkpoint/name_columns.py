"""Module names read as columns: each name's pattern, layer, expert number and natural-order key, in one pass.

A 100k-tensor MoE has ~25k module names, 1 MB of text. The pattern (roles.group_name), the layer
(roles.layer_index), the natural order's key and the expert number (experts_per_layer) were four regex
scans of it, ~45 ms (benchmarks/inspect_speed.py). One regex split on the numeric components (".17"
followed by "." or the name's end: what group_name collapses to ".*") gives them all:
- the texts between the numbers, joined by ".*", are the patterns;
- a pattern decides once which of its numbers is the layer (roles._LAYER: a component "layers", "h",
  "blocks", "block" or "decoder_layers" before it) and which the expert (a component ending in "experts"
  before it and another component after it), so a name's are read off its numbers by position;
- the texts (a few distinct ones) and numbers padded as natural_keys pads every digit run make its key, and
  the keys the names' natural order, worked out before the caller builds its rows (the keys, ~100 B a name,
  are gone by then: issue 23's memory target).
Patterns and expert numbers are kept as one string per distinct value (a row keeps them).
Names that are not plain ASCII, or hold a "*", NUL or newline, take the per-name functions instead.
"""

from __future__ import annotations

import operator
import re
from itertools import accumulate, repeat
from typing import NamedTuple

from advisor.checkpoint.roles import LAYER_WORDS, group_names, layer_indexes

_NUM = re.compile(r"(\d+)")
_NUMBER = re.compile(r"\.([0-9]+)(?=[.\n]|\Z)")      # a numeric component of names joined by newlines (ASCII)
_EXPERT_INDEX = re.compile(r"experts\.(\d+)\.")
_LAYER_WORDS = frozenset(LAYER_WORDS)
_NOWHERE = 1 << 62      # a position past any name's numbers
_CHUNK = 2048           # names joined and split at once: the parts of every name at once would be ~500 B a name
_DIGIT_MASK = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))     # ASCII digits -> "0", the rest -> " "


class NameColumns(NamedTuple):
    """Per name, in order: its pattern, layer and expert number as written ("" where it has none); and the
    names' natural order (sorted(key=natural_order) as indexes)."""

    patterns: list[str]
    layers: list[int | None]
    experts: list[str]
    order: list[int]


def expert_number(name: str) -> str:
    """The expert number in ``name`` as written ("" where it has none): the first ``experts.N.``."""
    m = _EXPERT_INDEX.search(name)
    return m.group(1) if m else ""


def name_columns(names: list[str]) -> NameColumns:
    chunks = _chunks(names)
    one: dict[str, str] = {}             # a string per distinct pattern and expert number
    if chunks is None or any("*" in c for c in chunks):
        return NameColumns(_shared(group_names(names), one), layer_indexes(names),
                           _shared(list(map(expert_number, names)), one), natural_order_of(names, natural_keys(names)))
    width = _longest_digit_run(chunks)
    # pattern -> where its layer and its expert are among its numbers (_NOWHERE: it has none)
    layer_at: dict[str, int] = {}
    expert_at: dict[str, int] = {}
    stars: dict[str, int] = {}           # pattern -> how many numbers its names hold
    padded: dict[str, str] = {}          # a number -> its key text
    padded_text: dict[str, str] = {}     # a text between numbers -> its key text
    ints: dict[str, int] = {}
    patterns: list[str] = []
    layers: list[int | None] = []
    experts: list[str] = []
    keys: list[str] = []
    for c in chunks:
        parts = _NUMBER.split(c)
        texts, numbers = parts[0::2], parts[1::2]
        pats = _shared(".*".join(texts).split("\n"), one)
        patterns += pats
        for p in set(pats).difference(layer_at):
            layer_at[p], expert_at[p] = _slots(p)
            stars[p] = p.count("*")
        first = list(accumulate(map(stars.__getitem__, pats), initial=0))      # each name's first number
        found = _numbers_at(numbers, first, map(layer_at.__getitem__, pats))
        ints.update((n, int(n)) for n in set(found).difference(ints) if n)
        layers += map(ints.get, found)
        experts += _shared(_numbers_at(numbers, first, map(expert_at.__getitem__, pats)), one)
        del first, found
        padded.update((n, ".\x00" + n.zfill(width)) for n in set(numbers).difference(padded))
        padded_text.update((t, _pad_runs(t, width)) for t in set(texts).difference(padded_text))
        parts[0::2] = map(padded_text.__getitem__, texts)
        parts[1::2] = map(padded.__getitem__, numbers)
        keys += "".join(parts).split("\n")
    return NameColumns(patterns, layers, experts, natural_order_of(names, keys, patterns))


def _numbers_at(numbers: list[str], first: list[int], at) -> list[str]:
    """Each name's number at its pattern's position ``at`` ("" where the pattern has none): the name's first number
    plus the position, or the "" past the last number (_NOWHERE is past any index: min() in C)."""
    padded = [*numbers, ""]
    return list(map(padded.__getitem__, map(min, map(operator.add, first, at), repeat(len(numbers)))))


def _shared(strings: list[str], one: dict[str, str]) -> list[str]:
    """``strings`` with equal ones the same object (the first of them met in ``one``)."""
    return list(map(one.setdefault, strings, strings))


def _slots(pattern: str) -> tuple[int, int]:
    """Which of a pattern's numbers ("*" components, in order) is the layer and which the expert (_NOWHERE: none)."""
    comps = pattern.split(".")
    layer = expert = _NOWHERE
    n = 0
    for j, comp in enumerate(comps):
        if comp != "*":
            continue
        if layer == _NOWHERE and j and comps[j - 1] in _LAYER_WORDS:
            layer = n
        if expert == _NOWHERE and j and comps[j - 1].endswith("experts") and j + 1 < len(comps):
            expert = n
        n += 1
    return layer, expert


def _pad_runs(text: str, width: int) -> str:
    return _NUM.sub(lambda m: "\x00" + m.group().zfill(width), text)


# ------------------------------------------------------------------ natural order

def natural_order(name: str):
    head = _head(name)
    parts = _NUM.split(name)
    if name.isascii():          # the digit runs are exactly the odd parts: convert them in one step
        parts[1::2] = map(int, parts[1::2])
        return (head, parts)
    return (head, [int(p) if p.isdigit() else p for p in parts])


def natural_keys(names: list[str]) -> list[str] | None:
    """The keys that order ``names`` as natural_order does, built in a few C passes over the names joined in
    chunks (natural_order costs ~3 us a name); None for names they cannot key (see below).

    The key of a name is one string: the name with a NUL before each digit run and every run zero-padded to
    the longest. Compared as strings these order exactly as natural_order's lists do: a NUL sorts below
    every character, so a text part that is a prefix of another sorts first as it does in the list, and runs
    of equal width compare as their numbers ("007" and "7" are equal in both). order_naturally puts the
    head (embedding first, lm_head and MTP last) before the key. Names a NUL, newline or non-ASCII
    character could confuse are not keyed."""
    chunks = _chunks(names)
    if chunks is None:
        return None
    width = _longest_digit_run(chunks)
    keys: list[str] = []
    padded: dict[str, str] = {}     # digit run -> NUL + its padding: a MoE's names hold a few hundred distinct runs
    for c in chunks:                # a chunk at a time: the parts of every name at once would be ~500 B a name
        parts = _NUM.split(c)
        runs = parts[1::2]
        padded.update((r, "\x00" + r.zfill(width)) for r in set(runs).difference(padded))
        parts[1::2] = map(padded.__getitem__, runs)
        keys += "".join(parts).split("\n")
    return keys


def natural_order_of(names: list[str], keys: list[str] | None, patterns: list[str] | None = None) -> list[int]:
    """The indexes of ``names`` in natural order (sorted(key=natural_order), stable); ``keys`` from natural_keys
    (None: natural_order itself). ``patterns``: the names' group patterns, one string per distinct pattern,
    whose heads are the names' (collapsing ".7" to ".*" neither makes nor breaks "embed", "lm_head", "mtp")."""
    if keys is None:
        return sorted(range(len(names)), key=lambda i: natural_order(names[i]))
    if patterns is None:
        heads = list(map(_head, names))
    else:
        head_of = {p: _head(p) for p in set(patterns)}
        heads = list(map(head_of.__getitem__, patterns))
    # by key, then (stable) by head: the order of (head, key), without a string or tuple per name for it
    order = sorted(range(len(names)), key=keys.__getitem__)
    order.sort(key=heads.__getitem__)
    return order


def _head(name: str) -> int:
    """natural_order's first part: the embedding first, lm_head and MTP last."""
    return 0 if "embed" in name else (2 if name.startswith(("lm_head", "mtp")) else 1)


def _chunks(names: list[str]) -> list[str] | None:
    """The names joined by newlines, _CHUNK at a time; None where a name is not plain ASCII or holds a NUL or
    newline."""
    chunks = ["\n".join(names[i:i + _CHUNK]) for i in range(0, len(names), _CHUNK)]
    if any(not c.isascii() or "\x00" in c for c in chunks) or sum(map(str.count, chunks, repeat("\n"))) \
            != len(names) - len(chunks):
        return None
    return chunks


def _longest_digit_run(chunks: list[str]) -> int:
    """The longest run of ASCII digits in ``chunks`` (ASCII text): a digit mask searched for runs of "0",
    the length found by doubling then bisection, a few C searches instead of a string per digit run."""
    mask = "\n".join(chunks).encode("ascii").translate(_DIGIT_MASK)
    if b"0" not in mask:
        return 0
    lo, hi = 1, 2                   # a run of lo digits is there; hi: not known yet
    while b"0" * hi in mask:
        lo, hi = hi, hi * 2
    while hi - lo > 1:              # a run of lo is there, one of hi is not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if b"0" * mid in mask else (lo, mid)
    return lo

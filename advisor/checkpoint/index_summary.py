"""What `inspect` needs of model.safetensors.index.json, read without building its weight map.

The index names every tensor once more (9 MB of text at 100k tensors). Reading it with json.loads takes
60-70 ms here and holds a dict of 100k names plus a str per shard value (RSS +31 MiB, +40 MiB at peak):
more than the memory budget of issue 23 (RSS growth <= 3x the header bytes) on its own. This module takes
~35 ms and +0.2 MiB (benchmarks/inspect_speed.py's 100k index, fresh processes). The loader only needs
the shard names, and whether the index names exactly the headers' tensors, each in its own shard: a count
and an order-free sum of hashes of the (name, shard) pairs answer that, checked against the headers' names.

summarize_index reads the file a block at a time and json-parses the weight map a chunk of pairs at a
time (CHUNK characters, a few hundred pairs), so no more than one chunk's names live at once. It is
exact where it answers: the top level is walked with json's own string and value scanners, and each
chunk is parsed by json itself. A weight map body without backslashes has no quote inside a string, so
quote parity tells whether a `,` or `}` separates pairs. Anything else (a backslash in the weight map,
invalid JSON or UTF-8, a BOM, a weight map that is not an object of strings, a repeated "weight_map",
no "weight_map", a file that is not regular or is over read_json's cap, an OSError) gives None: the
caller then reads the index the plain way, which words the error.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from _json import scanstring                       # json's own string scanner (C)
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

from advisor.textfile import JSON_LIMIT

# characters of weight map text parsed at once (~430 pairs of 75 characters). Measured at 100k names:
# 2^15 is fastest (2^13-2^16 within 10%) and its buffers stay under glibc's mmap threshold; 2^18 took
# 15% longer and grew RSS by 3 MiB, 2^19 by 7 MiB.
CHUNK = 1 << 15
_WS = re.compile(r"[ \t\n\r]*")     # json's whitespace
_VALUE = json.JSONDecoder()         # json.loads' own decoder (strict)
_PAIRS = json.JSONDecoder(object_pairs_hook=lambda pairs: pairs)   # an object as its list of (key, value)
_value = itemgetter(1)


@dataclass(frozen=True)
class IndexSummary:
    shards: frozenset[str]   # the distinct weight_map values (shard file names)
    count: int               # weight_map entries as written (a repeated key counts each time)
    fingerprint: int         # sum(map(hash, pairs)) over the (name, shard) pairs as written
    metadata: object         # index.get("metadata") as json.loads gives it (None when absent)


def pairs_fingerprint(names: Iterable[str], shard: str) -> int:
    """The header side of IndexSummary.fingerprint: a shard's tensor names paired with the shard."""
    return sum(map(hash, zip(names, repeat(shard))))


def _ws_end(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    return match.end() if match else pos


class _GiveUp(Exception):
    """Not a case the fast path answers: the caller reads the index the plain way."""


class _Text:
    """The file's text, decoded a block at a time; buf[pos:] is not consumed yet."""

    def __init__(self, fd: int):
        self.fd, self.left = fd, JSON_LIMIT + 1      # the file may grow while read: never past the cap
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.eof = "", 0, False

    def more(self, want: int) -> None:
        """Buffer at least `want` unread characters, or all that is left."""
        if len(self.buf) - self.pos >= want or self.eof:
            return
        parts = [self.buf[self.pos:]]
        have = len(parts[0])
        while have < want and not self.eof:
            data = os.read(self.fd, CHUNK)
            self.left -= len(data)
            if self.left < 0:
                raise _GiveUp
            self.eof = not data
            parts.append(self.decoder.decode(data, final=self.eof))   # UnicodeDecodeError: not UTF-8
            have += len(parts[-1])
        self.buf, self.pos = "".join(parts), 0

    def skip_ws(self) -> str:
        """Skip whitespace; the next character ('' at the end)."""
        while True:
            self.pos = _ws_end(self.buf, self.pos)
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self.more(CHUNK)

    def expect(self, char: str) -> None:
        if self.skip_ws() != char:
            raise _GiveUp
        self.pos += 1

    def scan(self, string: bool) -> object:
        """A top-level key (string) or value, by json's own scanners. A value is taken only where `,` or
        `}` follows it in the buffer ("1.5e+300" cut after "1.5e" parses as 1.5); else, or where the scan
        fails, it is retried on twice the text, up to the whole rest of the file."""
        self.more(CHUNK)
        while True:
            try:
                if string:
                    if self.buf[self.pos:self.pos + 1] != '"':
                        raise _GiveUp
                    obj, end = scanstring(self.buf, self.pos + 1, True)
                else:
                    obj, end = _VALUE.raw_decode(self.buf, self.pos)
                after = _ws_end(self.buf, end)
                if string or self.eof or self.buf[after:after + 1] in (",", "}"):
                    self.pos = end
                    return obj
            except ValueError:
                if self.eof:
                    raise
            self.more(2 * max(len(self.buf) - self.pos, CHUNK))


def summarize_index(path: str) -> IndexSummary | None:
    """The summary of index file `path`, or None where the plain read must decide (see the module doc).
    Never raises for the file's content or for an OSError."""
    try:
        # stat before open: a FIFO would block open(); fstat after it closes the swap-in race
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > JSON_LIMIT:
            return None
        return _summarize(_Text(fd))
    except (_GiveUp, ValueError, TypeError, RecursionError, OSError):
        # ValueError: invalid JSON or UTF-8; TypeError: an unhashable weight map value
        return None
    finally:
        os.close(fd)


def _summarize(t: _Text) -> IndexSummary:
    t.expect("{")
    metadata: object = None
    found: tuple[set, int, int] | None = None
    if t.skip_ws() == "}":
        raise _GiveUp                                   # {}: no weight map
    while True:
        t.skip_ws()
        key = t.scan(string=True)
        t.expect(":")
        if key == "weight_map":
            if found is not None or t.skip_ws() != "{":
                raise _GiveUp                           # json.loads would keep the last one: rare, left to it
            t.pos += 1
            found = _weight_map(t)
        else:
            t.skip_ws()
            value = t.scan(string=False)
            if key == "metadata":
                metadata = value                        # a repeated key: the last one, as json.loads
        t.skip_ws()
        if t.buf[t.pos:t.pos + 1] == "}":
            t.pos += 1
            break
        t.expect(",")
    if t.skip_ws() != "" or found is None:              # extra data after the object, or no weight map
        raise _GiveUp
    shards, count, fingerprint = found
    if not all(type(s) is str for s in shards):
        raise _GiveUp
    return IndexSummary(frozenset(shards), count, fingerprint, metadata)


def _weight_map(t: _Text) -> tuple[set, int, int]:
    """Shard names, pair count and fingerprint of a weight map body; t.pos is just after its `{`."""
    shards: set = set()
    count = fingerprint = 0
    want = CHUNK
    while True:
        t.more(want)
        buf, pos, end = t.buf, t.pos, len(t.buf)
        cut = _first_outside(buf, "}", pos, end)
        last = cut >= 0
        if not last:
            cut = _last_comma(buf, pos, end)
            if cut < 0:                                 # one long pair, or a body that never closes
                if t.eof:
                    raise _GiveUp
                want = 2 * max(want, end - pos)
                continue
        chunk = buf[pos:cut]
        t.pos, want = cut + 1, CHUNK
        if "\\" in chunk:                               # escapes would make quote parity meaningless
            raise _GiveUp
        text = "{" + chunk + "}"
        del chunk
        pairs, stop = _PAIRS.raw_decode(text)           # json itself checks the chunk's syntax
        # the object ends where the text does (always: no `}` outside a string in a chunk), and only the
        # first chunk may hold no pair (`{ }`): `,,` and `, }` are not JSON
        if stop != len(text) or not (pairs or (last and count == 0)):
            raise _GiveUp
        del text
        count += len(pairs)
        fingerprint += sum(map(hash, pairs))            # TypeError on a list or object value
        shards.update(map(_value, pairs))
        if last:
            return shards, count, fingerprint


def _first_outside(buf: str, char: str, pos: int, end: int) -> int:
    """The first `char` in buf[pos:end] outside a string (buf[pos] is outside one), or -1."""
    i = buf.find(char, pos, end)
    while i >= 0 and buf.count('"', pos, i) & 1:
        q = buf.find('"', i, end)                       # the end of the string `char` is in
        if q < 0:
            return -1
        pos = q + 1
        i = buf.find(char, pos, end)
    return i


def _last_comma(buf: str, pos: int, end: int) -> int:
    """The last `,` in buf[pos:end] outside a string (buf[pos] is outside one), or -1."""
    c = buf.rfind(",", pos, end)
    odd = c >= 0 and buf.count('"', pos, c) & 1
    while odd:
        q = buf.rfind('"', pos, c)                      # the start of the string `c` is in
        c = buf.rfind(",", pos, q)
        if c < 0:
            return -1
        odd ^= (buf.count('"', c, q) + 1) & 1
    return c

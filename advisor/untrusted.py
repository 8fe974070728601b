"""Strings from outside (tensor, file and folder names, config values, server replies, engine log
lines) made safe to show on a terminal, in an error line or in a report.

Control characters, bidirectional overrides, line separators and lone surrogates become visible
escapes (``\\x1b``, ``\\n``, ``\\u202e``, ``\\udcff``): a name cannot recolour or clear the
terminal, move the cursor, split an error line, reorder the text around it or make printing fail.
Rich markup is the renderers' business: they hand text to Rich as ``Text``, which never parses
markup (``advisor/cli.py``). JSON output stays data and is not passed through here.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (\x9b is an 8-bit CSI), Arabic letter mark, LRM/RLM, bidi embeddings
# and overrides, line/paragraph separators, bidi isolates, and surrogates (lone ones cannot be printed).
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ud800-\udfff"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def printable(text: str, *, multiline: bool = False) -> str:
    """``text`` with every unsafe character escaped; ``multiline`` keeps ``\\n`` (a shown command,
    a paragraph), everything else stays on one line."""
    text = str(text)
    return (_BUT_NEWLINE if multiline else _ANY).sub(_escape, text)


def one_line(text: str, limit: int | None = None) -> str:
    """One printable line, cut to ``limit`` characters (with an ellipsis) when given."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return printable(text)


def quoted(text: str, limit: int = 120) -> str:
    """A name for an error line: quoted, escaped, and cut when long (a 10 MB tensor name stays short)."""
    return f"'{one_line(text, limit)}'"


def has_surrogate(text: str) -> bool:
    """True when ``text`` holds a surrogate code point (from a ``\\ud800`` escape or an undecodable
    file name): not valid Unicode, and printing it to a UTF-8 stream fails."""
    return not text.isascii() and _SURROGATE.search(text) is not None


_SURROGATE = re.compile("[\ud800-\udfff]")

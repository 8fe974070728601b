"""A neutral, renderer-independent description of what a command shows.

Core code builds these blocks; the CLI renders them with Rich, the TUI with Textual widgets and
reports as Markdown/HTML. No renderer library is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# Styles are semantic; each renderer maps them to colours.
Style = str  # "normal" | "good" | "bad" | "warn" | "dim" | "accent"


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 1


@dataclass(frozen=True)
class Paragraph:
    text: str
    style: Style = "normal"


@dataclass(frozen=True)
class KeyValues:
    pairs: tuple[tuple[str, str], ...]
    title: str | None = None


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str | None = None
    # Optional per-row style, same length as rows when given.
    row_styles: tuple[Style, ...] = ()


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]
    title: str | None = None
    style: Style = "normal"


Block = Union[Heading, Paragraph, KeyValues, Table, Bullets]


@dataclass(frozen=True)
class Doc:
    blocks: tuple[Block, ...] = field(default_factory=tuple)

    def __add__(self, other: "Doc") -> "Doc":
        return Doc(self.blocks + other.blocks)


def na(value: object, unit: str = "", fmt: str = "{}") -> str:
    """Explicit N/A for missing values (nvitop style): never print 'None'."""
    if value is None:
        return "N/A"
    text = fmt.format(value)
    return f"{text} {unit}".rstrip() if unit else text

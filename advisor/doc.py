"""A neutral, renderer-independent description of what a command shows.

Core code builds these blocks; the CLI renders them with Rich, the TUI with Textual widgets and
reports as Markdown/HTML. No renderer library is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# Styles are semantic; each renderer maps them to colours. "code" is a literal command or file
# (fenced block in Markdown, <pre> in HTML, verbatim in the terminal).
Style = str  # "normal" | "good" | "bad" | "warn" | "dim" | "accent" | "code"


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


@dataclass(frozen=True)
class Series:
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class Chart:
    """A line/scatter chart: the TUI draws it with plotext, HTML reports as inline SVG,
    text renderers as a small table of its points."""

    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    kind: str = "line"          # line | scatter
    log_x: bool = False
    log_y: bool = False


@dataclass(frozen=True)
class Heatmap:
    """A labelled matrix of numbers (e.g. decode tok/s per GPU x engine); None = cannot run."""

    title: str
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    unit: str = ""


Block = Union[Heading, Paragraph, KeyValues, Table, Bullets, Chart, Heatmap]


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

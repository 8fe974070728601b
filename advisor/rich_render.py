"""Rich rendering of advisor.doc documents, shared by the CLI (advisor/cli.py) and the TUI
(advisor/tui/docview.py): one renderable per block, the progress bar long commands draw on stderr,
and the stdout console the CLI prints with.

With advisor/cli.py and advisor/tui/ the only modules that import Rich; Rich is imported inside the
functions, so `nvfp4-advisor --help` and the JSON paths never load it.
"""

from __future__ import annotations

_STYLES = {"normal": "", "good": "green", "bad": "bold red", "warn": "yellow", "dim": "dim", "accent": "bold cyan",
           "code": "cyan"}


def renderables(doc):
    """Rich renderables for a Doc, one per block (shared by the CLI and the TUI).

    Every string becomes a ``Text`` (Rich never reads markup in it: a tensor named ``[bold]x[/]``
    shows as written) and goes through advisor.untrusted (escape sequences, control characters and
    bidi overrides from a checkpoint or a server show as escapes). Line breaks stay where a block may
    hold several lines (paragraphs, cells, items); headings and titles are one line."""
    from rich.table import Table as RTable
    from rich.text import Text

    from advisor import doc as d
    from advisor.untrusted import printable

    def text(s, style="", **kw) -> Text:
        return Text(printable(str(s), multiline=True), style=style, **kw)

    def title(s, style=""):
        return Text(printable(str(s)), style=style) if s else None

    for block in doc.blocks:
        if isinstance(block, d.Heading):
            yield Text(printable(block.text), style="bold underline" if block.level == 1 else "bold")
        elif isinstance(block, d.Paragraph):
            if block.style == "code":   # a command to copy: never broken by Rich's wrapping
                yield text(block.text, _STYLES["code"], no_wrap=True, overflow="ignore")
            else:
                yield text(block.text, _STYLES.get(block.style, ""))
        elif isinstance(block, d.KeyValues):
            t = RTable(show_header=False, box=None, title=title(block.title), title_justify="left", pad_edge=False)
            t.add_column(style="bold", no_wrap=True)
            t.add_column(overflow="fold")
            for k, v in block.pairs:
                t.add_row(text(k), text(v))
            yield t
        elif isinstance(block, d.Table):
            t = RTable(title=title(block.title), title_justify="left", header_style="bold", expand=False)
            for c in block.columns:
                t.add_column(text(c), overflow="fold")
            for i, row in enumerate(block.rows):
                style = block.row_styles[i] if i < len(block.row_styles) else "normal"
                t.add_row(*(text(c) for c in row), style=_STYLES.get(style, ""))
            yield t
        elif isinstance(block, d.Bullets):
            # A grid keeps wrapped lines indented under their bullet.
            grid = RTable.grid(padding=(0, 1))
            grid.add_column(no_wrap=True)
            grid.add_column(overflow="fold")
            style = _STYLES.get(block.style, "")
            for item in block.items:
                grid.add_row(Text("  •", style=style), text(item, style))
            if block.title:
                from rich.console import Group

                yield Group(title(block.title, "bold"), grid)
            else:
                yield grid
        elif isinstance(block, d.Chart):
            t = RTable(title=title(block.title), title_justify="left", header_style="bold")
            t.add_column(text(block.x_label))
            for se in block.series:
                t.add_column(text(f"{se.label} ({block.y_label})" if block.y_label else se.label))
            xs = sorted({x for se in block.series for x in se.x})
            for x in xs:
                cells = []
                for se in block.series:
                    ys = [y for xx, y in zip(se.x, se.y) if xx == x]
                    cells.append(_num(ys[0]) if ys else "")
                t.add_row(_num(x), *cells)
            yield t
        elif isinstance(block, d.Heatmap):
            t = RTable(title=title(f"{block.title} ({block.unit})" if block.unit else block.title),
                       title_justify="left", header_style="bold")
            t.add_column("")
            for c in block.col_labels:
                t.add_column(text(c), justify="right")
            for label, values in zip(block.row_labels, block.values):
                t.add_row(text(label), *("✗" if v is None else _num(v) for v in values))
            yield t


class RichBar:
    """advisor.progress.Bar drawn with rich.progress on stderr: what runs now, the bar, done / total,
    elapsed time and the ETA from the rate seen so far."""

    def __init__(self, title: str):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.title = title
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                 TextColumn("{task.fields[amount]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task(title, total=None, amount="")
        self.progress.start()

    def __call__(self, step) -> None:
        from advisor.progress import amount

        done = amount(step.done, step.unit, with_unit=step.total is None)
        shown = f"{done}/{amount(step.total, step.unit)}" if step.total else done
        label = f"{self.title}: {step.phase}" if step.phase else self.title
        self.progress.update(self.task, completed=step.done, total=step.total, description=label[:44].ljust(44),
                             amount=shown)

    def close(self) -> None:
        self.progress.stop()


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def render(doc, console) -> None:
    for r in renderables(doc):
        console.print(r)
        console.print()


def stdout_console():
    """A Rich console for stdout. Rich's own answer to a closed pipe is exit status 1; ours is to
    stop writing and keep the command's status (`… | head` is not a failure)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console()

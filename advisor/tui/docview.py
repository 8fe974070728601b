"""A scrollable view of an advisor.doc.Doc: the same blocks the CLI prints, rendered in place."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static

from advisor.doc import Chart, Doc, Paragraph
from advisor.rich_render import renderables


def _plot(chart: Chart):
    from textual_plotext import PlotextPlot

    widget = PlotextPlot(classes="chart")
    plt = widget.plt
    plt.title(chart.title)
    for s in chart.series:
        draw = plt.scatter if chart.kind == "scatter" else plt.plot
        draw(list(s.x), list(s.y), label=s.label)
    if chart.log_x:
        plt.xscale("log")
    if chart.log_y:
        plt.yscale("log")
    plt.xlabel(chart.x_label)
    plt.ylabel(chart.y_label)
    return widget


class DocView(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    DocView { height: 1fr; padding: 0 1; }
    DocView > Static { margin-bottom: 1; width: 100%; }
    DocView > .chart { height: 16; margin-bottom: 1; }
    """

    def __init__(self, doc: Doc | None = None, *, id: str | None = None, placeholder: str = ""):
        super().__init__(id=id)
        self._doc = doc
        self._placeholder = placeholder
        self.doc: Doc | None = None

    def on_mount(self) -> None:
        self.show(self._doc or Doc((Paragraph(self._placeholder, "dim"),)))

    def show(self, doc: Doc) -> None:
        """Replace the content with ``doc`` (called from the UI thread).

        Charts become plotext plots; every other block is the CLI's Rich renderable.
        """
        self.doc = doc
        self.remove_children()
        widgets = []
        for block in doc.blocks:
            if isinstance(block, Chart):
                widgets.append(_plot(block))
            else:
                widgets.extend(Static(r) for r in renderables(Doc((block,))))
        self.mount_all(widgets)
        self.scroll_home(animate=False)

    def message(self, text: str, style: str = "dim") -> None:
        self.show(Doc((Paragraph(text, style),)))

    @property
    def text(self) -> str:
        """Plain text of the shown blocks (used by tests)."""
        from advisor.doc import Bullets, Heading, KeyValues, Table

        out: list[str] = []
        for b in (self.doc.blocks if self.doc else ()):
            if isinstance(b, (Heading, Paragraph)):
                out.append(b.text)
            elif isinstance(b, KeyValues):
                out.extend(f"{k}: {v}" for k, v in b.pairs)
            elif isinstance(b, Table):
                out.append(" | ".join(b.columns))
                out.extend(" | ".join(r) for r in b.rows)
            elif isinstance(b, Bullets):
                out.extend(b.items)
            elif isinstance(b, Chart):
                out.append(f"[chart] {b.title}")
        return "\n".join(out)

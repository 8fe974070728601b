"""advisor.doc blocks as one self-contained HTML page (inline CSS and SVG; no scripts, no network).

Sections named in ``folded`` (level-2 headings: the derivations, the hardware and checkpoint
details) become ``<details>``: the page opens on the answer and the matrix, the evidence is one
click down. A table's trailing "note" column becomes a full-width line under its row, so a wide
table never pushes the only explanation of a "no" off the side of the page.
"""

from __future__ import annotations

from html import escape as _html_escape

from advisor import doc as d
from advisor.report.svg import chart_svg, heatmap_svg
from advisor.untrusted import printable


def escape(text: str) -> str:
    """HTML-escaped, with control characters (from checkpoint names) shown as escapes."""
    return _html_escape(printable(str(text), multiline=True))

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1280px;
       padding: 0 1em; color: #111827; }
h1 { font-size: 1.6em; border-bottom: 2px solid #111827; } h2 { margin-top: 1.8em; border-bottom: 1px solid #d1d5db; }
table { border-collapse: collapse; margin: .2em 0 1.2em; } th, td { border: 1px solid #d1d5db; padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: #f3f4f6; } p.cap { font-weight: 600; margin: 1em 0 .2em; }
td:first-child { white-space: nowrap; } td { overflow-wrap: anywhere; }
table.kv th { background: #f9fafb; white-space: nowrap; }
table.answer { font-size: 1.15em; } table.answer th { background: #ecfeff; }
.good { color: #15803d; } .bad { color: #b91c1c; font-weight: 600; } .warn { color: #a16207; } .dim { color: #6b7280; }
.accent { color: #0e7490; font-weight: 600; }
tr.bad td { background: #fef2f2; } tr.bad { font-weight: normal; color: #991b1b; } td.long { min-width: 22em; white-space: normal; } tr.good td { background: #f0fdf4; } tr.warn td { background: #fefce8; }
tr.note td { border-top: none; color: #374151; font-size: .92em; padding-left: 2em; white-space: normal; }
td.heat { text-align: right; color: #111827; font-variant-numeric: tabular-nums; }
svg.chart { display: block; margin: .8em 0; } .scroll { overflow-x: auto; max-width: 100%; }
pre.code { background: #f3f4f6; border: 1px solid #d1d5db; padding: 8px 10px; white-space: pre-wrap;
           word-break: break-all; font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
details { margin-top: 1.2em; } details > summary { cursor: pointer; } details > summary h2 { display: inline-block; margin: 0; }
svg .cellval { font-size: 11px; fill: #111827; font-variant-numeric: tabular-nums; } svg .title { font-weight: 600; font-size: 13px; }
svg .tick, svg .legend { font-size: 11px; fill: #374151; } svg .axis { font-size: 12px; fill: #111827; }
"""  # noqa: E501 (one rule set a line, as a reader of the HTML expects)


def _cells(row) -> str:
    # Long text (a failure message, a log line) gets room instead of a one-word-wide column.
    return "".join(f'<td class="long">{escape(str(c))}</td>' if len(str(c)) > 60 else f"<td>{escape(str(c))}</td>"
                   for c in row)


def _rows(rows, styles=(), note_col: bool = False, width: int = 0) -> str:
    out = []
    for i, row in enumerate(rows):
        cls = styles[i] if i < len(styles) and styles[i] != "normal" else ""
        note = str(row[-1]) if note_col else ""
        cells = _cells(row[:-1] if note_col else row)
        out.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
        if note:
            out.append(f'<tr class="{f"note {cls}".strip()}"><td colspan="{width}">{escape(note)}</td></tr>')
    return "".join(out)


def _table(b: d.Table) -> str:
    # The title is a paragraph, not a <caption>: a caption wraps to a narrow table's width.
    cap = f'<p class="cap">{escape(b.title)}</p>' if b.title else ""
    note_col = len(b.columns) > 1 and b.columns[-1].lower() == "note"
    columns = b.columns[:-1] if note_col else b.columns
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    return (f'{cap}<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{_rows(b.rows, b.row_styles, note_col, len(columns))}</tbody></table></div>")


def _block(b) -> str:
    if isinstance(b, d.Paragraph):
        if b.style == "code":
            return f'<pre class="code"><code>{escape(b.text)}</code></pre>'
        return f'<p class="{b.style}">{escape(b.text)}</p>'
    if isinstance(b, d.KeyValues):
        cap = f'<p class="cap">{escape(b.title)}</p>' if b.title else ""
        rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in b.pairs)
        return f'{cap}<table class="kv"><tbody>{rows}</tbody></table>'
    if isinstance(b, d.Table):
        return _table(b)
    if isinstance(b, d.Bullets):
        heading = f"<p><strong>{escape(b.title)}</strong></p>" if b.title else ""
        items = "".join(f"<li>{escape(i)}</li>" for i in b.items)
        return f'{heading}<ul class="{b.style}">{items}</ul>'
    if isinstance(b, d.Chart):
        return f'<div class="scroll">{chart_svg(b)}</div>'
    if isinstance(b, d.Heatmap):
        return f'<div class="scroll">{heatmap_svg(b)}</div>'
    return ""


def to_html(doc: d.Doc, title: str, folded: tuple[str, ...] = (), answer: str | None = None) -> str:
    """``folded``: level-2 section headings rendered collapsed; ``answer``: the title of the
    KeyValues block that holds the answer (set in larger type)."""
    body: list[str] = []
    open_fold = False
    for b in doc.blocks:
        if isinstance(b, d.Heading):
            lvl = min(6, b.level)
            if lvl <= 2 and open_fold:
                body.append("</details>")
                open_fold = False
            if lvl == 2 and b.text in folded:
                body.append(f"<details><summary><h2>{escape(b.text)}</h2></summary>")
                open_fold = True
            else:
                body.append(f"<h{lvl}>{escape(b.text)}</h{lvl}>")
        elif isinstance(b, d.KeyValues) and answer is not None and b.title == answer:
            body.append(_block(b).replace('<table class="kv">', '<table class="kv answer">', 1))
        else:
            body.append(_block(b))
    if open_fold:
        body.append("</details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")

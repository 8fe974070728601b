"""advisor.doc blocks as one self-contained HTML page (inline CSS and SVG; no scripts, no network)."""

from __future__ import annotations

from html import escape

from advisor import doc as d
from advisor.report.svg import chart_svg, heatmap_svg

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1280px;
       padding: 0 1em; color: #111827; }
h1 { font-size: 1.6em; border-bottom: 2px solid #111827; } h2 { margin-top: 1.8em; border-bottom: 1px solid #d1d5db; }
table { border-collapse: collapse; margin: .2em 0 1.2em; } th, td { border: 1px solid #d1d5db; padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: #f3f4f6; } p.cap { font-weight: 600; margin: 1em 0 .2em; }
td:first-child { white-space: nowrap; }
table.kv th { background: #f9fafb; white-space: nowrap; }
.good { color: #15803d; } .bad { color: #b91c1c; font-weight: 600; } .warn { color: #a16207; } .dim { color: #6b7280; }
.accent { color: #0e7490; font-weight: 600; }
tr.bad td { background: #fef2f2; } tr.bad { font-weight: normal; color: #991b1b; } td.long { min-width: 22em; } tr.good td { background: #f0fdf4; } tr.warn td { background: #fefce8; }
td.heat { text-align: right; color: #111827; font-variant-numeric: tabular-nums; }
svg.chart { display: block; margin: .8em 0; } .scroll { overflow-x: auto; max-width: 100%; }
pre.code { background: #f3f4f6; border: 1px solid #d1d5db; padding: 8px 10px; white-space: pre-wrap;
           word-break: break-all; font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
svg .cellval { font-size: 11px; fill: #111827; font-variant-numeric: tabular-nums; } svg .title { font-weight: 600; font-size: 13px; }
svg .tick, svg .legend { font-size: 11px; fill: #374151; } svg .axis { font-size: 12px; fill: #111827; }
"""


def _rows(rows, styles=()) -> str:
    out = []
    for i, row in enumerate(rows):
        cls = styles[i] if i < len(styles) and styles[i] != "normal" else ""
        # Long text (a failure message, a log line) gets room instead of a one-word-wide column.
        cells = "".join(f'<td class="long">{escape(str(c))}</td>' if len(str(c)) > 60 else f"<td>{escape(str(c))}</td>"
                        for c in row)
        out.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return "".join(out)


def to_html(doc: d.Doc, title: str) -> str:
    body: list[str] = []
    for b in doc.blocks:
        if isinstance(b, d.Heading):
            lvl = min(6, b.level)
            body.append(f"<h{lvl}>{escape(b.text)}</h{lvl}>")
        elif isinstance(b, d.Paragraph):
            if b.style == "code":
                body.append(f'<pre class="code"><code>{escape(b.text)}</code></pre>')
            else:
                body.append(f'<p class="{b.style}">{escape(b.text)}</p>')
        elif isinstance(b, d.KeyValues):
            cap = f'<p class="cap">{escape(b.title)}</p>' if b.title else ""
            rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in b.pairs)
            body.append(f'{cap}<table class="kv"><tbody>{rows}</tbody></table>')
        elif isinstance(b, d.Table):
            # The title is a paragraph, not a <caption>: a caption wraps to a narrow table's width.
            cap = f'<p class="cap">{escape(b.title)}</p>' if b.title else ""
            head = "".join(f"<th>{escape(c)}</th>" for c in b.columns)
            body.append(f'{cap}<div class="scroll"><table><thead><tr>{head}</tr></thead>'
                        f"<tbody>{_rows(b.rows, b.row_styles)}</tbody></table></div>")
        elif isinstance(b, d.Bullets):
            title = f"<p><strong>{escape(b.title)}</strong></p>" if b.title else ""
            items = "".join(f"<li>{escape(i)}</li>" for i in b.items)
            body.append(f'{title}<ul class="{b.style}">{items}</ul>')
        elif isinstance(b, d.Chart):
            body.append(f'<div class="scroll">{chart_svg(b)}</div>')
        elif isinstance(b, d.Heatmap):
            body.append(f'<div class="scroll">{heatmap_svg(b)}</div>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")

"""advisor.doc blocks as GitHub-flavoured Markdown (renders sensibly pasted into an issue)."""

from __future__ import annotations

from advisor import doc as d
from advisor.untrusted import printable


def _t(text: str) -> str:
    """One line of text with control characters (from checkpoint names) shown as escapes."""
    return printable(str(text))


def _cell(text: str) -> str:
    return printable(str(text), multiline=True).replace("|", "\\|").replace("\n", "<br>")


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def _table(columns, rows) -> list[str]:
    out = ["| " + " | ".join(_cell(c) for c in columns) + " |",
           "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def to_markdown(doc: d.Doc) -> str:
    out: list[str] = []
    for b in doc.blocks:
        if isinstance(b, d.Heading):
            out.append("#" * min(6, b.level) + " " + _t(b.text))
        elif isinstance(b, d.Paragraph):
            text = printable(b.text, multiline=True)
            if b.style == "code":      # a command to copy: fenced, never re-flowed
                fence = "````" if "```" in text else "```"
                out.append(f"{fence}sh\n{text}\n{fence}")
                out.append("")
                continue
            if b.style == "bad":
                text = f"**{text}**"
            elif b.style == "warn":
                text = f"> ⚠ {text}"
            elif b.style == "accent":
                text = f"> {text}"
            out.append(text)
        elif isinstance(b, d.KeyValues):
            if b.title:
                out.append(f"**{_t(b.title)}**\n")
            out += _table(("", ""), b.pairs)
        elif isinstance(b, d.Table):
            if b.title:
                out.append(f"**{_t(b.title)}**\n")
            out += _table(b.columns, b.rows)
        elif isinstance(b, d.Bullets):
            if b.title:
                out.append(f"**{_t(b.title)}**\n")
            out += [f"- {printable(i, multiline=True)}" for i in b.items]
        elif isinstance(b, d.Chart):
            xs = sorted({x for s in b.series for x in s.x})
            rows = []
            for x in xs:
                row = [_num(x)]
                for s in b.series:
                    ys = [y for xx, y in zip(s.x, s.y) if xx == x]
                    row.append(_num(ys[0]) if ys else "")
                rows.append(row)
            out.append(f"**{_t(b.title)}** ({_t(b.y_label)} vs {_t(b.x_label)})\n")
            out += _table((b.x_label, *(s.label for s in b.series)), rows)
        elif isinstance(b, d.Heatmap):
            out.append(f"**{_t(b.title)}**" + (f" ({_t(b.unit)})" if b.unit else "") + "\n")
            rows = [[label, *("✗" if v is None else _num(v) for v in vals)]
                    for label, vals in zip(b.row_labels, b.values)]
            out += _table(("", *b.col_labels), rows)
        out.append("")
    return "\n".join(out).rstrip() + "\n"

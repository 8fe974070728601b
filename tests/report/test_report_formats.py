"""Golden-structure tests: each format carries every section, the table columns, and values that
agree with explain and `plan --json` for the same checkpoint and GPU (never hard-coded numbers)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from report_fixtures import API_KEY, ENV_KEY, FORMATS, GPUS, HF_TOKEN

from advisor.report.matrix import MATRIX_COLUMNS, primary_decision
from advisor.report.output import schema_errors

SECTIONS = ("Hardware", "Checkpoint: W4A4-NVFP4", "Kernel path (vllm", "Predictions and recommended settings",
            "Compatibility matrix")


def _md_table(md: str, first_col: str) -> list[list[str]]:
    """Rows of the first GitHub table whose header starts with FIRST_COL."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"| {first_col} |") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-"):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]])
            return [[c.strip() for c in line.split("|")[1:-1]]] + rows
    raise AssertionError(f"no table starting with {first_col!r}")


@pytest.mark.parametrize("gpu", GPUS)
def test_markdown_has_every_section_and_matrix_columns(reports, expected, gpu):
    md = reports[(gpu, "md")]
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    for section in SECTIONS:
        assert any(h.startswith(section) for h in headings), (section, headings)
    assert md.startswith("# nvfp4-advisor report: W4A4-NVFP4 on ")
    table = _md_table(md, "GPU")
    assert tuple(table[0]) == MATRIX_COLUMNS
    names = {row[0] for row in table[1:]}
    for g in GPUS:
        assert expected["plan"][g]["gpu"]["name"] in names
    # the header tells how to reproduce it and which rules were assumed
    assert "| reproduce with | nvfp4-advisor report demo:qwen3-8b-nvfp4" in md
    assert "| vllm rules |" in md and "| sglang rules |" in md
    # the launcher may put the (redacted) API key in front as an environment assignment
    assert re.search(r"```sh\n(?:[A-Z_]+='\*\*\*' )*vllm serve ", md)


@pytest.mark.parametrize("gpu", GPUS)
def test_markdown_values_agree_with_explain_and_plan(reports, expected, gpu):
    md = reports[(gpu, "md")]
    exp, plan = expected["explain"][gpu], expected["plan"][gpu]
    rows = _md_table(md, "layer class")[1:]
    assert len(rows) == len(exp.decisions)
    for row, d in zip(rows, exp.decisions):
        assert row[2] == d.checkpoint_scheme
        assert row[4] == (d.kernel or "N/A")
        assert row[5] == d.mma
    assert f"{plan['predictions']['decode_tok_s']:,.1f} tok/s" in md
    name = plan["gpu"]["name"]
    matrix = {(r[0], r[1].split()[0]): r for r in _md_table(md, "GPU")[1:]}
    row = matrix[(name, "vllm")]
    d = primary_decision(exp, expected["checkpoint"])
    assert (row[3], row[4], row[5]) == (d.effective_scheme, d.kernel, d.mma)
    assert float(row[6]) == pytest.approx(plan["predictions"]["decode_tok_s"], rel=1e-3)


@pytest.mark.parametrize("gpu", GPUS)
def test_json_validates_and_matches_plan(reports, expected, gpu):
    data = json.loads(reports[(gpu, "json")])
    assert schema_errors(data) == []
    assert data["schema_version"] == "1" and data["kind"] == "report"
    plan = expected["plan"][gpu]
    assert data["plan"]["predictions"] == plan["predictions"]
    assert data["plan"]["recommendation"] == plan["recommendation"]
    exp = expected["explain"][gpu]
    assert [d["kernel"] for d in data["kernel_path"]["decisions"]] == [d.kernel for d in exp.decisions]
    assert data["hardware"]["mode"] == "what-if" and data["hardware"]["gpu"]["id"] == gpu
    cell = next(c for c in data["matrix"]["cells"] if c["gpu_id"] == gpu and c["engine"] == "vllm")
    assert cell["decode_tok_s"] == pytest.approx(plan["predictions"]["decode_tok_s"], rel=1e-3)
    assert cell["max_context"]["4"] <= cell["max_context"]["1"]
    assert {c["gpu_id"] for c in data["matrix"]["cells"]} == set(GPUS)
    assert data["matrix"]["engines"] == ["vllm", "sglang"]
    assert re.match(r"(?:[A-Z_]+='\*\*\*' )*vllm serve ", data["launch"][0]["command_line"])


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.urls: list[str] = []
        self.headings: list[str] = []
        self._h = False

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._h = tag in ("h1", "h2")
        for k, v in attrs:
            if k in ("src", "href", "xlink:href") and v:
                self.urls.append(v)

    def handle_endtag(self, tag):
        if tag in ("h1", "h2"):
            self._h = False

    def handle_data(self, data):
        if self._h:
            self.headings.append(data)


@pytest.mark.parametrize("gpu", GPUS)
def test_html_is_self_contained_with_charts(reports, gpu):
    html = reports[(gpu, "html")]
    p = _Html()
    p.feed(html)
    assert p.tags.get("script", 0) == 0 and p.tags.get("link", 0) == 0 and p.tags.get("img", 0) == 0
    assert not [u for u in p.urls if "://" in u or u.startswith("//")]
    assert "@import" not in html and "url(" not in html
    assert p.tags.get("style") == 1
    # decode vs batch, KV pool vs context, roofline, matrix heat-map
    assert p.tags.get("svg", 0) >= 4
    for label in ("Decode vs batch", "KV pool vs context", "Roofline", "Predicted single-stream decode"):
        assert f'aria-label="{label}' in html
    for section in SECTIONS:
        assert any(h.startswith(section) for h in p.headings), section


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("gpu", GPUS)
def test_no_secret_in_any_report(reports, gpu, fmt):
    text = reports[(gpu, fmt)]
    for secret in (HF_TOKEN, API_KEY, ENV_KEY):
        assert secret not in text
    assert "--api-key ***" in text or "--api-key '***'" in text or "--api-key \\u0027***" in text

"""What a colleague sees when they open the HTML report, measured in headless Chromium at 1280 px:
a real <title>, the answer (runs as, decode, KV pool, max context) and the verdict in the first
screen, the matrix's notes inside the page width, the evidence folded below. Reports from the
`report` command and from the TUI's Export are both checked (each once had a broken title)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from report_fixtures import DEMO, run_cli

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, FOLD = 1280, 800

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="headless chromium not installed (/usr/bin/chromium)")]

# Appended to a copy of the page (the report itself has no script): measures the laid-out page.
PROBE = """<script>
const r = e => e.getBoundingClientRect();
const answer = document.querySelector('table.answer');
const verdict = [...document.querySelectorAll('p.bad')].find(p => p.textContent.startsWith('Verdict:'));
const matrix = [...document.querySelectorAll('h2')].find(h => h.textContent === 'Compatibility matrix');
const out = {
  title: document.title, h1: document.querySelector('h1').textContent,
  rows: answer ? [...answer.querySelectorAll('tr')].map(t => [t.cells[0].textContent, t.cells[1].textContent,
                                                              r(t).bottom + scrollY]) : [],
  verdict: verdict ? [verdict.textContent, r(verdict).bottom + scrollY] : null,
  matrixTop: matrix ? r(matrix).top + scrollY : null,
  folded: [...document.querySelectorAll('details:not([open]) > summary h2')].map(h => h.textContent),
};
// then every folded section opened: nothing anywhere may be wider than the page
document.querySelectorAll('details').forEach(d => { d.open = true; });
out.pageWidth = document.documentElement.scrollWidth;
out.viewport = innerWidth;
out.hiddenColumns = [...document.querySelectorAll('.scroll')].filter(d => d.scrollWidth > d.clientWidth + 1)
                       .map(d => d.textContent.slice(0, 80));
out.notes = [...document.querySelectorAll('tr.note td')].map(td => [td.textContent, r(td).right]);
const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def measure(page: Path, tmp_path: Path) -> dict:
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    argv = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--window-size={WIDTH},{FOLD}",
            f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probed.as_uri()]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def _cli_report(tmp_path, monkeypatch, demo: str, gpu: str, compare: str) -> Path:
    out = tmp_path / f"{gpu}.html"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert run_cli(["report", demo, "--gpu", gpu, "--compare", compare, "--engine", "vllm,sglang,fastllm",
                    "-o", out]) == 0
    return out


def _plan(demo: str, gpu: str) -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert run_cli(["plan", demo, "--gpu", gpu, "--json"]) == 0
    return json.loads(buf.getvalue())


def test_cli_report_answers_in_the_first_screen(tmp_path, monkeypatch):
    page = _cli_report(tmp_path, monkeypatch, DEMO, "rtx-3090", "rtx-2080-ti,t4,rtx-3090,rtx-5090,h100-sxm")
    got = measure(page, tmp_path)
    assert got["title"] and got["title"] == got["h1"] and "RTX 3090" in got["title"]
    labels = [row[0] for row in got["rows"]]
    assert labels == ["runs as", "decode (1 stream)", "KV pool", "max context"]
    assert all(bottom <= FOLD for *_, bottom in got["rows"]), got["rows"]
    plan = _plan(DEMO, "rtx-3090")
    decode = dict((k, v) for k, v, _ in got["rows"])["decode (1 stream)"]
    assert decode.startswith(f"{plan['predictions']['decode_tok_s']:,.1f} tok/s")
    kv = plan["recommendation"]["kv_cache_dtype"]
    shown = dict((k, v) for k, v, _ in got["rows"])
    assert shown["KV pool"] == f"{plan['predictions']['kv_pool_tokens'][kv]:,} tokens ({kv})"
    # the matrix follows the answer; nothing in it is cut off at 1280 px, its notes included
    assert got["matrixTop"] is not None and got["matrixTop"] < 2 * FOLD
    assert got["pageWidth"] <= got["viewport"] and got["hiddenColumns"] == []
    assert any("exceed the memory share" in text or "not supported" in text for text, _ in got["notes"])
    assert all(right <= WIDTH for _, right in got["notes"])
    # the evidence is one click down
    for section in ("Derivations", "Hardware", "About this report"):
        assert section in got["folded"]
    assert any(h.startswith("Kernel path") for h in got["folded"])


def test_a_verdict_is_in_the_first_screen(tmp_path, monkeypatch):
    page = _cli_report(tmp_path, monkeypatch, "demo:qwen3-30b-a3b-fp8", "rtx-2080-ti", "rtx-2080-ti,rtx-5090")
    got = measure(page, tmp_path)
    assert got["verdict"] is not None and got["verdict"][0].startswith("Verdict: does not fit")
    assert got["verdict"][1] <= FOLD


def test_tui_export_has_the_same_title_and_first_screen(tmp_path, monkeypatch):
    from advisor.services.analysis import Selection, analyze
    from advisor.tui import actions

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    a = analyze(Selection(DEMO, "rtx-3090"))
    page = actions.export_report(a, None, "html", tmp_path / "tui.html",
                                 launch_line=actions.launch_command_line(a), launch_engine="vllm")
    got = measure(page, tmp_path)
    assert got["title"] == got["h1"] and got["title"].startswith("nvfp4-advisor report: W4A4-NVFP4 on GeForce RTX 3090")
    assert [row[0] for row in got["rows"]] == ["runs as", "decode (1 stream)", "KV pool", "max context"]
    assert all(bottom <= FOLD for *_, bottom in got["rows"])

"""The HTML report in a real headless browser (Debian chromium): it renders, the SVG charts are in
the rendered DOM, and a screenshot is produced. No network: the page has nothing to fetch."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from report_fixtures import DEMO, run_cli

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="headless chromium not installed (/usr/bin/chromium)")]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(out.parent / "data"))
        assert run_cli(["report", DEMO, "--gpu", "rtx-5090", "--compare", "rtx-3090,rtx-5090,h100-sxm",
                        "--engine", "vllm,sglang", "-o", out]) == 0
    return out


def test_page_renders_with_its_charts(page, tmp_path):
    proc = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert "<h1>nvfp4-advisor report" in dom
    svgs = re.findall(r'<svg class="chart[^"]*"[^>]*aria-label="([^"]+)"', dom)
    assert len(svgs) >= 4
    for title in ("Decode vs batch", "KV pool vs context", "Roofline", "Predicted single-stream decode"):
        assert any(s.startswith(title) for s in svgs), (title, svgs)
    assert dom.count("<polyline") >= 3 and dom.count('class="cell"') == 3 * 2


def test_screenshot_is_produced(page, tmp_path):
    shot = tmp_path / "report.png"
    proc = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 3000)
    assert len(data) > 50_000          # a blank page compresses to a few KB; the report does not

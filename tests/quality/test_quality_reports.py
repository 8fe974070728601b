"""Quality evidence in `report` (Markdown, JSON against the shipped schema, HTML) and in `plan`'s
per-format table: present when measured (`quality --json`, `bench --reference-url --json`), a
"not measured" with the command to run otherwise, one line for a file that holds no evidence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.report.output import schema_errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "launch"))


@pytest.fixture(scope="module")
def evidence_files(bf16_ckpt, nvfp4_ckpt, tmp_path_factory):
    """`quality --json` of our NVFP4 twin, and `bench --reference-url --json` of two scripted servers."""
    from launch_fake_sse import FakeSSE

    d = tmp_path_factory.mktemp("evidence")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["quality", str(bf16_ckpt), str(nvfp4_ckpt), "--json"]) == 0
    (d / "quality.json").write_text(out.getvalue())
    a, b = FakeSSE(tokens=6, interval_s=0.001).start(), FakeSSE(tokens=6, interval_s=0.001).start()
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["bench", "--url", a.url, "--reference-url", b.url, "--agreement-only", "--json"]) == 0
    finally:
        a.stop()
        b.stop()
    (d / "bench.json").write_text(out.getvalue())
    return d / "quality.json", d / "bench.json"


def test_report_carries_a_quality_section_in_every_format(nvfp4_ckpt, evidence_files, tmp_path, capsys):
    q, b = evidence_files
    base = ["report", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--quality", str(q), "--quality", str(b)]
    assert main(base + ["-o", str(tmp_path / "r.json")]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert schema_errors(data) == []
    ev = data["quality"]["evidence"]
    assert [e["family"] for e in ev] == ["NVFP4"] and ev[0]["share"] == 1.0
    assert ev[0]["weights"].startswith("OK: median SNR") and "100.0% greedy agreement" in ev[0]["outputs"]
    assert data["quality"]["weights"][0]["status"] == "ok" and data["quality"]["agreement"][0]["agreement"] == 1.0
    assert main(base + ["-o", str(tmp_path / "r.md")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "## Quality (measured)" in md and "| NVFP4 | 100% | OK: median SNR" in md
    assert main(base + ["-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "Quality evidence per format" in html and "Output agreement with the reference" in html
    # not measured: the key is there and null, the schema still holds
    assert main(["report", str(nvfp4_ckpt), "--gpu", "rtx-3090", "-o", str(tmp_path / "plain.json")]) == 0
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert plain["quality"] is None and schema_errors(plain) == []
    capsys.readouterr()


def test_plan_says_which_evidence_exists_per_format(nvfp4_ckpt, evidence_files, tmp_path, capsys):
    q, b = evidence_files
    assert main(["plan", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)["quality_evidence"]
    assert [(e["family"], e["weights"][:12], e["outputs"][:12]) for e in ev] == [("NVFP4", "not measured",
                                                                                  "not measured")]
    assert "nvfp4-advisor quality" in ev[0]["weights"]
    assert main(["plan", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--quality", str(q), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)["quality_evidence"]
    assert ev[0]["weights"].startswith("OK: median SNR") and ev[0]["outputs"].startswith("not measured")
    assert main(["plan", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--quality", str(q), "--quality", str(b)]) == 0
    text = capsys.readouterr().out
    assert "Quality evidence per format" in text and "100.0%" in text


def test_a_file_without_evidence_is_one_line(nvfp4_ckpt, tmp_path, capsys):
    other = tmp_path / "plan.json"
    other.write_text(json.dumps({"schema_version": "1", "kind": "plan"}))
    rc = main(["plan", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--quality", str(other)])
    err = capsys.readouterr().err
    assert rc == 3 and err.count("\n") == 1 and "holds no quality evidence" in err
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"kind": "quality", "tensors": []}))
    rc = main(["report", str(nvfp4_ckpt), "--gpu", "rtx-3090", "--quality", str(bad), "-o", str(tmp_path / "r.md")])
    err = capsys.readouterr().err
    assert rc == 3 and "not a complete `quality --json` document" in err and not (tmp_path / "r.md").exists()

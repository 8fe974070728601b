"""Reports over plans with N/A figures (weights that do not fit, unknown peaks, CPU fallback) are valid
against the shipped schema and say N/A with the reason instead of a number."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.report.output import schema_errors


@pytest.mark.parametrize("argv", [
    ["demo:qwen3-30b-a3b-fp8", "--gpu", "rtx-3090"],                                  # does not fit
    ["demo:qwen3-8b-nvfp4", "--gpu", "rtx-pro-6000-bw-server"],                      # peaks unknown
    ["demo:llama-3.1-8b-gptq-int4", "--gpu", "rtx-3090", "--gpus", "2", "--engine", "fastllm"],
])
def test_na_plans_make_valid_reports(tmp_path, capsys, argv):
    out = tmp_path / "r.json"
    assert main(["report", *argv, "--format", "json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert schema_errors(data) == []
    md = tmp_path / "r.md"
    assert main(["report", *argv, "--format", "md", "-o", str(md)]) == 0
    if argv[0] == "demo:qwen3-30b-a3b-fp8":
        assert data["plan"]["predictions"]["decode_tok_s"] is None
        assert "N/A — the weights do not fit" in md.read_text()


def test_schema_errors_stay_one_readable_line():
    errs = schema_errors({"schema_version": "1", "kind": "report", "header": {"x": "y" * 5000}})
    assert errs and all(len(e) < 400 for e in errs)

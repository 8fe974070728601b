"""The kernel check's KV-pool lines say what was compared, and never show an error without both sides."""

from __future__ import annotations

from advisor.doc import KeyValues, Paragraph
from launchers.kernel_check import check
from launchers.report import kernel_check_doc


def _kv(doc):
    return dict(next(b for b in doc.blocks if isinstance(b, KeyValues)).pairs)


def test_error_percent_when_both_sides_exist():
    lines = ["INFO [kv_cache_utils.py:1087] GPU KV cache size: 110,000 tokens"]
    kv = _kv(kernel_check_doc(check(lines, None, 100_000)))
    assert kv["KV pool (plan)"].startswith("100,000") and kv["KV pool (engine)"].startswith("110,000")
    assert kv["error"] == "+10.0 %"


def test_no_error_line_without_a_prediction():
    lines = ["INFO [kv_cache_utils.py:1087] GPU KV cache size: 110,000 tokens"]
    kv = _kv(kernel_check_doc(check(lines, None, None)))
    assert "error" not in kv and kv["KV pool (plan)"].startswith("no prediction")


def test_nothing_to_compare_is_one_plain_sentence():
    doc = kernel_check_doc(check(["Uvicorn running on http://127.0.0.1:8000"], None, None))
    assert not any(isinstance(b, KeyValues) for b in doc.blocks)
    assert any(isinstance(b, Paragraph) and b.text.startswith("KV pool: no plan prediction") for b in doc.blocks)

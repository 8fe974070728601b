"""Capability lines say where a dense peak came from: measured table figure, derived, or halved sparse."""

from __future__ import annotations

from advisor.gpu_table import load_gpu_table
from advisor.probe.report import capability_statements


def _table():
    t = load_gpu_table()
    return t if isinstance(t, dict) else {s.id: s for s in t}


def test_halved_sparse_figures_are_flagged_and_others_are_not():
    t = _table()
    b300 = dict(capability_statements(t["b300"]))
    assert "half the published sparse figure" in b300["BF16"]
    assert "half the published sparse figure" not in b300["FP4 tensor cores"]   # FP4 is a dense figure
    rtx3090 = dict(capability_statements(t["rtx-3090"]))
    assert not any("sparse" in v for v in rtx3090.values())

"""A measured MoE layer carried to a card other than the measured system (advisor.cost.measured).

The shipped vLLM gpt-oss MXFP4 Marlin MoE table of the RTX PRO 6000 Server fits e = 1.0 at one token
(the fit's bound, fixed cost and rate traded off); carried as a rate to the DGX Spark (273 GB/s
against 1792) it made the experts stream at the full LPDDR5x peak, and plan's Spark gpt-oss-120b
decode ran 26 % above the published 33-34 tok/s.
"""

from __future__ import annotations

import pytest

from advisor.cost import measured as M
from advisor.cost import measured_tables as mt
from advisor.gpu_table import get_gpu

KERNEL = "vllm_gptossmxfp4moe_marlin_marlinexperts"
SHAPE = dict(hidden=2880, inter=2880, topk=4, experts=128)       # gpt-oss-120b


def _layer(gid: str, tokens: float, evidence=None):
    return M.moe_layer_time(get_gpu(gid), "w4a16_nvfp4", tokens, SHAPE["hidden"], SHAPE["inter"], SHAPE["topk"],
                            SHAPE["experts"], dtype="w4a16_mxfp4", engine="vllm", kernel=KERNEL, evidence=evidence)


def _table():
    return next(t for t in mt.moe_tables() if t.system == "rtx_pro_6000_server" and t.kernel == KERNEL)


def test_the_shipped_fit_is_at_its_bound_at_one_token():
    """The premise: the table this test carries has e = 1.0 at T = 1 and unbound fits next to it."""
    t = _table()
    assert t.tokens[0] == 1 and t.e[0] >= M.E_BOUND
    assert any(e < M.E_BOUND for e in t.e)


def test_a_bound_fit_does_not_stream_at_dram_peak_on_a_slower_card():
    spark = _layer("dgx-spark-gb10", 1)
    assert M.evidence_for(get_gpu("dgx-spark-gb10")).system.system == "rtx_pro_6000_server"
    assert spark.seconds is not None and "rtx_pro_6000_server" in spark.source
    # the rate of the nearest unbound fit (T = 4 here), not the full 273 GB/s
    assert spark.efficiency < 0.85
    assert spark.seconds > spark.fixed_s + spark.roofline_s / 0.85
    assert "at its bound" in spark.note and "T = 4" in spark.note      # the derivation says what replaced it


def test_the_measured_system_itself_is_charged_exactly_its_fit():
    """Same card: fixed + roofline / e, the measured time, bound fit or not."""
    server = get_gpu("rtx-pro-6000-bw-server")
    for tokens in (1, 4, 64):
        got = _layer(server.id, tokens)
        fixed, e = _table().at(tokens)
        assert got.seconds == pytest.approx(fixed + got.roofline_s / e)


@pytest.mark.parametrize("tokens", [4, 16, 64])
def test_an_unbound_fit_carries_unchanged(tokens):
    """Only a fit at its bound is replaced: elsewhere the carried time is fixed + roofline / e(T)."""
    spark = _layer("dgx-spark-gb10", tokens)
    fixed, e = _table().at(tokens)
    assert e < M.E_BOUND
    assert spark.seconds == pytest.approx(spark.fixed_s + spark.roofline_s / e)
    assert "at its bound" not in spark.note

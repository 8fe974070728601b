"""A weight-only kernel that issues mma.sync (Marlin) is charged the measured BF16 GEMM efficiency; on cards
whose BF16 GEMMs issue wgmma or tcgen05.mma that efficiency belongs to a faster instruction. There the
compute term takes the mma.sync rate of Marlin's own MoE kernel measured on the card's architecture (the
nearest evidence of that instruction), labelled a lower bound on speed; with no such table the BF16 figure
stays, labelled an upper bound. Both in the derivation and as a warning, and only on those cards."""

from __future__ import annotations

import json

import pytest

from advisor import cli
from advisor.cost import measured
from advisor.cost.efficiency import LEGACY_MMA_SYNC_NOTE, MARLIN_MMA_SYNC_NOTE, legacy_mma_sync
from advisor.gpu_table import get_gpu

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"      # W4A16 NVFP4 MLP: SGLang runs it on Marlin FP4 (mma.sync)


@pytest.mark.parametrize("mma,sm,legacy", [
    ("hmma_bf16", 90, True),     # Hopper: cuBLAS BF16 runs wgmma
    ("hmma_bf16", 100, True),    # B200: tcgen05.mma
    ("hmma_bf16", 103, True),    # B300
    ("hmma_bf16", 120, False),   # GeForce Blackwell: mma.sync is its only MMA
    ("hmma_bf16", 86, False),    # Ampere
    ("hmma_f16", 75, False),     # Turing
    ("wgmma_bf16", 90, False),   # the async MMA itself
    ("tcgen05_bf16", 100, False),
])
def test_legacy_mma_sync_only_where_the_card_has_a_faster_mma(mma, sm, legacy):
    assert legacy_mma_sync(mma, sm) is legacy


def _plan(gpu: str, engine: str, capsys) -> dict:
    code = cli.main(["plan", DEMO, "--gpu", gpu, "--engine", engine, "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    return json.loads(out)


def _strings(o):
    if isinstance(o, dict):
        for v in o.values():
            yield from _strings(v)
    elif isinstance(o, list):
        for v in o:
            yield from _strings(v)
    elif isinstance(o, str):
        yield o


@pytest.mark.parametrize("gpu,system", [("b200", "b200_sxm"), ("h100-sxm", "h100_sxm")])
def test_marlin_on_hopper_and_blackwell_runs_at_the_measured_marlin_rate(gpu, system, capsys):
    plan = _plan(gpu, "sglang", capsys)
    warned = [w for w in plan["warnings"] if MARLIN_MMA_SYNC_NOTE in w]
    assert len(warned) == 1 and "Marlin FP4 (W4A16)" in warned[0] and f"{system}/moe/" in warned[0]
    assert not any(LEGACY_MMA_SYNC_NOTE in s for s in _strings(plan))
    # the derivation the user reads says it at the term it concerns, with the table and its efficiency
    e, _ = measured.marlin_mma_sync_efficiency(measured.Ops(measured.evidence_for(get_gpu(gpu)), "sglang"))
    terms = [s for s in _strings(plan["derivations"]) if MARLIN_MMA_SYNC_NOTE in s]
    assert terms and all(f"x {e:.3g}:" in s and "moe_perf.parquet" in s for s in terms)


def test_the_marlin_rate_slows_the_compute_bound_prefill_it_caps(capsys, monkeypatch):
    """The 8k prefill of the W4A16 MLP on a B200 is compute-bound: at Marlin's measured mma.sync rate (e about
    0.13 of the BF16 peak) it takes longer than at the BF16 GEMM's tcgen05 efficiency it was charged before."""
    slow = _plan("b200", "sglang", capsys)["predictions"]["prefill_tok_s"]
    monkeypatch.setattr(measured, "marlin_mma_sync_efficiency", lambda ops, folder=None: None)
    fast = _plan("b200", "sglang", capsys)
    assert any(LEGACY_MMA_SYNC_NOTE in w for w in fast["warnings"])      # no table: the upper-bound label
    assert fast["predictions"]["prefill_tok_s"] > 1.5 * slow


def test_marlin_rate_comes_from_a_marlin_moe_table_of_the_cards_system():
    for gpu, lo, hi in (("b200", 0.08, 0.2), ("h200-sxm", 0.15, 0.4)):
        got = measured.marlin_mma_sync_efficiency(measured.Ops(measured.evidence_for(get_gpu(gpu)), "vllm"))
        assert got is not None and lo < got[0] < hi and "marlin" in got[1].lower()
    assert measured.marlin_mma_sync_efficiency(None) is None


@pytest.mark.parametrize("gpu,engine", [("rtx-5090", "sglang"), ("a100-80gb-sxm", "sglang"), ("b200", "vllm")])
def test_no_label_where_mma_sync_is_the_native_mma_or_no_mma_sync_kernel_runs(gpu, engine, capsys):
    plan = _plan(gpu, engine, capsys)
    assert not any("mma.sync" in s for s in _strings(plan))

"""A weight-only kernel that issues mma.sync (Marlin) is charged the measured BF16 GEMM efficiency; on cards
whose BF16 GEMMs issue wgmma or tcgen05.mma that efficiency belongs to a faster instruction, so the plan
labels the figure an upper bound (in the derivation and as a warning) there, and only there."""

from __future__ import annotations

import json

import pytest

from advisor import cli
from advisor.cost.efficiency import LEGACY_MMA_SYNC_NOTE, legacy_mma_sync

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


@pytest.mark.parametrize("gpu", ["b200", "h100-sxm"])
def test_marlin_on_hopper_and_blackwell_is_labelled_an_upper_bound(gpu, capsys):
    plan = _plan(gpu, "sglang", capsys)
    warned = [w for w in plan["warnings"] if LEGACY_MMA_SYNC_NOTE in w]
    assert len(warned) == 1 and "Marlin FP4 (W4A16)" in warned[0]
    # the derivation the user reads says it at the term it concerns
    assert any(LEGACY_MMA_SYNC_NOTE in s for s in _strings(plan["derivations"]))


@pytest.mark.parametrize("gpu,engine", [("rtx-5090", "sglang"), ("a100-80gb-sxm", "sglang"), ("b200", "vllm")])
def test_no_label_where_mma_sync_is_the_native_mma_or_no_mma_sync_kernel_runs(gpu, engine, capsys):
    plan = _plan(gpu, engine, capsys)
    assert not any("mma.sync" in s for s in _strings(plan))

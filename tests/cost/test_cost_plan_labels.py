"""Issue 16 point 5: the plan's labels say what was computed, and small figures keep a readable unit."""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint, explanation, rtx3090
from cost_hybrid27b import write_hybrid27b

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.plan_doc import duration_text, size_text, to_doc
from advisor.cost.workload import get_workload
from advisor.doc import KeyValues
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain


def _predictions(doc) -> dict[str, str]:
    kv = next(b for b in doc.blocks if isinstance(b, KeyValues) and b.title == "Predictions")
    return dict(kv.pairs)


def test_prefill_row_names_the_prompt_it_was_computed_for(tmp_path):
    ck = inspect_checkpoint(str(write_hybrid27b(tmp_path / "nvfp4", "NVFP4")))
    gpu = get_gpu("rtx-3090")
    plan = make_plan(ck, explain(ck, gpu, engine="vllm"), gpu, workload=get_workload("interactive"),
                     overrides=Overrides(prompt_tokens=54_000))
    row = _predictions(to_doc(plan))["prefill"]
    assert "for 54,000 tokens" in row and "1,024" not in row
    assert plan.derivations["prefill_seconds"].inputs["P"] == 54_000


def test_prefill_row_names_the_capped_prompt():
    ck = dense_checkpoint("W4A16-NVFP4", max_pos=8192)
    plan = make_plan(ck, explanation(), rtx3090(), workload=get_workload("interactive"),
                     overrides=Overrides(prompt_tokens=54_000))
    assert "for 8,192 tokens" in _predictions(to_doc(plan))["prefill"]


def test_tiny_figures_keep_a_readable_unit():
    ck = dense_checkpoint("W4A16-NVFP4", layers=1, hidden=256, inter=512, heads=4, kv_heads=2, head_dim=64,
                          vocab=1000, max_pos=4096)
    plan = make_plan(ck, explanation(), rtx3090(), workload=get_workload("interactive"))
    rows = _predictions(to_doc(plan))
    assert "0.00" not in rows["weights per GPU"] and rows["weights per GPU"].endswith("MiB")
    assert "0.00 s" not in rows["prefill"] and ("ms" in rows["prefill"] or "µs" in rows["prefill"])


@pytest.mark.parametrize("value, text", [(1.5 * 2**30, "1.50 GiB"), (9.57 * 2**30, "9.57 GiB"),
                                         (73.4 * 2**20, "73.40 MiB"), (5120, "5.00 KiB"), (512, "512 B"),
                                         (227.2 * 2**20, "227.2 MiB")])
def test_size_text(value, text):
    assert size_text(value) == text


@pytest.mark.parametrize("value, text", [(37.77, "37.77 s"), (0.614, "614 ms"), (0.0042, "4.2 ms"),
                                         (3.5e-5, "35 µs"), (0.0, "0 s")])
def test_duration_text(value, text):
    assert duration_text(value) == text

"""GPUs with unknown peaks or clocks: speeds are n/a rather than infinite, and a missing BF16 peak is not a
missing BF16 capability."""

from __future__ import annotations

import json

import pytest
from cost_builders import dense_checkpoint, explanation, make_gpu, NS, rtx3090, vllm_plan

from advisor.cli import main
from advisor.cost import context, gpu_efficiency
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.plan_doc import to_doc
from advisor.gpu_table import get_gpu

VLLM = load_engine_memory("vllm")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _text(doc) -> str:
    return repr(doc)          # every block's text (the frozen dataclasses' repr)


# ---------------------------------------------------------------- unknown peak / clock
def _null_gpu():
    none = {k: None for k in ("fp16_fp32acc", "fp16_fp16acc", "bf16", "tf32", "fp8_fp32acc", "fp8_fp16acc",
                              "fp6", "fp4", "int8")}
    return make_gpu("mystery-gpu", name="Mystery", cc=(8, 6), boost_clock_mhz=None, peaks={**none, "int4": NS})


def test_unknown_peak_and_clock_give_na_not_infinite_speed():
    plan = vllm_plan(_null_gpu())
    p = plan.predictions
    assert p.decode_tok_s is None and p.prefill_tok_s is None and p.prefill_seconds is None
    assert "tensor peak" in p.na["decode_tok_s"] and "tensor peak" in p.na["prefill_tok_s"]
    assert p.decode_aggregate_tok_s == {}
    js = plan.to_json()["predictions"]
    assert js["prefill_tok_s"] is None and js["na"]["prefill_tok_s"]
    issue = next(a for a in plan.assumptions if a.key == "issue_rate")
    assert issue.value == "N/A"
    assert "N/A" in _text(to_doc(plan))


def test_roofline_reports_unknown_rates_instead_of_zero_time():
    ctx = context.build(dense_checkpoint("W4A16-NVFP4"), explanation("W4A16-NVFP4"), _null_gpu(), gpus=1,
                        engine=VLLM, overrides=Overrides())
    pf = ctx.model.prefill(1024, 1024, VLLM.kv_dtype("bfloat16"))
    assert "tensor peak for hmma_bf16" in pf.unknown and "SM clock (dequant issue rate)" in pf.unknown
    step = ctx.model.decode_step(1, 1024, VLLM.kv_dtype("bfloat16"))
    assert step.unknown and step.seconds > 0


def test_server_edition_uses_workstation_figures_as_a_labelled_upper_bound(capsys):
    code, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-pro-6000-bw-server")
    assert code == 0
    p = doc["predictions"]
    assert p["upper_bound"] and "rtx-pro-6000-bw-ws" in p["upper_bound"]
    assert doc["derivations"]["prefill_seconds"]["inputs"]["t_mma"] > 0
    peaks = [a for a in doc["assumptions"] if a["key"].startswith("mma_tflops.")]
    assert peaks and all("upper bound" in a["source"] for a in peaks)


def test_gb10_issue_rate_uses_the_clock_its_peak_implies(capsys):
    _, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "dgx-spark-gb10")
    a = {x["key"]: x for x in doc["assumptions"]}
    assert 2400 < a["sm_clock"]["value"] < 2600 and "gpu-specs.md" in a["sm_clock"]["source"]
    assert a["issue_rate"]["value"] > 0
    assert gpu_efficiency.implied_clock_mhz(get_gpu("dgx-spark-gb10")) == pytest.approx(2543, abs=2)


# ---------------------------------------------------------------- BF16 capability from the CC
def test_unknown_bf16_peak_is_not_a_missing_bf16(capsys):
    assert context.has_bf16(get_gpu("rtx-pro-6000-bw-server"))
    assert context.has_bf16(make_gpu(peaks={**rtx3090().peaks, "bf16": None}))
    assert not context.has_bf16(get_gpu("t4"))
    _, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-pro-6000-bw-server")
    assert "float16" not in doc["predictions"]["kv_pool_tokens"]
    assert doc["recommendation"]["kv_cache_dtype"] != "float16"
    assert not any("sm_75" in w or "without BF16" in w for w in doc["warnings"])

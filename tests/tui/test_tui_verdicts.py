"""A verdict ("will not run", "does not fit") is said on the status line, the Launch tab and first on
Cost; Explain names the plan's KV dtype; the plain (piped) answer keeps what it promises."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from advisor.services import views
from advisor.services.analysis import Selection, analyze
from advisor.tui import actions
from advisor.tui.docview import DocView

pytestmark = pytest.mark.timeout(300)

QWEN36 = "demo:qwen3.6-27b-nvfp4-mixed"
QWEN3 = "demo:qwen3-8b-nvfp4"
GPT_OSS = "demo:gpt-oss-20b-mxfp4"


async def settle(app, pilot) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def _status(app) -> str:
    return str(app.query_one("#status", Static).render())


def _note(app) -> str:
    note = app.query_one("#launch-note", Static)
    return str(note.render()) if note.display else ""


async def test_will_not_run_is_said_on_status_launch_and_cost(make_app):
    app = make_app(checkpoint=GPT_OSS, gpu="rtx-3090", engine="fastllm")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        a = app.analysis
        assert a.ok and a.verdict == "will not run"        # no stage failed; the answer is "no"
        assert _status(app).endswith("— will not run")
        assert "unsupport src dtype U8" in _note(app)
        assert _note(app).startswith("explain predicts this will not run:")
        assert app.query_one("#cost-view", DocView).text.startswith("Verdict: will not run")


def test_does_not_fit_verdict_and_cost_first():
    a = analyze(Selection(QWEN36, "rtx-3060-12gb"))
    assert a.plan.recommendation.blocked
    assert a.verdict == "does not fit"
    assert a.verdict_reason == f"the plan has no launch line: {a.plan.recommendation.blocked}"
    doc = views.cost_doc(a)
    assert doc.blocks[0].text == "Verdict: does not fit"
    assert actions.launch_note(a, "vllm") == a.verdict_reason
    ok = analyze(Selection(QWEN3, "rtx-3090"))
    assert ok.verdict == "" and views.verdict_doc(ok).blocks == ()


def test_explain_names_the_plans_kv_dtype_when_it_differs():
    # the agents workload's 8 x 32k-token contexts fit the 3090's pool only as 4-bit KV (the checkpoint
    # declares FP8, which explain shows)
    a = analyze(Selection(QWEN36, "rtx-3090", engine="vllm", workload="agents"))
    explained = next(d for d in a.explanation.decisions if d.layer_class == "attention_kv")
    planned = a.plan.recommendation.kv_cache_dtype
    chosen = a.kv_decisions[planned]
    assert chosen.kv_cache_dtype != explained.kv_cache_dtype
    text = "\n".join(getattr(b, "text", "") for b in views.explain_doc(a).blocks[:3])   # right under the answer
    assert f"With the plan's KV cache dtype {planned}" in text
    assert f"runs on {chosen.kernel}" in text and f"stored as {chosen.kv_cache_dtype}" in text
    same = analyze(Selection(QWEN3, "rtx-3090", engine="vllm"))
    assert views.plan_kv_note(same) == ""


def no_gpu_probe():
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import RawSnapshot

    return build_result(RawSnapshot(status="no-driver", message="no NVIDIA driver found (test)", driver_version=None,
                                    cuda_driver_version=None, nvml_version=None, devices=(), pairs=()))


def test_plain_output_keeps_its_promises():
    a = analyze(Selection(QWEN3, "rtx-3090"))
    warnings = {w.text for d in a.explanation.decisions for w in d.warnings}
    assert warnings and "listed below" in a.explanation.summary
    doc = views.plain_doc(no_gpu_probe(), a)
    blocks = [b for b in doc.blocks if getattr(b, "title", None) == "Engine warnings and what they mean"]
    assert blocks and all(any(item.startswith(w) for item in blocks[0].items) for w in warnings)
    first = doc.blocks[0].text
    assert "--gpu ID" in first and "above" not in first
    assert "above" in views.hardware_doc(no_gpu_probe(), "rtx-3090", 1).blocks[0].text

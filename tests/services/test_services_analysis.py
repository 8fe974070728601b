"""The analysis service explains each (GPU, GPU count, engine, version, install options) once per analysis:
the TP sizes the tuner weighs and the explain-only answer after a failed plan reuse it, and the KV dtypes
it weighs take the attention decision alone (explain_kv), so one GPU costs one full explain."""

from __future__ import annotations

import collections

import pytest

import advisor.kernel_path.explain as explain_module
from advisor import engines
from advisor.cost.overrides import Overrides
from advisor.errors import AdvisorError
from advisor.services.analysis import Explainer, Selection, analyze


@pytest.fixture
def explains(monkeypatch):
    """Every explain() call the analysis makes, by what it was asked (GPU, count, engine, version, options)."""
    real = explain_module.explain
    seen: collections.Counter = collections.Counter()

    def counting(checkpoint, gpu, **kw):
        seen[(gpu.id, kw.get("gpus"), kw.get("engine"), kw.get("version"), kw.get("options"))] += 1
        return real(checkpoint, gpu, **kw)

    monkeypatch.setattr(explain_module, "explain", counting)
    return seen


@pytest.mark.parametrize("gpu, gpus", [("rtx-3090", 1), ("rtx-5090", 2)])
def test_each_gpu_and_engine_is_explained_once_per_option_set(explains, gpu, gpus):
    a = analyze(Selection("demo:qwen3-30b-a3b-nvfp4", gpu, gpus))
    assert a.ok and a.plan is not None
    assert explains and set(explains.values()) == {1}, explains
    assert {k[:4] for k in explains} == {(gpu, gpus, "vllm", None)}


@pytest.mark.parametrize("engine", engines.tuned())
@pytest.mark.parametrize("demo", ["qwen3-30b-a3b-nvfp4", "llama-3.1-8b-gptq-int4"])
def test_one_gpu_costs_one_full_explain_while_the_tuner_weighs_kv_dtypes(monkeypatch, engine, demo):
    real = explain_module._explain
    full = []

    def counting(*args, **kw):
        full.append(args[1].id)
        return real(*args, **kw)

    monkeypatch.setattr(explain_module, "_explain", counting)
    a = analyze(Selection(f"demo:{demo}", "rtx-3090", 1, engine))
    assert a.ok and a.plan is not None
    assert len(a.kv_decisions) > 1          # several KV dtypes were weighed
    assert full == ["rtx-3090"]


def test_a_kv_dtype_and_tp_the_user_chose_are_explained_once(explains):
    # the plan's KV decision and its TP size are the explained options themselves: no second explain
    a = analyze(Selection("demo:qwen3-8b-nvfp4", "rtx-3090", 2), overrides=Overrides(kv_cache_dtype="fp8", tp=2))
    assert a.ok
    assert sum(explains.values()) == 1, explains
    assert a.kv_decisions["fp8"] in a.explanation.decisions


def test_a_failed_plan_keeps_the_explanation_without_explaining_again(explains, monkeypatch):
    import advisor.cost.plan as plan_module

    def refuse(*a, **kw):
        raise AdvisorError("no memory model (test)")

    monkeypatch.setattr(plan_module, "make_plan", refuse)
    a = analyze(Selection("demo:qwen3-8b-nvfp4", "rtx-3090", 1))
    assert a.errors == {"plan": "no memory model (test)"} and a.explanation is not None
    assert set(explains.values()) == {1}, explains


def test_an_explain_error_is_kept_and_raised_again_without_rerunning(monkeypatch):
    calls = []

    def failing(checkpoint, gpu, **kw):
        calls.append(kw)
        raise AdvisorError("no rule (test)")

    monkeypatch.setattr(explain_module, "explain", failing)
    explainer = Explainer(checkpoint=None, gpu=None)
    for _ in range(2):
        with pytest.raises(AdvisorError, match="no rule"):
            explainer(gpus=1, engine="vllm")
    assert len(calls) == 1 and explainer.runs == 1


def test_options_that_differ_only_in_their_labels_are_explained_apart(monkeypatch):
    from advisor.kernel_path.options import InstallOptions

    monkeypatch.setattr(explain_module, "explain", lambda checkpoint, gpu, **kw: kw["options"])
    explainer = Explainer(checkpoint=None, gpu=None)
    plain, labelled = InstallOptions(), InstallOptions(labels=("--kv-cache-dtype fp8",))
    assert explainer(options=plain) is plain and explainer(options=labelled) is labelled   # shown differently
    assert explainer(options=InstallOptions()) is plain and explainer.runs == 2

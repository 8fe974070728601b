"""Paths that cannot run as a GPU roofline (layers on the CPU, weights that do not fit, a path the engine
refuses): n/a speeds, no launch line, and the tuner avoids them."""

from __future__ import annotations

import json
from dataclasses import replace

from cost_builders import dense_checkpoint, explanation

from advisor.cli import main
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.plan import make_plan
from advisor.cost.plan_doc import to_doc
from advisor.cost.workload import get_workload
from advisor.gpu_table import get_gpu

VLLM = load_engine_memory("vllm")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- CPU fallback is never chosen
def test_tuner_avoids_a_tp_size_that_runs_layers_on_the_cpu(capsys):
    code, doc = run_json(capsys, "demo:llama-3.1-8b-gptq-int4", "--gpu", "rtx-3090", "--gpus", "2",
                         "--engine", "fastllm")
    assert code == 0
    assert doc["recommendation"]["tp"] == 1
    tp2 = next(o for o in doc["tradeoffs"] if o["knob"] == "tp" and o["value"] == "2")
    assert not tp2["chosen"] and "CPU" in tp2["note"]
    assert any("TP 2 not chosen" in w and "CPU" in w for w in doc["warnings"])
    assert doc["predictions"]["decode_tok_s"] > 0          # TP 1 runs on the GPU: a real figure


def test_forced_cpu_path_reports_na_speeds(capsys):
    _, doc = run_json(capsys, "demo:llama-3.1-8b-gptq-int4", "--gpu", "rtx-3090", "--gpus", "2",
                      "--engine", "fastllm", "--tp", "2")
    p = doc["predictions"]
    assert p["decode_tok_s"] is None and p["prefill_tok_s"] is None and p["decode_aggregate_tok_s"] == {}
    assert "CPU" in p["na"]["decode_tok_s"]
    assert any("--tp 1 keeps every layer on the GPU" in w for w in doc["warnings"])


# ---------------------------------------------------------------- weights that do not fit
def test_weights_that_do_not_fit_give_na_no_flags_and_the_gpus_that_would(capsys):
    code, doc = run_json(capsys, "demo:qwen3-30b-a3b-fp8", "--gpu", "rtx-3090")
    assert code == 0
    p, r = doc["predictions"], doc["recommendation"]
    assert p["decode_tok_s"] is None and p["prefill_tok_s"] is None
    assert r["flags"] == {} and "--gpus 2" in r["blocked"]
    assert any("--gpus 2" in w for w in doc["warnings"])
    assert not any("at any TP size" in w for w in doc["warnings"])
    assert main(["plan", "demo:qwen3-30b-a3b-fp8", "--gpu", "rtx-3090"]) == 0
    out = capsys.readouterr().out
    assert "does not fit" in out and "--kv-cache-dtype" not in out and "188.5" not in out
    _, two = run_json(capsys, "demo:qwen3-30b-a3b-fp8", "--gpu", "rtx-3090", "--gpus", "2")
    assert two["predictions"]["decode_tok_s"] > 0 and two["recommendation"]["flags"]


# ---------------------------------------------------------------- a path the engine refuses
def test_path_the_engine_cannot_load_gives_na_speeds_and_no_launch_line(capsys):
    code, doc = run_json(capsys, "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm")
    assert code == 0
    p, r = doc["predictions"], doc["recommendation"]
    assert p["decode_tok_s"] is None and p["prefill_tok_s"] is None and p["decode_aggregate_tok_s"] == {}
    assert "unsupport src dtype U8" in p["na"]["decode_tok_s"]
    assert r["flags"] == {} and "unsupport src dtype U8" in r["blocked"]
    assert "decode_tok_s" not in doc["derivations"]
    assert main(["plan", "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm"]) == 0
    out = capsys.readouterr().out
    assert "cannot run — no launch line" in out and "--max_batch" not in out


def test_refused_path_renders_in_every_report_format_and_the_tui_cost_view(tmp_path):
    from advisor.report.output import schema_errors

    argv = ["demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm"]
    texts = {}
    for fmt in ("json", "md", "html"):
        out = tmp_path / f"r.{fmt}"
        assert main(["report", *argv, "--format", fmt, "-o", str(out)]) == 0
        texts[fmt] = out.read_text()
    data = json.loads(texts["json"])
    assert schema_errors(data) == []
    assert data["plan"]["predictions"]["decode_tok_s"] is None and data["plan"]["recommendation"]["blocked"]
    assert "unsupport src dtype U8" in texts["md"] and "unsupport src dtype U8" in texts["html"]
    from advisor.services import views
    from advisor.services.analysis import Selection, analyze

    a = analyze(Selection("demo:gpt-oss-20b-mxfp4", "rtx-4090", engine="fastllm"))
    view = repr(views.cost_doc(a))
    assert "cannot run — no launch line" in view and "N/A" in view


def test_a_linear_kernel_the_engine_rejects_blocks_the_plan():
    gpu = get_gpu("b200")
    exp = explanation("W8A8-FP8", gpu=gpu.id, mma="tcgen05_e4m3")
    bad = tuple(replace(d, runs=False, error="Int8 not supported on SM100.") if d.layer_class == "dense_linear"
                else d for d in exp.decisions)
    plan = make_plan(dense_checkpoint("W8A8-FP8"), replace(exp, decisions=bad), gpu, gpus=1,
                     workload=get_workload("interactive"), engine_memory=VLLM)
    assert plan.predictions.decode_tok_s is None
    assert "Int8 not supported on SM100" in plan.recommendation.blocked and plan.recommendation.flags == {}
    assert "Int8 not supported on SM100" in repr(to_doc(plan))
    ok = make_plan(dense_checkpoint("W8A8-FP8"), exp, gpu, gpus=1, workload=get_workload("interactive"),
                   engine_memory=VLLM)
    assert ok.predictions.decode_tok_s > 0 and ok.recommendation.flags and not ok.recommendation.blocked

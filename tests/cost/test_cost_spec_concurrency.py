"""Speculative decoding under concurrency (issue 19, point 3): per-stream and aggregate speed at 1...max
batch with and without drafts, from the speculative step at that batch (verify at M = b x (k+1), the
draft's own pass over its rows, the state copy of hybrid models); the tuner's draft count and max batch
follow the curve, and `plan` shows it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
from cost_builders import dense_checkpoint, explanation, rtx3090

from advisor.cli import main
from advisor.cost import context, spec_concurrency
from advisor.cost.context import Settings
from advisor.cost.engine_profile import load_engine_memory, profiles_dir
from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.workload import Workload
from advisor.errors import BadInput

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"
ISSUE_CASE = ("--gpu", "rtx-2080-ti", "--gpus", "2", "--engine", "fastllm", "--vram", "22", "--tp", "2",
              "--kv-cache-dtype", "fp8_e4m3", "--memory-share", "0.95", "--chunked-prefill", "4096",
              "--spec-method", "dflash")
# a measured-looking acceptance (conditional), so the gain is modest and the crossing comes early
ACCEPT = Overrides(acceptance=(0.7,), acceptance_kind="conditional")


def _dense_ctx(overrides: Overrides = ACCEPT):
    """Dense 8B W4A16 with an MTP head on an RTX 3090 (vLLM)."""
    return context.build(dense_checkpoint(mtp_layers=1), explanation(kv="bf16"), rtx3090(), gpus=1,
                         engine=load_engine_memory("vllm"), overrides=overrides)


def _settings(ctx, batch=1024, k=0, kv=None, tp=1):
    return Settings(kv or ctx.default_kv, batch, 0.9, 8192, tp, k, True)


def _hybrid_ctx(engine="fastllm", gpu="rtx-2080-ti", kv="fp8_e4m3", method="dflash", tp=2):
    """The issue's 27B hybrid (48 GDN + 16 attention layers) with its explained kernel path."""
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.options import InstallOptions

    ck = inspect_checkpoint(DEMO)
    g = get_gpu(gpu)
    eng = load_engine_memory(engine)
    ex = explain(ck, g, gpus=tp, engine=engine, options=InstallOptions(kv_cache_dtype=kv, tp=tp))
    ov = Overrides(vram_gb=22 if gpu == "rtx-2080-ti" else None, tp=tp, kv_cache_dtype=kv, spec_method=method)
    return context.build(ck, ex, g, gpus=tp, engine=eng, overrides=ov), eng


# ---------------------------------------------------------------- the curve
def test_speculation_stops_paying_once_the_verify_step_is_compute_bound():
    ctx = _dense_ctx()
    c = spec_concurrency.curve(ctx, _settings(ctx), 1024, 512)
    first = c.rows[0]
    assert first.batch == 1 and first.chosen_k > 0 and first.chosen.aggregate > first.plain_aggregate * 1.3
    assert c.stops_paying_at is not None and 1 < c.stops_paying_at <= 1024
    stop = next(r for r in c.rows if r.batch == c.stops_paying_at)
    # b x (k+1) rows cost (nearly) k+1 times the FLOPs once the step is compute-bound: no k gains 5 %
    assert stop.best.derived.inputs["verify_bound"] == "compute"
    assert stop.best.aggregate < stop.plain_aggregate * spec_concurrency.MIN_GAIN
    # the gain shrinks with the batch: at the crossing it is far below the batch-1 gain
    assert stop.best.speedup < first.chosen.speedup - 0.3


def test_the_draft_pass_grows_with_the_batch_and_the_block():
    """The old draft pass read the draft's weights once, whatever the batch: at a large batch a DFlash
    block of b x (k+1) rows turns the draft compute-bound too."""
    ctx, _ = _hybrid_ctx()
    s = _settings(ctx, 64, 7, ctx.engine.kv_dtype("fp8_e4m3"), tp=2)
    one = spec_concurrency.draft_pass(ctx, s, 1, 7, 1280)
    big = spec_concurrency.draft_pass(ctx, s, 64, 7, 1280)
    assert (one.inputs["passes"], one.inputs["rows_per_pass"], one.inputs["head_rows"]) == (1, 8, 7)
    assert (big.inputs["rows_per_pass"], big.inputs["head_rows"]) == (64 * 8, 64 * 7)
    assert one.inputs["bound"] == "bandwidth" and big.inputs["bound"] == "compute"
    assert big.value > 2 * one.value
    # DFlash drafts with 5 decoder layers (its KV too) and reads the 4.5-bit head copy FASTLLM_DRAFT_QUANT makes
    assert one.inputs["draft_layers"] == 5 and ctx.kv_layout(s).draft_layers == 5
    layer = ctx.model.weights.params_of("dense") / ctx.checkpoint.arch.num_layers * 2
    assert one.inputs["draft_bytes"] == pytest.approx(5 * layer + ctx.draft_head_copy_bytes())


def test_autoregressive_drafts_pass_k_times_over_the_batch():
    ctx = _dense_ctx()
    d = spec_concurrency.draft_pass(ctx, _settings(ctx), 8, 3, 512)
    assert (d.inputs["passes"], d.inputs["rows_per_pass"], d.inputs["head_rows"]) == (3, 8, 8)


def test_fastllm_verify_that_crosses_32_rows_pays_dequant_and_cublas():
    """FastLLM's per-tensor FP8 projections run a CUDA-core GEMV below 32 rows and dequantize to FP16 +
    cuBLAS from 32 rows on: 4 streams x 8 verified positions cross it, 4 x 4 do not."""
    ctx, _ = _hybrid_ctx()
    s = _settings(ctx, 4, 7, ctx.engine.kv_dtype("fp8_e4m3"), tp=2)
    k3 = spec_concurrency.spec_step(ctx, s, 4, 3, 1280)
    k7 = spec_concurrency.spec_step(ctx, s, 4, 7, 1280)
    assert k7.derived.inputs["M_verify"] == 32
    assert "dequant to FP16 + cublasGemmEx" in k7.derived.inputs["kernels_at_verify_M"]
    assert "cublasGemmEx" not in k3.derived.inputs.get("kernels_at_verify_M", "")
    assert k7.t_verify > 1.4 * k3.t_verify
    assert k7.aggregate < k3.aggregate          # a larger block accepts more, but costs more than it gains


def test_kv_dtype_enters_the_speculative_step():
    """At a long context the KV read is a large part of a verify step: an FP8 cache reads half the bytes
    of an FP16 one, and the speculative aggregate is higher with it."""
    ctx, eng = _hybrid_ctx()
    steps = {}
    for kv in ("fp8_e4m3", "float16"):
        s = _settings(ctx, 8, 3, eng.kv_dtype(kv), tp=2)
        steps[kv] = spec_concurrency.spec_step(ctx, s, 8, 3, 32768)
    fp8, fp16 = steps["fp8_e4m3"], steps["float16"]
    assert fp16.derived.inputs["kv_bytes_read"] == pytest.approx(2 * fp8.derived.inputs["kv_bytes_read"])
    assert fp16.t_verify > fp8.t_verify
    assert fp8.aggregate > fp16.aggregate


# ---------------------------------------------------------------- engine rules
def test_the_accepted_state_copy_follows_each_engine():
    """FastLLM restores a snapshot only after a rejection, SGLang scatters the accepted state every step,
    vLLM starts the next step from the accepted slot and copies nothing."""
    acc = (0.8, 0.7, 0.6)
    out = {}
    for engine in ("fastllm", "sglang", "vllm"):
        ctx, eng = _hybrid_ctx(engine=engine, gpu="rtx-5090", kv="auto" if engine != "fastllm" else "fp8_e4m3",
                               method="mtp", tp=1)
        s = _settings(ctx, 4, 3, ctx.default_kv)
        out[engine] = spec_concurrency.state_commit(ctx, s, 4, 3, acc)
        assert out[engine].source == eng.state_commit["source"]
    assert out["vllm"].value == 0.0
    assert out["sglang"].inputs["copied_share"] == 1.0
    assert out["fastllm"].inputs["copied_share"] == pytest.approx(1 - 0.8 * 0.7 * 0.6)
    assert out["sglang"].value > out["fastllm"].value > 0


def test_fastllm_mtp_replays_the_target_beyond_six_positions():
    """FastLLM keeps per-position state snapshots for at most 6 verified positions; an MTP verify of 7
    replays the target over the accepted prefix after a rejection."""
    ctx, _ = _hybrid_ctx(gpu="rtx-5090", kv="fp8_e4m3", method="mtp", tp=1)
    s = _settings(ctx, 1, 6, ctx.engine.kv_dtype("fp8_e4m3"))
    acc = (0.8,) * 6
    copy = spec_concurrency.state_commit(ctx, s, 1, 5, acc)
    replay = spec_concurrency.state_commit(ctx, s, 1, 6, acc)
    assert "replayed_positions" in replay.inputs and "replayed_positions" not in copy.inputs
    assert replay.value > 10 * copy.value
    assert "qwen3_5.cpp" in replay.source


def test_fastllm_mtp_batches_at_most_four_streams_and_five_drafts_on_one_gpu():
    ctx, _ = _hybrid_ctx(gpu="rtx-5090", kv="fp8_e4m3", method="mtp", tp=1)
    s = _settings(ctx, 8, 7, ctx.engine.kv_dtype("fp8_e4m3"))
    assert spec_concurrency.batching(ctx, s, 8, 7)[:2] == (4, 5)
    assert spec_concurrency.batching(ctx, s, 1, 7)[:2] == (1, 7)        # one stream: the unbatched path
    step = spec_concurrency.spec_step(ctx, s, 8, 7, 1280)
    assert (step.running, step.k_run) == (4, 5)
    assert step.aggregate == pytest.approx(4 * step.expected_tokens / step.seconds)
    assert step.per_stream == pytest.approx(step.aggregate / 8)           # the other four wait their turn
    # with TP every stream shares the batch
    assert spec_concurrency.batching(ctx, replace(s, tp=2), 8, 7)[:2] == (8, 5)


def test_a_bad_state_commit_rule_is_one_line_naming_the_file(tmp_path):
    folder = tmp_path / "engine_memory"
    shutil.copytree(profiles_dir(), folder)
    f = folder / "fastllm-1.9.yaml"
    f.write_text(f.read_text().replace("copy: on_reject", "copy: sometimes"))
    with pytest.raises(BadInput) as e:
        load_engine_memory("fastllm", folder=folder)
    assert "state_commit.copy" in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------- the tuner
def _workload(concurrency, objective="latency", floor=0.0):
    return Workload("t", "test", concurrency, 256, 512, 4096, objective, floor, True)


def _plan(w, overrides=ACCEPT):
    return make_plan(dense_checkpoint(mtp_layers=1), explanation(kv="bf16"), rtx3090(), workload=w,
                     overrides=overrides)


def test_the_draft_count_follows_the_concurrency():
    ctx = _dense_ctx()
    c = spec_concurrency.curve(ctx, _settings(ctx), 64, 512)
    assert c.stops_paying_at is not None
    one, many = _plan(_workload(1)), _plan(_workload(c.stops_paying_at))
    assert one.recommendation.max_batch == 1 and one.recommendation.draft_tokens > 0
    assert many.recommendation.max_batch == c.stops_paying_at
    assert many.recommendation.draft_tokens == 0


def test_the_max_batch_counts_the_drafts_that_pay_at_each_batch():
    """A per-stream floor no plain batch keeps: without drafts the tuner falls back to one stream; with
    them it runs the largest batch whose speculative per-stream speed keeps the floor."""
    ctx = _dense_ctx()
    c = spec_concurrency.curve(ctx, _settings(ctx), 16, 512)
    floor = 1.05 * c.rows[0].plain_aggregate
    keeps = [r.batch for r in c.rows if r.chosen is not None and r.chosen.per_stream >= floor]
    assert max(keeps) > 1
    w = _workload(16, "throughput", floor)
    plain = _plan(replace(w, speculative=False))
    drafted = _plan(w)
    assert plain.recommendation.max_batch == 1
    assert drafted.recommendation.max_batch > 1 and drafted.recommendation.draft_tokens > 0
    rows = {o.value: o.metrics for o in drafted.tradeoffs if o.knob == "max_batch"}
    assert rows[str(drafted.recommendation.max_batch)]["draft_tokens"] > 0
    assert rows["1"]["aggregate_tok_s"] > rows["1"]["plain_aggregate_tok_s"]


# ---------------------------------------------------------------- plan shows the curve
def test_plan_shows_the_curve_in_text_json_and_the_shared_document(capsys):
    assert main(["plan", DEMO, *ISSUE_CASE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    curve = doc["predictions"]["speculative"]["curve"]
    assert curve["method"] == "dflash" and "1" in curve["batches"]
    row = curve["batches"]["4"]
    for key in ("plain_aggregate_tok_s", "spec_aggregate_tok_s", "spec_per_stream_tok_s", "chosen_k", "t_verify",
                "t_draft", "t_commit"):
        assert key in row
    der = doc["derivations"]
    assert "B=4" in der["speculative_concurrency"]["inputs"] and der["speculative_concurrency"]["source"]
    # the recommended step term by term: the verify step (and its kernels at that M), the draft, the state
    step = der["speculative_step"]["inputs"]
    assert step["M_verify"] == step["B"] * (step["k"] + 1)
    assert der["speculative_verify_step"]["inputs"]["M"] == step["M_verify"]
    assert der["speculative_verify_linear_layers"]["inputs"]["M"] == step["M_verify"]
    assert der["speculative_draft_pass"]["source"].startswith("estimate")      # labelled: no engine source
    assert "qwen3_5" in der["speculative_state_commit"]["source"] or "fastllm" in der["speculative_state_commit"][
        "source"]
    assert main(["plan", DEMO, *ISSUE_CASE]) == 0
    assert "Speculation under concurrency: dflash" in capsys.readouterr().out


def test_the_cost_tab_document_carries_the_curve():
    from advisor.services.analysis import explain_and_plan
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.doc import Table
    from advisor.gpu_table import get_gpu
    from advisor.services.views import cost_doc

    ck, gpu = inspect_checkpoint(DEMO), get_gpu("rtx-2080-ti")
    ov = Overrides(vram_gb=22, tp=2, kv_cache_dtype="fp8_e4m3", spec_method="dflash")
    ex, p = explain_and_plan(ck, gpu, gpus=2, engine="fastllm", workload="agents", overrides=ov)
    a = SimpleNamespace(checkpoint=ck, explanation=ex, gpu=gpu, plan=p, verdict="", errors={})
    tables = [b for b in cost_doc(a).blocks if isinstance(b, Table) and b.title.startswith("Speculation under")]
    assert len(tables) == 1
    batches = [r[0] for r in tables[0].rows]
    assert batches[0] == "1" and str(p.recommendation.max_batch) in batches


def test_fixed_draft_tokens_that_lose_at_the_workloads_batch_are_flagged():
    """DFlash's block of 8 (7 drafts) at 8 streams verifies 64 rows through FastLLM's dequant + cuBLAS
    path: the plan keeps the user's setting and says that it loses against plain decoding."""
    from advisor.services.analysis import explain_and_plan
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu

    ctx, eng = _hybrid_ctx()
    step = spec_concurrency.spec_step(ctx, _settings(ctx, 8, 7, eng.kv_dtype("fp8_e4m3"), tp=2), 8, 7, 1280)
    assert step.speedup < 1.0
    ov = Overrides(vram_gb=22, tp=2, kv_cache_dtype="fp8_e4m3", spec_method="dflash", draft_tokens=7, max_batch=8,
                   memory_share=0.95)
    w = Workload("eight", "test", 8, 1024, 512, 8192, "throughput", 0.0, True)
    _, p = explain_and_plan(inspect_checkpoint(DEMO), get_gpu("rtx-2080-ti"), gpus=2, engine="fastllm", workload=w,
                            overrides=ov)
    assert p.recommendation.draft_tokens == 7 and p.recommendation.max_batch == 8
    note = next(x for x in p.warnings if x.startswith("--draft-tokens 7 at 8 stream(s)"))
    assert "plain decoding" in note and "64 rows" in note

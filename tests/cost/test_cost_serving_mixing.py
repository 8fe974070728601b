"""Served output rate under load: whether the running decodes ride the prefill steps.

vLLM's scheduler serves the running decodes first and gives the new prompt what is left of the token
budget, so decodes advance during every prefill step. SGLang 0.5.23 runs a new prefill batch on its
own and decodes only when no prefill is ready (scheduler.py:3992-4002@0.5.23); decodes join a prefill
batch only with --enable-mixed-chunk (default False). Under SGLang each of the c prefills of a cycle
stalls every stream, and every stream still needs O decode steps.
"""

from __future__ import annotations

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import context, serving
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.tuning import tune
from advisor.cost.workload import get_workload
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

PROMPT, OUT = 2048, 256


def _ctx(engine: str, config: str = "demo:qwen3-30b-a3b-fp8", gpu: str = "h100-sxm"):
    ck = inspect_checkpoint(config)
    g = get_gpu(gpu)
    ex = explain(ck, g, gpus=1, engine=engine)
    ctx = context.build(ck, ex, g, gpus=1, engine=load_engine_memory(engine), overrides=Overrides(prompt_tokens=PROMPT))
    return ctx, tune(ctx, get_workload("agents")).settings


def _separate_rate(ctx, s, c: int) -> float:
    """Output rate when no decode rides a prefill step: c prefills, then OUT decode steps of batch c."""
    return c * OUT / (c * ctx.prefill(s, PROMPT).seconds + OUT * ctx.decode(s, c, PROMPT + OUT).seconds)


@pytest.mark.parametrize("c", [8, 64])
def test_sglang_prefills_stall_every_decode(c):
    ctx, s = _ctx("sglang")
    sv = serving.serve(ctx, s, PROMPT, OUT, c, PROMPT + OUT)
    # the rate cannot beat the separate-steps schedule: no decode token is made during a prefill
    assert sv.output_tok_s <= _separate_rate(ctx, s, c) * (1 + 1e-9)
    d = sv.derivations["served_output_tok_s"]
    assert d.inputs["mixed"] is False
    assert "scheduler.py" in d.source and "@0.5.23" in d.source and "enable-mixed-chunk" in d.source
    # a stream's tokens wait for the others' prefills: its ITL is above a decode step's
    assert sv.itl_s > ctx.decode(s, c, PROMPT + OUT).seconds


def test_vllm_decodes_ride_the_prefill_steps():
    ctx, s = _ctx("vllm")
    c = 64
    sv = serving.serve(ctx, s, PROMPT, OUT, c, PROMPT + OUT)
    assert sv.output_tok_s > _separate_rate(ctx, s, c)
    assert "mixed" not in sv.derivations["served_output_tok_s"].inputs


def test_the_schedules_differ_only_under_load():
    ctx, s = _ctx("sglang")
    one = serving.serve(ctx, s, PROMPT, OUT, 1, PROMPT + OUT)
    assert one.ttft_loaded_s == one.ttft_isolated_s
    t1 = ctx.decode(s, 1, PROMPT + OUT).seconds
    assert one.output_tok_s == pytest.approx(OUT / (one.ttft_isolated_s + (OUT - 1) * t1))


def test_sglang_profile_states_the_flag_and_its_source():
    o = load_engine_memory("sglang").overhead
    assert o["prefill_mixes_decode"] is False
    assert "enable_mixed_chunk" in o["prefill_mixes_decode_source"] and "@0.5.23" in o["prefill_mixes_decode_source"]
    assert load_engine_memory("vllm").overhead.get("prefill_mixes_decode", True) is True

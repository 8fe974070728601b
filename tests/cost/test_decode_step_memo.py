"""decode_step keeps its module-group terms per (M, tp, extra): a step asked after another of the same M
(batch 2 x 1 position, then batch 1 x 2 positions, at another context) costs exactly what a fresh model
computes, and a model made by replace() does not inherit the old model's terms."""

from __future__ import annotations

from dataclasses import replace

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain


def _ctx(demo: str, gpu: str, engine: str = "vllm"):
    ck = inspect_checkpoint(f"demo:{demo}")
    g = get_gpu(gpu)
    return context.build(ck, explain(ck, g, gpus=1, engine=engine), g, gpus=1, engine=load_engine_memory(engine),
                         overrides=Overrides())


def _fresh_step(demo, gpu, *args, **kw):
    ctx = _ctx(demo, gpu)
    return ctx.model.decode_step(*args, ctx.default_kv, **kw)


def test_same_m_at_another_split_and_context_equals_a_fresh_model():
    for demo, gpu in (("qwen3-30b-a3b-nvfp4", "rtx-3090"), ("qwen3-8b-nvfp4", "b200")):
        ctx = _ctx(demo, gpu)
        kv = ctx.default_kv
        first = ctx.model.decode_step(2, 1024.0, kv)
        again = ctx.model.decode_step(1, 4096.0, kv, verify_tokens=2)
        assert first == _fresh_step(demo, gpu, 2, 1024.0)
        assert again == _fresh_step(demo, gpu, 1, 4096.0, verify_tokens=2)
        # the attention and KV terms still follow the context, the linear ones the M
        assert again.derived.inputs["kv_bytes"] != first.derived.inputs["kv_bytes"]
        assert [c.seconds for c in again.parts] == [c.seconds for c in first.parts]


def test_replace_starts_with_no_kept_terms():
    ctx = _ctx("qwen3-8b-nvfp4", "rtx-3090")
    kv = ctx.default_kv
    before = ctx.model.decode_step(1, 1024.0, kv)
    slower = replace(ctx.model, bandwidth_gbs=ctx.model.bandwidth_gbs / 2)
    after = slower.decode_step(1, 1024.0, kv)
    assert after.t_bytes > before.t_bytes
    assert slower._steps is not ctx.model._steps

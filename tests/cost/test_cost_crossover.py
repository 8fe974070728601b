"""The compute/bandwidth crossover batch is searched within the batch the KV pool holds."""

from __future__ import annotations

from cost_builders import dense_checkpoint, explanation, rtx3090, vllm_plan

from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.plan_doc import to_doc
from advisor.gpu_table import get_gpu

VLLM = load_engine_memory("vllm")


def _text(doc) -> str:
    return repr(doc)          # every block's text (the frozen dataclasses' repr)


def test_crossover_search_stops_at_the_batch_the_pool_holds():
    ctx = context.build(dense_checkpoint("W4A16-NVFP4"), explanation(), rtx3090(), gpus=1, engine=VLLM,
                        overrides=Overrides())
    kv = VLLM.kv_dtype("bfloat16")
    free = ctx.model.crossover_batch(1024, kv)
    assert free is not None and free & (free - 1)       # not a power of two: the old scan skipped it
    capped = ctx.model.crossover_batch(1024, kv, limit=free)      # the old scan returned None here
    assert capped is not None and capped <= free
    step = ctx.model.decode_step(capped, 1024, kv)
    assert step.t_compute >= step.t_bytes
    assert ctx.model.crossover_batch(1024, kv, limit=8) is None
    plan = vllm_plan(get_gpu("rtx-4090"))
    p = plan.predictions
    assert p.crossover_limit == max(1, p.max_concurrency_at_context)
    assert p.crossover_batch is None or p.crossover_batch <= p.crossover_limit
    assert "65536" not in _text(to_doc(plan))

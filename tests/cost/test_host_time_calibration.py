"""The engine's host time per step grows with the running requests as measured (vLLM 0.33's own scheduler,
profiles/calibration/host_time/): the profile's table is the runs' per-N median, plan adds its growth from
one request to the flat per-step figure, and under async scheduling a host-bound step takes the host time."""

from __future__ import annotations

import json
import statistics

import pytest
from cost_builders import dense_checkpoint, explanation, h100

from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from tests.conftest import ROOT

RUNS = sorted((ROOT / "profiles/calibration/host_time").glob("vllm-0.33.0-async-*.json"))
VLLM = load_engine_memory("vllm")


def test_the_profile_table_is_the_median_of_the_committed_runs():
    assert len(RUNS) >= 3
    tables = [{r["n"]: r["sum_cpu_us"] for r in json.loads(f.read_text())["table"]} for f in RUNS]
    want = {n: statistics.median(t[n] for t in tables) for n in tables[0]}
    got = dict(VLLM.overhead["host_scheduler_us"])
    assert set(got) == set(want)
    for n, us in want.items():
        assert got[n] == pytest.approx(us, abs=0.06)
    assert all(f.name in VLLM.overhead["host_scheduler_source"].replace("{1,2,3}", f.name[-6]) for f in RUNS)


def test_host_time_grows_with_the_running_requests():
    ctx = context.build(dense_checkpoint("BF16", layers=2, hidden=512, inter=1024, heads=8, kv_heads=2,
                                         head_dim=64, vocab=1000),
                        explanation("BF16", gpu="h100-sxm"), h100(), gpus=1, engine=VLLM, overrides=Overrides())
    m = ctx.model
    table = dict(VLLM.overhead["host_scheduler_us"])
    flat = VLLM.overhead["host_us_per_step"]
    assert m.host_seconds(1) == pytest.approx(flat * 1e-6)
    for n in (8, 256, 1024):
        assert m.host_seconds(n) == pytest.approx((flat + table[n] - table[1]) * 1e-6)
    mid = m.host_seconds(384)                      # between 256 and 512: linear
    assert m.host_seconds(256) < mid < m.host_seconds(512)
    beyond = m.host_seconds(2048) - m.host_seconds(1024)
    assert beyond == pytest.approx((table[1024] - table[512]) / 512 * 1024 * 1e-6)
    # a tiny model at 1,024 streams: the GPU step is shorter than the host's, so the step is the host time
    step = m.decode_step(1024, 64, VLLM.kv_dtype("bfloat16"))
    assert step.t_host == pytest.approx(m.host_seconds(1024))
    assert step.seconds == pytest.approx(step.t_host)

"""Whether the engine overlaps a step's host work with the GPU's (vLLM --async-scheduling, on by default from
0.14; SGLang's overlap scheduler) is a setting plan costs, recommends and launches: off, every step adds its
host time; the serve command and `launch --plan` carry the engine's flag; validation points on vLLM before
0.14 pin it off with their source."""

from __future__ import annotations

import sys

import pytest
import yaml
from cost_builders import dense_checkpoint, explanation, h100

from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.errors import BadInput
from launchers.engines import build_command
from launchers.settings import ServeSettings, settings_from_plan
from launchers.versions import DetectedVersion
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import validate_cost as vc  # noqa: E402


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_without_overlap_the_host_time_adds_to_every_step(engine):
    eng = load_engine_memory(engine)
    ck, ex = dense_checkpoint("BF16"), explanation("BF16", gpu="h100-sxm", engine=engine)
    on = context.build(ck, ex, h100(), gpus=1, engine=eng, overrides=Overrides())
    off = context.build(ck, ex, h100(), gpus=1, engine=eng, overrides=Overrides(host_overlap=False))
    kv = eng.kv_dtype("bfloat16") or eng.kv_dtype("auto")
    a, b = on.model.decode_step(64, 1024, kv), off.model.decode_step(64, 1024, kv)
    assert a.t_host == b.t_host > 0
    assert a.seconds == pytest.approx(max(a.seconds - 0, a.t_host))        # overlapped: hidden behind the GPU
    assert b.seconds == pytest.approx(a.seconds + b.t_host)                 # not: added
    row = {x.key: x for x in off.assumptions}["host_overlap"]
    assert row.value == "no" and "set off" in row.source


@pytest.mark.parametrize("engine, version, flag", [("vllm", "0.33.0", "--no-async-scheduling"),
                                                   ("sglang", "0.5.23", "--disable-overlap-schedule")])
def test_the_serve_command_carries_the_setting(engine, version, flag):
    s = ServeSettings(engine=engine, model="/m", host_overlap=False)
    assert flag in build_command(s, DetectedVersion(version, "test")).argv
    assert flag not in build_command(ServeSettings(engine=engine, model="/m"), DetectedVersion(version, "test")).argv


def test_vllm_before_0_14_needs_no_flag_for_it():
    cmd = build_command(ServeSettings(engine="vllm", model="/m", host_overlap=False), DetectedVersion("0.13.0", "t"))
    assert "--no-async-scheduling" not in cmd.argv
    assert any("before 0.14.0" in n for n in cmd.notes)


def test_plan_recommends_and_launch_takes_it():
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import load_workloads

    ck, ex = dense_checkpoint("BF16"), explanation("BF16", gpu="h100-sxm")
    plan = make_plan(ck, ex, h100(), gpus=1, workload=load_workloads()["interactive"],
                     overrides=Overrides(host_overlap=False))
    assert plan.recommendation.host_overlap is False
    assert "--no-async-scheduling" in plan.recommendation.flags
    s = settings_from_plan(plan.to_json() if hasattr(plan, "to_json") else plan, engine="vllm", model="/m")
    assert s.host_overlap is False


def test_a_pinned_default_must_say_why(tmp_path):
    p = {**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", "async_scheduling": False}
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [p]}))
    with pytest.raises(BadInput, match="async_scheduling needs async_scheduling_why"):
        vc.load_points(f)


def test_every_point_on_vllm_before_0_14_pins_it_off():
    """The rule is applied to every point whose vLLM is known to predate 0.14, whichever way it moves it."""
    import re

    for p in vc.load_points(vc.POINTS):
        if p["engine"] != "vllm":
            continue
        m = re.match(r"(?:gptoss image \()?(\d+)\.(\d+)", str(p["engine_version"]))
        old = bool(m) and (int(m.group(1)), int(m.group(2))) < (0, 14)
        dated = re.search(r"\((July|November) 2025\)", str(p["engine_version"]))
        if old or dated:
            assert p.get("async_scheduling") is False, p["id"]
        else:
            assert "async_scheduling" not in p, p["id"]


def test_one_rule_for_plan_and_launch_no_flag_before_the_version_that_has_it():
    """The plan's flag line and the serve command read the same rule: vLLM before 0.14.0 has no
    --no-async-scheduling (it schedules without overlap by default), so neither may print it."""
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.plan import _flags
    from advisor.engines.flags import no_host_overlap_args

    assert no_host_overlap_args("vllm", "0.13.0") == [] and no_host_overlap_args("vllm", "0.14.0") == [
        "--no-async-scheduling"]
    eng = load_engine_memory("vllm", None)
    old = _flags(eng, "auto", 0.9, 8, 8192, 1, version="0.13.0", host_overlap=False)
    new = _flags(eng, "auto", 0.9, 8, 8192, 1, version="0.33.0", host_overlap=False)
    assert "--no-async-scheduling" not in old and "--no-async-scheduling" in new

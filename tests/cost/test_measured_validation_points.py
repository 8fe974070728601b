"""benchmarks/validate_cost.py and its published measurements (benchmarks/validation_points.yaml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from advisor.errors import BadInput
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import validate_cost as vc  # noqa: E402


def test_shipped_points_are_sourced_and_runnable():
    points = vc.load_points(vc.POINTS)
    assert len(points) >= 20
    for p in points:
        assert p["url"].startswith("https://") and len(p["quote"]) > 10
        assert p["measured"] > 0
        assert p["config"].startswith("demo:") or (vc.CONFIGS / p["config"] / "config.json").is_file()
    assert len([p for p in points if p.get("ratio_to")]) >= 5
    gpus = {p["gpu"] for p in points}
    assert {"rtx-4090", "dgx-spark-gb10"} & gpus and {"h100-sxm", "gb200"} & gpus   # consumer and datacenter


def test_every_config_folder_is_named_in_sources():
    sources = (vc.CONFIGS / "SOURCES.md").read_text()
    for folder in vc.CONFIGS.iterdir():
        if folder.is_dir():
            assert f"`{folder.name}`" in sources


@pytest.mark.parametrize("bad, message", [
    ({"points": [{"id": "x"}]}, "missing url"),
    ({"points": [{**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "speed"}]}, "metric must be one of"),
    ({"points": [{**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", "ratio_to": "y"}]},
     "ratio_to 'y' is not a point"),
    ({"nothing": 1}, "top-level 'points:' list"),
])
def test_bad_points_file_is_one_line_bad_input(tmp_path, bad, message):
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump(bad))
    with pytest.raises(BadInput, match=message):
        vc.load_points(f)


def test_bad_points_file_exits_3_without_traceback(tmp_path):
    f = tmp_path / "points.yaml"
    f.write_text("points: [")
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "validate_cost.py"), "--points", str(f)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 3 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and str(f) in run.stderr


def test_ratio_errors_compare_like_with_like():
    a = vc.Result({"id": "a", "measured": 100.0}, 120.0)
    b = vc.Result({"id": "b", "measured": 50.0, "ratio_to": "a"}, 90.0)
    [(r, base, measured, predicted)] = vc.ratios([a, b])
    assert (r, base) == (b, a) and measured == 0.5 and predicted == pytest.approx(0.75)
    assert b.error == pytest.approx(0.8)


def test_a_point_on_a_bundled_demo_is_predicted():
    point = {"id": "demo", "url": "https://example.org", "quote": "q" * 20, "gpu": "rtx-5090", "engine": "vllm",
             "model": "Qwen3-8B NVFP4", "config": "demo:qwen3-8b-nvfp4", "tp": 1, "concurrency": 1,
             "input_tokens": 512, "output_tokens": 256, "metric": "request_output_tok_s", "measured": 100.0}
    result = vc.predict(point)
    assert result.predicted is not None and 10 < result.predicted < 1000
    decode = vc.predict({**point, "metric": "decode_tok_s"})
    assert result.predicted < decode.predicted          # the request includes its prefill


def _flagged(**flags) -> dict:
    return {**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", **flags}


@pytest.mark.parametrize("flags, message", [
    ({"memory_share": 1.5}, "memory_share must be float"),
    ({"memory_share": 0}, "memory_share must be float"),
    ({"cuda_graphs": "no"}, "cuda_graphs must be bool"),
    ({"max_num_seqs": 2.5}, "max_num_seqs must be int"),
    ({"chunked_prefill": True}, "chunked_prefill must be int"),
    ({"draft_tokens": -1}, "draft_tokens must be int"),
    ({"nvlink": 1}, "nvlink must be bool"),
    ({"kv_cache_dtype": " "}, "kv_cache_dtype must be str"),
])
def test_a_serving_condition_of_the_wrong_type_is_one_line_bad_input(tmp_path, flags, message):
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [_flagged(**flags)]}))
    with pytest.raises(BadInput, match=message):
        vc.load_points(f)


def test_the_serving_conditions_a_source_states_reach_plan_and_the_rest_stay_engine_defaults():
    base = {"tp": 2, "concurrency": 8, "input_tokens": 300}
    plain = vc.serving_overrides(base)
    assert (plain.tp, plain.max_batch, plain.prompt_tokens, plain.kv_cache_dtype) == (2, 8, 300, "auto")
    assert plain.memory_share is None and plain.cuda_graphs is None and plain.chunked_prefill is None
    stated = vc.serving_overrides({**base, "memory_share": 0.9, "max_num_seqs": 128, "cuda_graphs": False,
                                   "chunked_prefill": 8192, "draft_tokens": 0, "nvlink": False,
                                   "kv_cache_dtype": "fp8"})
    assert (stated.memory_share, stated.max_batch, stated.cuda_graphs, stated.chunked_prefill) == \
        (0.9, 128, False, 8192)
    assert (stated.draft_tokens, stated.nvlink, stated.kv_cache_dtype) == (0, False, "fp8")


def test_where_the_source_is_silent_the_engine_defaults_are_pinned_not_tuned():
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.gpu_table import get_gpu

    point = {"engine": "vllm", "gpu": "b200", "tp": 1, "concurrency": 64, "input_tokens": 2048}
    eng, gpu = load_engine_memory("vllm", None), get_gpu("b200")
    defaults = vc.engine_defaults(point)
    assert defaults == {"chunked_prefill": eng.batch_default(gpu.memory_gb, gpu.id)["chunked_prefill"],
                        "cuda_graphs": eng.cuda_graphs_default}
    pinned = vc.serving_overrides(point, defaults)
    assert (pinned.chunked_prefill, pinned.cuda_graphs) == (defaults["chunked_prefill"], defaults["cuda_graphs"])
    stated = vc.serving_overrides({**point, "chunked_prefill": 512, "cuda_graphs": not eng.cuda_graphs_default},
                                  defaults)
    assert (stated.chunked_prefill, stated.cuda_graphs) == (512, not eng.cuda_graphs_default)


def test_a_point_run_eager_is_predicted_slower_than_with_cuda_graphs():
    point = {"id": "demo", "url": "https://example.org", "quote": "q" * 20, "gpu": "rtx-5090", "engine": "vllm",
             "model": "Qwen3-8B NVFP4", "config": "demo:qwen3-8b-nvfp4", "tp": 1, "concurrency": 1,
             "input_tokens": 256, "output_tokens": 256, "metric": "decode_tok_s", "measured": 100.0}
    graphs = vc.predict({**point, "cuda_graphs": True}).predicted
    eager = vc.predict({**point, "cuda_graphs": False}).predicted
    assert graphs is not None and eager is not None and eager < graphs

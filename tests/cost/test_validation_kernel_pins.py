"""benchmarks/validate_cost.py pins the kernel the measured engine version ran where its default differs from
the rules plan encodes and an engine flag of those rules reaches the same kernel (kernel_flags()): vLLM 0.16.0
ran Nemotron-H's non-gated ReLU² experts on FlashInfer's CUTLASS MoE (its TRT-LLM MoE took no non-gated
layer then), where 0.33 runs TRT-LLM's; `--moe-backend flashinfer_cutlass` gives 0.33 the 0.16 kernel."""

from __future__ import annotations

import sys

import pytest
import yaml

from advisor.errors import BadInput
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import validate_cost as vc  # noqa: E402

PEAK = "b200-nemotron-3-nano-nvfp4-vllm-peak"


def _shipped(pid: str) -> dict:
    return next(p for p in vc.load_points(vc.POINTS) if p["id"] == pid)


@pytest.mark.parametrize("extra, message", [
    ({"moe_backend": "flashinfer_cutlass"}, "moe_backend needs moe_backend_why"),
    ({"moe_backend": "flashinfer_cutlass", "moe_backend_why": " "}, "moe_backend needs moe_backend_why"),
    ({"moe_backend": 3, "moe_backend_why": "vllm 0.16 oracle/nvfp4.py:117-123"}, "moe_backend must be str"),
])
def test_a_pinned_kernel_must_be_a_name_and_say_why(tmp_path, extra, message):
    p = {**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", **extra}
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [p]}))
    with pytest.raises(BadInput, match=message):
        vc.load_points(f)


@pytest.mark.parametrize("pid", [PEAK, "b200x2-nemotron-3-nano-fp8-vllm-peak"])
def test_the_pinned_kernel_reaches_the_kernel_path_plan_costs(pid):
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain

    point = _shipped(pid)
    overrides = vc.serving_overrides(point, vc.engine_defaults(point))
    assert vc.install_options({k: v for k, v in point.items() if k != "moe_backend"}, overrides) is None
    options = vc.install_options(point, overrides)
    assert options.flag("moe_backend") == "flashinfer_cutlass"
    assert (options.tp, options.kv_cache_dtype) == (overrides.tp, overrides.kv_cache_dtype)
    exp = explain(inspect_checkpoint(vc.checkpoint_path(point["config"])), get_gpu(point["gpu"]),
                  gpus=int(point["tp"]), engine="vllm", options=options)
    experts = [d for d in exp.decisions if d.layer_class == "moe_experts"]
    assert experts and all(d.kernel == "FLASHINFER_CUTLASS (FlashInferExperts)" and d.runs for d in experts)


def test_a_pinned_kernel_changes_the_prediction():
    """FlashInfer's CUTLASS NVFP4 MoE is measured at about half TRT-LLM's streaming rate on the B200
    (vLLM 0.24 tables): the NVFP4 TP 1 peak is predicted slower with the kernel 0.16 ran."""
    point = _shipped(PEAK)
    pinned = vc.predict(point).predicted
    default = vc.predict({k: v for k, v in point.items() if k not in ("moe_backend", "moe_backend_why")}).predicted
    assert pinned is not None and default is not None and pinned < 0.9 * default


def test_the_vllm_0_16_nemotron_h_points_pin_the_moe_kernel_0_16_ran():
    points = [p for p in vc.load_points(vc.POINTS) if p["engine"] == "vllm"
              and str(p.get("engine_version", "")).startswith("0.16")
              and p["config"].startswith("nemotron-3-nano")]
    assert len(points) == 4
    for p in points:
        assert p["moe_backend"] == "flashinfer_cutlass" and "@0.16.0" in p["moe_backend_why"]
        assert not p.get("set_apart")


def test_a_pinned_kernel_must_be_the_points_engines_flag(tmp_path):
    """vLLM's --moe-backend reaches no SGLang rule (and --moe-runner-backend no vLLM one): such a pin would be
    silently ignored, so the loader refuses it."""
    p = {**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", "engine": "sglang",
         "moe_backend": "flashinfer_cutlass", "moe_backend_why": "sglang 0.5.8.post1 server_args.py:1416-1436"}
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [p]}))
    with pytest.raises(BadInput, match="moe_backend is vllm's flag"):
        vc.load_points(f)


@pytest.mark.parametrize("pid, flag, kernel", [
    ("b200-nemotron-3-nano-fp8-sglang-c256", "flashinfer_cutlass", "flashinfer_cutlass (FP8 MoE)"),
    ("b200-nemotron-3-nano-fp8-sglang-c1", "flashinfer_cutlass", "flashinfer_cutlass (FP8 MoE)"),
    ("h200x4-nemotron-3-super-bf16-sglang-c256", "triton", "triton fused_moe"),
])
def test_the_sglang_pin_reaches_the_kernel_the_older_sglang_ran(pid, flag, kernel):
    """SGLang 0.5.6.post2-0.5.8.post1 forced flashinfer_cutlass on ModelOpt Nemotron-H, 0.5.9/0.5.10 left BF16 on
    Triton; 0.5.23 chooses TRT-LLM (sm_100) / FlashInfer CUTLASS BF16 (sm_90) only under auto."""
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.options import InstallOptions

    point = _shipped(pid)
    assert point["moe_runner_backend"] == flag and not point.get("set_apart")
    overrides = vc.serving_overrides(point, vc.engine_defaults(point))
    options = vc.install_options(point, overrides)
    assert options.flag("moe_runner_backend") == flag
    ckpt, gpu = inspect_checkpoint(vc.checkpoint_path(point["config"])), get_gpu(point["gpu"])

    def experts(opts):
        exp = explain(ckpt, gpu, gpus=int(point["tp"]), engine="sglang", options=opts)
        return {(d.kernel, d.runs) for d in exp.decisions if d.layer_class == "moe_experts"}

    assert experts(options) == {(kernel, True)}
    auto = InstallOptions(kv_cache_dtype=overrides.kv_cache_dtype, tp=overrides.tp)
    assert kernel not in {k for k, _ in experts(auto)}          # 0.5.23's auto chooses another kernel


def test_the_bf16_nano_cookbook_row_stays_set_apart():
    """Its December nightly ran Triton with default tiles; 0.5.23 under --moe-runner-backend triton would load
    a tuned B200 config, and no measured table has Triton at this shape: no pin reaches what ran."""
    point = _shipped("b200-nemotron-3-nano-bf16-sglang-c256")
    assert point.get("set_apart") and "moe_runner_backend" not in point

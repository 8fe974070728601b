"""vLLM's config-loading stage (issue 18): the file it reads, the method it resolves (normaliser, per-model
rewrites), model-wide refusals, and what explain, plan and launch make of them. Real configs from the
checkpoint corpus; vLLM's own answers for the same configs are checked in tests/conformance/vllm/."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checkpoint"))
from corpus_files import real_configs_dir, require  # noqa: E402  (real configs from their PyPI package)

DATA = require(real_configs_dir)
NO_FI = InstallOptions(flashinfer=False)


def _folder(tmp_path: Path, name: str, hf_quant_edit=None) -> str:
    d = tmp_path / name
    d.mkdir(parents=True)
    shutil.copy(DATA / f"{name}_config.json", d / "config.json")
    hq = DATA / f"{name}_hf_quant_config.json"
    if hq.exists():
        data = json.loads(hq.read_text())
        (d / "hf_quant_config.json").write_text(json.dumps(hf_quant_edit(data) if hf_quant_edit else data))
    return str(d)


def _explain(folder: str, gpu: str, options: InstallOptions = InstallOptions()):
    return explain(inspect_checkpoint(folder), get_gpu(gpu), engine="vllm", options=options)


def _by_role(exp, role):
    return [d for d in exp.decisions if role in d.roles]


# ---------------------------------------------------------------- point 1: ModelOpt's flat config.json layout

@pytest.mark.parametrize("gpu", ["t4", "h100-sxm"])
def test_flat_modelopt_config_is_built_unquantized(tmp_path, gpu):
    folder = _folder(tmp_path, "Qwen--Qwen3-32B-FP8-Static-PerTensor")
    info = inspect_checkpoint(folder)
    assert info.label == "W8A8-FP8" and info.producer == "modelopt"      # the checkpoint is FP8 ...
    exp = explain(info, get_gpu(gpu), engine="vllm")
    load = exp.load
    assert (load.config_file, load.method, load.outcome) == ("config.json", None, "unquantized")  # ... vLLM misses it
    assert any("flat ModelOpt layout" in s and "hf_quant_config.json is never opened" in s for s in load.steps)
    assert not load.refused            # no "refused below sm_80": vLLM raises nothing at config time
    dense = _by_role(exp, "attn_qkv")[0]
    assert dense.checkpoint_scheme == "W8A8-FP8" and dense.effective_scheme == "BF16"       # both views shown
    assert dense.kernel == "UnquantizedLinearMethod (cuBLAS)" and not dense.runs
    assert "weight_scale" in load.meaning and not exp.runs
    assert "does not recognise" in exp.summary


# ---------------------------------------------------------------- point 2: hf_quant_config.json without producer

def test_hf_quant_config_without_producer_is_not_modelopt(tmp_path):
    exp = _explain(_folder(tmp_path, "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"), "h100-sxm")
    assert (exp.load.config_file, exp.load.method, exp.load.outcome) == ("hf_quant_config.json", None, "unquantized")
    assert any("without a producer block" in s for s in exp.load.steps)
    assert {d.kernel for d in exp.decisions if d.layer_class == "dense_linear"} == {"UnquantizedLinearMethod (cuBLAS)"}


def test_the_same_file_with_a_producer_block_loads_as_modelopt(tmp_path):
    with_producer = _folder(tmp_path, "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
                            lambda d: {**d, "producer": {"name": "modelopt", "version": "0.31.0"}})
    exp = _explain(with_producer, "h100-sxm")
    assert (exp.load.method, exp.load.config_class, exp.load.outcome) == ("modelopt", "ModelOptFp8Config", "loads")
    assert any(d.kernel == "CutlassFP8ScaledMMLinearKernel" for d in exp.decisions)


# ---------------------------------------------------------------- point 3: per-model rewrites

def test_deepseek_v4_experts_are_mxfp4_not_block_fp8(tmp_path):
    folder = _folder(tmp_path, "deepseek-ai--DeepSeek-V4-Flash")
    h100 = _explain(folder, "h100-sxm", NO_FI)
    assert h100.load.method == "deepseek_v4_fp8" and any("DeepSeek-V4 rewrite" in s for s in h100.load.steps)
    experts = _by_role(h100, "expert")[0]
    assert experts.kernel.startswith("HUMMING") and experts.effective_scheme == "W4A16-MXFP4"
    b200 = _by_role(_explain(folder, "b200"), "expert")[0]
    assert b200.kernel == "FLASHINFER_TRTLLM_MXFP4_MXFP8 (TrtLlmMxfp4ExpertsModular)"
    assert b200.effective_scheme == "W4A8-FP8" and b200.activation_dtype == "mxfp8"
    # the attention/shared linears stay block FP8 under the rewritten method
    assert _by_role(h100, "attn_qkv")[0].kernel == "FlashInferFp8DeepGEMMDynamicBlockScaledKernel" or \
        _by_role(h100, "attn_qkv")[0].kernel == "DeepGemmFp8BlockScaledMMKernel"


def test_kimi_k3_becomes_mxfp4_and_refuses_turing(tmp_path):
    folder = _folder(tmp_path, "moonshotai--Kimi-K3")
    t4 = _explain(folder, "t4")
    assert t4.load.refused and t4.load.method == "mxfp4" and t4.load.config_class == "Mxfp4Config"
    assert t4.load.error == ("The quantization method mxfp4 is not supported for the current GPU. "
                             "Minimum capability: 80. Current capability: 75.")
    assert not t4.runs and all(d.kernel is None and not d.runs for d in t4.decisions)  # no layer listed as running
    assert "does not start" in t4.summary and "mxfp4" in t4.summary
    b200 = _explain(folder, "b200")
    experts = _by_role(b200, "expert")[0]
    # not compressed-tensors' method
    assert b200.load.method == "mxfp4" and not experts.kernel.startswith("VLLM_CUTLASS")
    assert experts.kernel == "FLASHINFER_TRTLLM_MXFP4_MXFP8 (TrtLlmMxfp4ExpertsMonolithic)"


def test_gpt_oss_resolves_gpt_oss_mxfp4(tmp_path):
    exp = _explain(_folder(tmp_path, "openai--gpt-oss-20b"), "h100-sxm")
    assert (exp.load.method, exp.load.config_class) == ("gpt_oss_mxfp4", "GptOssMxfp4Config")
    assert _by_role(exp, "expert")[0].kernel == "TRITON (OAITritonMxfp4ExpertsMonolithic)"      # point 5


# ---------------------------------------------------------------- point 4: a model-wide refusal

def test_min_capability_refusal_is_model_level(tmp_path):
    exp = _explain(_folder(tmp_path, "nvidia--Llama-3.1-70B-Instruct-FP8"), "t4")
    assert exp.load.refused and exp.load.method == "modelopt"
    assert exp.load.error.startswith("The quantization method modelopt is not supported for the current GPU. "
                                     "Minimum capability: 80. Current capability: 75.")
    assert all(not d.runs and d.kernel is None for d in exp.decisions)
    assert all(d.error == exp.load.error for d in exp.decisions)
    assert _explain(_folder(tmp_path / "a100", "nvidia--Llama-3.1-70B-Instruct-FP8"), "a100-80gb-sxm").load.runs


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=120)


def test_refused_model_plan_is_na_and_dry_run_refuses(tmp_path):
    folder = _folder(tmp_path, "moonshotai--Kimi-K3")
    ex = _cli("explain", folder, "--gpu", "t4", "--engine", "vllm", "--json")
    assert ex.returncode == 4
    assert json.loads(ex.stdout)["explanation"]["load"]["outcome"] == "refused"
    plan = _cli("plan", folder, "--gpu", "t4", "--engine", "vllm", "--json")
    doc = json.loads(plan.stdout)
    assert "mxfp4 is not supported for the current GPU" in json.dumps(doc)
    assert doc.get("plan", doc).get("decode", {}).get("tokens_per_s") in (None, {}) or "N/A" in plan.stdout \
        or "null" in plan.stdout
    dry = _cli("launch", folder, "--engine", "vllm", "--gpu", "t4", "--dry-run")
    assert dry.returncode != 0 and "will not run" in (dry.stdout + dry.stderr)


# ---------------------------------------------------------------- point 6: what a default install holds

def test_default_install_has_b12x_with_flashinfer(tmp_path):
    from advisor.kernel_path.default_install import resolve_install
    from advisor.kernel_path.rule_files import load_rules

    rules = load_rules("vllm")[0]
    assert resolve_install(rules, InstallOptions()).b12x is True             # the FlashInfer wheel ships b12x
    assert resolve_install(rules, InstallOptions(flashinfer=False)).b12x is False
    assert resolve_install(rules, InstallOptions(flashinfer=False, b12x=True)).b12x is True
    out = _cli("explain", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-5090", "--engine", "vllm", "--json")
    doc = json.loads(out.stdout)
    assert doc["install"]["facts"]["b12x"] is True
    assert "pip install vllm==0.33.0" in doc["install"]["default_pip_install"]
    assert "b12x" in doc["install"]["default_pip_install"]

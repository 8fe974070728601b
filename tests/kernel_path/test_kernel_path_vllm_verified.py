"""vLLM 0.33 rules checked line by line against the engine and its pinned libraries.

What each case asserts was read in vllm 0.33.0 (wheel), flashinfer-python 0.7.2.post1 and
humming-kernels 0.1.19 (the versions the wheel pins), or produced by compiling Triton kernels to
PTX (the last tests here rerun that compile on the CPU). The citations live in
profiles/engines/vllm-0.33.yaml; the test below pins their format.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_files import load_rule_file
from advisor.kernel_path.rule_versions import engines_dir
from advisor.kernel_path.select import resolve_mma
from advisor.yamlio import load_yaml_file

from kernel_path_builders import checkpoint, gpu
from kernel_path_ckpt import write_gpt_oss

VLLM_FILE = engines_dir() / "vllm-0.33.yaml"
D = InstallOptions()

# ------------------------------------------------------------------ citation format

# path:line(-line)?(, line(-line)?)*@version; several joined with "; ".
_VERSIONS = {
    "0.33.0": re.compile(r"^(vllm|csrc|cmake|requirements|docs)/[\w./-]+\.\w+$|^(CMakeLists\.txt|setup\.py)$"),
    # documented non-vLLM forms (profiles/engines/vllm-0.33.yaml header): package-relative paths
    "flashinfer-python-0.7.2.post1": re.compile(r"^flashinfer/[\w./-]+\.\w+$"),
    "humming-kernels-0.1.19": re.compile(r"^humming/[\w./-]+\.\w+$"),
}
_CITE = re.compile(r"^(?P<path>[\w./-]+):(?P<lines>\d+(?:-\d+)?(?:, \d+(?:-\d+)?)*)@(?P<ver>[\w.-]+)$")


def _sources(node, where="file"):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "source":
                yield where, v
            else:
                yield from _sources(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("id") or v.get("kernel") if isinstance(v, dict) else None
            yield from _sources(v, f"{where}[{label or i}]")


def _bad_citation(text: str) -> str | None:
    for cite in text.split("; "):
        m = _CITE.match(cite)
        if not m:
            return f"{cite!r} is not path:line(-line)?@version"
        if m["ver"] not in _VERSIONS:
            return f"{cite!r}: unknown version {m['ver']!r}"
        if not _VERSIONS[m["ver"]].match(m["path"]):
            return f"{cite!r}: path does not fit the {m['ver']} form"
        for rng in m["lines"].split(", "):
            lo, _, hi = rng.partition("-")
            if hi and int(hi) < int(lo):
                return f"{cite!r}: range {rng} runs backwards"
    return None


def test_every_vllm_source_is_a_line_citation():
    raw = load_yaml_file(VLLM_FILE, "rule file")
    found = list(_sources(raw))
    assert len(found) > 100
    bad = [(where, why) for where, text in found if (why := _bad_citation(text))]
    assert not bad, bad[:5]


@pytest.mark.parametrize("text, ok", [
    ("vllm/model_executor/layers/linear.py:166-242@0.33.0", True),
    ("vllm/a.py:1-2, 7@0.33.0; csrc/b.cu:3@0.33.0", True),
    ("flashinfer/gemm/gemm_base.py:7913-7935@flashinfer-python-0.7.2.post1", True),
    ("vllm/model_executor/layers/linear.py@0.33.0", False),                 # no line
    ("vllm/model_executor/layers/linear.py (UnquantizedLinearMethod)@0.33.0", False),
    ("gemm/gemm_base.py:10@flashinfer-python-0.7.2.post1", False),          # not package-relative
    ("vllm/a.py:9-3@0.33.0", False),
    ("vllm/a.py:3@0.34.0", False),
])
def test_citation_checker_rejects_what_it_should(text, ok):
    assert (_bad_citation(text) is None) is ok


def test_no_bare_inference_markers_left():
    text = VLLM_FILE.read_text()
    assert "[inf]" not in text and "[inf " not in text and "[inf-" not in text


# ------------------------------------------------------------------ dense / MoE / KV table

NO_FI = InstallOptions(flashinfer=False)


def _env(**kw) -> InstallOptions:
    return InstallOptions(env=tuple(kw.items()))


def _flag(name: str, value: str, **kw) -> InstallOptions:
    return InstallOptions(flags=((name, value),), **kw)


# (preset, moe, gpu, options, layer_class, kernel, effective, mma, act, extra)
# extra: "error" substring (the layer does not run), "warn" substring, "rejected" kernel that must be
# among the rejections with a reason.
CASES = [
    # Humming NVFP4 on Hopper is W4A16: FP8 activations need weight groups >= 32 (NVFP4: 16)
    ("nvfp4-w4a4", False, "h100", D, "dense_linear", "HummingNvFp4LinearKernel", "W4A16-NVFP4",
     "wgmma_bf16", "bf16", {"rejected": "FlashInferCuteDslNvFp4LinearKernel"}),
    ("nvfp4-a16", False, "h100", D, "dense_linear", "HummingNvFp4LinearKernel", "W4A16-NVFP4",
     "wgmma_bf16", "bf16", {}),
    ("nvfp4-w4a4", True, "h100", D, "moe_experts", "HUMMING (HummingIndexedExperts)", "W4A16-NVFP4",
     "wgmma_bf16", "bf16", {"rejected": "FLASHINFER_TRTLLM (TrtLlmNvFp4ExpertsMonolithic)"}),
    # FlashInfer FP4 GEMMs: CuTe-DSL tcgen05 on sm_10x, CUTLASS Sm100 / Sm120 block-scaled
    ("nvfp4-w4a4", False, "b200", D, "dense_linear", "FlashInferCuteDslNvFp4LinearKernel", "W4A4-NVFP4",
     "tcgen05_fp4_block_scaled", "nvfp4", {}),
    ("nvfp4-w4a4", False, "rtx-5090", D, "dense_linear", "FlashInferCutlassNvFp4LinearKernel", "W4A4-NVFP4",
     "mma_sync_fp4_block_scaled", "nvfp4", {"rejected": "FlashInferCuteDslNvFp4LinearKernel"}),
    ("nvfp4-w4a4", False, "thor", D, "dense_linear", "FlashInferCutlassNvFp4LinearKernel", "W4A4-NVFP4",
     "tcgen05_fp4_block_scaled", "nvfp4", {}),
    ("nvfp4-w4a4", True, "b200", D, "moe_experts", "FLASHINFER_TRTLLM (TrtLlmNvFp4ExpertsMonolithic)", "W4A4-NVFP4",
     "tcgen05_fp4_block_scaled", "nvfp4", {}),
    # TRT-LLM FP4 GEMM: FlashInfer declares it for sm_100/103/107 only; vLLM does not check
    ("nvfp4-w4a4", False, "b300", _flag("linear_backend", "flashinfer_trtllm"), "dense_linear",
     "FlashInferTrtllmNvFp4LinearKernel", "W4A4-NVFP4", "tcgen05_fp4_block_scaled", "nvfp4", {}),
    ("nvfp4-w4a4", False, "rtx-5090", _flag("linear_backend", "flashinfer_trtllm"), "dense_linear",
     "FlashInferTrtllmNvFp4LinearKernel", "W4A4-NVFP4", "none", "nvfp4",
     {"error": "does not support backend 'trtllm' with capability 120"}),
    # block FP8 on Hopper: FlashInfer swapAB (inline wgmma e4m3) / DeepGEMM
    ("fp8-block", False, "h100", D, "dense_linear", "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
     "W8A8-FP8", "wgmma_e4m3", "fp8_e4m3", {}),
    # Humming weight-only kernels: 16-bit activations, UMMA kind::f16 on sm_10x/11x
    ("fp8-w8a16", False, "b200", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8",
     "tcgen05_bf16", "bf16", {}),
    ("fp8-w8a16", False, "rtx-5090", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8",
     "hmma_bf16", "bf16", {}),
    ("fp8-w8a16", False, "h100", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8",
     "wgmma_bf16", "bf16", {}),
    ("fp8-w8a16", False, "t4", D, "dense_linear", "HummingFP8ScaledMMLinearKernel", "W8A16-FP8",
     "hmma_f16", "fp16", {}),
    ("int8-w8a8", False, "rtx-3090", _flag("linear_backend", "humming"), "dense_linear",
     "HummingInt8ScaledMMLinearKernel", "W8A16-INT8", "hmma_bf16", "bf16", {}),
    ("int8-w8a8", False, "b200", _flag("linear_backend", "humming"), "dense_linear",
     "HummingInt8ScaledMMLinearKernel", "W8A16-INT8", "tcgen05_bf16", "bf16", {}),
    # Triton INT8 (what VLLM_DISABLED_KERNELS=CutlassInt8... falls to on Blackwell)
    ("int8-w8a8", False, "b200", _env(VLLM_DISABLED_KERNELS="CutlassInt8ScaledMMLinearKernel"), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", "tcgen05_int8", "int8", {}),
    ("int8-w8a8", False, "b300", _env(VLLM_DISABLED_KERNELS="CutlassInt8ScaledMMLinearKernel"), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", "imma_int8", "int8", {}),
    ("int8-w8a8", False, "rtx-5090", _env(VLLM_DISABLED_KERNELS="CutlassInt8ScaledMMLinearKernel"), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", "imma_int8", "int8", {}),
    ("int8-w8a8", False, "h100", _flag("linear_backend", "triton"), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", "wgmma_int8", "int8", {}),
    ("int8-w8a8", False, "t4", _flag("linear_backend", "triton"), "dense_linear",
     "TritonInt8ScaledMMLinearKernel", "W8A8-INT8", "none", "int8", {"error": "PassManager::run failed"}),
    ("int8-w8a8", True, "t4", D, "moe_experts", "TRITON (TritonExperts int8)", "W8A8-INT8", "none", "int8",
     {"error": "PassManager::run failed"}),
    ("int8-w8a8", True, "rtx-3090", D, "moe_experts", "TRITON (TritonExperts int8)", "W8A8-INT8", "imma_int8",
     "int8", {}),
    # MXFP4 W4A4 dense on Hopper: Humming falls back to FP8 activations (groups of 32 allow it)
    ("mxfp4-w4a4", False, "h100", D, "dense_linear", "HummingMxFp4LinearKernel", "W4A8-FP8", "wgmma_e4m3",
     "fp8_e4m3", {"rejected": "FlashInferMxFp4LinearKernel"}),
    ("mxfp4-w4a4", False, "h100", InstallOptions(humming=False), "dense_linear", "MarlinMxFp4LinearKernel",
     "W4A16-MXFP4", "hmma_bf16", "bf16", {}),
    # compressed-tensors MXFP4 experts: vLLM CUTLASS (sm_10x/11x, quantizes activations to MXFP4) or Marlin
    ("mxfp4-w4a4", True, "b200", D, "moe_experts", "VLLM_CUTLASS (CutlassExpertsMxfp4)", "W4A4-MXFP4",
     "tcgen05_fp4_block_scaled", "mxfp4", {}),
    ("mxfp4-w4a4", True, "thor", D, "moe_experts", "VLLM_CUTLASS (CutlassExpertsMxfp4)", "W4A4-MXFP4",
     "tcgen05_fp4_block_scaled", "mxfp4", {}),
    ("mxfp4-w4a4", True, "rtx-5090", D, "moe_experts", "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16",
     "bf16", {"warn": "native support for FP4", "rejected": "VLLM_CUTLASS (CutlassExpertsMxfp4)"}),
    ("mxfp4-w4a4", True, "h100", D, "moe_experts", "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16",
     "bf16", {}),
    # W4A8 MoE through Humming: FP8 kept; sm_10x/11x run FP8 mma.sync and vLLM says it is slow
    ("w4a8-fp8", True, "b200", D, "moe_experts", "HUMMING (HummingIndexedExperts, FP8 mma.sync on sm_10x/11x)",
     "W4A8-FP8", "qmma_e4m3", "fp8_e4m3", {"warn": "activation is slow on SM100"}),
    ("w4a8-fp8", True, "rtx-4090", D, "moe_experts", "HUMMING (HummingIndexedExperts)", "W4A8-FP8", "qmma_e4m3",
     "fp8_e4m3", {"rejected": "CUTLASS (CutlassExpertsW4A8Fp8)"}),
    ("w4a8-fp8", True, "h100", D, "moe_experts", "CUTLASS (CutlassExpertsW4A8Fp8)", "W4A8-FP8", "wgmma_e4m3",
     "fp8_e4m3", {}),
    # W4A8-FP8 dense: compressed-tensors has a scheme on Hopper only
    ("w4a8-fp8", False, "rtx-4090", D, "dense_linear", None, "W4A8-FP8", "none", "bf16",
     {"error": "No compressed-tensors compatible scheme"}),
]


def _decision(exp, cls, scheme):
    ds = [d for d in exp.decisions if d.layer_class == cls]
    assert ds, f"no {cls} decision"
    return next((d for d in ds if d.checkpoint_scheme == scheme), ds[0])


@pytest.mark.parametrize("preset, moe, g, opts, cls, kernel, effective, mma, act, extra", CASES,
                         ids=[f"{c[0]}-{'moe' if c[1] else 'dense'}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_vllm_verified_choice(preset, moe, g, opts, cls, kernel, effective, mma, act, extra):
    ck = checkpoint(preset, moe=moe)
    d = _decision(explain(ck, gpu(g), engine="vllm", options=opts), cls, ck.modules[-1].scheme)
    assert d.kernel == kernel
    assert d.effective_scheme == effective
    assert d.mma == mma
    assert d.activation_dtype == act
    assert d.runs is ("error" not in extra), d.error
    if "error" in extra:
        assert extra["error"] in d.error
    else:
        assert d.source and d.reasons
    if "warn" in extra:
        assert any(extra["warn"] in w.text for w in d.warnings), [w.text for w in d.warnings]
    if "rejected" in extra:
        assert extra["rejected"] in {r.kernel for r in d.rejected}
    assert all(r.reason.strip() for r in d.rejected)


def test_fp8_kv_on_sm10x_quantizes_the_queries_too():
    """flashinfer.py:1131-1166@0.33.0: sm_10x with an FP8 KV cache uses FP8 queries (TRT-LLM-gen)."""
    ck = checkpoint("bf16")
    d = _decision(explain(ck, gpu("b200"), options=InstallOptions(kv_cache_dtype="fp8")), "attention_kv", "")
    assert (d.kernel, d.mma, d.activation_dtype) == ("FLASHINFER", "tcgen05_e4m3", "fp8_e4m3")
    d = _decision(explain(ck, gpu("l40s"), options=InstallOptions(kv_cache_dtype="fp8")), "attention_kv", "")
    assert (d.kernel, d.activation_dtype, d.dequant) == ("FLASHINFER", "bf16", "registers")


def test_triton_attention_on_turing_has_no_tensor_core_mma():
    """triton 3.8 lowers tl.dot to FMA on sm_75 (see the PTX test below)."""
    d = _decision(explain(checkpoint("bf16"), gpu("t4")), "attention_kv", "")
    assert d.kernel == "TRITON_ATTN" and d.mma == "none" and d.runs


# ------------------------------------------------------------------ gpt-oss (mxfp4, experts only)

@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    from advisor.checkpoint.inspect import inspect_checkpoint

    ck = inspect_checkpoint(str(write_gpt_oss(tmp_path_factory.mktemp("gpt-oss-tiny"))))
    assert ck.producer == "mxfp4" and ck.arch.model_type == "gpt_oss"
    return ck


NO_TK = InstallOptions(triton_kernels=False)

# (gpu, options, kernel, effective, mma, act, error)
GPT_OSS = [
    ("a100", D, "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    ("rtx-3090", D, "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    ("rtx-4090", D, "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    ("h100", D, "TRITON (OAITritonMxfp4ExpertsMonolithic)", "W4A16-MXFP4", "wgmma_bf16", "bf16", None),
    ("b200", D, "FLASHINFER_TRTLLM_MXFP4_BF16 (TrtLlmMxfp4ExpertsMonolithic)", "W4A16-MXFP4", "tcgen05_bf16", "bf16",
     None),
    ("b300", D, "FLASHINFER_TRTLLM_MXFP4_BF16 (TrtLlmMxfp4ExpertsMonolithic)", "W4A16-MXFP4", "tcgen05_bf16", "bf16",
     None),
    ("b200", NO_FI, "TRITON (OAITritonMxfp4ExpertsMonolithic)", "W4A16-MXFP4", "tcgen05_bf16", "bf16", None),
    ("thor", D, "TRITON (OAITritonMxfp4ExpertsMonolithic)", "W4A16-MXFP4", "tcgen05_bf16", "bf16", None),
    ("rtx-5090", D, "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    ("gb10", D, "MARLIN (MarlinExperts)", "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    # Hopper without triton_kernels: FlashInfer CUTLASS mixed-input, then Humming (ahead of Marlin)
    ("h100", NO_TK, "FLASHINFER_CUTLASS_MXFP4_BF16 (FlashInferExperts)", "W4A16-MXFP4", "wgmma_bf16", "bf16", None),
    ("h100", replace(NO_TK, flashinfer=False), "HUMMING (HummingIndexedExperts)", "W4A16-MXFP4", "wgmma_bf16", "bf16",
     None),
    ("h100", replace(NO_TK, flashinfer=False, humming=False), "MARLIN (MarlinExperts)", "W4A16-MXFP4",
     "hmma_bf16", "bf16", None),
    # --moe-backend triton on consumer Blackwell reaches the OAI Triton kernel kept after Marlin
    ("rtx-5090", _flag("moe_backend", "triton"), "TRITON (OAITritonMxfp4ExpertsMonolithic, after Marlin on sm_12x)",
     "W4A16-MXFP4", "hmma_bf16", "bf16", None),
    ("a100", _flag("moe_backend", "triton"), None, "W4A16-MXFP4", "none", "bf16", "No MXFP4 MoE backend"),
    # VLLM_MARLIN_INPUT_DTYPE: fp8 gives W4A8 on sm_89/sm_12x only; int8 is refused for MXFP4
    ("rtx-4090", _env(VLLM_MARLIN_INPUT_DTYPE="fp8"), "MARLIN (MarlinExperts, W4A8-FP8)", "W4A8-FP8",
     "qmma_e4m3", "fp8_e4m3", None),
    ("rtx-5090", _env(VLLM_MARLIN_INPUT_DTYPE="fp8"), "MARLIN (MarlinExperts, W4A8-FP8)", "W4A8-FP8",
     "qmma_e4m3", "fp8_e4m3", None),
    ("a100", _env(VLLM_MARLIN_INPUT_DTYPE="fp8"), "MARLIN (MarlinExperts)", "W4A16-MXFP4", "none", "bf16",
     "Marlin W4A8-FP8 only support SM89 or SM12x"),
    ("h100", _env(VLLM_MARLIN_INPUT_DTYPE="fp8"), "TRITON (OAITritonMxfp4ExpertsMonolithic)", "W4A16-MXFP4",
     "wgmma_bf16", "bf16", None),
    ("rtx-3090", _env(VLLM_MARLIN_INPUT_DTYPE="int8"), "MARLIN (MarlinExperts, INT8 activations)", "W4A16-MXFP4",
     "none", "int8", "MXFP4 weight + INT8 activation is not supported."),
    ("t4", D, None, "W4A16-MXFP4", "none", "fp16", "Minimum capability: 80"),
]


@pytest.mark.parametrize("g, opts, kernel, effective, mma, act, error", GPT_OSS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GPT_OSS)])
def test_gpt_oss_mxfp4_experts(gpt_oss, g, opts, kernel, effective, mma, act, error):
    exp = explain(gpt_oss, gpu(g), engine="vllm", options=opts)
    d = _decision(exp, "moe_experts", "W4A16-MXFP4")
    assert d.kernel == kernel
    assert d.effective_scheme == effective
    assert (d.mma, d.activation_dtype) == (mma, act)
    assert d.runs is (error is None)
    if error:
        assert error in d.error
    assert all(r.reason.strip() for r in d.rejected)
    # the MXFP8-activation TRT-LLM variant is never picked without an explicit activation request
    mxfp8 = [r for r in d.rejected if r.kernel == "FLASHINFER_TRTLLM_MXFP4_MXFP8"]
    if mxfp8 and not opts.flags:
        assert "quantization-config" in mxfp8[0].reason


def test_gpt_oss_dense_layers_stay_bf16_on_every_arch(gpt_oss):
    """mxfp4.py:91-105@0.33.0: every LinearBase gets UnquantizedLinearMethod."""
    for g, mma in (("a100", "hmma_bf16"), ("h100", "wgmma_bf16"), ("b200", "tcgen05_bf16"), ("rtx-5090", "hmma_bf16")):
        d = _decision(explain(gpt_oss, gpu(g)), "dense_linear", "BF16")
        assert (d.kernel, d.effective_scheme, d.mma) == ("UnquantizedLinearMethod (cuBLAS)", "BF16", mma)


def test_gpt_oss_winner_notes_carry_the_log_line(gpt_oss):
    for g, backend in (("b200", "FLASHINFER_TRTLLM_MXFP4_BF16"), ("h100", "TRITON"), ("rtx-5090", "MARLIN")):
        d = _decision(explain(gpt_oss, gpu(g)), "moe_experts", "W4A16-MXFP4")
        assert any(f"Using '{backend}' Mxfp4 MoE backend." in r for r in d.reasons), d.reasons


# ------------------------------------------------------------------ Triton PTX, rerun on the CPU

_PTX_CLASS = [  # (regex on the PTX instruction, MMA class)
    (r"tcgen05\.mma\S*kind::f16", "tcgen05_bf16"), (r"tcgen05\.mma\S*kind::f8f6f4", "tcgen05_e4m3"),
    (r"tcgen05\.mma\S*kind::i8", "tcgen05_int8"), (r"wgmma\.mma_async\S*\.bf16\.bf16", "wgmma_bf16"),
    (r"wgmma\.mma_async\S*\.e4m3\.e4m3", "wgmma_e4m3"), (r"wgmma\.mma_async\S*\.s8\.s8", "wgmma_int8"),
    (r"mma\.sync\S*\.bf16\.bf16", "hmma_bf16"), (r"mma\.sync\S*\.f16\.f16", "hmma_f16"),
    (r"mma\.sync\S*\.e4m3\.e4m3", "qmma_e4m3"), (r"mma\.sync\S*\.s8\.s8", "imma_int8"),
]


def _ptx_class(ptx: str) -> str:
    for pat, cls in _PTX_CLASS:
        if re.search(pat, ptx):
            return cls
    return "none"


def _compile(kind: str, cc: int, bm: int = 64) -> str:
    """PTX from kernel_path_triton_ptx.py in a subprocess with the interpreter off."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = Path(__file__).with_name("kernel_path_triton_ptx.py")
    run = subprocess.run([sys.executable, str(script), kind, str(cc), str(bm)], env=env, capture_output=True,
                         text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError(run.stderr[-2000:])
    return run.stdout


def _yaml_mma(path_id: str, kernel: str, sm: int) -> str:
    rules = load_rule_file(VLLM_FILE)
    path = next(p for p in rules.paths if p.id == path_id)
    return resolve_mma(next(c for c in path.candidates if c.kernel == kernel), sm)


@pytest.fixture
def triton_cache(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")


@pytest.mark.parametrize("kind, sm, path_id, kernel", [
    ("fp16", 75, "attn-16bit", "TRITON_ATTN"),            # no tensor-core lowering on Turing: FMA
    ("bf16", 86, "attn-16bit", "TRITON_ATTN"),
    ("bf16", 90, "moe-bf16", "TRITON (TritonExperts)"),
    ("bf16", 100, "moe-bf16", "TRITON (TritonExperts)"),
    ("bf16", 120, "moe-bf16", "TRITON (TritonExperts)"),
    ("i8", 90, "dense-int8-w8a8", "TritonInt8ScaledMMLinearKernel"),
    ("i8", 100, "dense-int8-w8a8", "TritonInt8ScaledMMLinearKernel"),
    ("i8", 103, "dense-int8-w8a8", "TritonInt8ScaledMMLinearKernel"),
    ("bf16_x_e2m1", 90, "moe-mxfp4-gpt-oss", "TRITON (OAITritonMxfp4ExpertsMonolithic)"),
    ("bf16_x_e2m1", 100, "moe-mxfp4-gpt-oss", "TRITON (OAITritonMxfp4ExpertsMonolithic)"),
    ("bf16_x_e2m1", 120, "moe-mxfp4-gpt-oss", "TRITON (OAITritonMxfp4ExpertsMonolithic, after Marlin on sm_12x)"),
])
def test_triton_mma_class_matches_the_rules(triton_cache, kind, sm, path_id, kernel):
    ptx = _compile(kind, sm)
    assert _ptx_class(ptx) == _yaml_mma(path_id, kernel, sm)


def test_triton_int8_dot_does_not_compile_for_turing(triton_cache):
    with pytest.raises(Exception, match="PassManager::run failed"):
        _compile("i8", 75)


def test_triton_small_fp8_tiles_upcast_on_hopper(triton_cache):
    """The note on the Triton FP8 MoE candidates: decode-sized tiles run f16 mma.sync on sm_90."""
    assert _ptx_class(_compile("fp8e4nv", 90, bm=16)) == "hmma_f16"
    assert _ptx_class(_compile("fp8e4nv", 90, bm=64)) == "wgmma_e4m3"

"""`nvfp4-advisor explain` end to end: a real checkpoint written in the test, the bundled demos."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main

from kernel_path_ckpt import write_nvfp4_llama


@pytest.fixture
def ckpt(tmp_path):
    return str(write_nvfp4_llama(tmp_path / "tiny-nvfp4"))


def _json(capsys, argv):
    code = main(argv + ["--json"])
    return code, json.loads(capsys.readouterr().out)


def test_human_output_on_rtx_3090(ckpt, capsys):
    assert main(["explain", ckpt, "--gpu", "rtx-3090"]) == 0
    out = capsys.readouterr().out
    assert "On your GeForce RTX 3090 this W4A4 NVFP4 checkpoint runs weight-only" in out
    assert "MarlinNvFp4LinearKernel" in out
    assert "Rejected candidates" in out and "FlashInferCutlassNvFp4LinearKernel" in out
    assert "does not have native support for FP4" in out


def test_json_holds_the_decisions(ckpt, capsys):
    code, doc = _json(capsys, ["explain", ckpt, "--gpu", "rtx-5090", "--engine", "vllm@0.33"])
    assert code == 0
    assert doc["schema_version"] and doc["kind"] == "explain"
    exp = doc["explanation"]
    assert exp["engine"] == "vllm" and exp["gpu_id"] == "rtx-5090" and exp["runs"] is True
    dense = next(d for d in exp["decisions"] if d["layer_class"] == "dense_linear")
    assert dense["kernel"] == "FlashInferCutlassNvFp4LinearKernel"
    assert dense["mma"] == "mma_sync_fp4_block_scaled"
    assert all(r["reason"] for r in dense["rejected"])
    assert {d["layer_class"] for d in exp["decisions"]} == {"dense_linear", "attention_kv", "lm_head_embed"}


def test_install_options_change_the_answer(ckpt, capsys):
    code, doc = _json(capsys, ["explain", ckpt, "--gpu", "b200", "--without", "flashinfer-cubin"])
    assert code == 0
    dense = next(d for d in doc["explanation"]["decisions"] if d["layer_class"] == "dense_linear")
    assert dense["kernel"] == "CutlassNvFp4LinearKernel"
    assert any("FlashInfer kernels are disabled" in w["text"] for w in dense["warnings"])
    assert doc["options"]["changed_facts"] == ["flashinfer_cubin"]
    code, doc = _json(capsys, ["explain", ckpt, "--gpu", "b200", "--without", "flashinfer-cubin", "--with", "nvcc"])
    dense = next(d for d in doc["explanation"]["decisions"] if d["layer_class"] == "dense_linear")
    assert dense["kernel"] == "FlashInferCuteDslNvFp4LinearKernel"


def test_unsupported_combination_exits_4_with_the_error(ckpt, capsys):
    code, doc = _json(capsys, ["explain", ckpt, "--gpu", "t4", "--kv-cache-dtype", "fp8"])
    assert code == 4
    att = next(d for d in doc["explanation"]["decisions"] if d["layer_class"] == "attention_kv")
    assert att["runs"] is False and "Re-run with --kv-cache-dtype" in att["error"]


def test_version_fallback_is_reported(ckpt, capsys):
    code, doc = _json(capsys, ["explain", ckpt, "--gpu", "h100-sxm", "--engine", "vllm@0.40.1"])
    assert code == 0
    assert doc["explanation"]["version_note"] == "no rules for vllm 0.40.1; using 0.33 (nearest older)"


def test_all_gpus_listing(ckpt, capsys):
    from advisor.gpu_table import load_gpu_table

    code, doc = _json(capsys, ["explain", ckpt, "--all-gpus", "--engine", "sglang"])
    assert code == 0 and doc["kind"] == "explain-all-gpus"
    assert len(doc["explanations"]) == len(load_gpu_table())
    t4 = next(e for e in doc["explanations"] if e["gpu_id"] == "t4")
    assert t4["runs"] is False        # SGLang serves NVFP4 only on sm_80+
    assert main(["explain", ckpt, "--all-gpus"]) == 0
    assert "rtx-3090" in capsys.readouterr().out


@pytest.mark.parametrize("argv, code, text", [
    (["--engine", "tensorrt"], 2, "unknown engine"),
    (["--linear-backend", "bogus"], 2, "not valid"),
    (["--engine", "fastllm", "--linear-backend", "marlin"], 2, "no flag"),
    (["--engine", "vllm@0.1"], 2, "oldest rule file"),
    (["--gpu", "no-such-gpu"], 2, ""),
])
def test_bad_arguments_are_one_line_errors(ckpt, capsys, argv, code, text):
    assert main(["explain", ckpt, "--gpu", "rtx-3090"] + argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert text in err


def test_bad_dependency_name_is_a_usage_error(ckpt):
    with pytest.raises(SystemExit) as info:
        main(["explain", ckpt, "--gpu", "rtx-3090", "--with", "cuda-magic"])
    assert info.value.code == 2


def test_missing_checkpoint_is_bad_input(tmp_path, capsys):
    assert main(["explain", str(tmp_path / "nope"), "--gpu", "rtx-3090"]) == 3


def _demos():
    from advisor.checkpoint.demo import list_demos

    return list_demos()


@pytest.mark.parametrize("engine", ["vllm", "sglang", "fastllm"])
def test_every_demo_explains_on_every_engine(capsys, engine):
    demos = _demos()
    assert demos
    for name in demos:
        code, doc = _json(capsys, ["explain", f"demo:{name}", "--gpu", "rtx-4090", "--engine", engine])
        assert code in (0, 4), name
        exp = doc["explanation"]
        assert exp["summary"].startswith("On your GeForce RTX 4090"), (name, exp["summary"])
        for d in exp["decisions"]:
            assert d["reasons"] and all(r["reason"] for r in d["rejected"])
            assert (d["kernel"] is not None) == d["runs"] or d["error"]


def test_fastllm_int4_on_two_gpus_falls_to_the_cpu(capsys):
    code, doc = _json(capsys, ["explain", "demo:llama-3.1-8b-gptq-int4", "--gpu", "rtx-3090", "--gpus", "2",
                               "--engine", "fastllm"])
    assert code == 0 and doc["explanation"]["gpus"] == 2
    dense = next(d for d in doc["explanation"]["decisions"]
                 if d["layer_class"] == "dense_linear" and d["checkpoint_scheme"] == "W4A16-INT4")
    assert dense["dequant"] == "cpu" and dense["mma"] == "none"
    assert any("SIGTERM" in w["meaning"] for w in dense["warnings"])
    code, doc = _json(capsys, ["explain", "demo:llama-3.1-8b-gptq-int4", "--gpu", "rtx-3090", "--engine", "fastllm"])
    dense = next(d for d in doc["explanation"]["decisions"]
                 if d["layer_class"] == "dense_linear" and d["checkpoint_scheme"] == "W4A16-INT4")
    assert dense["kernel"] == "INT4 group Marlin (W4A16)"


def test_mixed_checkpoint_summary_leads_with_its_largest_scheme(capsys):
    """nvidia/Qwen3.6-27B-NVFP4: 59 % of quantized bytes are W4A16 NVFP4 MLPs, 41 % FP8 attention/GDN."""
    code, doc = _json(capsys, ["explain", "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090"])
    assert code == 0
    summary = doc["explanation"]["summary"]
    assert summary.startswith("On your GeForce RTX 5090 the W4A16 NVFP4 layers of this mixed checkpoint")
    assert summary.index("W4A16 NVFP4") < summary.index("W8A8 FP8")


def test_a_message_printed_once_is_counted_once(capsys):
    """Dense and MoE Marlin print the same FP4 text; vLLM logs it with warning_once."""
    code, doc = _json(capsys, ["explain", "demo:qwen3-30b-a3b-nvfp4", "--gpu", "rtx-3090"])
    assert code == 0
    texts = [w["text"] for d in doc["explanation"]["decisions"] for w in d["warnings"]]
    assert len(texts) > len(set(texts)) == 1
    assert "prints 1 warning for" in doc["explanation"]["summary"]


def test_modelopt_mixed_precision_is_not_refused_on_turing(capsys):
    """ModelOptMixedPrecisionConfig.get_min_capability() = 75 (modelopt.py:1647-1656@0.33.0): its FP8
    layers run weight-only through Marlin; only plain ModelOpt FP8 needs sm_80."""
    code, doc = _json(capsys, ["explain", "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "t4", "--kv-cache-dtype", "float16"])
    assert code == 0
    fp8 = next(d for d in doc["explanation"]["decisions"] if d["checkpoint_scheme"] == "W8A8-FP8")
    assert fp8["runs"] and fp8["kernel"] == "MarlinFP8ScaledMMLinearKernel"
    assert fp8["effective_scheme"] == "W8A16-FP8"
    assert "Minimum capability: 80" not in json.dumps(doc)


def test_sglang_mixed_precision_fp8_layers_take_marlin_on_ampere(capsys):
    """SGLang's modelopt_mixed config has the FP4 config's minimum (sm_80), not ModelOpt FP8's sm_89;
    its FP8 layers go through ModelOptFp8LinearMethod's automatic Marlin branch on sm_80-88."""
    code, doc = _json(capsys, ["explain", "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-3090", "--engine", "sglang"])
    assert code == 0
    fp8 = next(d for d in doc["explanation"]["decisions"] if d["checkpoint_scheme"] == "W8A8-FP8")
    assert fp8["runs"] and fp8["effective_scheme"] == "W8A16-FP8" and fp8["mma"] == "hmma_bf16"
    code, doc = _json(capsys, ["explain", "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "t4", "--engine", "sglang"])
    assert code == 4 and "modelopt_mixed is not supported" in json.dumps(doc)


def test_all_gpus_table_footnotes_each_failure_once(capsys):
    """Four Turing cards fail for the same reason (FP8 KV on sm_75): one footnote, not four."""
    assert main(["explain", "demo:qwen3-30b-a3b-nvfp4", "--all-gpus"]) == 0
    out = capsys.readouterr().out
    assert "Why it fails" in out and "[1] FP8 KV cache is not supported" in out
    assert "[2]" not in out
    assert out.count("fails [1]") == 4


def test_summary_ceiling_ratio_comes_from_this_gpus_peaks(capsys):
    """GeForce Blackwell runs BF16 at half rate: FP4 is 8x its BF16 peak there, 4x on a B200."""
    from advisor.cli import main

    for gpu, ratio in (("rtx-5090", "8x"), ("b200", "4x"), ("b300", "6x")):
        assert main(["explain", "demo:qwen3-8b-nvfp4", "--gpu", gpu, "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)["explanation"]["summary"]
        assert f"({ratio} the BF16 dense peak)" in summary, (gpu, summary)


def test_env_override_the_rules_never_read_is_named(capsys):
    from advisor.cli import main

    argv = ["explain", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-4090", "--json"]
    assert main(argv + ["--env", "VLLM_NOT_A_REAL_KNOB=1", "--env", "VLLM_DISABLED_KERNELS=x"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ignored_env"] == ["VLLM_NOT_A_REAL_KNOB"]       # the one the rules read is not listed
    assert main(argv[:-1] + ["--env", "VLLM_NOT_A_REAL_KNOB=1"]) == 0
    assert "VLLM_NOT_A_REAL_KNOB: not modelled" in capsys.readouterr().out
    assert main(argv + ["--env", "VLLM_DISABLED_KERNELS=x"]) == 0
    assert "ignored_env" not in json.loads(capsys.readouterr().out)


def test_install_line_names_this_engines_dependencies_only(capsys):
    from advisor.cli import main

    def install_line(engine):
        assert main(["explain", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-4090", "--engine", engine,
                     "--no-flashinfer"]) == 0
        out = capsys.readouterr().out
        return " ".join(out.split("install", 1)[1].split("\n\n", 1)[0].split())

    fastllm, vllm = install_line("fastllm"), install_line("vllm")
    assert "Humming" not in fastllm and "FlashInfer" not in fastllm and "CUTLASS FP8" in fastllm
    assert "with Humming" in vllm and "without FlashInfer" in vllm and "you set: without flashinfer" in vllm


def test_marlin_8bit_activations_crash_nvfp4_moe_but_not_dense(capsys):
    """marlin_utils_fp4.py:347-349@0.33.0 raises for NVFP4 experts; dense NVFP4 never reads the variable."""
    from advisor.cli import main

    def decisions(ckpt):
        main(["explain", ckpt, "--gpu", "rtx-4090", "--env", "VLLM_MARLIN_INPUT_DTYPE=fp8", "--json"])
        return {d["layer_class"]: d for d in json.loads(capsys.readouterr().out)["explanation"]["decisions"]}

    moe = decisions("demo:qwen3-30b-a3b-nvfp4")["moe_experts"]
    assert not moe["runs"] and "NVFP4 weight + INT8/FP8 activation is not supported." in moe["error"]
    assert decisions("demo:qwen3-8b-nvfp4")["dense_linear"]["runs"]


def test_a_16bit_kv_cache_has_nothing_to_dequantize(capsys):
    from advisor.cli import main

    for engine in ("fastllm", "vllm"):
        main(["explain", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-4090", "--engine", engine,
              "--kv-cache-dtype", "float16" if engine == "fastllm" else "bfloat16", "--json"])
        kv = [d for d in json.loads(capsys.readouterr().out)["explanation"]["decisions"]
              if d["layer_class"] == "attention_kv"][0]
        assert kv["kv_cache_dtype"] in ("fp16", "bf16") and kv["dequant"] == "none", (engine, kv)

"""Log signatures, kernel check, verdict ranking, saved profiles and the plan adapter."""

from __future__ import annotations

import json

import pytest

from advisor.errors import BadInput
from advisor.kernel_path.model import Explanation, LayerDecision
from launchers import kernel_check, profiles, verdict, watchdog
from launchers.engines import build_command
from launchers.settings import ServeSettings, Speculative, predicted_kv_tokens, settings_from_plan
from launchers.signatures import diagnose

# Real engine log lines, kept whole (E501 waived for them below).
# ruff: noqa: E501
VLLM_3090_LOG = """\
(EngineCore pid=187) INFO 05-01 19:55:54 [cuda.py:368] Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', 'TRITON_ATTN'].
(EngineCore pid=187) WARNING 05-01 19:55:56 [marlin.py:34] Your GPU does not have native support for FP4 computation but FP4 quantization is being used. Weight-only FP4 compression will be used leveraging the Marlin kernel. This may degrade performance for compute-heavy workloads.
(EngineCore pid=187) INFO 05-01 19:55:56 [nvfp4.py:301] Using 'MARLIN' NvFp4 MoE backend out of potential backends: ['FLASHINFER_TRTLLM', 'MARLIN', 'EMULATION'].
(EngineCore pid=187) INFO 05-01 19:56:40 [gpu_worker.py:359] Available KV cache memory: 9.87 GiB
(EngineCore pid=187) INFO 05-01 19:56:40 [kv_cache_utils.py:1286] GPU KV cache size: 107,776 tokens
(APIServer pid=100) INFO:     Application startup complete.
""".splitlines()


def decision(cls, kernel):
    return LayerDecision(layer_class=cls, roles=(), checkpoint_scheme="W4A4-NVFP4", effective_scheme="W4A16-NVFP4",
                         kernel=kernel, mma="hmma_bf16", activation_dtype="bf16", dequant="registers", runs=True,
                         reasons=("test",))


def explanation(*decisions):
    return Explanation(engine="vllm", engine_version="0.33", requested_version=None, version_note=None,
                       gpu_id="rtx-3090", gpus=1, checkpoint_label="NVFP4", decisions=decisions, summary="", runs=True)


def test_kernel_check_against_explain_and_plan():
    exp = explanation(decision("dense_linear", "UnquantizedLinearMethod (cuBLAS)"),
                      decision("dense_linear", "MarlinNvFp4LinearKernel"),
                      decision("moe_experts", "MARLIN (MarlinExperts)"),
                      decision("attention_kv", "FLASH_ATTN"), decision("lm_head_embed", "UnquantizedEmbeddingMethod"))
    kc = kernel_check.check(VLLM_3090_LOG, exp, predicted_kv_tokens=100_000)
    marks = [(r.layer_class, r.predicted.split(" ")[0], r.mark) for r in kc.rows]
    assert marks == [("dense_linear", "UnquantizedLinearMethod", "?"), ("dense_linear", "MarlinNvFp4LinearKernel", "✓"),
                     ("moe_experts", "MARLIN", "✓"), ("attention_kv", "FLASH_ATTN", "✗"),
                     ("lm_head_embed", "UnquantizedEmbeddingMethod", "?")]
    (bad,) = kc.mismatches
    assert bad.observed == ("FLASHINFER",) and "attention backend" in bad.line
    assert kc.kv.observed_tokens == 107_776 and kc.kv.error_pct == pytest.approx(7.776)
    assert kc.observed.kv_gib == pytest.approx(9.87)


def test_kernel_check_sums_engine_cores_and_reads_sglang():
    obs = kernel_check.parse_log(["GPU KV cache size: 1,000 tokens", "GPU KV cache size: 1,500 tokens"])
    assert obs.kv_tokens == 2500
    assert kernel_check.parse_log(["max_total_num_tokens=40960, chunked_prefill_size=8192"]).kv_tokens == 40960


def test_signatures_map_to_cause_and_remedy():
    lines = ["loading", "(EngineCore) ValueError: To serve at least one request with the models's max seq len "
             "(131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (9.9 GiB)."]
    (f,) = [x for x in diagnose("vllm", lines, 1) if x.fatal]
    assert f.kind == "kv_too_small" and "--max-model-len" in f.remedy
    nccl = diagnose("vllm", ["torch.distributed.DistBackendError: NCCL error in: ../nccl.cpp:1, "
                             "unhandled cuda error"], 1)
    assert nccl[0].kind == "nccl" and "NCCL_P2P_DISABLE" in nccl[0].remedy
    fb = diagnose("vllm", VLLM_3090_LOG)
    assert [x.kind for x in fb] == ["slow_fallback", "ready"] and not fb[0].fatal
    assert diagnose("fastllm", ["bye"], 0)[0].cause.startswith("FastLLM exited with status 0")
    bad = diagnose("sglang", ["sglang serve: error: ambiguous option: --cuda-graph-max-bs could match ..."], 2)
    assert bad[0].kind == "bad_flag"


def test_verdict_ranks_evidence_first():
    exp = explanation(decision("attention_kv", "FLASH_ATTN"))
    kc = kernel_check.check(VLLM_3090_LOG, exp)
    band = verdict.Band(90, 110)
    assert verdict.judge("decode", 100, band).status == "within"
    v = verdict.judge("decode", 40, band, kernel_check=kc, watch_findings=[
        watchdog.WatchFinding("cpu_fallback", "GPU idle, CPU busy", "GPU 0 %, CPU 1.0 cores")])
    assert v.status == "below" and v.ratio == pytest.approx(0.4)
    assert [c.kind for c in v.causes][:2] == ["misdispatch", "cpu_fallback"]
    assert v.causes[-1].kind == "other"
    # nothing measured about power/thermal without telemetry: said so, ranked after the evidence
    no_tel = verdict.judge("decode", 40, band, watch_findings=[watchdog.WatchFinding("no_gpu_telemetry", "x", "y")])
    assert all(c.evidence.startswith("not checked") for c in no_tel.causes if c.kind in ("thermal", "power_clock"))


def test_watchdog_findings_from_samples():
    def s(util, cores, clock=1900, temp=60, throttle=()):
        g = watchdog.GpuSample(0, util, clock, 1950, 300, 350, temp, throttle, ())
        return watchdog.Sample(0.0, cores, (g,))
    kinds = [f.kind for f in watchdog.findings([s(0, 1.0)] * 5)]
    assert kinds == ["cpu_fallback"]
    assert [f.kind for f in watchdog.findings([s(95, 1.0)] * 5)] == []
    hot = watchdog.findings([s(95, 0.2, clock=1200, temp=89, throttle=("hw_thermal", "sw_power_cap"))] * 3)
    assert {f.kind for f in hot} == {"power_clock", "thermal"}
    assert watchdog.findings([watchdog.Sample(0.0, 1.0, ())])[0].kind == "no_gpu_telemetry"


def test_load_prediction_from_plan_json(tmp_path):
    plan = {"schema_version": "1", "kind": "plan",
            "predictions": {"decode_tok_s": 100.0, "decode_aggregate_tok_s": {"1": 100.0, "8": 640.0},
                            "kv_pool_tokens": {"fp8": 120000, "bfloat16": 60000}},
            "recommendation": {"kv_cache_dtype": "fp8", "max_batch": 8, "draft_tokens": 0, "memory_share": 0.9,
                               "chunked_prefill": 2048, "tp": 1, "cuda_graphs": True, "speculative_method": None}}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    pred = verdict.load_prediction(p)
    assert pred.decode_tps.low == pytest.approx(85) and pred.kv_tokens == 120000
    assert verdict.aggregate_for(pred, 8).high == pytest.approx(736) and verdict.aggregate_for(pred, 4) is None
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(BadInput, match="bad.json: not JSON"):
        verdict.load_prediction(bad)
    s = settings_from_plan(plan, engine="vllm", model="/m", port=9000)
    assert (s.kv_cache_dtype, s.max_batch, s.memory_share, s.chunked_prefill, s.port) == ("fp8", 8, 0.9, 2048, 9000)
    assert s.speculative is None and predicted_kv_tokens(plan) == 120000


def test_settings_from_real_recommendation():
    from advisor.cost.plan_records import Recommendation

    rec = Recommendation(kv_cache_dtype="nvfp4", max_batch=16, draft_tokens=3, memory_share=0.92, chunked_prefill=4096,
                         tp=2, cuda_graphs=False, speculative_method="qwen3_5_mtp", flags={})

    class P:
        recommendation = rec
    s = settings_from_plan(P(), engine="vllm", model="/m")
    assert s.speculative == Speculative("mtp", 3) and s.tp == 2 and not s.cuda_graphs and s.kv_cache_dtype == "nvfp4"


def test_profiles_roundtrip_without_secret(tmp_path):
    s = ServeSettings(engine="fastllm", model="/m", tp=2, api_key="sk-secret-123456789",
                      speculative=Speculative("dflash", 8, "/d"), extra_env=(("FASTLLM_X", "1"),), cuda_devices=(0, 1))
    path = profiles.save("two-2080", s, api_key_env="MY_KEY", directory=tmp_path)
    assert "sk-secret" not in path.read_text()
    loaded, key_env = profiles.load("two-2080", directory=tmp_path)
    assert key_env == "MY_KEY" and loaded.api_key is None
    assert loaded == ServeSettings(**{**s.__dict__, "api_key": None})
    assert profiles.list_names(tmp_path) == ["two-2080"]
    (tmp_path / "broken.yaml").write_text("settings: {engine: vllm, model: /m, bogus: 1}")
    with pytest.raises(BadInput, match="unknown keys"):
        profiles.load("broken", directory=tmp_path)
    with pytest.raises(BadInput, match="no launch profile"):
        profiles.load("missing", directory=tmp_path)


def test_launch_cli_dry_run_profile_roundtrip(capsys, monkeypatch):
    from advisor.cli import main

    monkeypatch.setenv("L6_KEY", "sk-cli-secret-987654321")
    rc = main(["launch", "/models/x", "--engine", "sglang", "--max-batch", "8", "--api-key-env", "L6_KEY",
               "--dry-run", "--save-profile", "sg", "--json"])
    first = json.loads(capsys.readouterr().out)
    assert rc == 0 and "sk-cli-secret" not in json.dumps(first)
    assert main(["launch", "--profile", "sg", "--dry-run", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["command"]["argv"] == first["command"]["argv"]
    assert main(["launch", "--profile", "nope", "--dry-run"]) == 3
    monkeypatch.delenv("L6_KEY")               # the profile names the variable; say so when it is unset
    assert main(["launch", "--profile", "sg", "--dry-run"]) == 2
    assert "launch profile 'sg' reads the API key from L6_KEY" in capsys.readouterr().err
    assert main(["launch", "/m", "--engine", "vllm", "--kv-cache-dtype", "q4_0", "--dry-run"]) == 4


def test_kernel_check_with_real_explain_of_demo_checkpoint():
    import argparse
    from pathlib import Path

    from advisor.commands.launch import _explanation

    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3-30b-a3b-nvfp4"
    notes = []
    s = ServeSettings(engine="vllm", model=str(demo))
    exp = _explanation(argparse.Namespace(gpu="rtx-3090", gpus=None), s, notes, "0.33.0", build_command(s))
    assert exp is not None and notes == []
    kc = kernel_check.check(VLLM_3090_LOG, exp)
    by_kernel = {r.predicted: r.status for r in kc.rows}
    assert by_kernel["MarlinNvFp4LinearKernel"] == "match"          # the Marlin FP4 warning
    assert by_kernel["MARLIN (MarlinExperts)"] == "match"
    assert by_kernel["FLASHINFER"] == "match"
    assert kc.mismatches == ()
    skipped = []
    assert _explanation(argparse.Namespace(gpu=None, gpus=None), s, skipped, None, build_command(s)) is None
    assert "pass --gpu" in skipped[0]


def test_kernel_prediction_follows_the_launched_settings(monkeypatch):
    # The demo checkpoint declares FP8 KV (FLASHINFER on an RTX 3090); launched with BF16 KV, vLLM
    # takes FLASH_ATTN: the kernel check must compare against that, not against the defaults.
    import argparse
    from pathlib import Path

    from advisor.commands.launch import _explanation
    from advisor.services.launch.command import launch_options
    from advisor.kernel_path.rule_files import load_rules

    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3-8b-nvfp4"
    ns = argparse.Namespace(gpu="rtx-3090", gpus=None)

    def attention(**kw):
        s = ServeSettings(engine="vllm", model=str(demo), **kw)
        exp = _explanation(ns, s, [], "0.33.0", build_command(s))
        (d,) = [d for d in exp.decisions if d.layer_class == "attention_kv"]
        return d.kernel

    assert attention() == "FLASHINFER"
    assert attention(kv_cache_dtype="bf16") == "FLASH_ATTN"
    # flags explain knows, as written in the command (also via --extra-arg); the engine's environment
    monkeypatch.setenv("FASTLLM_CUDA_NVFP4_MARLIN", "0")
    s = ServeSettings(engine="fastllm", model=str(demo), tp=2, api_key="sk-x-0123456789abcdef",
                      extra_args=("--moe_device=cuda",), cuda_graphs=False, kv_cache_dtype="fp8_e4m3")
    opts = launch_options(build_command(s), load_rules("fastllm", "1.9.0")[0], dict(__import__("os").environ))
    assert opts.flags == (("moe_device", "cuda"),) and opts.kv_cache_dtype == "fp8_e4m3" and opts.tp == 2
    env = dict(opts.env)
    assert env["FASTLLM_CUDA_GRAPH"] == "0" and env["FASTLLM_CUDA_NVFP4_MARLIN"] == "0"
    assert not any("API_KEY" in k for k in env)


def test_real_plan_json_drives_launch_and_verdict(tmp_path, capsys):
    from pathlib import Path

    from advisor.cli import main

    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3-30b-a3b-nvfp4"
    assert main(["plan", str(demo), "--gpu", "rtx-5090", "--engine", "vllm", "--json"]) == 0
    plan_doc = json.loads(capsys.readouterr().out)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_doc))
    rec, preds = plan_doc["recommendation"], plan_doc["predictions"]
    assert main(["launch", str(demo), "--engine", "vllm", "--plan", str(path), "--dry-run", "--json"]) == 0
    argv = json.loads(capsys.readouterr().out)["command"]["argv"]
    pairs = dict(zip(argv, argv[1:]))
    for flag, value in rec["flags"].items():              # the plan's own flag table, reproduced
        assert pairs[flag] == value, flag
    pred = verdict.load_prediction(path)
    assert pred.decode_tps.low < preds["decode_tok_s"] < pred.decode_tps.high
    assert pred.kv_tokens == preds["kv_pool_tokens"][rec["kv_cache_dtype"]]


def test_no_kv_token_comparison_for_a_shared_recurrent_state_pool():
    """vLLM's logged 'KV cache size' is concurrency x max_model_len: with per-request GDN/Mamba state
    in the same pool it is not a KV token count, so the check must not compare it (SGLang's split
    pool logs KV tokens after the state pool, which the plan predicts)."""
    plan = {"predictions": {"kv_pool_tokens": {"fp8": 120000}, "recurrent_state": {"pool": "shared"}},
            "recommendation": {"kv_cache_dtype": "fp8"}}
    assert predicted_kv_tokens(plan) is None
    plan["predictions"]["recurrent_state"]["pool"] = "split"
    assert predicted_kv_tokens(plan) == 120000
    plan["predictions"]["recurrent_state"] = None
    assert predicted_kv_tokens(plan) == 120000

"""Golden tests of generated commands (three reference setups) and the version gates."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from advisor.errors import Unsupported, UsageError
from launchers.engines import build_command
from launchers.settings import ServeSettings, Speculative
from launchers.versions import DetectedVersion


def test_golden_vllm_rtx3090_w4a4_nvfp4():
    # RTX 3090 (sm_86): a W4A4 NVFP4 checkpoint runs weight-only Marlin; BF16 KV (FA2 has no FP8 KV).
    s = ServeSettings(engine="vllm", model="/models/Qwen3-8B-NVFP4", port=8000, max_batch=16,
                      max_model_len=16384, memory_share=0.9, kv_cache_dtype="auto", checkpoint_scheme="W4A4-NVFP4")
    cmd = build_command(s, DetectedVersion("0.33.0", "test"))
    assert list(cmd.argv) == [
        "vllm", "serve", "/models/Qwen3-8B-NVFP4", "--host", "127.0.0.1", "--port", "8000",
        "--tensor-parallel-size", "1", "--max-num-seqs", "16", "--gpu-memory-utilization", "0.9",
        "--max-model-len", "16384", "--kv-cache-dtype", "auto"]
    assert cmd.env == ()
    assert cmd.version == "0.33.0" and "detected" in cmd.version_note


def test_golden_vllm_rtx5090_nvfp4_moe_nvfp4_kv_mtp():
    s = ServeSettings(engine="vllm", model="/models/Qwen3-30B-A3B-NVFP4", port=8001, max_batch=32,
                      max_model_len=32768, memory_share=0.92, kv_cache_dtype="nvfp4",
                      speculative=Speculative("mtp", 3), moe_backend="flashinfer_cutlass", cuda_devices=(0,))
    cmd = build_command(s, DetectedVersion("0.33.0", "test"))
    assert list(cmd.argv) == [
        "vllm", "serve", "/models/Qwen3-30B-A3B-NVFP4", "--host", "127.0.0.1", "--port", "8001",
        "--tensor-parallel-size", "1", "--max-num-seqs", "32", "--gpu-memory-utilization", "0.92",
        "--max-model-len", "32768", "--kv-cache-dtype", "nvfp4",
        "--speculative-config", '{"method":"mtp","num_speculative_tokens":3}',
        "--moe-backend", "flashinfer_cutlass"]
    assert cmd.env == (("CUDA_VISIBLE_DEVICES", "0"),)
    # the JSON argument survives shell quoting: paste the display line back through shlex
    env_and_argv = shlex.split(cmd.display())
    assert env_and_argv[1:] == list(cmd.argv)


def test_golden_fastllm_2x2080ti_tp2_dflash():
    s = ServeSettings(engine="fastllm", model="/models/Qwen3.5-9B-NVFP4", port=8080, tp=2, max_batch=4,
                      kv_cache_dtype="fp8_e4m3", speculative=Speculative("dflash", 8, "/models/Qwen3.5-9B-DFlash"),
                      cuda_graphs=False, cuda_devices=(0, 1))
    cmd = build_command(s, DetectedVersion("1.9.0", "test"))
    assert list(cmd.argv) == [
        "ftllm", "server", "/models/Qwen3.5-9B-NVFP4", "--host", "127.0.0.1", "--port", "8080", "--tp", "2",
        "--max_batch", "4", "--kv_cache_dtype", "fp8_e4m3",
        "--speculative_algorithm", "dflash", "--speculative_draft_model_path", "/models/Qwen3.5-9B-DFlash",
        "--speculative_num_draft_tokens", "9", "--startup-progress", "ndjson"]
    assert dict(cmd.env) == {"CUDA_VISIBLE_DEVICES": "0,1", "FASTLLM_CUDA_GRAPH": "0"}
    assert "--tokens" not in cmd.argv
    assert any("anchor" in n for n in cmd.notes)


def test_fastllm_dflash_refused_before_1_9():
    s = ServeSettings(engine="fastllm", model="/m", speculative=Speculative("dflash", 8, "/d"))
    with pytest.raises(Unsupported, match=r"fastllm 0\.1\.8\.2 has no .*dflash.*first seen in 1\.9\.0"):
        build_command(s, DetectedVersion("0.1.8.2", "test"))


def test_fastllm_tokens_refused_with_concurrency_and_fp8_warning():
    with pytest.raises(Unsupported, match="--tokens forces concurrency to 1"):
        build_command(ServeSettings(engine="fastllm", model="/m", max_batch=4, extra_args=("--tokens", "8192")))
    ok = build_command(ServeSettings(engine="fastllm", model="/m", max_batch=1, extra_args=("--tokens", "8192")))
    assert "--tokens" in ok.argv
    cmd = build_command(ServeSettings(engine="fastllm", model="/m", weight_dtype="fp8", checkpoint_scheme="BF16"))
    assert any("does not convert" in w for w in cmd.warnings)
    assert not build_command(ServeSettings(engine="fastllm", model="/m", weight_dtype="fp8",
                                           checkpoint_scheme="W8A8-FP8")).warnings


def test_sglang_speculative_needs_all_three_and_new_graph_flag():
    s = ServeSettings(engine="sglang", model="/m", max_batch=24, kv_cache_dtype="fp8_e4m3",
                      speculative=Speculative("eagle3", 3, "/draft"))
    a = list(build_command(s, DetectedVersion("0.5.23", "t")).argv)
    assert a[:2] == ["sglang", "serve"]
    assert a[a.index("--speculative-num-steps") + 1] == "3"
    assert a[a.index("--speculative-eagle-topk") + 1] == "1"
    assert a[a.index("--speculative-num-draft-tokens") + 1] == "4"
    assert a[a.index("--cuda-graph-max-bs-decode") + 1] == "24"
    assert "--cuda-graph-max-bs" not in a
    old = list(build_command(s, DetectedVersion("0.5.13", "t")).argv)
    assert old[:3] == ["python", "-m", "sglang.launch_server"]
    assert "--cuda-graph-max-bs" in old and "--cuda-graph-max-bs-decode" not in old
    dflash_settings = ServeSettings(engine="sglang", model="/m", speculative=Speculative("dflash", 7, "/d"))
    dflash = list(build_command(dflash_settings).argv)
    assert dflash[dflash.index("--speculative-num-steps") + 1] == "1"


def test_sglang_refuses_removed_and_missing_flags():
    with pytest.raises(Unsupported, match="cuda-graph-max-bs-decode"):
        build_command(ServeSettings(engine="sglang", model="/m", extra_args=("--cuda-graph-max-bs=64",)),
                      DetectedVersion("0.5.23", "t"))
    with pytest.raises(Unsupported, match=r"sglang 0\.5\.13 has no --kv-cache-dtype nvfp4"):
        build_command(ServeSettings(engine="sglang", model="/m", kv_cache_dtype="nvfp4"),
                      DetectedVersion("0.5.13", "t"))
    with pytest.raises(Unsupported, match="has no --kv-cache-dtype 'fp16'"):
        build_command(ServeSettings(engine="sglang", model="/m", kv_cache_dtype="fp16"))


def test_vllm_version_gates_and_user_values():
    with pytest.raises(Unsupported, match=r"vllm 0\.30\.1 has no --linear-backend"):
        build_command(ServeSettings(engine="vllm", model="/m", linear_backend="marlin"), DetectedVersion("0.30.1", "t"))
    with pytest.raises(UsageError, match="needs a draft model"):
        build_command(ServeSettings(engine="vllm", model="/m", speculative=Speculative("eagle3", 2)))
    with pytest.raises(UsageError, match="127.0.0.1"):
        build_command(ServeSettings(engine="vllm", model="/m", host="0.0.0.0"))


def test_vllm_multinode_ray_steps():
    s = ServeSettings(engine="vllm", model="/m", tp=4, pp=2, nodes=2, head_address="10.0.0.1")
    cmd = build_command(s)
    assert cmd.argv[-2:] == ("--distributed-executor-backend", "ray")
    assert "--pipeline-parallel-size" in cmd.argv
    head, worker = cmd.display_steps()
    assert head.startswith("ray start --head --node-ip-address=10.0.0.1 --port=6379 --num-gpus=4")
    assert worker == "ray start --address=10.0.0.1:6379 --num-gpus=4"
    with pytest.raises(Unsupported, match="vLLM"):
        build_command(ServeSettings(engine="sglang", model="/m", tp=2, nodes=2, head_address="10.0.0.1"))
    with pytest.raises(UsageError, match="--head-address"):
        build_command(ServeSettings(engine="vllm", model="/m", tp=2, nodes=2))


def test_trtllm_yaml_config_and_llamacpp():
    s = ServeSettings(engine="trtllm", model="/m", kv_cache_dtype="fp8_e4m3", max_batch=8,
                      speculative=Speculative("eagle3", 3, "/draft"), cuda_graphs=False)
    cmd = build_command(s)
    i = cmd.argv.index("--extra_llm_api_options")
    (f,) = cmd.files
    assert cmd.argv[i + 1] == f.path
    cfg = yaml.safe_load(f.content)
    assert cfg == {"kv_cache_config": {"dtype": "fp8"},
                   "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model": "/draft"},
                   "cuda_graph_config": None}
    ll = build_command(ServeSettings(engine="llamacpp", model="/m.gguf", kv_cache_dtype="q8_0", max_batch=4,
                                     speculative=Speculative("draft_model", 8, "/d.gguf")))
    a = list(ll.argv)
    assert a[a.index("-ctk") + 1] == "q8_0" and a[a.index("-ctv") + 1] == "q8_0" and "-fa" in a
    assert a[a.index("--spec-draft-n-max") + 1] == "8" and "--draft-max" not in a
    with pytest.raises(Unsupported, match="--spec-draft-n-max"):
        build_command(ServeSettings(engine="llamacpp", model="/m", extra_args=("--draft-max", "8")),
                      DetectedVersion("11500", "t"))


def test_json_form_is_serialisable():
    from advisor.jsonout import document, dumps

    cmd = build_command(ServeSettings(engine="vllm", model="/m", api_key="k-123456"))
    out = dumps(document("launch", {"command": cmd}))
    assert json.loads(out)["command"]["env"]["VLLM_API_KEY"] == "***"
    assert "k-123456" not in out


@pytest.mark.parametrize("engine,var", [("vllm", "VLLM_API_KEY"), ("llamacpp", "LLAMA_API_KEY")])
def test_api_key_travels_in_the_environment_not_argv(engine, var):
    # argv is world-readable (/proc/PID/cmdline, `ps`); both engines read the key from `var`
    cmd = build_command(ServeSettings(engine=engine, model="/m", api_key="sk-env-0123456789"))
    assert not any("sk-env" in a for a in cmd.argv) and "--api-key" not in cmd.argv
    assert dict(cmd.env)[var] == "sk-env-0123456789"
    assert "sk-env" not in cmd.display() and f"{var}='***'" in cmd.display()


def test_display_lines_are_valid_shell_and_redacted():
    import subprocess

    s = ServeSettings(engine="vllm", model="/models/my model", api_key="sk-live-abcdef0123456789",
                      speculative=Speculative("mtp", 2), cuda_devices=(0, 1), extra_args=("--seed", "-1"))
    cmd = build_command(s)
    for line in (cmd.display(), cmd.display_multiline()):
        assert "sk-live" not in line
        # bash parses the copyable line back into the same argv (program replaced by printf)
        words = line.replace(" \\\n  ", " ").split(" ")
        program = next(i for i, w in enumerate(words) if "=" not in w)       # after the VAR=value words
        script = "printf '%s\\0' " + " ".join(words[program + 1:])
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
        expected = [a if a != s.api_key else "***" for a in cmd.argv[1:]]
        assert out.split("\0")[:-1] == expected
    assert len(cmd.display_multiline().splitlines()) > 3


def test_version_from_noisy_version_output():
    from launchers.versions import version_from_output

    vllm = ("INFO 12-02 14:18:15 [__init__.py:216] Automatically detected platform cuda.\n"
            "WARNING Tried to allocate 2.00 GiB earlier\n0.33.0\n")
    assert version_from_output(vllm) == "0.33.0"
    assert version_from_output("0.34.0rc1.dev12+g1a2b3c\n") == "0.34.0rc1.dev12+g1a2b3c"
    assert version_from_output("version: 5191 (c7f3169)\nbuilt with cc 13.2 for x86_64\n") == "5191"
    assert version_from_output("INFO loaded 1.5 GiB of weights\nusage: vllm [-h]\n") is None


def test_fastllm_moe_on_one_gpu_warns_experts_on_cpu():
    moe = ServeSettings(engine="fastllm", model="/m", checkpoint_moe=True)
    (w,) = [w for w in build_command(moe).warnings if "MoE" in w]
    assert "--moe_device cpu" in w and "--moe_device --extra-arg=cuda" in w
    # TP places the experts on the GPUs; an explicit placement is the user's choice; dense models: nothing
    for s in (replace(moe, tp=2), replace(moe, extra_args=("--moe_device", "cuda")),
              replace(moe, checkpoint_moe=False)):
        assert not any("MoE" in w for w in build_command(s).warnings)


def test_launch_cli_reads_moe_from_the_checkpoint(capsys):
    from advisor.cli import main

    demo = Path(__file__).resolve().parents[2] / "profiles" / "demo"
    assert main(["launch", str(demo / "qwen3-30b-a3b-nvfp4"), "--engine", "fastllm", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["command"]
    assert out["settings"]["checkpoint_moe"] is True and any("MoE" in w for w in out["warnings"])
    assert main(["launch", str(demo / "qwen3-8b-nvfp4"), "--engine", "fastllm", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["command"]["settings"]["checkpoint_moe"] is False


def test_trtllm_chunk_size_becomes_the_token_budget():
    a = list(build_command(ServeSettings(engine="trtllm", model="/m", chunked_prefill=4096)).argv)
    assert "--enable_chunked_prefill" in a and a[a.index("--max_num_tokens") + 1] == "4096"
    both = build_command(ServeSettings(engine="trtllm", model="/m", chunked_prefill=4096, max_batched_tokens=8192))
    a = list(both.argv)
    assert a[a.index("--max_num_tokens") + 1] == "8192" and any("4096" in n for n in both.notes)

"""Hostile command lines: every refusal is one stderr line, the documented exit code, and with --json
the same error document on stdout; nan/inf/absurd numbers stop at argparse; secrets never echo."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor import cli
from cli_fakes import install_fake_command
from advisor.errors import BadInput

DEMO = "demo:qwen3-8b-nvfp4"          # 32 attention heads, 8 KV heads


def run_cli(argv, capsys):
    """(exit code, stdout, stderr) whether main returns or argparse raises SystemExit."""
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_error_doc(out: str, err: str, code: int) -> dict:
    doc = json.loads(out)
    assert doc["kind"] == "error" and doc["schema_version"] and doc["exit_code"] == code
    assert err.count("\n") == 1 and "Traceback" not in err
    assert doc["error"] in err                  # the same message on both streams
    return doc


# ---------------------------------------------------------------- 1. --json error document everywhere
@pytest.mark.parametrize("argv,needle", [
    (["plan", DEMO, "--gpu", "rtx-3090", "--gpus", "0", "--json"], "--gpus"),
    (["explain", DEMO, "--gpu", "rtx-3090", "--with", "banana", "--json"], "banana"),
    (["explain", DEMO, "--gpu", "rtx-3090", "--env", "NOEQUALS", "--json"], "KEY=VALUE"),
    (["convert", "a", "b", "--max-shard-size", "banana", "--json"], "not a size"),
    (["launch", DEMO, "--engine", "vllm", "--dry-run", "--cuda-devices", "banana", "--json"], "GPU indices"),
    (["--json", "no-such-command"], "invalid choice"),
])
def test_argparse_errors_give_the_json_error_document(argv, needle, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 2
    doc = assert_error_doc(out, err, 2)
    assert needle in doc["error"]


def test_argparse_errors_without_json_print_nothing_on_stdout(capsys):
    code, out, err = run_cli(["plan", DEMO, "--gpus", "0"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "need at least 1 GPU" in err


def test_json_after_double_dash_is_not_the_flag(capsys):
    code, out, err = run_cli(["launch", "--engine", "banana", "--", "--json"], capsys)
    assert code == 2 and out == ""


_fake = install_fake_command


@pytest.mark.parametrize("exc,code,needle", [
    (OSError(5, "Input/output error"), 3, "OSError"),
    (ValueError("bad number"), 3, "ValueError: bad number"),
    (KeyError("oops"), 1, "internal error"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (BadInput("truncated header", path="/x.safetensors"), 3, "/x.safetensors: truncated header"),
])
def test_every_failure_branch_gives_the_json_error_document(monkeypatch, capsys, exc, code, needle):
    def run(args):
        raise exc

    _fake(monkeypatch, run)
    monkeypatch.delenv("NVFP4_ADVISOR_DEBUG", raising=False)
    got, out, err = run_cli(["fake", "--json"], capsys)
    assert got == code
    assert needle in assert_error_doc(out, err, code)["error"]
    got, out, err = run_cli(["fake"], capsys)           # without --json: stderr only
    assert got == code and out == "" and needle in err


# ---------------------------------------------------------------- 2. finite, bounded numbers
@pytest.mark.parametrize("flag,value,needle", [
    ("--vram", "nan", "finite"), ("--vram", "inf", "finite"), ("--vram", "1e308", "at most"),
    ("--vram", "-3", "finite positive"), ("--bandwidth", "nan", "finite"), ("--power-limit", "nan", "finite"),
    ("--power-limit", "-inf", "finite"), ("--memory-share", "nan", "finite"),
    ("--draft-bytes", "inf", "finite"), ("--draft-tokens", "-1", "0 to 16"), ("--draft-tokens", "1000", "0 to 16"),
    ("--gpus", "100000", "at most"), ("--pcie-gen", "99", "3 to 6"), ("--pcie-lanes", "0", "1 to 32"),
    ("--acceptance", "1.5,2", "[0, 1]"), ("--acceptance", ",", "at least one"),
    ("--acceptance", "nan", "[0, 1]"), ("--tp", "0", "from 1"), ("--context", "-5", "from 1"),
])
def test_plan_refuses_nonsense_numbers_at_argparse(flag, value, needle, capsys):
    code, out, err = run_cli(["plan", DEMO, "--gpu", "rtx-3090", f"{flag}={value}", "--json"], capsys)
    assert code == 2
    doc = assert_error_doc(out, err, 2)
    assert f"argument {flag}" in doc["error"] and needle in doc["error"]


@pytest.mark.parametrize("argv", [
    ["explain", DEMO, "--gpu", "rtx-3090", "--ep", "-1"],
    ["explain", DEMO, "--gpu", "rtx-3090", "--tp", "0"],
    ["verify", "--reference", "r", "--threads", "0"],
    ["convert", "a", "b", "--max-shard-size", "0"],
    ["convert", "a", "b", "--threads", "-2"],
    ["bench", "--url", "http://127.0.0.1:1", "--timeout", "0"],
    ["bench", "--url", "http://127.0.0.1:1", "--timeout", "nan"],
    ["bench", "--url", "http://127.0.0.1:1", "--concurrency", "0"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run", "--max-model-len", "-1"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run", "--ready-timeout", "-5"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run", "--ready-timeout", "nan"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run", "--port", "70000"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run", "--cuda-devices", "-1"],
    ["microbench", "--budget", "-1"],
    ["microbench", "--device", "-1"],
])
def test_other_commands_refuse_nonsense_numbers(argv, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "error: argument --" in err


def test_a_valid_plan_still_runs_with_what_ifs(capsys):
    code, out, _ = run_cli(["plan", DEMO, "--gpu", "rtx-3090", "--vram", "48", "--power-limit", "250",
                            "--acceptance", "0.8,0.6", "--draft-tokens", "2", "--json"], capsys)
    assert code == 0 and json.loads(out)["kind"] == "plan"


# ---------------------------------------------------------------- 3. the same exit code everywhere
@pytest.mark.parametrize("engine", ["banana", "llamacpp", "transformers"])
def test_plan_unknown_engine_is_a_usage_error_like_explain(engine, capsys):
    code, out, err = run_cli(["plan", DEMO, "--gpu", "rtx-3090", "--engine", engine, "--json"], capsys)
    assert code == 2
    doc = assert_error_doc(out, err, 2)
    assert "unknown engine" in doc["error"] and "vllm" in doc["error"] and "engine_memory" not in doc["error"]
    code, _, err = run_cli(["explain", DEMO, "--gpu", "rtx-3090", "--engine", engine], capsys)
    assert code == 2 and "unknown engine" in err


@pytest.mark.parametrize("cmd", [
    ["plan", DEMO, "--gpu", "rtx-3090"],
    ["explain", DEMO, "--gpu", "rtx-3090"],
    ["launch", DEMO, "--engine", "vllm", "--dry-run"],
])
def test_unknown_kv_cache_dtype_exits_2_in_every_command(cmd, capsys):
    code, out, err = run_cli([*cmd, "--kv-cache-dtype", "banana", "--json"], capsys)
    assert code == 2
    assert "banana" in assert_error_doc(out, err, 2)["error"]


def test_kv_dtype_the_engine_lacks_is_still_unsupported(capsys):
    code, _, err = run_cli(["launch", DEMO, "--engine", "llamacpp", "--dry-run", "--kv-cache-dtype", "nvfp4"],
                           capsys)
    assert code == 4 and "nvfp4" in err


def test_bench_port_out_of_range_is_a_usage_error(capsys):
    code, out, err = run_cli(["bench", "--url", "http://127.0.0.1:99999", "--json"], capsys)
    assert code == 2
    doc = assert_error_doc(out, err, 2)
    assert "port out of range" in doc["error"] and "ValueError" not in doc["error"]


# ---------------------------------------------------------------- 4. secrets
def test_launch_dry_run_redacts_secret_extra_args(capsys):
    for extra in (["--extra-arg=--api-key=SECRET123"], ["--extra-arg=--api-key", "--extra-arg=SECRET123"],
                  ["--extra-arg=--hf-token=SECRET123"]):
        code, out, err = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", *extra, "--json"], capsys)
        assert code == 0 and "SECRET123" not in out + err
        doc = json.loads(out)
        assert "***" in doc["command"]["command_line"] and "***" in " ".join(doc["command"]["argv"])
        assert "***" in " ".join(doc["command"]["settings"]["extra_args"])
        code, out, err = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", *extra], capsys)
        assert code == 0 and "SECRET123" not in out + err and "***" in out


def test_the_real_process_still_gets_the_secret():
    from launchers.engines import build_command
    from launchers.settings import ServeSettings

    settings = ServeSettings(engine="vllm", model="/m", version="0.33", extra_args=("--api-key=SECRET123",))
    cmd = build_command(settings)
    assert "--api-key=SECRET123" in cmd.argv and "SECRET123" not in cmd.display()
    from advisor.jsonout import dumps, to_jsonable

    assert "SECRET123" not in dumps(to_jsonable(cmd))


def test_bench_never_echoes_url_credentials(capsys):
    code, out, err = run_cli(["bench", "--url", "http://user:pass@127.0.0.1:1", "--timeout", "2",
                              "--long-prompt-words", "0", "--shots", "1", "--max-tokens", "2", "--json"], capsys)
    assert code == 1
    doc = assert_error_doc(out, err, 1)
    assert "user:pass" not in out + err and "http://***@127.0.0.1:1" in doc["error"]
    code, out, err = run_cli(["bench", "--url", "http://user:pass@127.0.0.1:99999"], capsys)
    assert code == 2 and "user:pass" not in out + err


# ---------------------------------------------------------------- 5. launch agrees with plan/explain
def test_launch_refuses_a_tp_the_heads_do_not_divide(capsys):
    code, out, err = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", "--tp", "3", "--json"], capsys)
    assert code == 2
    assert "attention heads (32)" in assert_error_doc(out, err, 2)["error"]
    code, _, plan_err = run_cli(["plan", DEMO, "--gpu", "rtx-3090", "--gpus", "4", "--tp", "3"], capsys)
    assert code == 2 and "attention heads (32)" in plan_err
    code, out, _ = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", "--tp", "2", "--json"], capsys)
    assert code == 0 and "--tensor-parallel-size" in json.loads(out)["command"]["argv"]


def test_launch_refuses_an_extra_arg_that_moves_the_port(capsys):
    for extra in (["--extra-arg=--port", "--extra-arg=9000"], ["--extra-arg=--port=9000"]):
        code, out, err = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", *extra, "--json"], capsys)
        assert code == 2
        msg = assert_error_doc(out, err, 2)["error"]
        assert "--extra-arg --port overrides --port 8000" in msg and "readiness polls 8000" in msg


def test_launch_warns_when_an_extra_arg_repeats_a_flag(capsys):
    code, out, _ = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", "--max-model-len", "4096",
                            "--extra-arg=--max-model-len=100", "--json"], capsys)
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert any("--extra-arg --max-model-len overrides --max-model-len 4096" in w for w in warnings)
    code, out, _ = run_cli(["launch", DEMO, "--engine", "vllm", "--dry-run", "--extra-arg=--enforce-eager",
                            "--json"], capsys)
    assert code == 0 and not any("overrides" in w for w in json.loads(out)["warnings"])


# ---------------------------------------------------------------- 7. microbench without a GPU
def test_microbench_without_a_driver_does_not_import_torch(tmp_path):
    code = (
        "import sys, json, io, contextlib\n"
        "import advisor.probe as p\n"
        "from advisor.probe.model import ProbeResult\n"
        "p.probe = lambda nvml=None: ProbeResult('no-driver', 'no NVIDIA driver found', None, None, None)\n"
        "from advisor.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['microbench', '--json'])\n"
        "doc = json.loads(buf.getvalue())\n"
        "assert rc == 0 and doc['available'] is False and 'no NVIDIA driver' in doc['reason'], doc\n"
        "assert 'torch' not in sys.modules, 'torch imported without a GPU'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

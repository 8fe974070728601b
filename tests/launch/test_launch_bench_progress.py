"""`bench`: one set of defaults (the CLI's and the TUI's are launchers.bench.BenchConfig, stated in the
output); progress in tokens inside each shot with a total for the ETA (rich.progress on a terminal);
the kernel check of a server `nvfp4-advisor launch` started, found by its port; a server launched for
the CPU is not taken for one that fell back to it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from launch_fake_sse import FakeSSE
from launchers import bench

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--max-tokens", "6", "--shots", "1", "--long-prompt-words", "0", "--concurrency", "1"]


@pytest.fixture
def srv():
    s = FakeSSE(tokens=6, interval_s=0.01, ttft_s=0.005).start()
    yield s
    s.stop()


def test_cli_help_states_the_defaults_of_the_one_config():
    from advisor.cli import build_parser

    cfg = bench.BenchConfig()
    sub = build_parser()._subparsers._group_actions[0].choices["bench"]
    helps = {a.option_strings[0]: a.help for a in sub._actions if a.option_strings}
    for flag, value in (("--max-tokens", cfg.max_tokens), ("--shots", cfg.shots), ("--concurrency", cfg.concurrency),
                        ("--long-prompt-words", cfg.long_prompt_words), ("--timeout", f"{cfg.timeout_s:g}"),
                        ("--run-timeout", f"{cfg.run_timeout_s:g}")):
        assert f"(default {value})" in helps[flag], (flag, helps[flag])


def test_cli_without_flags_runs_the_default_config(monkeypatch, srv):
    from advisor.cli import main

    seen = {}
    real = bench.run
    monkeypatch.setattr(bench, "run", lambda base, cfg, **kw: seen.setdefault("cfg", cfg) and real(
        base, bench.BenchConfig(max_tokens=6, shots=1, concurrency=1, long_prompt_words=0), **kw))
    main(["bench", "--url", srv.url, "--json"])
    assert seen["cfg"] == bench.BenchConfig()


def test_settings_are_printed_with_the_results(srv, capsys):
    from advisor.cli import main

    assert main(["bench", "--url", srv.url, *SMALL]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "settings: 6 output tokens per request, 1 shot(s) of each of 3 prompt kinds" in out
    assert "no concurrent streams, no long-prompt prefill" in out


def test_progress_counts_tokens_inside_each_shot_toward_the_planned_total(srv):
    from advisor.progress import Step

    cfg = bench.BenchConfig(max_tokens=6, shots=2, concurrency=2, long_prompt_words=0)
    steps: list[Step] = []
    bench.run(srv.url, cfg, on_step=steps.append)
    assert {s.total for s in steps} == {cfg.planned_tokens} and cfg.planned_tokens == 3 * 3 * 6 + 2 * 6
    done = [s.done for s in steps]
    assert done == sorted(done) and done[-1] == cfg.planned_tokens
    assert any(d % 6 for d in done)                         # moved inside a shot, token by token
    assert any(s.phase == "single stream: math shot 2/2" for s in steps)
    assert any(s.phase == "2 concurrent streams" for s in steps)


def test_cli_draws_a_progress_bar_with_tokens_and_eta_on_a_terminal(srv):
    import pty
    import select

    code = ("import sys; sys.path.insert(0, %r)\nfrom advisor.cli import main\n"
            "sys.exit(main(['bench', '--url', %r, '--max-tokens', '40', '--shots', '1', '--long-prompt-words', '0',"
            " '--concurrency', '1']))\n" % (str(ROOT), srv.url))
    srv.interval_s = 0.02
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    seen = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(60)
    os.close(master)
    text = seen.decode("utf-8", "replace")
    assert proc.returncode == 0
    assert "/240 tok" in text and "ETA" in text and "bench: single stream" in text      # 6 requests x 40 tokens


# ---------------------------------------------------------------- the launch on that port
def _record(tmp_path, port: int, command_line: str, log_lines: list[str], engine: str):
    """A launch record as `nvfp4-advisor launch` writes it, for a live process (this test's own)."""
    from launchers import pidfile

    log = tmp_path / "server.log"
    log.write_text("\n".join(log_lines) + "\n")
    me = psutil.Process()
    rec = pidfile.ServerRecord(pid=me.pid, pgid=os.getpgid(me.pid), port=port, engine=engine,
                               started=me.create_time(), command_line=command_line, log=str(log))
    pidfile.write(rec)
    return rec


VLLM_LOG = ["INFO Using MarlinNvFp4LinearKernel for NVFP4 GEMM",
            "INFO Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', 'TRITON_ATTN']",
            "INFO GPU KV cache size: 230,000 tokens"]


def test_bench_runs_the_kernel_check_of_the_launch_on_that_port(tmp_path, monkeypatch, capsys, srv):
    from advisor.checkpoint.demo import demo_path
    from advisor.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    model = tmp_path / "qwen3-8b-nvfp4"
    shutil.copytree(demo_path("qwen3-8b-nvfp4"), model)
    assert main(["plan", str(model), "--gpu", "rtx-3090", "--json"]) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(capsys.readouterr().out)
    _record(tmp_path, srv.port, f"vllm serve {model} --host 127.0.0.1 --port {srv.port} --kv-cache-dtype fp8",
            VLLM_LOG, "vllm")
    assert main(["bench", "--url", srv.url, "--plan", str(plan), *SMALL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["layer_class"].split(" ")[0]: r for r in out["kernel_check"]["rows"]}
    assert rows["dense_linear"]["status"] == "match" and rows["attention_kv"]["status"] == "match"
    assert out["kernel_check"]["kv"]["observed_tokens"] == 230000
    causes = [c for v in out["verdicts"] for c in v.get("causes", ())]
    assert not any("start the server with `nvfp4-advisor launch`" in c["evidence"] for c in causes)
    assert main(["bench", "--url", srv.url, "--plan", str(plan), *SMALL]) == 0
    assert "Kernel check" in capsys.readouterr().out


def test_without_a_launch_on_the_port_it_says_why_not(tmp_path, monkeypatch, capsys, srv):
    from advisor.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["bench", "--url", srv.url, *SMALL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel_check"] is None
    assert f"no server started by `nvfp4-advisor launch` listens on port {srv.port}" in out["kernel_check_note"]


def test_a_server_launched_for_the_cpu_is_not_a_cpu_fallback(tmp_path, monkeypatch, capsys, srv):
    from advisor.cli import main

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["bench", "--url", srv.url, *SMALL, "--json"]) == 0
    kinds = {f["kind"] for f in json.loads(capsys.readouterr().out)["watchdog"] or ()}
    assert kinds & {"no_gpu_telemetry", "cpu_fallback"}          # this machine has no GPU: said for a GPU server
    _record(tmp_path, srv.port, f"HF_HUB_OFFLINE=1 transformers serve {tmp_path} --host 127.0.0.1 "
                                f"--port {srv.port} --device cpu", ["INFO Uvicorn running"], "transformers")
    assert main(["bench", "--url", srv.url, *SMALL, "--json"]) == 0
    kinds = {f["kind"] for f in json.loads(capsys.readouterr().out)["watchdog"] or ()}
    assert not kinds & {"no_gpu_telemetry", "cpu_fallback"}

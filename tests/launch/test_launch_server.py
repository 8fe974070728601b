"""End to end on CPU: a real `transformers serve` (tiny random Llama) through the supervisor,
benchmarked with the streaming client, stopped with no orphan left."""

from __future__ import annotations

import json

import psutil
import pytest

from launch_support import as_in_a_terminal, free_port

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]


def test_ready_and_models(tiny_server, tiny_model):
    server, ready = tiny_server
    assert ready.probe.ok and ready.probe.statuses == (("/health", "200"),)
    assert ready.elapsed_s < 180
    assert server.listener_is_ours() is True
    from launchers.readiness import fetch_model_ids

    assert fetch_model_ids(ready.base_url) == (str(tiny_model),)
    assert any("Uvicorn running on" in line for line in server.tail(200))


def test_streaming_bench_numbers_are_sane(tiny_server):
    from launchers import bench, watchdog

    server, ready = tiny_server
    dog = watchdog.Watchdog(lambda: [p.pid for p in server.processes()], interval_s=0.2).start()
    rep = bench.run(ready.base_url, bench.BenchConfig(max_tokens=24, shots=2, concurrency=4, long_prompt_words=150))
    samples = dog.stop()
    assert rep.failures == ()
    assert all(k.failed == 0 and k.ttft_s and 0 < k.ttft_s < 10 for k in rep.kinds)
    # ITL from token arrivals: one gap per token after the first, positive, consistent with the decode rate
    assert rep.itl_s.n >= 3 * 2 * 5 and 0 < rep.itl_s.p50 <= rep.itl_s.p99 < 5
    assert rep.decode_tps and 1 < rep.decode_tps < 20000
    assert 0.2 < rep.decode_tps * rep.itl_s.mean < 5          # tok/s and mean ITL describe the same stream
    assert rep.concurrency.failed == 0 and rep.concurrency.aggregate_tps > 0
    assert rep.prefill.prompt_tokens and rep.prefill.prompt_tokens > 150 and rep.prefill.prefill_s > 0
    assert rep.interference.short_ttft_during_prefill_s is not None
    assert any("[DONE]" in n for n in rep.notes)             # transformers serve sends no [DONE]
    assert any(s.cpu_cores and s.cpu_cores > 0.3 for s in samples)   # the CPU server was busy generating
    assert watchdog.findings(samples, expect_gpu=False) == []        # no NVML here: nothing claimed


def test_launch_cli_check_starts_and_stops_without_orphans(tiny_model, capsys, monkeypatch):
    from advisor.cli import main
    from launchers import pidfile

    port = free_port()
    before = {p.pid for p in psutil.process_iter()}
    rc = main(["launch", str(tiny_model), "--engine", "transformers", "--device", "cpu", "--port", str(port),
               "--check", "--ready-timeout", "180", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["ready"] is True and out["url"] == f"http://127.0.0.1:{port}"
    assert out["command"]["argv"][:2] == ["transformers", "serve"]
    assert out["stop"]["signal"] in ("SIGINT", "SIGTERM") and out["stop"]["survivors"] == []
    new = [p for p in psutil.process_iter(["cmdline"]) if p.pid not in before
           and str(port) in " ".join(p.info["cmdline"] or ())]
    assert new == []
    assert pidfile.leftovers() == []


def test_launch_cli_serves_until_ctrl_c(tiny_model, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    import httpx

    port = free_port()
    cli = subprocess.Popen([sys.executable, "-m", "advisor", "launch", str(tiny_model), "--engine", "transformers",
                            "--device", "cpu", "--port", str(port), "--ready-timeout", "180"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                           preexec_fn=as_in_a_terminal)
    try:
        lines = []
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            line = cli.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("serving "):
                break
        assert any(ln.startswith("serving ") for ln in lines), "".join(lines)
        assert any("Kernel check" in ln for ln in lines)
        server_pids = [p.pid for p in psutil.Process(cli.pid).children(recursive=True)]
        assert server_pids
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60,
                       json={"model": str(tiny_model), "messages": [{"role": "user", "content": "hi"}],
                             "max_tokens": 4})
        assert r.status_code == 200
        cli.send_signal(signal.SIGINT)                       # Ctrl-C in the advisor's terminal
        out, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0, err
    assert "stopped with" in out
    for pid in server_pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

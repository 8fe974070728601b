"""The bench client against a scripted SSE server with known token timing and real-server quirks."""

from __future__ import annotations

import statistics

import pytest
from launch_fake_sse import FakeSSE

from advisor.errors import UsageError
from launchers import bench, server_metrics, stream_client

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sse():
    servers = []

    def make(**kw):
        s = FakeSSE(**kw).start()
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


async def one(srv, **client_kw):
    c = stream_client.Client(srv.url, **client_kw)
    async with c.http() as http:
        await c.resolve_model(http)
        return c, await c.stream(http, "hi", 64)


async def test_arrival_times_match_server_send_times(sse):
    srv = sse(interval_s=0.02, ttft_s=0.05, tokens=20)
    c, r = await one(srv)
    assert r.ok and r.chunks == 20 and r.tokens == 20 and r.done_marker
    # ITL is computed from arrivals: each gap is the server's 20 ms spacing (scheduler noise allowed)
    assert statistics.median(r.itls) == pytest.approx(0.02, abs=0.004)
    assert r.ttft_s == pytest.approx(0.05, abs=0.03)
    assert r.decode_tps == pytest.approx(50, rel=0.2)
    # the arrival spacing reproduces the send spacing token by token
    sends = srv.sends[-1]
    send_gaps = [b - a for a, b in zip(sends, sends[1:])]
    assert max(abs(x - y) for x, y in zip(r.itls, send_gaps)) < 0.01


async def test_tolerates_no_done_no_usage_other_model_name(sse):
    srv = sse(done_marker=False, usage=False, tokens=8, interval_s=0.001, ttft_s=0.001)
    c, r = await one(srv, model="whatever-name")
    assert r.ok and not r.done_marker and r.usage_tokens is None and r.tokens == 8
    assert r.model == "served-fake-model"
    assert srv.bodies[-1]["model"] == "whatever-name" and srv.bodies[-1]["temperature"] == 0


async def test_rejected_extras_are_dropped_once(sse):
    srv = sse(reject_extras=True, tokens=4, interval_s=0.001, ttft_s=0.001)
    c, r = await one(srv)
    assert r.ok and c.minimal
    assert "ignore_eos" in srv.bodies[0] and "ignore_eos" not in srv.bodies[1]
    assert any("rejected" in n for n in c.notes)


async def test_suite_medians_concurrency_and_spec_metrics(sse):
    metrics = ('# HELP x\nvllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
               'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 80.0\n'
               'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 50.0\n')
    srv = sse(tokens=12, interval_s=0.005, ttft_s=0.01, metrics=metrics)
    cfg = bench.BenchConfig(max_tokens=12, shots=3, concurrency=8, long_prompt_words=50)
    rep = await bench.run_suite(stream_client.Client(srv.url), cfg)
    assert [k.kind for k in rep.kinds] == ["code", "math", "prose"]
    assert all(k.shots == 3 and k.failed == 0 and k.tokens == 12 for k in rep.kinds)
    assert rep.itl_s.n == 3 * 3 * 11 and rep.itl_s.p50 == pytest.approx(0.005, abs=0.003)
    assert rep.concurrency.streams == 8 and rep.concurrency.failed == 0
    assert rep.concurrency.aggregate_tps > rep.decode_tps          # 8 streams overlap in time
    assert rep.prefill.prompt_tokens == 7 and rep.interference.short_ttft_idle_s is not None
    assert rep.spec is None          # the counters did not move during the run: no acceptance claimed
    before = server_metrics.parse_metrics(metrics)
    doubled = metrics.replace("100.0", "200.0").replace(" 80.0", " 160.0").replace(" 50.0", " 100.0")
    after = server_metrics.parse_metrics(doubled)
    acc = server_metrics.spec_acceptance(before, after)
    assert acc.per_position == pytest.approx((0.8, 0.5)) and acc.mean_accepted_length == pytest.approx(2.3)
    # 3 warm-up + 9 shots + 8 concurrent + long + 2 idle + long + short
    assert len(srv.bodies) == 3 + 9 + 8 + 1 + 2 + 1 + 1


def test_percentiles_and_loopback_only():
    assert bench.percentile([1, 2, 3, 4], 50) == 2 and bench.percentile(range(1, 101), 99) == 99
    assert bench.percentile([], 50) is None
    with pytest.raises(UsageError, match="127.0.0.1"):
        stream_client.check_url("http://example.com:8000")
    assert stream_client.check_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    with pytest.raises(UsageError, match="with its scheme, e.g. http://127.0.0.1:8000"):
        stream_client.check_url("127.0.0.1:8000")        # the host is fine: say what is missing


def test_nothing_listening_fails_at_once(capsys):
    import socket
    import time

    from advisor.cli import main

    with socket.socket() as s:                 # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    rc = main(["bench", "--url", f"http://127.0.0.1:{port}", "--model", "m", "--shots", "3"])
    err = capsys.readouterr().err
    assert rc == 1 and "no server answers" in err
    assert "shot 1/3" not in err and time.monotonic() - t0 < 10    # no round of failing requests first


def test_bench_cli_against_fake_server(sse, capsys):
    import json

    from advisor.cli import main

    srv = sse(tokens=6, interval_s=0.002, ttft_s=0.002)
    rc = main(["bench", "--url", srv.url, "--max-tokens", "6", "--shots", "1", "--long-prompt-words", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["kind"] == "bench"
    assert out["report"]["model"] == "fake-model" and out["report"]["decode_tps"] > 0
    assert main(["bench", "--url", "http://10.1.2.3:80"]) == 2


def test_bench_cli_verdict_against_plan(sse, capsys, tmp_path):
    import json

    from advisor.cli import main

    srv = sse(tokens=10, interval_s=0.02, ttft_s=0.01)          # ~50 tok/s per stream
    plan = {"predictions": {"decode_tok_s": 500.0, "decode_aggregate_tok_s": {"1": 500.0, "2": 900.0},
                            "kv_pool_tokens": {"fp8": 1000}},
            "recommendation": {"kv_cache_dtype": "fp8"}}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    rc = main(["bench", "--url", srv.url, "--plan", str(p), "--max-tokens", "10", "--shots", "1",
               "--concurrency", "2", "--long-prompt-words", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    single, agg = out["verdicts"]
    assert single["status"] == "below" and single["ratio"] < 0.2
    assert [c["kind"] for c in single["causes"]][0] == "misdispatch"       # not checked without a launch
    assert single["causes"][0]["evidence"].startswith("not checked")
    assert agg["metric"].startswith("aggregate") and agg["status"] == "below"


def test_verdict_against_a_what_if_plan_names_it_first(sse, capsys, tmp_path):
    import json

    from advisor.cli import main

    srv = sse(tokens=6, interval_s=0.02, ttft_s=0.01)
    plan = {"gpu": {"id": "rtx-5090", "selection": "what-if: 1 x GeForce RTX 5090 (not in this box)"},
            "predictions": {"decode_tok_s": 500.0}, "recommendation": {"kv_cache_dtype": "fp8"}}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    rc = main(["bench", "--url", srv.url, "--plan", str(p), "--max-tokens", "6", "--shots", "1",
               "--long-prompt-words", "0", "--concurrency", "1", "--json"])
    (single,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert rc == 0 and single["status"] == "below"
    first = single["causes"][0]
    assert first["checked"] and "what-if" in first["text"] and "RTX 5090 (not in this box)" in first["evidence"]
    # a plan for the probed cards carries no such cause
    plan["gpu"]["selection"] = "probed: 1 x GeForce RTX 5090"
    p.write_text(json.dumps(plan))
    main(["bench", "--url", srv.url, "--plan", str(p), "--max-tokens", "6", "--shots", "1",
          "--long-prompt-words", "0", "--concurrency", "1", "--json"])
    (single,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert not any("what-if" in c["text"] for c in single["causes"])


def test_launch_cli_dry_run_from_plan(capsys, tmp_path):
    import json

    from advisor.cli import main

    plan = {"recommendation": {"kv_cache_dtype": "fp8", "max_batch": 12, "draft_tokens": 2, "memory_share": 0.88,
                               "chunked_prefill": 4096, "tp": 2, "cuda_graphs": True, "speculative_method": "mtp"}}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    assert main(["launch", "/models/m", "--engine", "vllm", "--plan", str(p), "--port", "8123", "--dry-run",
                 "--json"]) == 0
    argv = json.loads(capsys.readouterr().out)["command"]["argv"]
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--kv-cache-dtype"] == "fp8" and pairs["--max-num-seqs"] == "12" and pairs["--port"] == "8123"
    assert pairs["--tensor-parallel-size"] == "2" and pairs["--gpu-memory-utilization"] == "0.88"
    assert json.loads(pairs["--speculative-config"]) == {"method": "mtp", "num_speculative_tokens": 2}
    plan["engine"] = {"name": "vllm", "version": "0.33"}        # as `plan --json` writes it
    p.write_text(json.dumps(plan))
    assert main(["launch", "/models/m", "--engine", "sglang", "--plan", str(p), "--dry-run"]) == 2
    assert "is a plan for vllm: launch --engine vllm" in capsys.readouterr().err

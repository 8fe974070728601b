"""Bench-client overhead (issue 6): timing error per token < 1 ms, and 64 concurrent streams from
one process.

1. A scripted SSE server runs in a separate process (tests/launch/launch_fake_sse.py) and records
   when it sent each token (perf_counter = CLOCK_MONOTONIC, shared by processes on Linux). The
   client's arrival time of every token is compared with its send time: the error is what the
   client adds (loopback + parsing + event-loop scheduling). Measured for 1 stream and for 64
   concurrent streams from one process.
2. The same 64 concurrent streams against the tiny real server (`transformers serve`, CPU), started
   through the supervisor: all streams must complete with token timings.

    python benchmarks/bench_client_overhead.py [--tokens 100] [--interval-ms 20] [--streams 64] [--no-real]
                                               [--smoke]

--smoke: 2 streams of 5 tokens; the real server's command is built but not started (its start-up
takes minutes on a busy 2-core box; tests/launch runs it); no targets (CI runs this so it cannot rot).

Prints medians and p99 and the ratio to the 1 ms target; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "launch"
sys.path.insert(0, str(ROOT))
TARGET_MS = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q / 100 * len(v) + 0.5)) - 1))]


async def drive(url: str, streams: int, tokens: int, model: str | None = None):
    from launchers import stream_client

    client = stream_client.Client(url, model=model, timeout_s=300)
    async with client.http(streams) as http:
        await client.resolve_model(http)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(client.stream(http, f"hello {i}", tokens) for i in range(streams)))
        wall = time.perf_counter() - t0
    return results, wall


def timing_error(streams: int, tokens: int, interval_ms: float) -> dict:
    port = free_port()
    out = Path(tempfile.mkdtemp()) / "sends.json"
    srv = subprocess.Popen([sys.executable, str(TESTS / "launch_fake_sse.py"), str(port), str(interval_ms),
                            str(tokens), str(out)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert srv.stdout.readline().strip() == "ready"
        cpu0 = time.process_time()
        results, wall = asyncio.run(drive(f"http://127.0.0.1:{port}", streams, tokens))
        cpu = time.process_time() - cpu0
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(10)
    sends = json.loads(out.read_text())
    # match client streams to server requests by their first send time (requests overlap)
    firsts = sorted((r.t0 + r.arrivals[0], i) for i, r in enumerate(results) if r.ok)
    server_order = sorted(range(len(sends)), key=lambda j: sends[j][0] if sends[j] else 1e18)
    errors_ms, itl_errors_ms = [], []
    for (_, i), j in zip(firsts, server_order):
        r, s = results[i], sends[j]
        arr = [r.t0 + a for a in r.arrivals]
        if len(arr) != len(s):
            continue
        errors_ms += [(a - b) * 1000 for a, b in zip(arr, s)]
        itl_errors_ms += [abs(x - y) * 1000 for x, y in zip(r.itls, (b - a for a, b in zip(s, s[1:])))]
    return {"streams": streams, "ok": sum(r.ok for r in results), "tokens": len(errors_ms), "wall_s": wall,
            "client_cpu_ms_per_token": cpu * 1000 / max(1, len(errors_ms)),
            "arrival_error_ms_median": statistics.median(errors_ms), "arrival_error_ms_p99": pct(errors_ms, 99),
            "itl_error_ms_median": statistics.median(itl_errors_ms), "itl_error_ms_p99": pct(itl_errors_ms, 99)}


def real_server_command(model: Path, streams: int):
    from launchers.engines import build_command
    from launchers.settings import ServeSettings

    # max_batch > 1 turns on --continuous-batching: the 64 streams are served together, like an engine
    s = ServeSettings(engine="transformers", model=str(model), port=free_port(), device="cpu", max_batch=streams)
    return s, build_command(s)


def real_server(streams: int, tokens: int) -> dict:
    from launchers.supervisor import Server

    work = Path(tempfile.mkdtemp())
    model = work / "tiny-llama"
    subprocess.run([sys.executable, str(TESTS / "launch_make_tiny.py"), str(model)], check=True,
                   env=dict(os.environ, HF_HUB_OFFLINE="1"), capture_output=True, timeout=300)
    s, command = real_server_command(model, streams)
    server = Server(command, log_path=work / "serve.log", records_dir=work / "records").start()
    try:
        server.wait_ready(180)
        asyncio.run(drive(s.base_url, 1, 8))                 # warm-up (the first batched request is slow)
        cpu0 = time.process_time()
        results, wall = asyncio.run(drive(s.base_url, streams, tokens))
        cpu = time.process_time() - cpu0
    finally:
        server.stop()
    ok = [r for r in results if r.ok]
    toks = sum(r.tokens for r in ok)
    return {"streams": streams, "ok": len(ok), "tokens": toks, "wall_s": wall, "aggregate_tok_s": toks / wall,
            "client_cpu_ms_per_token": cpu * 1000 / max(1, toks),
            "ttft_median_s": statistics.median(r.ttft_s for r in ok) if ok else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--interval-ms", type=float, default=20.0)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--real-tokens", type=int, default=16)
    ap.add_argument("--no-real", action="store_true", help="skip the tiny real server")
    ap.add_argument("--smoke", action="store_true", help="2 streams of 5 tokens, no targets")
    args = ap.parse_args()
    if args.smoke:
        args.tokens, args.interval_ms, args.streams, args.real_tokens = 5, 5.0, 2, 4
    failed = False
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    busy = load >= cpus
    print(f"load average {load:.1f} on {cpus} CPUs (the client shares them with the server)")
    for n in (1, args.streams):
        r = timing_error(n, args.tokens, args.interval_ms)
        # Gates: one stream — ITL error and arrival error (what TTFT carries) < 1 ms. Many streams —
        # the client's own CPU per token < 1 ms (what a dedicated core must absorb) and, unless the box
        # is oversubscribed (load >= CPUs, where any process waits for a core), ITL error < 1 ms.
        if n == 1:
            ok = r["itl_error_ms_median"] < TARGET_MS and r["arrival_error_ms_median"] < TARGET_MS
        else:
            ok = r["client_cpu_ms_per_token"] < TARGET_MS and (busy or r["itl_error_ms_median"] < TARGET_MS)
        ok = ok and r["ok"] == n
        failed |= not ok
        gate = " (timing not gated: box oversubscribed)" if n > 1 and busy else ""
        print(f"fake SSE, {n:3d} stream(s) x {args.tokens} tokens @ {args.interval_ms:g} ms: "
              f"ITL error median {r['itl_error_ms_median']:.3f} ms (p99 {r['itl_error_ms_p99']:.3f}, "
              f"ratio to 1 ms {r['itl_error_ms_median'] / TARGET_MS:.2f}); arrival error median "
              f"{r['arrival_error_ms_median']:.3f} ms (p99 {r['arrival_error_ms_p99']:.3f}); client CPU "
              f"{r['client_cpu_ms_per_token']:.3f} ms/token — {'ok' if ok else 'MISSED'}{gate}")
    if args.smoke:
        _, command = real_server_command(Path(tempfile.gettempdir()) / "tiny-llama", args.streams)
        print(f"tiny real server: not started in --smoke; its command: {' '.join(command.argv)}")
    elif not args.no_real:
        r = real_server(args.streams, args.real_tokens)
        ok = r["ok"] == args.streams
        failed |= not ok
        print(f"tiny real server, {r['streams']} concurrent streams: {r['ok']} completed, {r['tokens']} tokens in "
              f"{r['wall_s']:.2f} s ({r['aggregate_tok_s']:.0f} tok/s), client CPU {r['client_cpu_ms_per_token']:.3f} "
              f"ms/token, TTFT median {r['ttft_median_s']:.3f} s — {'ok' if ok else 'MISSED'}")
    return 1 if failed and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())

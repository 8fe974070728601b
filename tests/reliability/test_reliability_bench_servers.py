"""The bench client against servers that misbehave on purpose (issue 21 points 1-4), every mode of
reliability_sse.MisbehavingServer: each run ends within its deadlines without a traceback, says
what went wrong in one line per kind of problem, leaves flagged streams out of the medians, keeps
every good measurement, and holds its memory when a server sends 50 MB in one line, in an error
body or as its model list.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from launchers import bench, stream_result
from reliability_sse import MODES, MisbehavingServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]

FAST = dict(max_tokens=8, shots=1, concurrency=1, long_prompt_words=20, timeout_s=1.0, run_timeout_s=30.0, stall_s=0.6)


def run(mode: str, **kw) -> tuple[bench.BenchReport, float, int]:
    cfg = bench.BenchConfig(**{**FAST, **kw})
    with MisbehavingServer(mode) as srv:
        t0 = time.monotonic()
        rep = bench.run(srv.url, cfg)
        return rep, time.monotonic() - t0, srv.requests


# (mode, what the one-line finding says, the flag the streams get, config changes)
SLOW = {"stall_s": 30.0}             # only the deadline may end these, however loaded the machine
BROKEN = [
    ("http500", "HTTP 500: 'internal error: boom", "errored", {}),
    ("html", "no SSE stream in the reply: '<html><body>Welcome to nginx!", "empty", {}),
    ("short", "ended after 3 of 8 tokens without a finish reason", "short", {}),
    ("empty", "the stream carried no content", "empty", {}),
    ("slow_drip", "request deadline (1 s) reached with", "errored", SLOW),
    ("stall", "stalled: no data for 0.6 s after 3 content chunks", "errored", {"timeout_s": 5.0}),
    ("error_event", "error event in the stream: 'CUDA error: an illegal memory access'", "errored", {}),
    ("flood", "the server sent more than 96 content chunks for 8 tokens", "errored", {}),
    ("garbage", "the stream carried no content", "empty", {}),
]


@pytest.mark.parametrize("mode,finding,flag,kw", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_stream_is_one_line_flagged_and_never_a_measurement(mode, finding, flag, kw):
    rep, wall, requests = run(mode, **kw)
    assert rep.ttft_s is None and rep.decode_tps is None and rep.itl_s.n == 0    # nothing enters a median
    shots = 3 + (flag == "short")               # a short stream is an answer: the long prompt runs too
    assert rep.excluded == ((flag, shots),) and f"{shots} {flag}" in rep.excluded_text
    first = rep.failures[0]
    assert finding in first and "(6 requests, first: warm-up code)" in first, rep.failures
    # the run stops after six requests in a row got nothing (3 warm-ups + 3 shots), not after all
    if flag != "short":
        assert rep.stopped == "6 requests in a row got no answer" and requests == 6
    assert all("\n" not in f for f in rep.failures) and len(rep.failures) <= 2
    assert wall < 6 * rep.config.timeout_s + 10, wall             # each request within its deadline
    assert bench.no_measurement(rep).startswith(f"{rep.url}: no usable measurement (")


QUIRKS = ["bad_chunks", "huge_chunk", "hang_models", "huge_models", "ok"]


def test_every_misbehaviour_has_its_test():
    assert {b[0] for b in BROKEN} | set(QUIRKS) == set(MODES)


@pytest.mark.parametrize("mode", QUIRKS)
def test_a_server_with_quirks_still_gives_every_measurement(mode):
    rep, wall, _ = run(mode, timeout_s={"hang_models": 2.0, "huge_chunk": 30.0}.get(mode, 5.0))
    assert rep.failures == () and rep.excluded == ()
    assert [k.tokens for k in rep.kinds] == [8, 8, 8] and rep.decode_tps is not None   # no measurement lost
    if mode == "bad_chunks":
        assert any("SSE chunks of an unexpected shape were skipped" in n for n in rep.notes), rep.notes
    if mode == "huge_chunk":
        assert any("SSE lines over 1 MiB were skipped" in n for n in rep.notes), rep.notes
    if mode == "hang_models":
        assert rep.model == "default" and wall < 20


def test_a_cut_stream_among_good_ones_is_left_out_and_the_verdict_says_so():
    from launchers.report import bench_doc, plain
    from launchers.verdict import Band, Verdict

    good = stream_result.StreamResult(True, None, 0.1, 1.0, (0.1, 0.2, 0.3), 3, 7, True, "m", finish="length")
    cut = stream_result.StreamSoFar(0.0)
    cut.arrivals = [0.1, 0.1001, 0.1002]            # 3 of 16 tokens in a burst, then a clean close
    res = cut.result(0.2, 16)
    assert not res.ok and res.flag == "short" and res.decode_tps > 10_000   # the lie it would have told
    rep, _, _ = run("short", long_prompt_words=0)
    v = Verdict("decode tok/s (1 stream)", "no_measurement", None, Band(10, 20), None)
    text = plain(bench_doc(rep, [v]))
    assert "3 short of 3 streams left out of the medians" in text
    assert "→ no_measurement (3 short of 3 streams left out of the medians)" in text
    assert good.ok and good.decode_tps == pytest.approx(10.0)


def test_the_whole_run_stops_at_its_deadline_with_what_it_has():
    # a token every 0.2 s, never done: the first request runs into the 3 s run deadline
    rep, wall, requests = run("slow_drip", timeout_s=30.0, run_timeout_s=3.0, stall_s=30.0)
    assert wall < 3.0 + 5, wall
    assert rep.stopped == "the run deadline (3 s) was reached" and requests == 1
    assert rep.failures[0].startswith("warm-up code: run deadline reached with ")
    assert rep.failures[-1] == ("stopped early: the run deadline (3 s) was reached; skipped: warm-up, "
                                "single streams, long-prompt prefill")


def test_bench_cli_with_a_short_timeout_ends_against_an_endless_stream(capsys):
    """The issue's report: one token every while, never [DONE], `bench --timeout 5` ran forever."""
    from advisor.cli import main

    with MisbehavingServer("slow_drip") as srv:
        t0 = time.monotonic()
        rc = main(["bench", "--url", srv.url, "--timeout", "1", "--max-tokens", "8", "--shots", "1",
                   "--long-prompt-words", "0"])
        wall = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == 1 and wall < 20
    last = err.strip().splitlines()[-1]
    assert last.startswith("nvfp4-advisor: error: ") and "no usable measurement" in last and "deadline" in last


def test_deadlines_are_shown_and_in_the_json(capsys):
    from advisor.cli import main

    with MisbehavingServer("ok") as srv:
        rc = main(["bench", "--url", srv.url, "--max-tokens", "8", "--shots", "1", "--long-prompt-words", "0",
                   "--timeout", "7", "--run-timeout", "90"])
        out = capsys.readouterr().out
        assert rc == 0 and "deadlines: 7 s per request, 90 s for the run" in " ".join(out.split())
        rc = main(["bench", "--url", srv.url, "--max-tokens", "8", "--shots", "1", "--long-prompt-words", "0",
                   "--timeout", "7", "--run-timeout", "90", "--json"])
    cfg = json.loads(capsys.readouterr().out)["report"]["config"]
    assert rc == 0 and cfg["timeout_s"] == 7 and cfg["run_timeout_s"] == 90


PEAK = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {root!r})
    from advisor.cli import main
    main(["bench", "--url", sys.argv[1], "--max-tokens", "8", "--shots", "1", "--long-prompt-words", "0",
          "--timeout", "20", "--json"])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, file=sys.stderr)
""")


def _peak_mb(mode: str) -> int:
    with MisbehavingServer(mode) as srv:
        out = subprocess.run([sys.executable, "-c", PEAK.format(root=str(ROOT)), srv.url], capture_output=True,
                             text=True, timeout=120)
    return int(out.stderr.strip().splitlines()[-1])


def test_50_mb_in_one_line_or_one_error_body_does_not_reach_memory():
    base = _peak_mb("ok")
    for mode in ("huge_chunk", "http500", "huge_models"):
        assert _peak_mb(mode) < base + 25, mode

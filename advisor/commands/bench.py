"""`nvfp4-advisor bench --url URL`: measure a running OpenAI-compatible server (streaming) and
judge it against the plan's prediction."""

from __future__ import annotations

NAME = "bench"
HELP = "benchmark a server on 127.0.0.1 (TTFT, ITL, tokens/s, concurrency, prefill) vs the plan"
ORDER = 61


def _url(text: str) -> str:
    """The base URL's port must parse (urllib raises a bare ValueError at first use otherwise)."""
    import argparse
    from urllib.parse import urlsplit

    try:
        urlsplit(text).port
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{_shown(text)}: {str(err).lower()}") from None
    return text


def _userinfo(url: str) -> tuple[str, ...]:
    """user:password in http://user:password@host/ (a secret: never echoed)."""
    from urllib.parse import urlsplit

    netloc = urlsplit(url).netloc
    return (netloc.rpartition("@")[0],) if "@" in netloc else ()


def _shown(url: str) -> str:
    from advisor.redact import redact

    return redact(url, _userinfo(url))


def add_arguments(parser) -> None:
    from advisor.commands._args import number, whole

    parser.add_argument("--url", required=True, type=_url, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", help="model name to send (default: the first id of /v1/models)")
    parser.add_argument("--plan", metavar="PLAN.json",
                        help="`plan --json` output (or a prediction file) to judge against")
    parser.add_argument("--concurrency", type=whole(1, 4096), default=1, metavar="N",
                        help="concurrent streams (default 1)")
    parser.add_argument("--max-tokens", type=whole(1, 10**7), default=512, metavar="N",
                        help="output tokens per request (default 512)")
    parser.add_argument("--shots", type=whole(1, 1000), default=3, metavar="N",
                        help="shots per prompt kind (default 3)")
    parser.add_argument("--long-prompt-words", type=whole(0, 10**7), default=3000, metavar="N",
                        help="words in the long-prefill prompt; 0 skips it (default 3000)")
    parser.add_argument("--timeout", type=number(0, 86400), default=300.0, metavar="S",
                        help="per-request timeout (default 300)")
    parser.add_argument("--api-key-env", metavar="VAR", help="read the API key from this environment variable")


def run(args):
    """Credentials in --url (user:pass@) are replaced by *** in every message and in the report."""
    from advisor.errors import AdvisorError
    from advisor.redact import redact

    secrets = _userinfo(args.url)
    try:
        outcome = _run(args)
    except AdvisorError as err:
        if secrets:
            raise type(err)(redact(str(err), secrets)) from None
        raise
    return outcome


def _run(args):
    import os
    import sys
    from urllib.parse import urlparse

    from advisor.commands import Outcome
    from advisor.errors import AdvisorError, UsageError
    from advisor.jsonout import document
    from launchers import bench, report, verdict, watchdog

    base = bench.check_url(args.url)
    cfg = bench.BenchConfig(max_tokens=args.max_tokens, shots=args.shots, concurrency=args.concurrency,
                            long_prompt_words=max(0, args.long_prompt_words), timeout_s=args.timeout)
    prediction = verdict.load_prediction(args.plan) if args.plan else None
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise UsageError(f"--api-key-env {args.api_key_env}: that environment variable is empty or unset")
    port = urlparse(base).port or 80
    pids = watchdog.listener_pids(port)
    dog = watchdog.Watchdog(lambda: pids).start() if pids else None

    def say(msg):
        if not args.json:
            print(f"  {msg}", file=sys.stderr, flush=True)

    try:
        rep = bench.run(base, cfg, model=args.model, api_key=key, on_progress=say)
    finally:
        samples = dog.stop() if dog else []
    if _userinfo(args.url):
        import dataclasses

        rep = dataclasses.replace(rep, url=_shown(rep.url))
    found = watchdog.findings(samples) if dog else None
    if rep.ttft_s is None and (rep.concurrency is None or rep.concurrency.aggregate_tps is None):
        raise AdvisorError(f"{base}: no request succeeded ({rep.failures[0] if rep.failures else 'no data'})")
    verdicts = []
    if prediction:
        verdicts.append(verdict.judge("decode tok/s (1 stream)", rep.decode_tps, prediction.decode_tps,
                                      watch_findings=found, what_if=prediction.what_if))
        if rep.concurrency:
            band = verdict.aggregate_for(prediction, rep.concurrency.streams)
            verdicts.append(verdict.judge(f"aggregate tok/s ({rep.concurrency.streams} streams)",
                                          rep.concurrency.aggregate_tps, band, watch_findings=found,
                                          what_if=prediction.what_if))
    payload = {"report": rep, "prediction": prediction, "verdicts": verdicts,
               "watchdog": found if found is not None else None,
               "watched_pids": pids}
    return Outcome(json=document("bench", payload), doc=report.bench_doc(rep, verdicts, found or ()),
                   exit_code=1 if rep.failures else 0)

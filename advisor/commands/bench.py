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
        _ = urlsplit(text).port
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
    # None: launchers.bench.BenchConfig's default, the one the TUI's Bench tab uses too (the help states it);
    # the ranges are BenchConfig's own (tests/launch/test_launch_bench_limits.py holds them equal)
    parser.add_argument("--concurrency", type=whole(1, 512), default=None, metavar="N",
                        help="concurrent streams (default 4)")
    parser.add_argument("--max-tokens", type=whole(1, 32768), default=None, metavar="N",
                        help="output tokens per request (default 512)")
    parser.add_argument("--shots", type=whole(1, 20), default=None, metavar="N",
                        help="shots per prompt kind (default 3)")
    parser.add_argument("--long-prompt-words", type=whole(0, 10**7), default=None, metavar="N",
                        help="words in the long-prefill prompt; 0 skips it (default 3000)")
    parser.add_argument("--timeout", type=number(0, 86400), default=None, metavar="S",
                        help="deadline of each whole request, streaming included (default 300)")
    parser.add_argument("--run-timeout", type=number(0, 7 * 86400), default=None, metavar="S",
                        help="deadline of the whole run: it stops there and reports what it measured (default 3600)")
    parser.add_argument("--api-key-env", metavar="VAR", help="read the API key from this environment variable")
    parser.add_argument("--server-log", metavar="FILE",
                        help="the server's log: read the draft acceptance the engine prints (vLLM, FastLLM "
                             "pos_accept_rate, SGLang accept len) and give the matching plan flags")
    from advisor import engines

    parser.add_argument("--engine", choices=engines.tuned(),
                        help="the engine that wrote --server-log (default: recognised from its lines)")
    ref = parser.add_argument_group("output agreement with a reference server (quality)")
    ref.add_argument("--reference-url", type=_url, metavar="URL",
                     help="a server of the reference (e.g. the BF16 model, or `convert --dequantized` of this one): "
                          "the bundled prompts go to both at temperature 0; greedy token agreement, first "
                          "divergence, top-k KL where both return logprobs, per prompt kind")
    ref.add_argument("--reference-model", metavar="NAME",
                     help="model name on the reference server (default: its first)")
    ref.add_argument("--prompts", metavar="YAML", help="prompt set (default: profiles/prompts/quality.yaml)")
    ref.add_argument("--agreement-tokens", type=whole(1, 4096), metavar="N",
                     help="tokens per prompt (default: the prompt set's max_tokens)")
    ref.add_argument("--agreement-only", action="store_true", help="skip the speed suite")
    ref.add_argument("--reference-server-log", metavar="FILE",
                     help="the reference server's log: with --server-log, compare the draft acceptance both print")


def run(args):
    """Credentials in --url (user:pass@) are replaced by *** in every message and in the report."""
    from advisor.errors import AdvisorError
    from advisor.redact import redact

    secrets = _userinfo(args.url) + (_userinfo(args.reference_url) if getattr(args, "reference_url", None) else ())
    try:
        outcome = _run(args)
    except AdvisorError as err:
        if secrets:
            raise type(err)(redact(str(err), secrets)) from None
        raise
    return outcome


def _run(args):
    import os

    from advisor.commands import Outcome
    from advisor.doc import Doc, Paragraph
    from advisor.errors import UsageError
    from advisor.jsonout import document
    from advisor.services import bench
    from launchers import report

    given = dict(max_tokens=args.max_tokens, shots=args.shots, concurrency=args.concurrency,
                 long_prompt_words=None if args.long_prompt_words is None else max(0, args.long_prompt_words),
                 timeout_s=args.timeout, run_timeout_s=args.run_timeout)
    bench.check_url(args.url)
    cfg = bench.config(**given)                    # the TUI's defaults too
    prediction = bench.load_prediction(args.plan) if args.plan else None
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise UsageError(f"--api-key-env {args.api_key_env}: that environment variable is empty or unset")
    if getattr(args, "agreement_only", False) or getattr(args, "reference_server_log", None):
        _check_agreement_args(args)
    if getattr(args, "agreement_only", False):
        ag, doc = _agreement(args, key)
        return Outcome(json=document("bench", {"agreement": ag}), doc=doc, exit_code=1 if ag.failures else 0)
    from advisor.progress import bar_for

    bar = bar_for(args, "bench")
    try:
        run = bench.measure(args.url, cfg, model=args.model, api_key=key, on_step=bar)
    finally:
        bar.close()
    rep, found = run.report, run.findings
    if _userinfo(args.url):
        import dataclasses

        rep = dataclasses.replace(rep, url=_shown(rep.url))
    bench.require_measurement(rep)
    check, check_note = bench.launch_check(run.launched, args.plan, run.port)
    verdicts = bench.judge(rep, prediction, kernel_check=check, watch_findings=found) if prediction else []
    logged = bench.logged_acceptance(args.server_log, getattr(args, "engine", None)) if args.server_log else None
    payload = {"report": rep, "prediction": prediction, "verdicts": verdicts,
               "watchdog": found if found is not None else None,
               "watched_pids": list(run.watched_pids), "kernel_check": check, "kernel_check_note": check_note}
    doc = report.bench_doc(rep, verdicts, found or ())
    doc = doc + (report.kernel_check_doc(check) if check is not None else Doc()) + Doc((Paragraph(check_note, "dim"),))
    if args.server_log:
        payload["logged_acceptance"] = logged
        doc = _with_acceptance(doc, logged, args.server_log)
    failed = bool(rep.failures)
    if getattr(args, "reference_url", None):
        ag, ag_doc = _agreement(args, key)
        payload["agreement"] = ag
        doc = doc + ag_doc
        failed = failed or bool(ag.failures)
    return Outcome(json=document("bench", payload), doc=doc, exit_code=1 if failed else 0)


def _with_acceptance(doc, logged, path: str):
    from advisor.doc import Doc, KeyValues, Paragraph

    if logged is None:
        return Doc(doc.blocks + (Paragraph(f"{path}: no draft-acceptance line (vLLM SpecDecoding metrics, FastLLM "
                                           "pos_accept_rate, SGLang accept len)", "dim"),))
    rows = [(f"position {i + 1}", f"{u:.1%} of verify steps") for i, u in enumerate(logged.per_position)]
    rows.append(("mean accepted length", f"{logged.mean_length:.2f} tokens / step"))
    rows.append(("read as", f"{logged.kind} ({logged.source})"))
    if logged.plan_args():
        rows.append(("plan with", logged.plan_args()))
    return Doc(doc.blocks + (KeyValues(tuple(rows), title=f"Draft acceptance ({logged.engine} log)"),))


def _check_agreement_args(args) -> None:
    from advisor.errors import UsageError

    if not getattr(args, "reference_url", None):
        flag = "--agreement-only" if args.agreement_only else "--reference-server-log"
        raise UsageError(f"{flag} needs --reference-url")


def _agreement(args, key):
    """Output agreement with the reference server and, where both servers report draft acceptance,
    the canary; returns (report with credentials hidden, its doc)."""
    import dataclasses
    import sys

    from advisor.quality.report import agreement_doc
    from advisor.services import bench

    def say(msg):
        if not args.json:
            print(f"  {msg}", file=sys.stderr, flush=True)

    ag = bench.agreement(args.url, args.reference_url, prompts=args.prompts, model=args.model,
                         reference_model=args.reference_model, api_key=key, max_tokens=args.agreement_tokens,
                         timeout_s=args.timeout if args.timeout is not None else 300.0, on_progress=say,
                         server_log=args.server_log, reference_server_log=args.reference_server_log,
                         engine=getattr(args, "engine", None))
    shown = dataclasses.replace(ag, candidate_url=_shown(ag.candidate_url), reference_url=_shown(ag.reference_url))
    return shown, agreement_doc(shown)

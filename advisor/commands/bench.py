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
    parser.add_argument("--engine", choices=("vllm", "sglang", "fastllm"),
                        help="the engine that wrote --server-log (default: recognised from its lines)")
    ref = parser.add_argument_group("output agreement with a reference server (quality)")
    ref.add_argument("--reference-url", type=_url, metavar="URL",
                     help="a server of the reference (e.g. the BF16 model, or `convert --dequantized` of this one): "
                          "the bundled prompts go to both at temperature 0; greedy token agreement, first "
                          "divergence, top-k KL where both return logprobs, per prompt kind")
    ref.add_argument("--reference-model", metavar="NAME", help="model name on the reference server (default: its first)")
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
    from urllib.parse import urlparse

    from advisor.commands import Outcome
    from advisor.doc import Doc, Paragraph
    from advisor.errors import AdvisorError, UsageError
    from advisor.jsonout import document
    from launchers import bench, report, verdict, watchdog

    base = bench.check_url(args.url)
    given = dict(max_tokens=args.max_tokens, shots=args.shots, concurrency=args.concurrency,
                 long_prompt_words=None if args.long_prompt_words is None else max(0, args.long_prompt_words),
                 timeout_s=args.timeout, run_timeout_s=args.run_timeout)
    cfg = bench.BenchConfig(**{k: v for k, v in given.items() if v is not None})   # the TUI's defaults too
    prediction = verdict.load_prediction(args.plan) if args.plan else None
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
    port = urlparse(base).port or 80
    pids = watchdog.listener_pids(port)
    dog = watchdog.Watchdog(lambda: pids).start() if pids else None
    from advisor.progress import bar_for
    from launchers import served

    launched = served.find(port)           # started by `nvfp4-advisor launch`: its log holds the kernels
    bar = bar_for(args, "bench")
    try:
        rep = bench.run(base, cfg, model=args.model, api_key=key, on_step=bar)
    finally:
        bar.close()
        samples = dog.stop() if dog else []
    if _userinfo(args.url):
        import dataclasses

        rep = dataclasses.replace(rep, url=_shown(rep.url))
    # a server launched for the CPU (transformers serve --device cpu) is not a CPU fallback
    expect_gpu = not (launched is not None and launched.device == "cpu")
    found = watchdog.findings(samples, expect_gpu=expect_gpu) if dog else None
    if rep.ttft_s is None and (rep.concurrency is None or rep.concurrency.aggregate_tps is None):
        raise AdvisorError(bench.no_measurement(rep))
    check, check_note = launch_check(launched, args.plan, port)
    verdicts = []
    if prediction:
        verdicts.append(verdict.judge("decode tok/s (1 stream)", rep.decode_tps, prediction.decode_tps,
                                      kernel_check=check, watch_findings=found, what_if=prediction.what_if))
        if rep.concurrency:
            band = verdict.aggregate_for(prediction, rep.concurrency.streams)
            verdicts.append(verdict.judge(f"aggregate tok/s ({rep.concurrency.streams} streams)",
                                          rep.concurrency.aggregate_tps, band, kernel_check=check,
                                          watch_findings=found, what_if=prediction.what_if))
    logged = _logged_acceptance(args.server_log, getattr(args, "engine", None)) if args.server_log else None
    payload = {"report": rep, "prediction": prediction, "verdicts": verdicts,
               "watchdog": found if found is not None else None,
               "watched_pids": pids, "kernel_check": check, "kernel_check_note": check_note}
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


def launch_check(launched, plan_path: str | None, port: int):
    """The kernel check of a server `nvfp4-advisor launch` started on ``port``: its log against explain
    for its checkpoint on the plan's GPU (--plan) or this machine's, and the plan's KV pool. (None, why)
    for a server started otherwise."""
    from launchers import kernel_check

    if launched is None:
        return None, (f"kernels not checked: no server started by `nvfp4-advisor launch` listens on port {port} "
                      "(a launch records its log; that is what the check reads)")
    plan_doc = _plan_json(plan_path)
    explanation, why = _launch_explanation(launched, plan_doc)
    from launchers.settings import predicted_kv_tokens

    kv = predicted_kv_tokens(plan_doc) if plan_doc is not None else None
    check = kernel_check.check(launched.log_tail(), explanation, kv)
    note = f"kernel check: {launched.engine} server pid {launched.record.pid}, log {launched.record.log}"
    return check, note + (f"; {why}" if why else "")


def _plan_json(path: str | None) -> dict | None:
    import json

    if not path:
        return None
    from advisor.textfile import read_text

    try:
        doc = json.loads(read_text(path, what="plan file"))
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("recommendation"), dict) else None


def _launch_explanation(launched, plan_doc):
    """explain's prediction for the launched command: (Explanation, "") or (None, why not)."""
    import os
    from types import SimpleNamespace

    from advisor.commands.launch import TUNED_ENGINES, launch_options
    from advisor.errors import AdvisorError

    if launched.engine not in TUNED_ENGINES or not launched.model:
        return None, f"no prediction: the advisor has no {launched.engine} rules"
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.rules import load_rules
    from launchers.served import _argv

    try:
        if plan_doc is not None and isinstance(plan_doc.get("gpu"), dict) and plan_doc["gpu"].get("id"):
            from advisor.gpu_table import get_gpu

            spec = get_gpu(plan_doc["gpu"]["id"])
        else:
            from advisor.probe import probe, resolve_gpus

            spec = resolve_gpus(probe(), "auto", None).spec      # the server runs on this machine
        argv = _argv(launched.record.command_line)
        tp = next((int(argv[i + 1]) for i, w in enumerate(argv[:-1])
                   if w in ("--tensor-parallel-size", "--tp-size", "--tp") and argv[i + 1].isdigit()), 1)
        cmd = SimpleNamespace(argv=tuple(argv), engine=launched.engine, env=(), settings=SimpleNamespace(tp=tp))
        options = launch_options(cmd, load_rules(launched.engine, None)[0], os.environ)
        info = inspect_checkpoint(launched.model)
        return explain(info, spec, gpus=max(tp, 1), engine=launched.engine, options=options), ""
    except AdvisorError as err:
        return None, f"no prediction: {err}"


def _logged_acceptance(path: str, engine: str | None):
    """The engine's own acceptance line from its log (the last 4 MiB: engines print running windows)."""
    from advisor.textfile import read_text
    from launchers import spec_log

    return spec_log.parse(read_text(path, limit_bytes=4 * 2**20, what="server log", tail=True), engine)


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
    """Output agreement with the reference server (launchers/agreement.py) and, where both servers
    report draft acceptance, the canary; returns (report, doc blocks)."""
    import dataclasses
    import sys

    from advisor.quality.canary import compare_acceptance, from_log
    from advisor.quality.prompts import load_prompts
    from advisor.quality.report import agreement_doc
    from launchers import agreement

    prompts = load_prompts(args.prompts)

    def say(msg):
        if not args.json:
            print(f"  {msg}", file=sys.stderr, flush=True)

    ag = agreement.run(args.url, args.reference_url, prompts, model=args.model, reference_model=args.reference_model,
                       api_key=key, max_tokens=args.agreement_tokens,
                       timeout_s=args.timeout if args.timeout is not None else 300.0, on_progress=say)
    if ag.canary is None and args.server_log and args.reference_server_log:
        cand = from_log(_logged_acceptance(args.server_log, getattr(args, "engine", None)))
        ref = from_log(_logged_acceptance(args.reference_server_log, getattr(args, "engine", None)))
        if cand is not None and ref is not None:
            ag = dataclasses.replace(ag, canary=compare_acceptance(cand, ref))
    shown = dataclasses.replace(ag, candidate_url=_shown(ag.candidate_url), reference_url=_shown(ag.reference_url))
    return shown, agreement_doc(shown)

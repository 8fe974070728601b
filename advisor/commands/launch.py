"""`nvfp4-advisor launch CHECKPOINT --engine E`: a tuned serve command, supervised until ready,
with a kernel check against `explain`, kept serving until Ctrl-C."""

from __future__ import annotations

from advisor import engines
from advisor.services.launch.command import TUNED_ENGINES, Tuning

NAME = "launch"
HELP = "generate, start and supervise an engine server (vllm, sglang, fastllm, llamacpp, trtllm, transformers)"
ORDER = 60

ENGINES = engines.launchable()
SPEC_METHODS = ("mtp", "eagle", "eagle3", "dflash", "dspark", "ngram", "draft_model")


def _devices(text: str) -> tuple[int, ...]:
    import argparse

    try:
        devices = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1 — got {text!r}") from None
    if not devices or any(d < 0 for d in devices):
        raise argparse.ArgumentTypeError(f"expected GPU indices (0 or more) like 0,1 — got {text!r}")
    return devices


def add_arguments(parser) -> None:
    from advisor.commands._args import MAX_GPUS, add_gpu_arguments, number, whole

    parser.add_argument("checkpoint", metavar="CHECKPOINT", nargs="?",
                        help="checkpoint folder (GGUF file for llamacpp); optional with --profile")
    parser.add_argument("--engine", choices=ENGINES, help="serving engine")
    parser.add_argument("--engine-version", metavar="V", help="target this engine version's flags (default: detect)")
    add_gpu_arguments(parser, default=None)
    parser.add_argument("--port", type=whole(1, 65535), help="port on 127.0.0.1 (default 8000)")
    parser.add_argument("--served-model-name", metavar="NAME")
    parser.add_argument("--tp", type=whole(1, MAX_GPUS), help="tensor parallel size (default: --gpus or 1)")
    parser.add_argument("--pp", type=whole(1, MAX_GPUS), help="pipeline parallel size")
    parser.add_argument("--nodes", type=whole(1, MAX_GPUS), help="nodes (more than 1: Ray cluster steps, vLLM only)")
    parser.add_argument("--head-address", metavar="IP", help="multi-node: IP of the Ray head node")
    parser.add_argument("--kv-cache-dtype", metavar="DTYPE",
                        help="auto, bf16, fp16, fp8_e4m3, fp8_e5m2, nvfp4, q8_0, q4_0 (or the engine's own name)")
    parser.add_argument("--max-batch", type=whole(1, 65536), help="concurrent sequences")
    parser.add_argument("--max-model-len", type=whole(1, 10**8), help="context length")
    parser.add_argument("--max-batched-tokens", type=whole(1, 10**8))
    parser.add_argument("--memory-share", type=number(0, 1), help="fraction of GPU memory for the engine")
    parser.add_argument("--chunked-prefill", type=whole(0, 10**8), metavar="TOKENS",
                        help="chunk size; 0 disables where possible")
    parser.add_argument("--spec-method", choices=SPEC_METHODS, help="speculative decoding method")
    parser.add_argument("--draft-tokens", type=whole(1, 16), help="tokens drafted per step (not counting the anchor)")
    parser.add_argument("--draft-model", metavar="PATH", help="draft checkpoint")
    parser.add_argument("--linear-backend", metavar="NAME")
    parser.add_argument("--moe-backend", metavar="NAME")
    parser.add_argument("--no-cuda-graphs", action="store_true", help="turn CUDA graphs off")
    parser.add_argument("--cuda-devices", type=_devices, metavar="0,1", help="CUDA_VISIBLE_DEVICES for the server")
    parser.add_argument("--device", help="transformers serve: cpu | cuda | auto")
    parser.add_argument("--weight-dtype", help="engine --dtype override (FastLLM)")
    parser.add_argument("--api-key-env", metavar="VAR", help="read the server API key from this environment variable")
    parser.add_argument("--extra-arg", action="append", default=None, metavar="ARG",
                        help="pass ARG to the engine unchanged (repeatable; use --extra-arg=--flag)")
    parser.add_argument("--plan", metavar="PLAN.json",
                        help="take settings (and the KV pool prediction) from `plan --json` (default: plan now "
                             "when the GPU is known: --gpu, or the probed cards)")
    parser.add_argument("--workload", metavar="W", default="interactive",
                        help="workload the settings are tuned for (default interactive; list: profiles/workloads.yaml)")
    parser.add_argument("--profile", metavar="NAME", help="start from a saved launch profile")
    parser.add_argument("--save-profile", metavar="NAME", help="save these settings as a launch profile")
    parser.add_argument("--dry-run", action="store_true", help="print the command and exit")
    parser.add_argument("--check", action="store_true", help="start, wait until ready, run the kernel check, stop")
    parser.add_argument("--ready-timeout", type=number(0, 7 * 86400), default=900.0, metavar="S",
                        help="seconds (default 900)")
    parser.add_argument("--log", metavar="FILE", help="server log file (default: user data dir)")
    parser.add_argument("--follow", action="store_true", help="echo the server log to stderr")
    parser.add_argument("--stop-leftovers", action="store_true",
                        help="stop servers an earlier nvfp4-advisor run left running")


_SIMPLE = ("port", "served_model_name", "tp", "pp", "nodes", "head_address", "kv_cache_dtype", "max_batch",
           "max_model_len", "max_batched_tokens", "memory_share", "chunked_prefill", "linear_backend",
           "moe_backend", "device", "weight_dtype", "cuda_devices")


def tune(args) -> Tuning:
    """The plan for CHECKPOINT on the known GPU (--gpu ID, or the probed cards), as the TUI and `report`
    make it; without a known GPU (or for an engine without rules) the command stays untuned and says why."""
    from advisor.errors import AdvisorError

    engine, model = args.engine, args.checkpoint
    if args.plan or args.profile or not model or not engine:
        return Tuning()
    if engine not in TUNED_ENGINES:
        return Tuning(why_not=f"the advisor has no {engine} rules to tune it")
    from advisor.commands._args import selection_from_args

    try:
        sel = selection_from_args(args)
    except AdvisorError:
        if (getattr(args, "gpu", None) or "auto").strip().lower() != "auto":
            raise                               # a bad --gpu is a usage error, as everywhere
        return Tuning(why_not="no GPU named and none found here")
    from advisor.services.launch import command

    return command.tune(model, engine, args.workload, sel)


def build_settings(args, environ, tuning: Tuning | None = None):
    """ServeSettings from profile < plan (--plan, or ``tuning``'s) < explicit flags (edge code: reads
    files and the environment)."""
    import dataclasses

    from advisor.errors import UsageError
    from advisor.services.launch import profiles
    from advisor.services.launch.command import read_plan
    from launchers.settings import ServeSettings, Speculative, settings_from_plan

    base, key_env, plan_doc = None, args.api_key_env, None
    if args.profile:
        base, saved_env = profiles.load(args.profile)
        key_env = key_env or saved_env
    model = args.checkpoint or (base.model if base else None)
    engine = args.engine or (base.engine if base else None)
    if not model or not engine:
        raise UsageError("give CHECKPOINT and --engine (or --profile NAME)")
    if args.plan:
        plan_doc = read_plan(args.plan, engine)
        base = settings_from_plan(plan_doc, engine=engine, model=model,
                                  **({} if base is None else {"port": base.port}))
    elif base is None and tuning is not None and tuning.plan is not None:
        plan_doc = tuning.plan
        base = settings_from_plan(plan_doc, engine=engine, model=model)
    s = base or ServeSettings(engine=engine, model=model)
    s = dataclasses.replace(s, engine=engine, model=model)
    changes = {k: getattr(args, k) for k in _SIMPLE if getattr(args, k, None) is not None}
    if args.engine_version:
        changes["version"] = args.engine_version
    if args.tp is None and args.gpus and "tp" not in changes and plan_doc is None and not args.profile:
        changes["tp"] = args.gpus
    if args.no_cuda_graphs:
        changes["cuda_graphs"] = False
    if args.extra_arg:
        changes["extra_args"] = tuple(args.extra_arg)
    if args.spec_method or args.draft_tokens or args.draft_model:
        old = s.speculative
        method = args.spec_method or (old.method if old else None)
        tokens = args.draft_tokens or (old.draft_tokens if old else None)
        if not method or not tokens:
            raise UsageError("speculative decoding needs --spec-method and --draft-tokens")
        changes["speculative"] = Speculative(method, tokens, args.draft_model or (old.draft_model if old else None))
    if key_env:
        key = environ.get(key_env)
        if not key:
            origin = f"--api-key-env {key_env}" if args.api_key_env else \
                f"launch profile {args.profile!r} reads the API key from {key_env}"
            raise UsageError(f"{origin}: that environment variable is empty or unset")
        changes["api_key"] = key
    return dataclasses.replace(s, **changes), key_env, plan_doc


def _explanation(args, settings, notes, version, cmd, tuning: Tuning | None = None):
    """explain's prediction for the kernel check; None (with a note) when it cannot be made."""
    known = tuning is not None and tuning.selection is not None
    if settings.engine not in TUNED_ENGINES or (args.gpu is None and not known):
        if settings.engine in TUNED_ENGINES:
            notes.append("kernel prediction skipped: pass --gpu ID|auto to compare the engine's kernels with explain")
        return None
    import os

    from advisor.commands._args import selection_from_args
    from advisor.errors import AdvisorError
    from advisor.services.launch.command import predicted_path

    try:
        sel = tuning.selection if tuning is not None and tuning.selection is not None else selection_from_args(args)
        return predicted_path(settings, cmd, version, sel, os.environ)
    except AdvisorError as err:
        notes.append(f"kernel prediction skipped: {err}")
        return None


def _tuning_payload(args, tuning: Tuning) -> dict:
    if args.plan:
        return {"tuned": True, "source": args.plan}
    if args.profile:
        return {"tuned": None, "source": f"launch profile {args.profile!r}"}
    if tuning.plan is not None and tuning.selection is not None:      # a plan is made for a selection
        return {"tuned": True, "source": "plan", "gpus": tuning.label, "selection": tuning.selection.note,
                "workload": args.workload}
    return {"tuned": False, "why": tuning.why_not}


def _tuning_doc(args, tuning: Tuning):
    """One line under the command: what it is tuned for, or that it is not and how to tune it."""
    from advisor.doc import Doc, Paragraph

    if args.plan or args.profile:
        return Doc()
    if tuning.plan is not None and tuning.selection is not None:
        where = "" if tuning.selection.source == "probed" else " (what-if)"
        return Doc((Paragraph(f"Tuned for {tuning.label}{where}, workload {args.workload}: the command the TUI "
                              "and `report` show.", "good"),))
    how = ("add --gpu ID (e.g. --gpu rtx-3090; list: nvfp4-advisor gpus) to tune it for that card, or --plan "
           "PLAN.json from `nvfp4-advisor plan CHECKPOINT --gpu ID --json`") if args.engine in TUNED_ENGINES else \
        "set batch, context and memory flags yourself"
    return Doc((Paragraph(f"Untuned: {tuning.why_not}; engine defaults apart from the flags given. To tune: {how}.",
                          "warn"),))


def run(args):
    with _sigterm_as_ctrl_c():
        return _run(args)


class _sigterm_as_ctrl_c:
    """`kill PID` (systemd, docker stop) and a closed terminal (SIGHUP) stop the server the way Ctrl-C
    does: SIGINT -> SIGTERM -> SIGKILL over its group, pidfile removed. Python's default action for
    both ends the advisor at once, leaving the engine to the parent-death SIGKILL (which reaches its
    leader only, not the engine's worker processes) and the pidfile behind."""

    SIGNALS = ("SIGTERM", "SIGHUP")

    def __enter__(self):
        import signal
        import threading

        self.old = {}
        if threading.current_thread() is threading.main_thread():
            for name in self.SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    self.old[sig] = signal.signal(sig, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        import signal

        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        return False


def _run(args):
    import os
    import sys
    import time
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.doc import Bullets, Doc, KeyValues, Paragraph
    from advisor.errors import EXIT_UNSUPPORTED, BadInput
    from advisor.jsonout import document
    from advisor.services.launch import command, profiles, server as serving
    from launchers import report
    from launchers.settings import predicted_kv_tokens
    from launchers.supervisor import ServerFailed

    tuning = tune(args)
    settings, key_env, plan_doc = build_settings(args, os.environ, tuning)
    settings = command.with_scheme(settings)
    command.check_tp(settings, args.gpus)
    cmd = command.command_for(settings)
    overridden = command.extra_arg_overrides(cmd)
    payload = {"command": cmd, "dry_run": bool(args.dry_run), "tuning": _tuning_payload(args, tuning)}
    doc = report.command_doc(cmd) + _tuning_doc(args, tuning)
    if args.save_profile:
        path = profiles.save(args.save_profile, settings, api_key_env=key_env)
        payload["saved_profile"] = str(path)
        doc = doc + Doc((Paragraph(f"saved launch profile {args.save_profile!r}: {path}", "good"),))
    demo = settings.model.startswith("demo:")
    if demo and not args.dry_run:
        raise BadInput("a bundled demo holds configs only, no weights: launch a real checkpoint folder or hub id "
                       "(--dry-run shows the command)", path=settings.model)
    notes: list[str] = []
    # explain before the dry-run return: a printed command must carry the failure explain predicts
    explanation = _explanation(args, settings, notes, cmd.version, cmd, tuning)
    predicted_fail = explanation is not None and not explanation.runs
    # the engine refuses the whole model while reading its config (explain's config-loading stage)
    refused = explanation is not None and explanation.load is not None and explanation.load.refused
    if args.dry_run:
        verdict = tuning.verdict if tuning.plan is plan_doc else ""
        warnings = command.dry_run_warnings(settings, explanation, verdict, tuple(overridden))
        payload.update(warnings=warnings, notes=notes)
        if warnings:
            doc = doc + Doc((Bullets(tuple(warnings), title="Before you run it", style="warn"),))
        if notes:
            doc = doc + Doc((Bullets(tuple(notes), style="dim"),))
        return Outcome(json=document("launch", payload), doc=doc, exit_code=EXIT_UNSUPPORTED if refused else 0)
    if settings.model.startswith(("/", "./", "../", "~")) and not Path(settings.model).expanduser().exists():
        # an explicit local path (a hub id would be org/name): the engine would fail only after starting
        raise BadInput("no such checkpoint folder or file", path=settings.model)

    quiet = bool(args.json)

    def say(text: str) -> None:
        if not quiet:
            from advisor.untrusted import printable

            print(printable(text, multiline=True), file=sys.stderr, flush=True)

    left = serving.leftovers()
    if left:
        if args.stop_leftovers or (sys.stdin.isatty() and not quiet and _ask(left)):
            for rec in left:
                res = serving.stop_leftover(rec)
                say(f"stopped leftover {rec.engine} server pid {rec.pid} on port {rec.port} ({res.signal})")
        else:
            for r in left:   # now, not only in the final report: a serving launch ends with Ctrl-C
                say(f"warning: pid {r.pid} ({r.engine}, port {r.port}) was left running by an earlier launch; "
                    "stop it with --stop-leftovers")
            payload["leftovers"] = [{"pid": r.pid, "port": r.port, "engine": r.engine} for r in left]
            running = tuple(f"pid {r.pid}: {r.engine} on port {r.port} — {r.command_line}" for r in left)
            doc = doc + Doc((Bullets(running, title="Servers left running by an earlier run (stop: --stop-leftovers)",
                                     style="warn"),))
    for text in overridden:
        say(f"warning: {text}")
    notes += overridden
    if predicted_fail:
        # said before the (possibly long) load, which is expected to end in an error
        say(f"warning: explain predicts this will not run: {explanation.summary}")
        notes.append(f"explain predicted that this does not run: {explanation.summary}")
    kv_pred = predicted_kv_tokens(plan_doc) if plan_doc else None
    log_path = Path(args.log) if args.log else serving.log_path(settings.engine, settings.port)
    server = serving.server_for(cmd, log_path, (lambda line: say(f"  | {line}")) if args.follow else None)
    say(f"starting: {cmd.display()}")
    say(f"log: {log_path}")
    last = [0.0]

    def progress(p) -> None:
        if p.elapsed_s - last[0] >= 5.0:
            last[0] = p.elapsed_s
            say(f"  {p.elapsed_s:5.0f} s  {p.phase}: {p.probe}  {p.last_line[:100]}")

    payload["log"] = str(log_path)
    try:
        server.start()
        for swept in server.swept:     # what an earlier, killed advisor left running: ended now
            say(swept.text)
        payload["swept"] = server.swept
        ready = server.wait_ready(args.ready_timeout, on_progress=progress)
    except ServerFailed as err:
        stop = server.stop() if server.proc else None
        payload.update(ready=False, error=str(err), findings=list(err.findings), log_tail=list(err.tail), stop=stop)
        return Outcome(json=document("launch", payload), doc=doc + report.failure_doc(err), exit_code=1)
    except KeyboardInterrupt:
        server.stop()
        raise
    kc = serving.check_kernels(server, explanation, kv_pred)
    check_doc = report.kernel_check_doc(kc) + report.findings_doc(ready.findings, "Warnings at start-up")
    payload.update(ready=True, ready_after_s=ready.elapsed_s, url=ready.base_url, kernel_check=kc,
                   startup_findings=list(ready.findings), notes=notes)
    doc = doc + Doc((KeyValues((("ready after", f"{ready.elapsed_s:.1f} s"), ("url", ready.base_url))),)) + check_doc
    if notes:
        doc = doc + Doc((Bullets(tuple(notes), style="dim"),))
    if args.check:
        payload["stop"] = server.stop()
        return Outcome(json=document("launch", payload), doc=doc)
    say(report.plain(check_doc))
    dog = serving.watch(lambda: [p.pid for p in server.processes()])
    exit_code = 0
    try:
        say(f"serving {settings.model_id} at {ready.base_url} — Ctrl-C to stop")
        while server.returncode is None:
            time.sleep(0.5)
        failure = server.failure(f"{settings.engine} exited with status {server.returncode} while serving",
                                  server.returncode)
        doc = doc + report.failure_doc(failure)
        payload["error"] = str(failure)
        exit_code = 1
    except KeyboardInterrupt:
        say("stopping …")
    samples = dog.stop()
    payload["stop"] = server.stop()
    payload["watchdog"] = serving.watch_findings(samples, settings.device)
    stopped = payload["stop"]
    doc = doc + Doc((KeyValues((("stopped with", stopped.signal or "already exited"),
                                ("after", f"{stopped.elapsed_s:.1f} s"))
                               + ((("also ended", ", ".join(stopped.escaped) + " (had left the process group)"),)
                                  if stopped.escaped else ())
                               + ((("still running", ", ".join(map(str, stopped.survivors))),)
                                  if stopped.survivors else ())),))
    if payload["watchdog"]:
        doc = doc + Doc((Bullets(tuple(f"{w.text} ({w.evidence})" for w in payload["watchdog"]),
                                 title="Watchdog while serving", style="warn"),))
    return Outcome(json=document("launch", payload), doc=doc, exit_code=exit_code)


def _ask(left) -> bool:
    import sys

    for r in left:
        print(f"nvfp4-advisor: pid {r.pid} ({r.engine}, port {r.port}) was left running by an earlier launch",
              file=sys.stderr)
    try:
        return input("stop it now? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False

"""The serve command for a checkpoint: tuned from the plan (or untuned, saying why), the TUI's edited
shell line read back, and the checks made before anything runs (the TP split, --extra-arg flags that
repeat the command's own, explain's prediction for what is really launched)."""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING

from advisor import engines
from advisor.errors import AdvisorError, UsageError

if TYPE_CHECKING:      # annotations only: the launchers load when a command is built
    from advisor.kernel_path.model import Explanation
    from advisor.probe.selection import GpuSelection
    from advisor.services.analysis import Analysis
    from launchers.command import LaunchCommand

TUNED_ENGINES = engines.tuned()       # the engines with rules: plan tunes their settings

# Flags the supervisor relies on: an --extra-arg repeating them would make readiness poll the wrong place.
_SUPERVISED = ("--port", "--host")


@dataclasses.dataclass(frozen=True)
class Tuning:
    """What the command was tuned for: the plan (``plan --json`` form) and the GPU selection, or why not."""

    plan: dict | None = None
    selection: GpuSelection | None = None
    why_not: str = ""
    verdict: str = ""                  # the analysis' verdict reason ("" when nothing stands in the way)

    @property
    def label(self) -> str:
        return f"{self.selection.count} x {self.selection.spec.name}" if self.selection is not None else ""


def tune(model: str, engine: str, workload: str, selection: GpuSelection) -> Tuning:
    """The plan for MODEL on the GPU selection, as the TUI and `report` make it (the shared analysis)."""
    from advisor.services.analysis import Selection, analyze

    a = analyze(Selection(model, selection.spec.id, selection.count, engine, None, workload), gpu=selection.spec)
    if a.plan is None:
        return Tuning(selection=selection, why_not="; ".join(a.errors.values()) or "no plan")
    return Tuning(plan=a.plan.to_json(), selection=selection, verdict=a.verdict_reason)


def untuned_tp(analysis: Analysis) -> int:
    """TP for an engine the plan did not tune: the plan's TP where it fits the GPUs, else the largest
    split of the model (attention and KV heads) over at most the selected GPUs."""
    from advisor.cost.feasibility import tp_problem

    gpus = max(1, analysis.selection.gpus)
    if analysis.checkpoint is None:           # nothing to split: no command is made without a checkpoint
        return 1
    arch = analysis.checkpoint.arch
    planned = analysis.plan.recommendation.tp if analysis.plan is not None else None
    if planned and planned <= gpus and tp_problem(planned, arch) is None:
        return planned
    return next((n for n in range(gpus, 0, -1) if tp_problem(n, arch) is None), 1)


def generated_command(analysis: Analysis | None, engine: str | None = None, port: int = 8000, *,
                      gpu_here: bool = False) -> LaunchCommand | None:
    """The tuned serve command for an analysis (plan recommendation -> ServeSettings -> argv).
    Another engine than the explained one gets untuned settings with a TP the model allows;
    ``gpu_here``: the probe found a GPU (transformers serve then picks it, else runs on the CPU)."""
    from launchers.engines import build_command
    from launchers.settings import ServeSettings, settings_from_plan

    if analysis is None or analysis.checkpoint is None:
        return None
    engine = engine or analysis.selection.engine
    model = analysis.checkpoint.source
    moe = analysis.checkpoint.arch.moe is not None
    if analysis.plan is not None and engine == analysis.selection.engine:
        settings = settings_from_plan(analysis.plan, engine=engine, model=model, port=port,
                                      checkpoint_scheme=analysis.checkpoint.label, checkpoint_moe=moe)
    else:
        es = engines.find(engine)
        tp = 1 if es and es.one_device else untuned_tp(analysis)     # transformers serve: one device
        settings = ServeSettings(engine=engine, model=model, port=port, tp=tp,
                                 device="cpu" if es and es.cpu_without_gpu and not gpu_here else None,
                                 checkpoint_scheme=analysis.checkpoint.label, checkpoint_moe=moe)
    return build_command(settings)


def launch_note(analysis: Analysis | None, engine: str | None, explainable: tuple[str, ...] = ()) -> str:
    """The warning above the command: the verdict `launch --dry-run` prints for the explained engine,
    or that another engine's command is not tuned ('' when neither applies)."""
    if analysis is None or analysis.checkpoint is None:
        return ""
    planned = analysis.selection.engine
    if engine and engine != planned:
        how = ("pick the engine on the Explain tab to tune it" if engine in explainable
               else f"the advisor has no {engine} rules to tune it")
        return f"not tuned: explain/plan use {planned} — {how}"
    return analysis.verdict_reason


def demo_note(analysis: Analysis | None) -> str:
    """What to replace in a demo's command ('' for a real checkpoint): the demo has no weights."""
    source = analysis.selection.checkpoint if analysis is not None else ""
    if not source.startswith("demo:"):
        return ""
    return (f"{source} is a demo (configs, no weights): this is its tuned command. To run it, replace {source} "
            "with your checkpoint — load your folder on F3 (Checkpoint) and the command is re-tuned for it — "
            "then Ctrl+L.")


def launch_command_line(analysis: Analysis | None, engine: str | None = None, *, gpu_here: bool = False) -> str:
    """The generated command as a shell line ('# why' when it cannot be made, '' without a checkpoint)."""
    try:
        cmd = generated_command(analysis, engine, gpu_here=gpu_here)
    except AdvisorError as err:
        return f"# {err}"
    return cmd.display() if cmd is not None else ""


def command_from_line(line: str, analysis: Analysis | None, engine: str | None = None, *,
                      gpu_here: bool = False) -> LaunchCommand:
    """The (possibly edited) shell line -> a LaunchCommand: leading KEY=VALUE words are the
    environment, `--port N` / `--host H` update where readiness is polled."""
    base = generated_command(analysis, engine, gpu_here=gpu_here)
    if base is None:
        raise UsageError("load a checkpoint first")
    try:
        words = shlex.split(line.replace("\\\n", " "), comments=True)   # join `\`-continued lines
    except ValueError as err:
        raise UsageError(f"cannot parse the command: {err}") from None
    env = []
    while words and "=" in words[0] and not words[0].startswith("-") and words[0].split("=", 1)[0].isidentifier():
        k, v = words.pop(0).split("=", 1)
        env.append((k, v))
    if not words:
        raise UsageError("the command is empty")
    settings = base.settings
    for flag in ("--port", "--host"):
        if flag in words:
            i = words.index(flag) + 1
            try:
                settings = (dataclasses.replace(settings, port=int(words[i])) if flag == "--port"
                            else dataclasses.replace(settings, host=words[i]))
            except (IndexError, ValueError):
                raise UsageError(f"{flag} needs a value") from None
    return dataclasses.replace(base, settings=settings, argv=tuple(words), env=tuple(env))


def with_scheme(settings):
    """Fill checkpoint_scheme / checkpoint_moe from a local checkpoint's headers (engine warnings only)."""
    from pathlib import Path

    if settings.checkpoint_scheme or not Path(settings.model).is_dir():
        return settings
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.textfile import NotRegularFile

    try:
        info = inspect_checkpoint(settings.model)
    except NotRegularFile:
        raise                                   # a FIFO/device config would hang the engine as well
    except (AdvisorError, OSError, ValueError):
        return settings
    return dataclasses.replace(settings, checkpoint_scheme=info.label, checkpoint_moe=info.arch.moe is not None)


def check_tp(settings, gpus: int | None) -> None:
    """The TP check plan and explain make (heads and experts divisible, enough GPUs), for a checkpoint
    readable here (a folder or a bundled demo); the engine would refuse the same --tp at start-up."""
    from pathlib import Path

    if not settings.tp or settings.tp == 1:
        return
    if not (settings.model.startswith("demo:") or Path(settings.model).is_dir()):
        return
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.cost.feasibility import check_tp as check

    try:
        info = inspect_checkpoint(settings.model)
    except (AdvisorError, OSError, ValueError):
        return                              # unreadable: the engine's own check still applies
    check(settings.tp, gpus or settings.tp, info.arch)


def extra_arg_overrides(cmd) -> list[str]:
    """Warnings for --extra-arg flags that repeat one the generated command already sets (the engine
    takes the last one); refuses --port/--host, which readiness polling depends on."""
    extra = list(cmd.settings.extra_args or ())
    if not extra:
        return []
    base = list(cmd.argv[:len(cmd.argv) - len(extra)]) if tuple(cmd.argv[-len(extra):]) == tuple(extra) \
        else list(cmd.argv)
    set_here: dict[str, str] = {}
    for i, a in enumerate(base):
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            set_here[name] = val if eq else (base[i + 1] if i + 1 < len(base) and not base[i + 1].startswith("--")
                                             else "")
    out = []
    for a in extra:
        name = a.partition("=")[0]
        if not name.startswith("--") or name not in set_here:
            continue
        shown = f"{name} {set_here[name]}".strip()
        if name in _SUPERVISED:
            raise UsageError(f"--extra-arg {name} overrides {shown}, but readiness polls {set_here[name]}: "
                             f"use the advisor's own {name} instead")
        out.append(f"--extra-arg {name} overrides {shown} that the command already sets (the engine takes the last)")
    return out


def launch_options(cmd, rules, environ):
    """explain's options for what is really launched: the engine flags explain knows (backends, FastLLM
    --moe_device ...) and the KV dtype as they stand in the command, TP, and the engine's environment
    variables. Without them the prediction is for engine defaults and the kernel check compares the
    engine's log with a different setup."""
    from advisor.kernel_path.options import InstallOptions

    argv = list(cmd.argv)

    def value(cli: str) -> str | None:
        for i, a in enumerate(argv):
            if a == cli and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(cli + "="):
                return a.split("=", 1)[1]
        return None

    flags = tuple((name, v) for name, spec in rules.flags.items() if (v := value(spec.cli)) is not None)
    kv = value("--kv-cache-dtype") or value("--kv_cache_dtype")
    prefixes = es.env_prefixes if (es := engines.find(cmd.engine)) else ()
    env = {k: v for k, v in environ.items() if k.startswith(prefixes) and not k.endswith("API_KEY")}
    env.update((k, v) for k, v in cmd.env if not k.endswith("API_KEY"))
    return InstallOptions(flags=flags, kv_cache_dtype=None if kv in (None, "auto") else kv,
                          tp=cmd.settings.tp, env=tuple(sorted(env.items())))


def predicted_path(settings, cmd, version: str | None, selection: GpuSelection, environ) -> Explanation:
    """explain's prediction for the command as launched (its flags, KV dtype, TP and environment) on
    the GPU selection; raises AdvisorError when it cannot be made."""
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.kernel_path.explain import explain
    from advisor.kernel_path.rule_files import load_rules

    info = inspect_checkpoint(settings.model)
    options = launch_options(cmd, load_rules(settings.engine, version)[0], environ)
    return explain(info, selection.spec, gpus=selection.count, engine=settings.engine, version=version,
                   options=options)


def dry_run_warnings(settings, explanation: Explanation | None, verdict: str = "",
                     overridden: tuple[str, ...] = ()) -> list[str]:
    """What to know before running the command: a demo has no weights, explain predicts a failure
    (else the plan's verdict, e.g. the weights do not fit), --extra-arg flags that override the command's."""
    warnings = []
    if settings.model.startswith("demo:"):
        warnings.append("demo checkpoint: configs only, no weights — the engine needs your real checkpoint "
                        f"in place of {settings.model}")
    if explanation is not None and not explanation.runs:
        warnings.append(f"explain predicts this will not run: {explanation.summary}")
    elif verdict:
        warnings.append(verdict)     # the TUI's launch note says the same
    return warnings + list(overridden)


def command_for(settings):
    """The LaunchCommand for SETTINGS, in the flags of the engine version they name (else the one
    installed here, else the newest the advisor knows)."""
    from launchers.engines import build_command
    from launchers.versions import detect_version

    return build_command(settings, None if settings.version else detect_version(settings.engine))


def read_plan(path: str, engine: str) -> dict:
    """A `plan --json` document to launch ENGINE from: a BadInput for anything else, a usage error for
    another engine's plan, Unsupported for a plan without a launch line (the weights do not fit ...)."""
    import json

    from advisor.errors import BadInput
    from advisor.textfile import read_text

    try:
        plan_doc = json.loads(read_text(path, what="plan file"))
    except (ValueError, RecursionError) as err:
        raise BadInput(f"not JSON: {err}", path=path) from None
    if not isinstance(plan_doc, dict) or "recommendation" not in plan_doc:
        raise BadInput("not a `plan --json` document (no recommendation)", path=path)
    planned = (plan_doc.get("engine") or {}).get("name") if isinstance(plan_doc.get("engine"), dict) else None
    if planned and planned != engine:
        # the recommendation is in the planned engine's spellings and memory model
        raise UsageError(f"{path} is a plan for {planned}: launch --engine {planned}, or make a plan for "
                         f"{engine} (`nvfp4-advisor plan CHECKPOINT --engine {engine} --json`)")
    blocked = (plan_doc.get("recommendation") or {}).get("blocked")
    if blocked:
        from advisor.errors import Unsupported

        raise Unsupported(f"{path}: the plan has no launch line: {blocked}")
    return plan_doc

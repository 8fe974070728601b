"""EngineSpec: what the advisor knows about one serving engine, in one frozen record.

Data and small pure functions only: the core reads it before any work (the TUI's engine picker,
`plan --engine` checks), so nothing here imports pydantic, yaml or the launchers (the launcher is named
by its module, and launchers/engines resolves it; its log lines are data in log_signatures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from advisor.engines.log_signatures import LogSignature


def _no_args(*_args: object) -> list[str]:
    return []


def _draft_for_block_drafters(method: str) -> bool:
    return method in ("dflash", "dspark")


@dataclass(frozen=True)
class EngineSpec:
    name: str                                   # the --engine value
    label: str                                  # how people write it
    launcher: str                               # module building its serve command (launchers.engines.vllm)
    rule_family: str | None = None              # profiles/engines/<family>-<version>.yaml; None: no rules
    memory_family: str | None = None            # profiles/engine_memory/<family>-<version>.yaml
    env_prefixes: tuple[str, ...] = ()          # its own environment variables (read into explain's options)
    tp_flag: str = "--tp"
    tp_flag_from: int = 1                       # the launcher passes the TP flag from this size on
    one_device: bool = False                    # serves from one device: an untuned launch gets TP 1
    cpu_without_gpu: bool = False               # runs on the CPU where no GPU was found
    context_flag: str = ""                      # caps one request's context
    chat_template_flag: str = ""
    # spellings of engine-neutral settings (advisor.engines.flags dispatches to them)
    speculative: Callable[[str, int, str | None], list[str]] = _no_args   # (method, draft tokens, draft model)
    needs_draft: Callable[[str], bool] = _draft_for_block_drafters       # engine-neutral method
    prefix_cache: Callable[[bool], list[str]] = _no_args
    plan_states_prefix_cache: bool = False      # its default depends on the model: the plan says what it assumed
    eager: Callable[[str | None], list[str]] = _no_args                  # (engine version) -> flags
    eager_env: tuple[tuple[str, str], ...] = ()  # CUDA graphs off by environment instead of a flag
    no_host_overlap: tuple[str, ...] = ()       # flags that stop it scheduling the next step while the GPU works
    no_host_overlap_since: str = ""             # first version with those flags (before it: no overlap, no flag)
    no_host_overlap_source: str = ""
    allreduce: str = ""                         # TP all-reduce is this library's (nccl), not a kernel of its own
    allreduce_source: str = ""
    four_bit_kv_warning: str = ""               # measured on this engine: replaces the plan's generic warning
    # what is installed (launchers.versions): the programs its command runs, the Python distributions that
    # carry its version, and the version whose flags were read (used when it is not installed here)
    executables: tuple[str, ...] = ()
    distributions: tuple[str, ...] = ()
    reference_version: str | None = None
    version_flag: bool = False                  # ask `PROGRAM --version` even when the program is a Python script
    # readiness quirks (launchers.supervisor, launchers.signatures)
    log_signatures: tuple[LogSignature, ...] = ()   # its own log lines (advisor.engines.log_signatures)
    ready_event: str = ""                       # a log event that means ready before the HTTP probe answers
    exits_zero_on_failure: bool = False         # a fatal error still exits with status 0

    @property
    def tuned(self) -> bool:
        """It has rule files (and a memory profile): explain and plan tune its settings."""
        return self.rule_family is not None

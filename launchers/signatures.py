"""Log signatures matched against an engine's log: what it prints when ready, out of memory, falling back, stuck.

The signatures are engine data (advisor.engines.log_signatures, named by each EngineSpec); this module only
matches them. An engine's list is its own signatures plus the common ones, kind by kind in KINDS order; within
a kind the engine's own ready line is tried before the HTTP server's generic ones, and for every other kind the
generic signature comes first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from advisor import engines
from advisor.engines.log_signatures import (  # noqa: F401  (kinds re-exported for the supervisor and tests)
    BAD_FLAG, COMMON, FAILURE_KINDS, FALLBACK, FATAL, KINDS, KV_SMALL, NCCL, NOT_READY, OOM, PORT, READY,
    UNSUPPORTED, LogSignature)


@dataclass(frozen=True)
class Finding:
    kind: str
    cause: str
    remedy: str
    line: str                        # the log line that matched (already redacted by the caller)
    source: str = ""

    @property
    def fatal(self) -> bool:
        return self.kind in FAILURE_KINDS


@lru_cache(maxsize=None)
def signatures_for(engine: str) -> tuple[LogSignature, ...]:
    """The signatures a line of ``engine``'s log is matched against, in match order."""
    spec = engines.find(engine)
    own = spec.log_signatures if spec else ()
    out: list[LogSignature] = []
    for kind in KINDS:
        mine = [s for s in own if s.kind == kind]
        common = [s for s in COMMON if s.kind == kind]
        out += mine + common if kind == READY else common + mine
    return tuple(out)


def match_line(engine: str, line: str) -> list[Finding]:
    return [Finding(sig.kind, sig.cause, sig.remedy, line.strip(), sig.source)
            for sig in signatures_for(engine) if sig.matches(line)]


def diagnose(engine: str, lines: Iterable[str], exit_code: int | None = None) -> list[Finding]:
    """Every signature finding in ``lines`` (first occurrence of each cause), failures first."""
    seen: set[tuple[str, str]] = set()
    out: list[Finding] = []
    for line in lines:
        for f in match_line(engine, line):
            key = (f.kind, f.cause)
            if key not in seen:
                seen.add(key)
                out.append(f)
    if exit_code is not None and not any(f.fatal for f in out):
        spec = engines.find(engine)
        if exit_code == 0 and spec and spec.exits_zero_on_failure:
            out.append(Finding(FATAL, f"{spec.label} exited with status 0 before serving", "read the log tail", ""))
        else:
            out.append(Finding(FATAL, f"the server exited with status {exit_code} before it was ready",
                               "read the log tail for the first error", ""))
    return sorted(out, key=lambda f: (not f.fatal, f.kind == READY))

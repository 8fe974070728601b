"""Draft acceptance as the engine itself logs it, read from its server log.

Each engine prints a different quantity, and `plan --acceptance` must know which one it was given:

  vLLM     SpecDecoding metrics: Mean acceptance length: 2.41, ..., Per-position acceptance rate: 0.812,
           0.457, 0.140, Avg Draft acceptance rate: 46.9%
           -> unconditional: accepted at position i / drafts (vllm/v1/spec_decode/metrics.py:82-136@0.33.0)
  FastLLM  [Qwen3.5 DFlash2] pos_accept_rate=[85.00%, 62.10%, 40.00%].
           -> unconditional, percent: accepts at position i / validations that proposed it
              (src/models/qwen3_5.cpp:12929-12939, 16215-16240@d3aea32f; the 1.9.0 binary prints
              '[Qwen3.5 %s] pos_accept_rate=[' for MTP and DFlash2)
  SGLang   Decode batch, ..., accept len: 2.35, accept rate: 0.45, ...
           -> only the mean accepted length per verify step (metrics_reporter.py:965-1005@0.5.23)

The last such line of the log wins (the engines print running windows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advisor.cost.speculative import from_mean_length, to_conditional

_FLOAT = r"[0-9]+(?:\.[0-9]+)?"
_VLLM = re.compile(r"SpecDecoding metrics: Mean acceptance length: (" + _FLOAT + r").*?"
                   r"Per-position acceptance rate: ((?:" + _FLOAT + r")(?:, " + _FLOAT + r")*)")
_FASTLLM = re.compile(r"\[([^\]\n]+)\][^\n]*?pos_accept_rate=\[([^\]\n]*)\]")
_SGLANG = re.compile(r"accept len: (" + _FLOAT + r"), accept rate: (" + _FLOAT + r")")

SOURCES = {
    "vllm": "vllm/v1/spec_decode/metrics.py:82-136@0.33.0",
    "fastllm": "src/models/qwen3_5.cpp:12929-12939, 16215-16240@d3aea32f; libfastllm_tools.so 1.9.0 "
               "'[Qwen3.5 %s] pos_accept_rate=['",
    "sglang": "sglang/srt/managers/scheduler_components/metrics_reporter.py:965-1005@0.5.23",
}


@dataclass(frozen=True)
class LoggedAcceptance:
    engine: str
    kind: str                          # unconditional | mean_length
    per_position: tuple[float, ...]    # as printed, as fractions (() when the engine prints only a mean)
    mean_length: float                 # tokens per verify step, the bonus token included
    line: str
    source: str

    def conditional(self, draft_tokens: int | None = None) -> tuple[float, ...]:
        """a_i = P(position i accepted | positions < i were), what `plan` models."""
        if self.per_position:
            return to_conditional(self.per_position, "unconditional")
        return from_mean_length(self.mean_length, draft_tokens or 0)

    def plan_args(self, draft_tokens: int | None = None) -> str:
        """The `plan` flags that reuse this measurement."""
        if self.per_position:
            rates = ",".join(f"{u:.3g}" for u in self.per_position)
            return f"--acceptance {rates} --acceptance-kind unconditional"
        conditional = self.conditional(draft_tokens)
        if not conditional:
            return ""
        return f"--acceptance {','.join(f'{a:.3g}' for a in conditional)} --acceptance-kind conditional"


def _rates(text: str, percent: bool) -> tuple[float, ...] | None:
    out = []
    for part in text.split(","):
        part = part.strip().rstrip("%")
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            return None
        out.append(v / 100.0 if percent else v)
    return tuple(out) if out and all(0.0 <= v <= 1.0 for v in out) else None


def _vllm(text: str):
    for m in _VLLM.finditer(text):
        rates = _rates(m.group(2), percent=False)
        if rates is not None:
            yield m.start(), LoggedAcceptance("vllm", "unconditional", rates, float(m.group(1)),
                                              _line(text, m.start()), SOURCES["vllm"])


def _fastllm(text: str):
    for m in _FASTLLM.finditer(text):
        rates = _rates(m.group(2), percent="%" in m.group(2))
        if rates is not None:
            yield m.start(), LoggedAcceptance("fastllm", "unconditional", rates, 1.0 + sum(rates),
                                              _line(text, m.start()), SOURCES["fastllm"])


def _sglang(text: str):
    for m in _SGLANG.finditer(text):
        yield m.start(), LoggedAcceptance("sglang", "mean_length", (), float(m.group(1)),
                                          _line(text, m.start()), SOURCES["sglang"])


READERS = {"vllm": _vllm, "fastllm": _fastllm, "sglang": _sglang}   # the engines that log acceptance


def parse(text: str, engine: str | None = None) -> LoggedAcceptance | None:
    """The engine's last acceptance line in ``text`` (None: no such line; engine None: any engine's)."""
    found: LoggedAcceptance | None = None
    pos = -1
    for name, read in READERS.items():
        if engine not in (None, name):
            continue
        for start, acceptance in read(text):
            if start > pos:
                pos, found = start, acceptance
    return found


def _line(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:end if end >= 0 else len(text)].strip()[:300]


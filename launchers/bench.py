"""The benchmark suite against one OpenAI-compatible server (field-notes §6): real chat requests,
temperature 0, a fixed number of output tokens, three prompt kinds x three shots, medians; then N
concurrent streams, a long-prompt prefill, the TTFT of a short request sent during a long prefill, and
speculative acceptance from /metrics when exposed.

The requests go through launchers.stream_client (deadlines, caps, flags for streams that err, carry no
content or end short); a flagged stream is left out of every median. The run stops at its own deadline
(``--run-timeout``) or after FAILED_IN_A_ROW requests in a row that got nothing, with what it has.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from advisor.errors import UsageError
from advisor.progress import Step
from launchers.server_metrics import SpecAcceptance, scrape_metrics, spec_acceptance
from launchers.stream_client import DEFAULT_STALL_S, Client, Meter
from launchers.stream_result import EMPTY, ERRORED, MAX_LINE_BYTES, SHORT, StreamResult, shown

FAILED_IN_A_ROW = 6               # the run stops after this many requests in a row got nothing at all

PROMPTS = {
    "code": "Write a Python function that merges two sorted lists into one sorted list, "
            "then explain its time complexity and give three test cases.",
    "math": "A train leaves at 9:40 and travels 318 km at 84 km/h, then 142 km at 71 km/h. "
            "When does it arrive? Show every step of the calculation.",
    "prose": "Write a short story about a lighthouse keeper who finds a message in a bottle. "
             "Describe the sea, the weather and what the message says.",
}
SHORT_PROMPT = "Say hello in five words."


# ---------------------------------------------------------------- statistics
def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no data."""
    vals = sorted(values)
    if not vals:
        return None
    k = max(0, min(len(vals) - 1, math.ceil(q / 100 * len(vals)) - 1))
    return vals[k]


def median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


@dataclass(frozen=True)
class Dist:
    mean: float | None
    p50: float | None
    p99: float | None
    n: int

    @staticmethod
    def of(values: Iterable[float | None]) -> Dist:
        vals = [v for v in values if v is not None]
        return Dist(statistics.fmean(vals) if vals else None, percentile(vals, 50), percentile(vals, 99), len(vals))


# ---------------------------------------------------------------- the suite
@dataclass(frozen=True)
class BenchConfig:
    """The one set of defaults of the CLI `bench` and the TUI's Bench tab (field-notes §6: a fixed
    number of output tokens, three prompt kinds x three shots, concurrent streams, a long prefill)."""

    max_tokens: int = 512
    shots: int = 3
    concurrency: int = 4
    long_prompt_words: int = 3000
    interference: bool = True
    timeout_s: float = 300.0          # deadline of one whole request (streaming included)
    run_timeout_s: float = 3600.0     # deadline of the whole run: it stops there with what it has
    stall_s: float = DEFAULT_STALL_S  # silence allowed once tokens flow (capped at timeout_s)

    def __post_init__(self):
        if not (1 <= self.max_tokens <= 32768):
            raise UsageError("max tokens must be between 1 and 32768")
        if not (1 <= self.shots <= 20):
            raise UsageError("shots must be between 1 and 20")
        if not (1 <= self.concurrency <= 512):
            raise UsageError("concurrency must be between 1 and 512")
        if not all(0 < t < math.inf for t in (self.timeout_s, self.run_timeout_s, self.stall_s)):
            raise UsageError("timeouts must be positive and finite")

    @property
    def planned_tokens(self) -> int:
        """Output tokens the whole suite asks for: warm-ups, single streams, concurrent streams, the
        long prompt and the interference probe (the progress bar's total)."""
        n = len(PROMPTS) * (1 + self.shots) * self.max_tokens
        if self.concurrency > 1:
            n += self.concurrency * self.max_tokens
        if self.long_prompt_words > 0:
            n += 4 + (2 * 16 + 16 + 4 if self.interference else 0)
        return n

    @property
    def settings(self) -> str:
        """The settings in words, printed with the results (the defaults are stated, not implied)."""
        conc = f"{self.concurrency} concurrent streams" if self.concurrency > 1 else "no concurrent streams"
        long = (f"a {self.long_prompt_words:,}-word prefill prompt" if self.long_prompt_words > 0
                else "no long-prompt prefill")
        return (f"{self.max_tokens} output tokens per request, {self.shots} shot(s) of each of {len(PROMPTS)} prompt "
                f"kinds (after one warm-up each), {conc}, {long}")

    @property
    def deadlines(self) -> str:
        stall = min(self.stall_s, self.timeout_s)
        return (f"{self.timeout_s:g} s per request, {self.run_timeout_s:g} s for the run; a stream silent for "
                f"{stall:g} s after its first token counts as stalled")


@dataclass(frozen=True)
class KindResult:
    kind: str
    shots: int
    failed: int                       # shots left out of the medians (errored, empty or short)
    ttft_s: float | None              # median over shots
    decode_tps: float | None          # median over shots
    tokens: float | None              # median output tokens


@dataclass(frozen=True)
class ConcurrencyResult:
    streams: int
    failed: int
    wall_s: float
    aggregate_tps: float | None       # all output tokens / wall time
    per_stream_tps: Dist              # decode rate of each stream
    ttft_s: Dist


@dataclass(frozen=True)
class PrefillResult:
    prompt_tokens: int | None         # as the server counted them (None: no usage sent)
    prompt_words: int
    prefill_s: float | None           # TTFT of the long prompt


@dataclass(frozen=True)
class InterferenceResult:
    short_ttft_idle_s: float | None
    short_ttft_during_prefill_s: float | None

    @property
    def slowdown(self) -> float | None:
        a, b = self.short_ttft_idle_s, self.short_ttft_during_prefill_s
        return b / a if a and b else None


@dataclass(frozen=True)
class BenchReport:
    url: str
    model: str
    config: BenchConfig
    kinds: tuple[KindResult, ...]
    ttft_s: float | None              # median of all single-stream shots
    itl_s: Dist                       # pooled token gaps of all single-stream shots
    decode_tps: float | None          # median single-stream decode rate
    concurrency: ConcurrencyResult | None
    prefill: PrefillResult | None
    interference: InterferenceResult | None
    spec: SpecAcceptance | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    failures: tuple[str, ...] = field(default_factory=tuple)     # one line per kind of failure
    measured: int = 0                 # measurement requests (warm-ups not counted)
    excluded: tuple[tuple[str, int], ...] = ()                   # (errored | empty | short, count) of those
    stopped: str | None = None        # why the run ended before its last phase

    @property
    def excluded_text(self) -> str | None:
        """'2 short, 1 errored of 9 streams left out of the medians', or None when all counted."""
        if not self.excluded:
            return None
        parts = ", ".join(f"{n} {flag}" for flag, n in self.excluded)
        return f"{parts} of {self.measured} streams left out of the medians"


def long_prompt(words: int) -> str:
    base = ("the quick brown fox jumps over the lazy dog while quantized weights stream from memory "
            "and the tensor cores wait for the next tile of activations").split()
    text = " ".join(base[i % len(base)] for i in range(words))
    return f"Summarise the following text in one sentence.\n\n{text}"


class _Log:
    """Every request of the run with its label; stops the run at the deadline or after
    FAILED_IN_A_ROW requests in a row that got nothing."""

    def __init__(self, client: Client, cfg: BenchConfig):
        self.client, self.cfg = client, cfg
        self.entries: list[tuple[str, StreamResult, bool]] = []      # (label, result, measured)
        self.in_a_row = 0
        self.stopped: str | None = None
        self.skipped: list[str] = []

    def add(self, label: str, r: StreamResult, measured: bool = True) -> StreamResult:
        self.entries.append((label, r, measured))
        self.in_a_row = self.in_a_row + 1 if r.flag in (ERRORED, EMPTY) else 0
        return r

    def go(self, phase: str) -> bool:
        """May ``phase`` start? Records why not."""
        if not self.stopped:
            if self.client.out_of_time():
                self.stopped = f"the run deadline ({self.cfg.run_timeout_s:g} s) was reached"
            elif self.in_a_row >= FAILED_IN_A_ROW:
                self.stopped = f"{self.in_a_row} requests in a row got no answer"
        if self.stopped and phase not in self.skipped:
            self.skipped.append(phase)
        return not self.stopped

    def failures(self) -> tuple[str, ...]:
        groups: dict[str, list[str]] = {}
        for label, r, _ in self.entries:
            if not r.ok:
                groups.setdefault(r.error or r.flag or "failed", []).append(label)
        out = [f"{labels[0]}: {error}" if len(labels) == 1 else f"{error} ({len(labels)} requests, first: {labels[0]})"
               for error, labels in groups.items()]
        if self.stopped:
            out.append(f"stopped early: {self.stopped}; skipped: {', '.join(self.skipped)}")
        return tuple(out)

    def excluded(self) -> tuple[tuple[str, int], ...]:
        counts = Counter(r.flag for _, r, measured in self.entries if measured and r.flag)
        return tuple((flag, counts[flag]) for flag in (SHORT, EMPTY, ERRORED) if counts[flag])


async def run_suite(client: Client, cfg: BenchConfig, *, on_progress: Callable[[str], None] | None = None,
                    on_step: Callable[[Step], None] | None = None) -> BenchReport:
    """``on_progress``: one line per phase; ``on_step``: advisor.progress.Step updates (tokens, ETA)."""
    meter = client.meter = Meter(cfg.planned_tokens, on_step) if on_step is not None else None

    def say(msg: str) -> None:
        if on_progress is not None:
            on_progress(msg)
        if meter is not None:
            meter.enter(msg)
    client.stall_s = min(cfg.stall_s, client.timeout_s)
    client.run_deadline = time.perf_counter() + cfg.run_timeout_s
    log = _Log(client, cfg)
    notes: set[str] = set()
    async with client.http(max(cfg.concurrency, 2)) as http:
        model = await client.resolve_model(http)
        metrics_before = await scrape_metrics(http, client.base_url, min(5.0, client.timeout_s))
        # warm-up: one unmeasured request per prompt kind (first requests pay one-time costs:
        # thread pools, graph/JIT caches; seen as 20x slower first shots on transformers serve)
        for kind, prompt in PROMPTS.items():
            if log.go("warm-up"):
                say(f"warm-up: {kind}")
                log.add(f"warm-up {kind}", await client.stream(http, prompt, cfg.max_tokens), measured=False)
        kinds = []
        singles: list[StreamResult] = []
        for kind, prompt in PROMPTS.items():
            shots = []
            for i in range(cfg.shots):
                if log.go("single streams"):
                    say(f"single stream: {kind} shot {i + 1}/{cfg.shots}")
                    shots.append(log.add(f"{kind} shot {i + 1}", await client.stream(http, prompt, cfg.max_tokens)))
            ok = [r for r in shots if r.ok]
            singles += ok
            kinds.append(KindResult(kind, len(shots), len(shots) - len(ok), median(r.ttft_s for r in ok),
                                    median(r.decode_tps for r in ok), median(r.tokens for r in ok)))
        all_results = list(singles)
        metrics_after = await scrape_metrics(http, client.base_url, min(5.0, client.timeout_s))
        spec = spec_acceptance(metrics_before, metrics_after)

        conc = None
        if cfg.concurrency > 1 and log.go("concurrent streams"):
            say(f"{cfg.concurrency} concurrent streams")
            prompts = list(PROMPTS.values())
            t0 = time.perf_counter()
            res = await asyncio.gather(*(client.stream(http, prompts[i % 3], cfg.max_tokens)
                                         for i in range(cfg.concurrency)))
            wall = time.perf_counter() - t0
            for i, r in enumerate(res):
                log.add(f"concurrent stream {i + 1}", r)
            ok = [r for r in res if r.ok]
            all_results += ok
            conc = ConcurrencyResult(cfg.concurrency, len(res) - len(ok), wall,
                                     sum(r.tokens for r in ok) / wall if ok and wall > 0 else None,
                                     Dist.of(r.decode_tps for r in ok), Dist.of(r.ttft_s for r in ok))

        prefill = interference = None
        if cfg.long_prompt_words > 0 and log.go("long-prompt prefill"):
            say(f"long prompt prefill ({cfg.long_prompt_words} words)")
            lp = long_prompt(cfg.long_prompt_words)
            r = log.add("long prompt", await client.stream(http, lp, 4))
            if r.ok:
                prefill = PrefillResult(r.prompt_tokens, cfg.long_prompt_words, r.ttft_s)
            if cfg.interference and r.ok and log.go("prefill interference"):
                say("short request during a long prefill")
                idle = [log.add("short idle", await client.stream(http, SHORT_PROMPT, 16)) for _ in range(2)]
                long_task = asyncio.ensure_future(client.stream(http, lp, 4))
                await asyncio.sleep(min(0.25 * (r.ttft_s or 0.0), 0.5))
                short = log.add("short during prefill", await client.stream(http, SHORT_PROMPT, 16))
                log.add("long prompt (second)", await long_task)
                interference = InterferenceResult(median(x.ttft_s for x in idle if x.ok),
                                                  short.ttft_s if short.ok else None)
    for r in all_results:
        if not r.done_marker:
            notes.add("the server sent no `data: [DONE]`; streams ended at connection close")
            break
    if all_results and all(r.usage_tokens is None for r in all_results):
        notes.add("the server sent no usage chunk: tokens are counted from content chunks")
    bundled = [r for r in all_results if r.usage_tokens and r.usage_tokens > r.chunks]
    if bundled:
        notes.add("some chunks carry several tokens: ITL is measured per chunk")
    answered = {r.model for r in all_results if r.model}
    if answered and model not in answered:
        notes.add(f"the server answered as {shown(sorted(answered)[0], 80)} for model {shown(model, 80)}")
    early = [r for r in all_results if r.finish == "stop" and r.tokens < cfg.max_tokens]
    if early and not client.minimal:
        notes.add(f"{len(early)} streams stopped at EOS before {cfg.max_tokens} tokens although ignore_eos was sent")
    every = [r for _, r, _ in log.entries]
    if sum(r.bad_chunks for r in every):
        notes.add(f"{sum(r.bad_chunks for r in every)} SSE chunks of an unexpected shape were skipped")
    if sum(r.long_lines for r in every):
        notes.add(f"{sum(r.long_lines for r in every)} SSE lines over {MAX_LINE_BYTES >> 20} MiB were skipped")
    notes |= client.notes
    itls = [x for r in singles for x in r.itls]
    return BenchReport(client.base_url, model, cfg, tuple(kinds), median(r.ttft_s for r in singles), Dist.of(itls),
                       median(r.decode_tps for r in singles), conc, prefill, interference, spec,
                       tuple(sorted(notes)), log.failures(), sum(m for _, _, m in log.entries), log.excluded(),
                       log.stopped)


def run(base_url: str, cfg: BenchConfig, *, model: str | None = None, api_key: str | None = None,
        on_progress: Callable[[str], None] | None = None, on_step: Callable[[Step], None] | None = None) -> BenchReport:
    client = Client(base_url, model=model, api_key=api_key, timeout_s=cfg.timeout_s, stall_s=cfg.stall_s)
    return asyncio.run(run_suite(client, cfg, on_progress=on_progress, on_step=on_step))


def no_measurement(rep: BenchReport) -> str | None:
    """The one-line reason when the run measured nothing usable (None when it did)."""
    if rep.ttft_s is not None or (rep.concurrency is not None and rep.concurrency.aggregate_tps is not None):
        return None
    why = rep.failures[0] if rep.failures else "no data"
    return f"{rep.url}: no usable measurement ({why})"

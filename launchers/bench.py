"""Streaming benchmark client for OpenAI-compatible servers (httpx, asyncio, SSE).

Method (field-notes §6): real chat requests, temperature 0, a fixed number of output tokens, three
prompt kinds x three shots, medians; then N concurrent streams, a long-prompt prefill, the TTFT of a
short request sent during a long prefill, and speculative acceptance from /metrics when exposed.
Token arrival times are taken with ``perf_counter`` as each SSE line arrives; ITL is their spacing.

Tolerates servers that send no ``data: [DONE]``, no usage chunk, or ignore the model name. Bounded
against servers that misbehave (README "Limits and guarantees"):
- time: every request ends by its deadline (``--timeout``, the whole request, however the bytes
  trickle in) and the run by its own (``--run-timeout``); a stream silent for ``stall_s`` once tokens
  flow is ended as stalled;
- memory: SSE lines are read with a cap (MAX_LINE_BYTES; a longer line is skipped and counted), error
  bodies and /v1/models and /metrics replies are read up to a cap, content chunks per stream are
  capped;
- truth: a stream that errs, carries no content or ends short of its tokens is flagged and left out
  of every median; chunks of an unexpected shape are counted and skipped, never fatal.
Only loopback URLs are accepted.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from advisor.errors import AdvisorError, UsageError
from advisor.untrusted import one_line, quoted

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_LINE_BYTES = 1 << 20          # an SSE line longer than 1 MiB is not a token chunk: skipped, counted
MAX_BODY_BYTES = 1 << 20          # error bodies and /v1/models replies are read up to this much
MAX_METRICS_BYTES = 8 << 20       # /metrics of a big multi-GPU vLLM is a few hundred KB
DEFAULT_STALL_S = 60.0            # silence allowed once tokens flow (prefill before the first one: the deadline)
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


def check_url(url: str) -> str:
    u = urlparse(url)
    if u.scheme not in ("http", "https") and "://" not in url:
        raise UsageError(f"{url}: give the server's base URL with its scheme, e.g. http://127.0.0.1:8000")
    if u.scheme not in ("http", "https") or (u.hostname or "") not in LOOPBACK:
        raise UsageError(f"{url}: the benchmark only talks to servers on 127.0.0.1 (loopback)")
    return url.rstrip("/").removesuffix("/v1")


# ---------------------------------------------------------------- statistics
def percentile(values, q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no data."""
    vals = sorted(values)
    if not vals:
        return None
    k = max(0, min(len(vals) - 1, math.ceil(q / 100 * len(vals)) - 1))
    return vals[k]


def median(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


@dataclass(frozen=True)
class Dist:
    mean: float | None
    p50: float | None
    p99: float | None
    n: int

    @staticmethod
    def of(values) -> "Dist":
        vals = [v for v in values if v is not None]
        return Dist(statistics.fmean(vals) if vals else None, percentile(vals, 50), percentile(vals, 99), len(vals))


# ---------------------------------------------------------------- one stream
ERRORED, EMPTY, SHORT = "errored", "empty", "short"       # why a stream is left out of the medians


@dataclass(frozen=True)
class StreamResult:
    ok: bool                             # a measurement: content, no error, not cut short
    error: str | None                    # one line: why not (None when ok)
    ttft_s: float | None                 # request sent -> first content chunk
    e2e_s: float
    arrivals: tuple[float, ...]          # seconds after the request was sent, one per content chunk
    usage_tokens: int | None             # completion_tokens from a usage chunk, when the server sends one
    prompt_tokens: int | None
    done_marker: bool                    # saw `data: [DONE]`
    model: str | None                    # model name the server answered with
    t0: float = 0.0                      # perf_counter when the request was sent (arrivals are relative)
    flag: str | None = None              # errored | empty | short: left out of every median
    finish: str | None = None            # the last finish_reason the server gave
    bad_chunks: int = 0                  # data lines that were not chunks of the expected shape (skipped)
    long_lines: int = 0                  # lines over MAX_LINE_BYTES (skipped)

    @property
    def chunks(self) -> int:
        return len(self.arrivals)

    @property
    def tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else self.chunks

    @property
    def itls(self) -> tuple[float, ...]:
        a = self.arrivals
        return tuple(b - x for x, b in zip(a, a[1:]))

    @property
    def decode_tps(self) -> float | None:
        """Tokens per second after the first chunk (the per-stream decode rate)."""
        if self.chunks < 2:
            return None
        span = self.arrivals[-1] - self.arrivals[0]
        first = self.tokens / self.chunks          # tokens carried by the first chunk (bundling engines)
        return (self.tokens - first) / span if span > 0 else None


class _Stream:
    """What one response has delivered so far; kept outside the reading coroutine so that a request
    cut by its deadline still reports what arrived."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.arrivals: list[float] = []
        self.usage = self.prompt = self.model = self.finish = None
        self.done = False
        self.error: str | None = None
        self.bad = self.long = self.data_lines = 0
        self.other: bytes = b""                          # the first non-SSE bytes, to say what came instead
        self.deadline = math.inf                         # perf_counter by which the request must end
        self.which = "deadline"

    def late(self) -> None:
        """The deadline passed: say so (once), with how far the stream got."""
        if self.error is None:
            got = f"{len(self.arrivals)} content chunks" if self.arrivals else "no content"
            self.error = (f"{self.which} reached with {got}"
                          + (" and the stream still open (a slow or endless stream)" if self.arrivals else ""))

    def result(self, clock: float, max_tokens: int) -> StreamResult:
        e2e = clock - self.t0
        arrivals = tuple(self.arrivals)
        ttft = arrivals[0] if arrivals else None
        flag, error = None, self.error
        tokens = self.usage if self.usage is not None else len(arrivals)
        if error:
            flag = ERRORED
        elif not arrivals:
            flag = EMPTY
            if self.data_lines == 0 and self.other:
                error = f"no SSE stream in the reply: {_shown(self.other)}"
            else:
                error = "the stream carried no content" + (f" ({self.bad} chunks of an unexpected shape)"
                                                           if self.bad else "")
        elif self.finish not in ("stop", "length", None):
            flag, error = SHORT, f"finished with {_shown(self.finish, 40)} after {tokens} of {max_tokens} tokens"
        elif self.finish is None and tokens < max_tokens:
            flag, error = SHORT, f"ended after {tokens} of {max_tokens} tokens without a finish reason"
        return StreamResult(flag is None, error, ttft, e2e, arrivals, self.usage, self.prompt, self.done,
                            self.model, self.t0, flag, self.finish, self.bad, self.long)


def _shown(data, limit: int = 120) -> str:
    """Server-sent bytes or text as one short, quoted, printable line."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)
    return quoted(text.strip(), limit)


def _count(v) -> int | None:
    return v if type(v) is int and v >= 0 else None


def _chunk_fields(chunk: dict):
    """(model, completion_tokens, prompt_tokens, has_content, finish) of a chat.completion.chunk, or None
    when a field has an unexpected type."""
    model = chunk.get("model")
    usage = chunk.get("usage")
    choices = chunk.get("choices")
    if not (model is None or isinstance(model, str)) or not (usage is None or isinstance(usage, dict)) \
            or not (choices is None or isinstance(choices, list)):
        return None
    completion = prompt = None
    if usage:
        completion, prompt = _count(usage.get("completion_tokens")), _count(usage.get("prompt_tokens"))
    content, finish = False, None
    for choice in choices or ():
        if not isinstance(choice, dict):
            return None
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return None
        texts = (delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning"), choice.get("text"))
        if not all(t is None or isinstance(t, str) for t in texts):
            return None
        content = content or any(texts)
        f = choice.get("finish_reason")
        if f is not None:
            if not isinstance(f, str):
                return None
            finish = f
    return model, completion, prompt, content, finish


class Client:
    """One server. ``extras`` (ignore_eos, stream_options) are dropped once if the server rejects them.

    ``timeout_s`` is the deadline of a whole request, ``stall_s`` the silence allowed once tokens
    flow, ``run_deadline`` (perf_counter) the end of the whole run, set by ``run_suite``."""

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 300.0, stall_s: float | None = None):
        self.base_url = check_url(base_url)
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.stall_s = min(stall_s or DEFAULT_STALL_S, timeout_s)
        self.run_deadline = math.inf
        self.minimal = False
        self.notes: set[str] = set()
        self.meter: Meter | None = None          # the run's progress in output tokens (set by run_suite)

    def http(self, concurrency: int = 1) -> httpx.AsyncClient:
        headers = {"Accept-Encoding": "identity"}      # raw bytes: a compressed reply cannot balloon
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
        return httpx.AsyncClient(headers=headers, limits=limits, trust_env=False,
                                 timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)))

    def out_of_time(self) -> bool:
        return time.perf_counter() >= self.run_deadline

    async def resolve_model(self, http: httpx.AsyncClient) -> str:
        """The model id to send (first of /v1/models unless given). Asking also checks that something
        answers at all: with nothing listening, every request of the suite would fail one by one."""
        try:
            status, body = await get_capped(http, self.base_url + "/v1/models", MAX_BODY_BYTES,
                                            min(self.timeout_s, 30.0))
        except httpx.ConnectError as err:
            raise AdvisorError(f"{self.base_url}: no server answers ({err or 'connection refused'}); "
                               "start one first, e.g. `nvfp4-advisor launch`") from None
        except (httpx.HTTPError, asyncio.TimeoutError):
            status, body = None, b""
        if self.model:
            return self.model
        try:
            data = json.loads(body).get("data", []) if status == 200 else []
            self.model = str(data[0]["id"]) if data else "default"
        except (ValueError, RecursionError, KeyError, IndexError, AttributeError, TypeError):
            self.model = "default"
        return self.model

    def body(self, prompt: str, max_tokens: int, minimal: bool) -> dict:
        b = {"model": self.model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
             "temperature": 0, "stream": True}
        if not minimal:
            b["stream_options"] = {"include_usage": True}
            b["ignore_eos"] = True              # fixed output length where the engine supports it
        return b

    async def stream(self, http: httpx.AsyncClient, prompt: str, max_tokens: int) -> StreamResult:
        res = await self._bounded(http, prompt, max_tokens, self.minimal)
        if res is None:                         # the server rejected the extras: plain requests from now on
            if not self.minimal:
                self.minimal = True
                self.notes.add("server rejected ignore_eos/stream_options: output length may stop at EOS")
            res = await self._bounded(http, prompt, max_tokens, True)
        if self.meter is not None:
            self.meter.finished(max_tokens, res.chunks)
        return res

    async def _bounded(self, http, prompt: str, max_tokens: int, minimal: bool) -> StreamResult | None:
        """One request within its deadline: min(now + timeout_s, the run's deadline)."""
        t0 = time.perf_counter()
        run_left = self.run_deadline - t0
        budget = min(self.timeout_s, run_left)
        acc = _Stream(t0)
        if budget <= 0:
            acc.error = "not sent: the run deadline was reached"
            return acc.result(t0, max_tokens)
        acc.deadline = t0 + budget
        acc.which = f"request deadline ({self.timeout_s:g} s)" if budget == self.timeout_s else "run deadline"
        rejected = False
        try:   # the reading loop keeps to the deadline itself; this also bounds connecting and the headers
            rejected = await asyncio.wait_for(self._read(http, prompt, max_tokens, minimal, acc), budget)
        except asyncio.TimeoutError:
            acc.late()
        if rejected:
            return None
        return acc.result(time.perf_counter(), max_tokens)

    async def _read(self, http, prompt: str, max_tokens: int, minimal: bool, acc: _Stream) -> bool:
        """Fill ``acc``; True when the server rejected the extras (retry without them)."""
        try:
            async with http.stream("POST", self.base_url + "/v1/chat/completions",
                                   json=self.body(prompt, max_tokens, minimal)) as r:
                if r.status_code in (400, 422) and not minimal:
                    await _read_capped(r, MAX_BODY_BYTES, acc.deadline)
                    return True
                if r.status_code != 200:
                    body = await _read_capped(r, MAX_BODY_BYTES, acc.deadline)
                    acc.error = f"HTTP {r.status_code}: {_shown(body, 200) if body.strip() else 'empty body'}"
                    return False
                await self._consume(r, acc, max_tokens)
        except httpx.HTTPError as err:
            acc.error = one_line(f"{type(err).__name__}: {err or 'connection error'}", 200)
        return False

    async def _consume(self, r: httpx.Response, acc: _Stream, max_tokens: int) -> None:
        clock = time.perf_counter
        most = 4 * max_tokens + 64                      # content chunks: a server sending more is broken
        raw = r.aiter_raw()
        buf = bytearray()
        skipping = False
        while True:
            left = acc.deadline - clock()
            stall = bool(acc.arrivals) and self.stall_s < left      # before the first token: prefill, no stall
            if left <= 0:
                return acc.late()
            try:
                piece = await asyncio.wait_for(raw.__anext__(), self.stall_s if stall else left)
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError:
                if not stall:
                    return acc.late()
                acc.error = f"stalled: no data for {self.stall_s:g} s after {len(acc.arrivals)} content chunks"
                return
            now = clock()
            start = 0
            while True:
                nl = piece.find(b"\n", start)
                if nl < 0:
                    if not skipping:
                        buf += piece[start:]
                        if len(buf) > MAX_LINE_BYTES:
                            skipping = True
                            acc.long += 1
                            buf.clear()
                    break
                if skipping:
                    skipping = False
                else:
                    buf += piece[start:nl]
                    if self._line(bytes(buf), now, acc):
                        return
                    buf.clear()
                start = nl + 1
            if len(acc.arrivals) > most:
                acc.error = f"the server sent more than {most} content chunks for {max_tokens} tokens"
                return
        if buf and not skipping:
            self._line(bytes(buf), clock(), acc)

    def _line(self, line: bytes, now: float, acc: _Stream) -> bool:
        """Take one SSE line; True when the stream is over ([DONE] or an error event)."""
        line = line.rstrip(b"\r")
        if not line.startswith(b"data:"):
            if line.strip() and not acc.other and not line.startswith((b":", b"event:", b"id:", b"retry:")):
                acc.other = line[:200]
            return False
        acc.data_lines += 1
        payload = line[5:].strip()
        if payload == b"[DONE]":
            acc.done = True
            return True
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError):
            acc.bad += 1
            return False
        if not isinstance(chunk, dict):
            acc.bad += 1
            return False
        if "error" in chunk and not chunk.get("choices"):      # an error event in the middle of a stream
            err = chunk["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            acc.error = f"error event in the stream: {_shown(str(msg), 200)}"
            return True
        fields = _chunk_fields(chunk)
        if fields is None:
            acc.bad += 1
            return False
        model, completion, prompt, content, finish = fields
        acc.model = acc.model or model
        acc.usage = completion if completion is not None else acc.usage
        acc.prompt = prompt if prompt is not None else acc.prompt
        acc.finish = finish or acc.finish
        if content:
            acc.arrivals.append(now - acc.t0)
            if self.meter is not None:
                self.meter.token()
        return False


async def _read_capped(r: httpx.Response, limit: int, deadline: float) -> bytes:
    """At most ``limit`` bytes of the body, read until ``deadline`` (perf_counter) at the latest."""
    out = bytearray()
    raw = r.aiter_raw()
    while len(out) < limit:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        try:
            piece = await asyncio.wait_for(raw.__anext__(), left)
        except (StopAsyncIteration, asyncio.TimeoutError):
            break
        out += piece[:limit - len(out)]
    return bytes(out)


async def get_capped(http: httpx.AsyncClient, url: str, limit: int, timeout_s: float) -> tuple[int, bytes]:
    """GET with the whole reply bounded in time and size: (status, at most ``limit`` bytes)."""
    deadline = time.perf_counter() + timeout_s

    async def go():
        async with http.stream("GET", url, timeout=timeout_s) as r:
            return r.status_code, await _read_capped(r, limit, deadline)
    return await asyncio.wait_for(go(), timeout_s)


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
    tokens: int | None                # median output tokens


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
class SpecAcceptance:
    per_position: tuple[float, ...]   # acceptance rate of draft position 0, 1, ...
    mean_accepted_length: float       # 1 + sum(per_position): tokens per verification step
    drafts: float
    source: str


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


class Meter:
    """The run's progress in output tokens for a progress bar (advisor.progress.Step): tokens as they
    arrive, and each finished request credited its whole budget, so a stream that ends early (EOS, an
    error) does not leave the bar behind its ETA."""

    def __init__(self, total: int, on_step):
        self.total, self.on_step = total, on_step
        self.credited = self.live = 0
        self.phase = ""

    def _emit(self) -> None:
        from advisor.progress import Step

        self.on_step(Step(min(self.credited + self.live, self.total), self.total, "tok", self.phase))

    def token(self) -> None:
        self.live += 1
        self._emit()

    def finished(self, budget: int, received: int) -> None:
        self.credited += budget
        self.live = max(0, self.live - received)
        self._emit()

    def enter(self, phase: str) -> None:
        self.phase = phase
        self._emit()


async def run_suite(client: Client, cfg: BenchConfig, *, on_progress=None, on_step=None) -> BenchReport:
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
        notes.add(f"the server answered as {_shown(sorted(answered)[0], 80)} for model {_shown(model, 80)}")
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
        on_progress=None, on_step=None) -> BenchReport:
    client = Client(base_url, model=model, api_key=api_key, timeout_s=cfg.timeout_s, stall_s=cfg.stall_s)
    return asyncio.run(run_suite(client, cfg, on_progress=on_progress, on_step=on_step))


def no_measurement(rep: BenchReport) -> str | None:
    """The one-line reason when the run measured nothing usable (None when it did)."""
    if rep.ttft_s is not None or (rep.concurrency is not None and rep.concurrency.aggregate_tps is not None):
        return None
    why = rep.failures[0] if rep.failures else "no data"
    return f"{rep.url}: no usable measurement ({why})"


# ---------------------------------------------------------------- /metrics
_METRIC = re.compile(r'^([a-zA-Z_:][\w:]*)(\{[^}\n]*\})?[ \t]+([-+0-9.eEinfNa]+)', re.M)   # one line each


async def scrape_metrics(http: httpx.AsyncClient, base_url: str, timeout_s: float = 5.0) -> dict[tuple[str, str], float]:
    try:
        status, body = await get_capped(http, base_url + "/metrics", MAX_METRICS_BYTES, timeout_s)
    except (httpx.HTTPError, asyncio.TimeoutError):
        return {}
    if status != 200:
        return {}
    return parse_metrics(body.decode("utf-8", "replace"))


def parse_metrics(text: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for name, labels, value in _METRIC.findall(text):
        pos = re.search(r'position="(\d+)"', labels or "")
        key = (name, pos.group(1) if pos else "")
        try:
            out[key] = out.get(key, 0.0) + float(value)   # sum over engines/models
        except ValueError:
            continue
    return out


def spec_acceptance(before: dict, after: dict) -> SpecAcceptance | None:
    """Per-position acceptance from vLLM's counters (vllm:spec_decode_num_*_total), as deltas."""
    def delta(name, pos=""):
        return after.get((name, pos), 0.0) - before.get((name, pos), 0.0)

    drafts = delta("vllm:spec_decode_num_drafts_total")
    if drafts <= 0:
        return None
    positions = sorted(int(p) for (n, p) in after if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total" and p)
    rates = tuple(delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", str(p)) / drafts for p in positions)
    return SpecAcceptance(rates, 1.0 + sum(rates), drafts, "vllm:spec_decode_num_accepted_tokens_per_pos_total")

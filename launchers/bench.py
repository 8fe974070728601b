"""Streaming benchmark client for OpenAI-compatible servers (httpx, asyncio, SSE).

Method (field-notes §6): real chat requests, temperature 0, a fixed number of output tokens, three
prompt kinds x three shots, medians; then N concurrent streams, a long-prompt prefill, the TTFT of a
short request sent during a long prefill, and speculative acceptance from /metrics when exposed.
Token arrival times are taken with ``perf_counter`` as each SSE line arrives; ITL is their spacing.

Tolerates servers that send no ``data: [DONE]``, no usage chunk, or ignore the model name; every loop
is bounded (request count, per-request timeout) and only loopback URLs are accepted.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from advisor.errors import AdvisorError, UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")

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
@dataclass(frozen=True)
class StreamResult:
    ok: bool
    error: str | None
    ttft_s: float | None                 # request sent -> first content chunk
    e2e_s: float
    arrivals: tuple[float, ...]          # seconds after the request was sent, one per content chunk
    usage_tokens: int | None             # completion_tokens from a usage chunk, when the server sends one
    prompt_tokens: int | None
    done_marker: bool                    # saw `data: [DONE]`
    model: str | None                    # model name the server answered with
    t0: float = 0.0                      # perf_counter when the request was sent (arrivals are relative)

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


class Client:
    """One server. ``extras`` (ignore_eos, stream_options) are dropped once if the server rejects them."""

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 300.0):
        self.base_url = check_url(base_url)
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.minimal = False
        self.notes: set[str] = set()

    def http(self, concurrency: int = 1) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
        return httpx.AsyncClient(headers=headers, limits=limits, trust_env=False,
                                 timeout=httpx.Timeout(self.timeout_s, connect=10.0))

    async def resolve_model(self, http: httpx.AsyncClient) -> str:
        """The model id to send (first of /v1/models unless given). Asking also checks that something
        answers at all: with nothing listening, every request of the suite would fail one by one."""
        try:
            r = await http.get(self.base_url + "/v1/models", timeout=min(self.timeout_s, 30.0))
        except httpx.ConnectError as err:
            raise AdvisorError(f"{self.base_url}: no server answers ({err or 'connection refused'}); "
                               "start one first, e.g. `nvfp4-advisor launch`") from None
        except httpx.HTTPError:
            r = None
        if self.model:
            return self.model
        try:
            data = r.json().get("data", []) if r is not None and r.status_code == 200 else []
            self.model = str(data[0]["id"]) if data else "default"
        except (ValueError, KeyError, IndexError, AttributeError, TypeError):
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
        res = await self._stream_once(http, prompt, max_tokens, self.minimal)
        if res is None:                         # the server rejected the extras: plain requests from now on
            if not self.minimal:
                self.minimal = True
                self.notes.add("server rejected ignore_eos/stream_options: output length may stop at EOS")
            res = await self._stream_once(http, prompt, max_tokens, True)
        return res

    async def _stream_once(self, http, prompt, max_tokens, minimal: bool) -> StreamResult | None:
        clock = time.perf_counter
        arrivals: list[float] = []
        usage = prompt_toks = model = None
        done = False
        t0 = clock()
        try:
            async with http.stream("POST", self.base_url + "/v1/chat/completions",
                                   json=self.body(prompt, max_tokens, minimal)) as r:
                if r.status_code in (400, 422) and not minimal:
                    await r.aread()
                    return None
                if r.status_code != 200:
                    text = (await r.aread()).decode("utf-8", "replace")[:200]
                    return StreamResult(False, f"HTTP {r.status_code}: {text}", None, clock() - t0, (), None,
                                        None, False, None)
                async for line in r.aiter_lines():
                    now = clock()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        continue
                    model = model or chunk.get("model")
                    u = chunk.get("usage")
                    if u:
                        usage = u.get("completion_tokens", usage)
                        prompt_toks = u.get("prompt_tokens", prompt_toks)
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") \
                                or choice.get("text"):
                            arrivals.append(now - t0)
                            break
        except httpx.HTTPError as err:
            return StreamResult(False, f"{type(err).__name__}: {err}", None, clock() - t0, tuple(arrivals),
                                usage, prompt_toks, done, model)
        e2e = clock() - t0
        if not arrivals:
            return StreamResult(False, "the stream carried no content", None, e2e, (), usage, prompt_toks, done, model)
        return StreamResult(True, None, arrivals[0], e2e, tuple(arrivals), usage, prompt_toks, done, model, t0)


# ---------------------------------------------------------------- the suite
@dataclass(frozen=True)
class BenchConfig:
    max_tokens: int = 512
    shots: int = 3
    concurrency: int = 1
    long_prompt_words: int = 3000
    interference: bool = True
    timeout_s: float = 300.0

    def __post_init__(self):
        if not (1 <= self.max_tokens <= 32768):
            raise UsageError("max tokens must be between 1 and 32768")
        if not (1 <= self.shots <= 20):
            raise UsageError("shots must be between 1 and 20")
        if not (1 <= self.concurrency <= 512):
            raise UsageError("concurrency must be between 1 and 512")


@dataclass(frozen=True)
class KindResult:
    kind: str
    shots: int
    failed: int
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
    failures: tuple[str, ...] = field(default_factory=tuple)


def long_prompt(words: int) -> str:
    base = ("the quick brown fox jumps over the lazy dog while quantized weights stream from memory "
            "and the tensor cores wait for the next tile of activations").split()
    text = " ".join(base[i % len(base)] for i in range(words))
    return f"Summarise the following text in one sentence.\n\n{text}"


async def run_suite(client: Client, cfg: BenchConfig, *, on_progress=None) -> BenchReport:
    say = on_progress or (lambda msg: None)
    failures: list[str] = []
    notes: set[str] = set()
    all_results: list[StreamResult] = []
    async with client.http(max(cfg.concurrency, 2)) as http:
        model = await client.resolve_model(http)
        metrics_before = await scrape_metrics(http, client.base_url)
        # warm-up: one unmeasured request per prompt kind (first requests pay one-time costs:
        # thread pools, graph/JIT caches; seen as 20x slower first shots on transformers serve)
        for kind, prompt in PROMPTS.items():
            say(f"warm-up: {kind}")
            await client.stream(http, prompt, cfg.max_tokens)
        kinds = []
        singles: list[StreamResult] = []
        for kind, prompt in PROMPTS.items():
            shots = []
            for i in range(cfg.shots):
                say(f"single stream: {kind} shot {i + 1}/{cfg.shots}")
                r = await client.stream(http, prompt, cfg.max_tokens)
                shots.append(r)
                if not r.ok:
                    failures.append(f"{kind} shot {i + 1}: {r.error}")
            ok = [r for r in shots if r.ok]
            singles += ok
            kinds.append(KindResult(kind, len(shots), len(shots) - len(ok), median(r.ttft_s for r in ok),
                                    median(r.decode_tps for r in ok), median(r.tokens for r in ok)))
        all_results += singles
        metrics_after = await scrape_metrics(http, client.base_url)
        spec = spec_acceptance(metrics_before, metrics_after)

        conc = None
        if cfg.concurrency > 1:
            say(f"{cfg.concurrency} concurrent streams")
            prompts = list(PROMPTS.values())
            t0 = time.perf_counter()
            res = await asyncio.gather(*(client.stream(http, prompts[i % 3], cfg.max_tokens)
                                         for i in range(cfg.concurrency)))
            wall = time.perf_counter() - t0
            ok = [r for r in res if r.ok]
            failures += [f"concurrent stream: {r.error}" for r in res if not r.ok]
            all_results += ok
            conc = ConcurrencyResult(cfg.concurrency, len(res) - len(ok), wall,
                                     sum(r.tokens for r in ok) / wall if ok and wall > 0 else None,
                                     Dist.of(r.decode_tps for r in ok), Dist.of(r.ttft_s for r in ok))

        prefill = interference = None
        if cfg.long_prompt_words > 0:
            say(f"long prompt prefill ({cfg.long_prompt_words} words)")
            lp = long_prompt(cfg.long_prompt_words)
            r = await client.stream(http, lp, 4)
            if r.ok:
                prefill = PrefillResult(r.prompt_tokens, cfg.long_prompt_words, r.ttft_s)
            else:
                failures.append(f"long prompt: {r.error}")
            if cfg.interference and r.ok:
                say("short request during a long prefill")
                idle = [await client.stream(http, SHORT_PROMPT, 16) for _ in range(2)]
                long_task = asyncio.ensure_future(client.stream(http, lp, 4))
                await asyncio.sleep(min(0.25 * (r.ttft_s or 0.0), 0.5))
                short = await client.stream(http, SHORT_PROMPT, 16)
                await long_task
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
        notes.add(f"the server answered as {sorted(answered)[0]!r} for model {model!r}")
    notes |= client.notes
    itls = [x for r in singles for x in r.itls]
    return BenchReport(client.base_url, model, cfg, tuple(kinds), median(r.ttft_s for r in singles), Dist.of(itls),
                       median(r.decode_tps for r in singles), conc, prefill, interference, spec,
                       tuple(sorted(notes)), tuple(failures))


def run(base_url: str, cfg: BenchConfig, *, model: str | None = None, api_key: str | None = None,
        on_progress=None) -> BenchReport:
    client = Client(base_url, model=model, api_key=api_key, timeout_s=cfg.timeout_s)
    return asyncio.run(run_suite(client, cfg, on_progress=on_progress))


# ---------------------------------------------------------------- /metrics
_METRIC = re.compile(r'^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)', re.M)


async def scrape_metrics(http: httpx.AsyncClient, base_url: str) -> dict[tuple[str, str], float]:
    try:
        r = await http.get(base_url + "/metrics", timeout=5.0)
    except httpx.HTTPError:
        return {}
    if r.status_code != 200:
        return {}
    return parse_metrics(r.text)


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

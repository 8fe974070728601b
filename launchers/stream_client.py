"""Streaming chat client for one OpenAI-compatible server on loopback (httpx, asyncio, SSE).

Token arrival times are taken with ``perf_counter`` as each SSE line arrives; ITL is their spacing.
Tolerates servers that send no ``data: [DONE]``, no usage chunk, or ignore the model name. Bounded
against servers that misbehave (README "Limits and guarantees"):
- time: every request ends by its deadline (``--timeout``, the whole request, however the bytes
  trickle in) and the run by its own (``--run-timeout``); a stream silent for ``stall_s`` once tokens
  flow is ended as stalled;
- memory: SSE lines are read with a cap (MAX_LINE_BYTES; a longer line is skipped and counted), error
  bodies and /v1/models replies are read up to a cap, content chunks per stream are capped;
- truth: a stream that errs, carries no content or ends short of its tokens is flagged (the suite,
  launchers.bench, leaves it out of every median); chunks of an unexpected shape are counted and
  skipped, never fatal.
Only loopback URLs are accepted.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Callable
from urllib.parse import urlparse

import httpx

from advisor.errors import AdvisorError, UsageError
from advisor.progress import Step
from advisor.untrusted import one_line
from launchers.stream_result import MAX_LINE_BYTES, StreamResult, StreamSoFar, chunk_fields, shown

LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_BODY_BYTES = 1 << 20          # error bodies and /v1/models replies are read up to this much
DEFAULT_STALL_S = 60.0            # silence allowed once tokens flow (prefill before the first one: the deadline)


def check_url(url: str) -> str:
    u = urlparse(url)
    if u.scheme not in ("http", "https") and "://" not in url:
        raise UsageError(f"{url}: give the server's base URL with its scheme, e.g. http://127.0.0.1:8000")
    if u.scheme not in ("http", "https") or (u.hostname or "") not in LOOPBACK:
        raise UsageError(f"{url}: the benchmark only talks to servers on 127.0.0.1 (loopback)")
    return url.rstrip("/").removesuffix("/v1")


class Meter:
    """The run's progress in output tokens for a progress bar (advisor.progress.Step): tokens as they
    arrive, and each finished request credited its whole budget, so a stream that ends early (EOS, an
    error) does not leave the bar behind its ETA."""

    def __init__(self, total: int, on_step: Callable[[Step], None]):
        self.total, self.on_step = total, on_step
        self.credited = self.live = 0
        self.phase = ""

    def _emit(self) -> None:
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

    def body(self, prompt: str, max_tokens: int, minimal: bool) -> dict[str, object]:
        b: dict[str, object] = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                "max_tokens": max_tokens, "temperature": 0, "stream": True}
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
            retry = await self._bounded(http, prompt, max_tokens, True)
            assert retry is not None            # a request without the extras is never rejected for them
            res = retry
        if self.meter is not None:
            self.meter.finished(max_tokens, res.chunks)
        return res

    async def _bounded(self, http: httpx.AsyncClient, prompt: str, max_tokens: int,
                       minimal: bool) -> StreamResult | None:
        """One request within its deadline: min(now + timeout_s, the run's deadline)."""
        t0 = time.perf_counter()
        run_left = self.run_deadline - t0
        budget = min(self.timeout_s, run_left)
        acc = StreamSoFar(t0)
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

    async def _read(self, http: httpx.AsyncClient, prompt: str, max_tokens: int, minimal: bool,
                    acc: StreamSoFar) -> bool:
        """Fill ``acc``; True when the server rejected the extras (retry without them)."""
        try:
            async with http.stream("POST", self.base_url + "/v1/chat/completions",
                                   json=self.body(prompt, max_tokens, minimal)) as r:
                if r.status_code in (400, 422) and not minimal:
                    await _read_capped(r, MAX_BODY_BYTES, acc.deadline)
                    return True
                if r.status_code != 200:
                    body = await _read_capped(r, MAX_BODY_BYTES, acc.deadline)
                    acc.error = f"HTTP {r.status_code}: {shown(body, 200) if body.strip() else 'empty body'}"
                    return False
                await self._consume(r, acc, max_tokens)
        except httpx.HTTPError as err:
            acc.error = one_line(f"{type(err).__name__}: {err or 'connection error'}", 200)
        return False

    async def _consume(self, r: httpx.Response, acc: StreamSoFar, max_tokens: int) -> None:
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

    def _line(self, line: bytes, now: float, acc: StreamSoFar) -> bool:
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
            acc.error = f"error event in the stream: {shown(str(msg), 200)}"
            return True
        fields = chunk_fields(chunk)
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

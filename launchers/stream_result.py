"""What one streamed chat response delivered: its token arrival times, usage, finish reason, and
why it is left out of the medians (errored, empty, short); the fields of one SSE chunk, type-checked."""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.untrusted import quoted

MAX_LINE_BYTES = 1 << 20          # an SSE line longer than 1 MiB is not a token chunk: skipped, counted
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


class StreamSoFar:
    """What one response has delivered so far; kept outside the reading coroutine so that a request
    cut by its deadline still reports what arrived."""

    def __init__(self, t0: float):
        self.t0 = t0
        self.arrivals: list[float] = []
        self.usage: int | None = None           # completion_tokens of the last usage chunk
        self.prompt: int | None = None
        self.model: str | None = None
        self.finish: str | None = None
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
                error = f"no SSE stream in the reply: {shown(self.other)}"
            else:
                error = "the stream carried no content" + (f" ({self.bad} chunks of an unexpected shape)"
                                                           if self.bad else "")
        elif self.finish not in ("stop", "length", None):
            flag, error = SHORT, f"finished with {shown(self.finish, 40)} after {tokens} of {max_tokens} tokens"
        elif self.finish is None and tokens < max_tokens:
            flag, error = SHORT, f"ended after {tokens} of {max_tokens} tokens without a finish reason"
        return StreamResult(flag is None, error, ttft, e2e, arrivals, self.usage, self.prompt, self.done,
                            self.model, self.t0, flag, self.finish, self.bad, self.long)


def shown(data: object, limit: int = 120) -> str:
    """Server-sent bytes or text as one short, quoted, printable line."""
    text = data.decode("utf-8", "replace") if isinstance(data, (bytes, bytearray)) else str(data)
    return quoted(text.strip(), limit)


def _count(v: object) -> int | None:
    return v if type(v) is int and v >= 0 else None


def chunk_fields(chunk: dict) -> tuple[str | None, int | None, int | None, bool, str | None] | None:
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

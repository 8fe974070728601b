"""A scripted OpenAI-style SSE server with known token timing, for the bench client's tests and
benchmarks/bench_client_overhead.py. Raw asyncio HTTP/1.1 (Connection: close), 127.0.0.1 only.

Knobs model the quirks real servers have: no ``data: [DONE]`` (transformers serve), no usage chunk
(llama-cpp-python), ignoring the model name, rejecting unknown fields (HTTP 422), /metrics with vLLM
speculative counters. Send times (perf_counter, CLOCK_MONOTONIC: comparable across processes on
Linux) are recorded per request so a client's arrival times can be checked against them.

Run standalone: python launch_fake_sse.py PORT INTERVAL_MS TOKENS TIMES_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from dataclasses import dataclass, field


@dataclass
class FakeSSE:
    interval_s: float = 0.01
    ttft_s: float = 0.02
    tokens: int = 16
    done_marker: bool = True
    usage: bool = True
    model: str = "fake-model"
    strict_model: bool = False          # 404 for any other model name
    reject_extras: bool = False         # 422 for ignore_eos / stream_options (like transformers serve)
    metrics: str = ""                   # body of GET /metrics ("" -> 404)
    port: int = 0
    sends: list = field(default_factory=list)       # per request: list of perf_counter send times
    bodies: list = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.base_events.Server | None = None
    _thread: threading.Thread | None = None

    # -------------------------------------------------------------- lifecycle
    def start(self) -> "FakeSSE":
        ready = threading.Event()

        def main():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -------------------------------------------------------------- HTTP
    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            if method == "GET" and path == "/v1/models":
                await self._json(writer, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
            elif method == "GET" and path == "/health":
                await self._json(writer, 200, {"status": "ok"})
            elif method == "GET" and path == "/metrics" and self.metrics:
                await self._raw(writer, 200, "text/plain", self.metrics.encode())
            elif method == "POST" and path == "/v1/chat/completions":
                await self._chat(writer, json.loads(body or b"{}"))
            else:
                await self._json(writer, 404, {"detail": "not found"})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _raw(self, writer, status, ctype, data: bytes):
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _json(self, writer, status, obj):
        await self._raw(writer, status, "application/json", json.dumps(obj).encode())

    async def _chat(self, writer, req):
        self.bodies.append(req)
        if self.reject_extras and ({"ignore_eos", "stream_options"} & set(req)):
            return await self._json(writer, 422, {"detail": "Unexpected fields in the request"})
        if self.strict_model and req.get("model") != self.model:
            return await self._json(writer, 404, {"detail": "model not found"})
        n = min(int(req.get("max_tokens", self.tokens)), self.tokens)
        sends: list[float] = []
        self.sends.append(sends)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        await writer.drain()
        t0 = time.perf_counter()

        def chunk(delta, finish=None, usage=None):
            d = {"id": "x", "object": "chat.completion.chunk", "model": "served-" + self.model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                d["usage"] = usage
            return f"data: {json.dumps(d)}\n\n".encode()

        writer.write(chunk({"role": "assistant"}))
        tokens = [chunk({"content": f"t{i} "}) for i in range(n)]   # pre-encoded: keep the server cheap
        for i in range(n):
            target = t0 + self.ttft_s + i * self.interval_s
            delay = target - time.perf_counter()
            if delay > 0:                         # the exact send time is recorded below, so no spinning
                await asyncio.sleep(delay)
            writer.write(tokens[i])
            await writer.drain()
            sends.append(time.perf_counter())
        usage = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": n + 7} if self.usage else None
        writer.write(chunk({}, "length", usage))
        if self.done_marker:
            writer.write(b"data: [DONE]\n\n")
        await writer.drain()


if __name__ == "__main__":  # standalone: serve until killed, dump send times on SIGTERM
    import signal

    port, interval_ms, tokens, out = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    srv = FakeSSE(interval_s=interval_ms / 1000.0, tokens=tokens, port=port).start()
    print("ready", flush=True)

    def dump(*_):
        with open(out, "w") as f:
            json.dump(srv.sends, f)
        sys.exit(0)

    signal.signal(signal.SIGTERM, dump)
    while True:
        time.sleep(3600)

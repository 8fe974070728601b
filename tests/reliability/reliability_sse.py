"""OpenAI-style servers on 127.0.0.1 that misbehave on purpose, one behaviour per ``mode``.

Raw asyncio HTTP/1.1 (one request per connection) in a background thread. Every mode answers
/v1/models normally unless it is about that endpoint; /v1/chat/completions does:
  ok            16 tokens, finish "length", usage, [DONE]
  http500       HTTP 500 with a 2 MB error body
  html          HTTP 200, text/html, a web page instead of an SSE stream
  bad_chunks    valid tokens interleaved with chunks of every wrong shape (and non-JSON data lines)
  short         3 of the requested tokens, then a clean close: no finish_reason, no [DONE]
  empty         the role chunk, finish "stop", [DONE]: no content
  huge_chunk    one 50 MB data line (first request only), then the tokens
  slow_drip     a token every 0.2 s, forever
  stall         3 tokens, then silence with the connection open
  error_event   3 tokens, then ``data: {"error": ...}``
  flood         content chunks as fast as possible, never ending
  garbage       HTTP 200 event-stream of random bytes, then close
  hang_models   /v1/models and /metrics never answer (the chat endpoint is fine)
  huge_models   /v1/models and /metrics send 50 MB
"""

from __future__ import annotations

import asyncio
import json
import os
import threading

MODES = ("ok", "http500", "html", "bad_chunks", "short", "empty", "huge_chunk", "slow_drip", "stall", "error_event",
         "flood", "garbage", "hang_models", "huge_models")


def _chunk(delta=None, finish=None, usage=None) -> bytes:
    d = {"id": "x", "object": "chat.completion.chunk", "model": "fake",
         "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage:
        d["usage"] = usage
    return b"data: " + json.dumps(d).encode() + b"\n\n"


BAD = [b"data: not json\n\n", b"data: [1, 2, 3]\n\n", b'data: {"choices": "oops"}\n\n',
       b'data: {"choices": [5]}\n\n', b'data: {"choices": [{"delta": 7}]}\n\n',
       b'data: {"choices": [{"delta": {"content": 42}}]}\n\n', b'data: {"usage": [1]}\n\n',
       b'data: {"model": 3, "choices": []}\n\n', b'data: {"choices": [{"delta": {}, "finish_reason": 1}]}\n\n',
       b"data: \"\\ud800\"\n\n", b": a comment line\n\n", b"event: ping\n\n"]


class MisbehavingServer:
    def __init__(self, mode: str):
        assert mode in MODES, mode
        self.mode = mode
        self.port = 0
        self.requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "MisbehavingServer":
        ready = threading.Event()

        def main():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            server.close()
            tasks = asyncio.all_tasks(self._loop)
            for t in tasks:
                t.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        loop = self._loop
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            if path in ("/v1/models", "/metrics"):
                await self._models(writer, path)
            elif method == "POST" and path == "/v1/chat/completions":
                self.requests += 1
                await self._chat(writer, json.loads(body or b"{}"))
            else:
                await self._send(writer, 404, "application/json", b'{"detail": "not found"}')
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _send(self, writer, status, ctype, data: bytes):
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        await writer.drain()

    async def _models(self, writer, path):
        if self.mode == "hang_models":
            await asyncio.sleep(3600)
        if self.mode == "huge_models":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            for _ in range(50):
                writer.write(b"[" * (1 << 20))
                await writer.drain()
            return
        if path == "/metrics":
            return await self._send(writer, 404, "text/plain", b"")
        await self._send(writer, 200, "application/json",
                         json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode())

    async def _chat(self, writer, req):
        n = int(req.get("max_tokens", 16))
        mode = self.mode
        if mode == "http500":
            return await self._send(writer, 500, "text/plain", b"internal error: boom\n" + b"x" * (2 << 20))
        if mode == "html":
            return await self._send(writer, 200, "text/html", b"<html><body>Welcome to nginx!</body></html>\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        writer.write(_chunk({"role": "assistant"}))
        await writer.drain()
        if mode == "garbage":
            writer.write(os.urandom(4096) + b"\n" + os.urandom(4096))
            return await writer.drain()
        if mode == "empty":
            writer.write(_chunk({}, "stop") + b"data: [DONE]\n\n")
            return await writer.drain()
        if mode == "huge_chunk" and self.requests == 1:
            writer.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            for _ in range(50):
                writer.write(b"A" * (1 << 20))
                await writer.drain()
            writer.write(b"\"}}]}\n\n")
        if mode in ("slow_drip", "flood"):
            i = 0
            while True:
                writer.write(_chunk({"content": f"t{i} "}))
                await writer.drain()
                i += 1
                await asyncio.sleep(0.2 if mode == "slow_drip" else 0)
        count = 3 if mode in ("short", "stall", "error_event") else n
        for i in range(count):
            if mode == "bad_chunks":
                writer.write(BAD[i % len(BAD)])
            writer.write(_chunk({"content": f"t{i} "}))
            await writer.drain()
            await asyncio.sleep(0.002)
        if mode == "short":
            return
        if mode == "stall":
            await asyncio.sleep(3600)
        if mode == "error_event":
            writer.write(b'data: {"error": {"message": "CUDA error: an illegal memory access", "code": 500}}\n\n')
            return await writer.drain()
        writer.write(_chunk({}, "length", {"prompt_tokens": 7, "completion_tokens": n}) + b"data: [DONE]\n\n")
        await writer.drain()

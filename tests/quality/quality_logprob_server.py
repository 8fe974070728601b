"""An OpenAI-compatible chat server that returns top-k logprobs, for the KL part of the agreement
tests: `transformers serve` 5.24 ignores `logprobs` (UNUSED_CHAT_COMPLETION_FIELDS), and the
engines that return them (vLLM, SGLang, llama.cpp) do not run on this CPU-only machine.

The model is real: a checkpoint folder loaded with transformers, decoded greedily with its chat
template; the stream follows vLLM's chat-completion chunk format (choices[0].logprobs.content[i]
with token, logprob, top_logprobs). Optionally it counts speculative acceptance the way vLLM's
/metrics does (drafts, accepted per position) at fixed rates, for the canary's wiring.

    python quality_logprob_server.py PORT NAME=FOLDER [NAME=FOLDER ...] [--accept=0.8,0.5]
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402


def load(folder: str):
    return (AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).eval(),
            AutoTokenizer.from_pretrained(folder))


def generate(model, tok, messages: list, max_tokens: int, top_k: int):
    """Greedy decoding: (decoded text, token string, logprob, top-k [(token, logprob)]) per step."""
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    ids = ids["input_ids"]
    past = None
    with torch.no_grad():
        for _ in range(max_tokens):
            out = model(input_ids=ids, cache=past, use_cache=True)
            past = out.cache
            logp = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            top = torch.topk(logp, top_k)
            nxt = int(top.indices[0])
            yield (tok.decode([nxt]), tok.convert_ids_to_tokens([nxt])[0], float(logp[nxt]),
                   [(tok.convert_ids_to_tokens([int(i)])[0], float(v)) for v, i in zip(top.values, top.indices)])
            if nxt == tok.eos_token_id:
                return
            ids = torch.tensor([[nxt]])


class LogprobServer:
    """One server on 127.0.0.1 (a thread): models by name, optional speculative counters."""

    def __init__(self, models: dict[str, tuple], accept: list[float] | None = None, port: int = 0):
        self.models = models
        self.accept = list(accept or [])
        self.drafts = 0
        self.accepted = [0] * len(self.accept)
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "LogprobServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def metrics(self) -> str:
        with self.lock:
            lines = [f"vllm:spec_decode_num_drafts_total {self.drafts}"]
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {a}'
                      for i, a in enumerate(self.accepted)]
        return "\n".join(lines) + "\n"

    def count(self, n: int) -> None:
        with self.lock:
            self.drafts += n
            self.accepted = [a + round(r * n) for a, r in zip(self.accepted, self.accept)]

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    self._send(200, b'{"status":"ok"}')
                elif self.path == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": n, "object": "model"}
                                                                           for n in server.models]}).encode())
                elif self.path == "/metrics" and server.accept:
                    self._send(200, server.metrics().encode(), "text/plain")
                else:
                    self._send(404, b'{"detail":"not found"}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                name = body.get("model") or next(iter(server.models))
                if self.path != "/v1/chat/completions" or name not in server.models:
                    return self._send(404, b'{"detail":"not found"}')
                model, tok = server.models[name]
                top_k, want = int(body.get("top_logprobs") or 1), bool(body.get("logprobs"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                n = 0
                for text, piece, lp, top in generate(model, tok, body["messages"], int(body.get("max_tokens", 16)),
                                                     top_k):
                    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
                    if want:
                        choice["logprobs"] = {"content": [{"token": piece, "logprob": lp, "top_logprobs": [
                            {"token": t, "logprob": v} for t, v in top]}]}
                    self.wfile.write(f"data: {json.dumps({'model': name, 'choices': [choice]})}\n\n".encode())
                    self.wfile.flush()
                    n += 1
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
                if server.accept:
                    server.count(n)

        return Handler


def main(argv: list[str]) -> int:
    port, accept, models = int(argv[0]), None, {}
    for arg in argv[1:]:
        if arg.startswith("--accept="):
            accept = [float(x) for x in arg.split("=", 1)[1].split(",")]
        else:
            name, folder = arg.split("=", 1)
            models[name] = load(folder)
    srv = LogprobServer(models, accept, port)
    print(f"serving on {srv.url}", flush=True)
    srv.httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

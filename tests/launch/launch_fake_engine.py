"""Scripted fake engine processes, one per failure signature (usage: MODE PORT).

Each prints what the real engine prints (engines-launch.md §5) and behaves like it:
  ready           serve /health and /v1/models (like vLLM once up)
  oom             log loading lines, then a CUDA OOM traceback line, exit 1
  port_after_load load for 1 s, THEN bind the port (FastLLM/uvicorn order); exit 3 on EADDRINUSE
  ignore_term     serve /health but ignore SIGINT and SIGTERM; a grandchild in the group does too
  fastllm_error   print "FastLLM Error: …" + "Press any key to exit...", wait for a key, exit 0
  never_ready     answer /health with 503 "Loading model" forever (llama.cpp while loading)
"""

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode, port = sys.argv[1], int(sys.argv[2])


def log(msg):
    print(msg, flush=True)


class Handler(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802
        if Handler.status == 503:
            body = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
        elif self.path == "/v1/models":
            body = {"object": "list", "data": [{"id": "fake", "object": "model"}]}
        else:
            body = {"status": "ok"}
        data = json.dumps(body).encode()
        self.send_response(Handler.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def serve():
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log(f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
    httpd.serve_forever()


log(f"INFO fake engine pid {os.getpid()} mode {mode} args {sys.argv[1:]}")
if mode == "ready":
    log("INFO [cuda.py:334] Using FLASHINFER attention backend out of potential backends: "
        "['FLASHINFER', 'TRITON_ATTN'].")
    log("INFO [kv_cache_utils.py:1286] GPU KV cache size: 10,000 tokens")
    serve()
elif mode == "oom":
    log("INFO Loading safetensors checkpoint shards: 100% Completed | 1/1")
    time.sleep(0.3)
    log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 23.56 GiB")
    sys.exit(1)
elif mode == "port_after_load":
    log("[Fastllm] loading model ...")
    time.sleep(1.0)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            log(f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
                "address already in use")
            sys.exit(3)
        raise
    log("bound unexpectedly")
    sys.exit(0)
elif mode == "ignore_term":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal,time\n"
                              "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                              "print('worker up', flush=True)\ntime.sleep(600)"])
    log(f"worker pid {child.pid}")
    log("The server is fired up and ready to roll!")
    serve()
elif mode == "fastllm_error":
    log("Load model from /models/x ...")
    log("FastLLM Error: Unsupported data type for layer model.layers.0.mlp.gate_proj")
    log("Press any key to exit...")
    sys.stdin.read(1)          # getchar(): returns at once on /dev/null
    sys.exit(0)
elif mode == "never_ready":
    Handler.status = 503
    log("srv    load_model: loading model")
    serve()
else:
    sys.exit(f"unknown mode {mode}")

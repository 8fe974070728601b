"""Engines that fight their supervisor (usage: MODE PORT TAG). Every process they start carries TAG
in its command line, so a test can count what is left after a stop.

  ready        serves like vLLM and stops on SIGINT
  daemon       serves like vLLM; a worker double-forks, setsid()s, ignores SIGINT/SIGTERM, sleeps
  daemon_bare  the same worker, re-executed with an empty environment (only a cgroup can find it)
  workers      the leader and two workers in its process group ignore SIGINT and SIGTERM
  flood        serves while printing lines as fast as it can, forever
  long_line    prints one 100 MB line, then "after the long line", then serves
  exit_now     prints one line and exits with status 7
  never_ready  answers /health with 503 forever
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLEEPER = "import signal, sys, time\n" \
          "signal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" \
          "time.sleep(600)  # {tag}"


def log(msg: str) -> None:
    print(msg, flush=True)


class Handler(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802
        body = json.dumps({"object": "list", "data": [{"id": "fake"}]} if self.path == "/v1/models"
                          else {"status": "ok"}).encode()
        self.send_response(Handler.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def serve(port: int) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    log(f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
    httpd.serve_forever()


def daemonize(tag: str, bare: bool) -> None:
    """The classic double fork: the grandchild is in a new session, its parent gone at once."""
    if os.fork() > 0:
        os.wait()
        return
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    log(f"daemon pid {os.getpid()}")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    env = {} if bare else dict(os.environ)
    os.execve(sys.executable, [sys.executable, "-c", SLEEPER.format(tag=tag)], env)


def main() -> None:
    mode, port, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    log(f"INFO fake engine pid {os.getpid()} mode {mode}")
    if mode == "ready":
        serve(port)
    elif mode in ("daemon", "daemon_bare"):
        daemonize(tag, bare=mode == "daemon_bare")
        serve(port)
    elif mode == "workers":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for _ in range(2):
            w = subprocess.Popen([sys.executable, "-c", SLEEPER.format(tag=tag)])
            log(f"worker pid {w.pid}")
        serve(port)
    elif mode == "flood":
        def flood():
            i = 0
            while True:
                print(f"flood line {i} " + "x" * 200, flush=False)
                i += 1
        threading.Thread(target=flood, daemon=True).start()
        serve(port)
    elif mode == "long_line":
        chunk = "L" * (1 << 20)
        for _ in range(100):
            sys.stdout.write(chunk)
        sys.stdout.write("\n")
        log("after the long line")
        serve(port)
    elif mode == "exit_now":
        log("fatal: nothing to serve")
        sys.exit(7)
    elif mode == "never_ready":
        Handler.status = 503
        serve(port)
    else:
        sys.exit(f"unknown mode {mode}")
    time.sleep(600)


if __name__ == "__main__":
    main()

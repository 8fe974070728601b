"""The hub path end to end through the real huggingface_hub client, against a local HTTP server on
127.0.0.1 that serves a folder the way the Hub's resolve endpoint does (HEAD metadata, GET with
Range). Checks that only config files are downloaded, that headers come from Range requests, that
sharded repos work, and that HF_HUB_OFFLINE afterwards uses the cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import ROOT

from ckpt_builders import LLAMA_CONFIG, llama_tensors, write_checkpoint

pytestmark = pytest.mark.server

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class _Hub(BaseHTTPRequestHandler):
    repos: dict[str, Path] = {}
    log: list[tuple[str, str, str | None]] = []

    def log_message(self, *args):   # quiet
        pass

    def _lookup(self):
        m = _RESOLVE.match(self.path.split("?")[0])
        if not m:
            return None, "RepoNotFound"
        folder = self.repos.get(m["repo"])
        if folder is None:
            return None, "RepoNotFound"
        path = folder / m["file"]
        if not path.is_file():
            return None, "EntryNotFound"
        return path, None

    def _headers(self, path: Path, length: int, status: int = 200, extra: dict | None = None):
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"' + hashlib.sha1(path.read_bytes()).hexdigest() + '"')
        self.send_header("Content-Length", str(length))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _missing(self, code: str):
        self.send_response(404)
        self.send_header("X-Error-Code", code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        path, err = self._lookup()
        self.log.append(("HEAD", self.path, None))
        if err:
            return self._missing(err)
        self._headers(path, path.stat().st_size)

    def do_GET(self):
        path, err = self._lookup()
        rng = self.headers.get("Range")
        self.log.append(("GET", self.path, rng))
        if err:
            return self._missing(err)
        data = path.read_bytes()
        if rng:
            a, b = (int(x) for x in re.match(r"bytes=(\d+)-(\d+)", rng).groups())
            part = data[a:b + 1]
            self._headers(path, len(part), 206, {"Content-Range": f"bytes {a}-{a + len(part) - 1}/{len(data)}"})
            self.wfile.write(part)
        else:
            self._headers(path, len(data))
            self.wfile.write(data)


@pytest.fixture
def hub_server():
    _Hub.repos, _Hub.log = {}, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Hub
    srv.shutdown()
    srv.server_close()


def _inspect(args, endpoint, hf_home, offline=False):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home),
           "HF_HUB_OFFLINE": "1" if offline else "0", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1"}
    env.pop("HF_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "advisor", "inspect", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_hub_id_through_the_real_client(tmp_path, hub_server):
    endpoint, hub = hub_server
    tensors = llama_tensors("bf16")
    local = write_checkpoint(tmp_path / "repo", tensors, LLAMA_CONFIG)
    sharded = write_checkpoint(tmp_path / "sharded", tensors, LLAMA_CONFIG, shards=3)
    hub.repos.update({"org/tiny": local, "org/tiny-sharded": sharded})
    expected = json.loads(subprocess.run([sys.executable, "-m", "advisor", "inspect", str(local), "--json"],
                                         capture_output=True, text=True, timeout=120,
                                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout)["checkpoint"]

    for repo in ("org/tiny", "org/tiny-sharded@main"):
        proc = _inspect([repo, "--json"], endpoint, tmp_path / "hf")
        assert proc.returncode == 0, proc.stderr
        got = json.loads(proc.stdout)["checkpoint"]
        assert got["totals"]["sizes_from"] == "headers"
        assert got["totals"]["stored_bytes"] == expected["totals"]["stored_bytes"]
        assert got["label"] == expected["label"] == "BF16"
        assert [m["name"] for m in got["modules"]] == [m["name"] for m in expected["modules"]]
    # weights are never downloaded: every GET of a .safetensors file is a header range
    weight_gets = [(p, r) for verb, p, r in hub.log if verb == "GET" and p.endswith(".safetensors")]
    assert len(weight_gets) >= 4 and all(r is not None and r.startswith("bytes=") for _, r in weight_gets)
    assert all(int(re.match(r"bytes=(\d+)-(\d+)", r).group(2)) <= 100_000 for _, r in weight_gets)

    # offline afterwards: config.json from the cache, headers unavailable -> sizes from the config
    hub.log.clear()
    proc = _inspect(["org/tiny", "--json"], endpoint, tmp_path / "hf", offline=True)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["checkpoint"]
    assert got["totals"]["sizes_from"] == "config" and got["label"] == "BF16"
    assert any(f["code"] == "no-weights" for f in got["findings"])
    assert hub.log == []

    # a repository the hub does not have: one line, exit 3
    proc = _inspect(["org/missing"], endpoint, tmp_path / "hf")
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines()[-1].startswith("nvfp4-advisor: error: org/missing: ")
    assert "repository not found" in proc.stderr

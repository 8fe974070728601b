"""Readiness per engine: which HTTP endpoints must answer 200 before the server counts as up.

vLLM: /health then /v1/models; SGLang /health (503 while starting); FastLLM has no /health, so
/v1/models (its startup.ready progress event also counts); llama.cpp /health (503 "Loading model");
trtllm-serve and transformers serve /health (engines-launch.md §1.4, §2.4, §3, §4; oracles.md §4a).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

PROBES = {
    "vllm": ("/health", "/v1/models"),
    "sglang": ("/health",),
    "fastllm": ("/v1/models",),
    "llamacpp": ("/health",),
    "trtllm": ("/health",),
    "transformers": ("/health",),
}


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    statuses: tuple[tuple[str, str], ...]   # (path, "200" | "503" | "connection refused" ...)
    model_ids: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        return ", ".join(f"{p} {s}" for p, s in self.statuses) or "no probe"


def probe(engine: str, base_url: str, *, api_key: str | None = None, timeout_s: float = 2.0) -> ProbeResult:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    statuses: list[tuple[str, str]] = []
    ids: tuple[str, ...] = ()
    with httpx.Client(timeout=timeout_s, headers=headers, trust_env=False) as client:
        for path in PROBES[engine]:
            try:
                r = client.get(base_url + path)
            except httpx.ConnectError:
                statuses.append((path, "connection refused"))
                return ProbeResult(False, tuple(statuses))
            except httpx.HTTPError as err:
                statuses.append((path, type(err).__name__))
                return ProbeResult(False, tuple(statuses))
            statuses.append((path, str(r.status_code)))
            if r.status_code != 200:
                return ProbeResult(False, tuple(statuses))
            if path == "/v1/models":
                ids = model_ids(r)
    return ProbeResult(True, tuple(statuses), ids)


def model_ids(response) -> tuple[str, ...]:
    try:
        return tuple(str(m["id"]) for m in response.json().get("data", []) if "id" in m)
    except (ValueError, AttributeError, TypeError):
        return ()


def fetch_model_ids(base_url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> tuple[str, ...]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(base_url + "/v1/models", headers=headers, timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return ()
    return model_ids(r) if r.status_code == 200 else ()

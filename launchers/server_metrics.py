"""A server's Prometheus /metrics: scraped with a size and time cap, summed per (name, draft position),
and vLLM's speculative-decoding counters turned into per-position acceptance."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

import httpx

from launchers.stream_client import get_capped

MAX_METRICS_BYTES = 8 << 20       # /metrics of a big multi-GPU vLLM is a few hundred KB


@dataclass(frozen=True)
class SpecAcceptance:
    per_position: tuple[float, ...]   # acceptance rate of draft position 0, 1, ...
    mean_accepted_length: float       # 1 + sum(per_position): tokens per verification step
    drafts: float
    source: str


_METRIC = re.compile(r'^([a-zA-Z_:][\w:]*)(\{[^}\n]*\})?[ \t]+([-+0-9.eEinfNa]+)', re.M)   # one line each


async def scrape_metrics(http: httpx.AsyncClient, base_url: str,
                         timeout_s: float = 5.0) -> dict[tuple[str, str], float]:
    try:
        status, body = await get_capped(http, base_url + "/metrics", MAX_METRICS_BYTES, timeout_s)
    except (httpx.HTTPError, asyncio.TimeoutError):
        return {}
    if status != 200:
        return {}
    return parse_metrics(body.decode("utf-8", "replace"))


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

"""Reference-vs-candidate output agreement: the bundled prompt set sent at temperature 0 to both
servers (OpenAI chat completions, streamed), tokens and top-k logprobs collected, compared by
advisor.quality.agreement_stats. Speculative acceptance is scraped from both servers' /metrics
around the run, so the canary compares the same requests.

Servers that do not return logprobs (transformers serve 5.24 accepts and ignores `logprobs`:
UNUSED_CHAT_COMPLETION_FIELDS in transformers/cli/serving/chat_completion.py) are compared on
their stream chunks (one token per chunk on the engines we launch); KL then says why it is missing.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from advisor.errors import AdvisorError
from advisor.quality import agreement_stats as st
from advisor.quality.canary import compare_acceptance, from_metrics
from advisor.quality.prompts import PromptSet
from launchers import server_metrics, stream_client

TOP_LOGPROBS = 5
MAX_PIECES_PER_TOKEN = 4


class Side:
    """One server: its client (model name, key, timeout) and whether it takes logprobs."""

    def __init__(self, base_url: str, *, model: str | None, api_key: str | None, timeout_s: float):
        self.client = stream_client.Client(base_url, model=model, api_key=api_key, timeout_s=timeout_s)
        self.logprobs = True
        self.notes: set[str] = set()

    def body(self, prompt: str, max_tokens: int) -> dict:
        b = {"model": self.client.model, "messages": [{"role": "user", "content": prompt}],
             "max_tokens": max_tokens, "temperature": 0, "stream": True}
        if self.logprobs:
            b |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
        return b

    async def generate(self, http: httpx.AsyncClient, prompt: str, max_tokens: int) -> st.Generation:
        gen = await self._bounded(http, prompt, max_tokens)
        if gen is None:                        # rejected the logprobs fields: plain requests from now on
            self.logprobs = False
            self.notes.add(f"{self.client.base_url} rejected logprobs: compared on stream chunks")
            retry = await self._bounded(http, prompt, max_tokens)
            assert retry is not None           # a request without logprobs is never rejected for them
            gen = retry
        return gen

    async def _bounded(self, http, prompt: str, max_tokens: int) -> st.Generation | None:
        """One request with a total deadline (httpx's timeout is per read: a server trickling bytes
        would never time out)."""
        try:
            return await asyncio.wait_for(self._once(http, prompt, max_tokens), self.client.timeout_s)
        except asyncio.TimeoutError:
            return st.Generation("", (), "chunks", error=f"no complete answer within {self.client.timeout_s:g} s")

    async def _once(self, http, prompt: str, max_tokens: int) -> st.Generation | None:
        text: list[str] = []
        chunks: list[str] = []
        tokens: list[str] = []
        top: list[tuple[tuple[str, float], ...]] = []
        finish = None
        try:
            async with http.stream("POST", self.client.base_url + "/v1/chat/completions",
                                   json=self.body(prompt, max_tokens)) as r:
                if r.status_code in (400, 422) and self.logprobs:
                    await r.aread()
                    return None
                if r.status_code != 200:
                    msg = (await r.aread()).decode("utf-8", "replace")[:200]
                    return st.Generation("", (), "chunks", error=f"HTTP {r.status_code}: {msg}")
                async for line in r.aiter_lines():
                    if len(chunks) > MAX_PIECES_PER_TOKEN * max_tokens + 16:
                        break                  # far more pieces than tokens asked for: stop reading
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        continue
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        piece = "".join(x for x in (delta.get("reasoning_content"), delta.get("reasoning"),
                                                    delta.get("content"), choice.get("text")) if isinstance(x, str))
                        if piece:
                            text.append(piece)
                            chunks.append(piece)
                        lp = choice.get("logprobs") or {}
                        for entry in (lp.get("content") or []) if isinstance(lp, dict) else []:
                            if isinstance(entry, dict) and isinstance(entry.get("token"), str):
                                tokens.append(entry["token"])
                                top.append(tuple((t["token"], float(t["logprob"])) for t in
                                                 entry.get("top_logprobs") or ()
                                                 if isinstance(t, dict) and "token" in t and "logprob" in t))
                        finish = choice.get("finish_reason") or finish
        except httpx.HTTPError as err:
            return st.Generation("".join(text), tuple(chunks), "chunks", error=f"{type(err).__name__}: {err}")
        if tokens:
            return st.Generation("".join(text), tuple(tokens), "logprobs", tuple(top), finish)
        return st.Generation("".join(text), tuple(chunks), "chunks", (), finish)


async def run_agreement(candidate: Side, reference: Side, prompts: PromptSet, *, max_tokens: int | None = None,
                        on_progress=None) -> st.AgreementReport:
    say = on_progress or (lambda msg: None)
    max_tokens = max_tokens or prompts.max_tokens
    async with candidate.client.http(2) as hc, reference.client.http(2) as hr:
        cand_model = await candidate.client.resolve_model(hc)
        ref_model = await reference.client.resolve_model(hr)
        before = await asyncio.gather(server_metrics.scrape_metrics(hc, candidate.client.base_url),
                                      server_metrics.scrape_metrics(hr, reference.client.base_url))
        comparisons: list[st.PromptComparison] = []
        failures: list[str] = []
        sources = set()
        for i, p in enumerate(prompts.prompts):
            say(f"agreement: {p.kind} prompt {i + 1}/{len(prompts.prompts)}")
            ref, cand = await asyncio.gather(reference.generate(hr, p.text, max_tokens),
                                             candidate.generate(hc, p.text, max_tokens))
            bad = [f"{who}: {g.error}" for who, g in (("reference", ref), ("candidate", cand)) if g.error]
            if bad:
                failures.append(f"{p.kind} prompt {i + 1}: {'; '.join(bad)}")
                continue
            sources.add((ref.token_source, cand.token_source))
            comparisons.append(st.compare_generations(p.kind, p.text, ref, cand))
        after = await asyncio.gather(server_metrics.scrape_metrics(hc, candidate.client.base_url),
                                     server_metrics.scrape_metrics(hr, reference.client.base_url))
    if not comparisons:
        raise AdvisorError(f"agreement: no prompt answered on both servers ({failures[0] if failures else 'no data'})")
    both = sources == {("logprobs", "logprobs")}
    kl_note = None
    if not both:
        missing = sorted({who for s in sources for who, src in zip(("reference", "candidate"), s) if src != "logprobs"})
        kl_note = (f"KL not measured: the {' and the '.join(missing)} server returned no logprobs "
                   "(transformers serve ignores them; vLLM, SGLang and llama.cpp return them)")
    canary = None
    spec_c = from_metrics(server_metrics.spec_acceptance(before[0], after[0]))
    spec_r = from_metrics(server_metrics.spec_acceptance(before[1], after[1]))
    if spec_c is not None and spec_r is not None:
        canary = compare_acceptance(spec_c, spec_r)
    return st.AgreementReport(
        candidate.client.base_url, reference.client.base_url, cand_model, ref_model, max_tokens, prompts.source,
        "logprob tokens" if both else "stream chunks", st.summarize(comparisons), tuple(comparisons), kl_note,
        canary, tuple(failures), tuple(sorted(candidate.notes | reference.notes)))


def run(candidate_url: str, reference_url: str, prompts: PromptSet, *, model: str | None = None,
        reference_model: str | None = None, api_key: str | None = None, max_tokens: int | None = None,
        timeout_s: float = 300.0, on_progress=None) -> st.AgreementReport:
    cand = Side(candidate_url, model=model, api_key=api_key, timeout_s=timeout_s)
    ref = Side(reference_url, model=reference_model, api_key=api_key, timeout_s=timeout_s)
    return asyncio.run(run_agreement(cand, ref, prompts, max_tokens=max_tokens, on_progress=on_progress))

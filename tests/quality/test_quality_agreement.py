"""Output agreement (`bench --reference-url`): the statistics on hand-made generations, the bundled
prompt set, and real servers on 127.0.0.1: `transformers serve` with a tiny BF16 Llama and its
`convert --dequantized` NVFP4 twin (agreement below 100 %) and an identical pair (100 %); KL from
a logprob-returning server over the same two real checkpoints (twin: KL > 0; identical: KL = 0);
the acceptance canary through /metrics of two servers."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.quality import agreement_stats as st
from advisor.quality.canary import AcceptanceSample, compare_acceptance
from advisor.quality.prompts import load_prompts

HERE = Path(__file__).resolve().parent
MAKE_TINY = HERE.parent / "launch" / "launch_make_tiny.py"


def _gen(tokens, top=None):
    return st.Generation("".join(tokens), tuple(tokens), "logprobs" if top else "chunks", tuple(top or ()))


# ------------------------------------------------------------------ statistics

def test_compare_generations_positions_and_divergence():
    same = st.compare_generations("code", "p", _gen("abcd"), _gen("abcd"))
    assert same.identical and same.matched == 4 and same.agreement == 1.0
    flip = st.compare_generations("code", "p", _gen("abcd"), _gen("abxd"))
    assert flip.first_divergence == 2 and flip.matched == 3 and flip.agreement == 0.75
    short = st.compare_generations("code", "p", _gen("abcd"), _gen("ab"))
    assert short.first_divergence == 2 and short.matched == 2
    longer = st.compare_generations("code", "p", _gen("ab"), _gen("abcd"))
    assert longer.first_divergence == 2 and longer.agreement == 1.0     # all reference positions matched


def test_topk_kl():
    lp = (("a", math.log(0.6)), ("b", math.log(0.3)))
    assert st.kl_topk(lp, lp) == 0.0
    other = (("a", math.log(0.3)), ("b", math.log(0.6)))
    # two listed tokens and a rest bucket of 0.1 on both sides
    want = 0.6 * math.log(0.6 / 0.3) + 0.3 * math.log(0.3 / 0.6)
    assert st.kl_topk(lp, other) == pytest.approx(want)
    missing = (("a", math.log(0.6)), ("c", math.log(0.3)))      # b not listed: given the smallest listed prob
    assert st.kl_topk(lp, missing) == pytest.approx(0.0)
    # KL is measured only up to the first divergence, where both saw the same context
    ref = _gen("abc", [lp, lp, lp])
    cand = _gen("axc", [lp, other, other])
    c = st.compare_generations("math", "p", ref, cand)
    assert len(c.kl) == 2 and c.kl[0] == 0.0 and c.kl[1] > 0


def test_intervals():
    w = st.wilson(0, 10)
    assert w.low == 0.0 and w.high == pytest.approx(0.2775, abs=1e-4)
    w = st.wilson(10, 10)
    assert w.high == 1.0 and w.low == pytest.approx(0.7225, abs=1e-4)
    items = [0.1, 0.2, 0.3, 0.9]
    a = st.bootstrap(items, lambda s: sum(s) / len(s))
    assert a == st.bootstrap(items, lambda s: sum(s) / len(s))                 # seeded: reproducible
    assert a.low < 0.375 < a.high
    # all prompts identical: the bootstrap has no spread, the token Wilson interval still does
    k = st.kind_agreement("code", [st.compare_generations("code", "p", _gen("abcd" * 4), _gen("abcd" * 4))] * 3)
    assert k.agreement == 1.0 and k.agreement_ci.high == 1.0 and 0.9 < k.agreement_ci.low < 1.0
    assert k.identical == 3 and k.identical_ci.low < 1.0


def test_bundled_prompt_set_and_bad_prompt_file(tmp_path, capsys):
    ps = load_prompts()
    kinds = [p.kind for p in ps.prompts]
    assert {k: kinds.count(k) for k in kinds} == {"code": 4, "math": 4, "prose": 4} and ps.max_tokens == 64
    bad = tmp_path / "p.yaml"
    bad.write_text("prompts:\n  - kind: code\n")
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--reference-url", "http://127.0.0.1:9",
               "--agreement-only", "--prompts", str(bad)])
    err = capsys.readouterr().err
    assert rc == 3 and err.count("\n") == 1 and "prompts[0] needs a non-empty 'text'" in err
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--agreement-only"])
    assert rc == 2 and "--agreement-only needs --reference-url" in capsys.readouterr().err
    rc = main(["bench", "--url", "http://127.0.0.1:9", "--reference-url", "http://example.com:80", "--agreement-only"])
    assert rc == 2 and "only talks to servers on 127.0.0.1" in capsys.readouterr().err


def test_canary_with_counts_and_from_logs():
    ref = AcceptanceSample((0.80, 0.55, 0.30), 2.65, 2000, "ref")
    same = compare_acceptance(AcceptanceSample((0.79, 0.56, 0.29), 2.64, 2000, "cand"), ref)
    assert same.finding is None and not any(d.significant for d in same.positions)
    drop = compare_acceptance(AcceptanceSample((0.70, 0.40, 0.20), 2.30, 2000, "cand"), ref)
    assert drop.finding and "suspect the quantized GEMM path" in drop.finding
    assert [d.position for d in drop.positions if d.significant] == [1, 2, 3]
    few = compare_acceptance(AcceptanceSample((0.70, 0.40, 0.20), 2.30, 20, "cand"), AcceptanceSample(
        (0.80, 0.55, 0.30), 2.65, 20, "ref"))
    assert few.finding is None                                       # the same drop on 20 drafts is noise
    from advisor.quality.canary import from_log
    from launchers import spec_log

    line = ("SpecDecoding metrics: Mean acceptance length: {m}, Accepted throughput: 1.0 tokens/s, Drafted "
            "throughput: 1.0 tokens/s, Accepted: 10 tokens, Drafted: 30 tokens, Per-position acceptance rate: "
            "{r}, Avg Draft acceptance rate: 40.0%")
    r = from_log(spec_log.parse(line.format(m="2.40", r="0.800, 0.400, 0.200"), "vllm"))
    c = from_log(spec_log.parse(line.format(m="1.90", r="0.600, 0.200, 0.100"), "vllm"))
    res = compare_acceptance(c, r)
    assert res.finding and "mean accepted length fell from 2.40" in res.finding and "without a noise" in res.method


# ------------------------------------------------------------------ real servers

@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    """(BF16 tiny Llama with a chat template, its NVFP4 twin dequantized to BF16)."""
    base = tmp_path_factory.mktemp("agree")
    subprocess.run([sys.executable, str(MAKE_TINY), str(base / "bf16")], check=True, capture_output=True,
                   timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert main(["convert", str(base / "bf16"), str(base / "nvfp4"), "--json"]) == 0
    assert main(["convert", str(base / "nvfp4"), str(base / "twin"), "--dequantized", "--json"]) == 0
    return base / "bf16", base / "twin"


def _serve(folder: Path, tmp: Path):
    from launch_support import free_port, transformers_exe  # tests/launch helpers

    from launchers.engines import build_command
    from launchers.settings import ServeSettings
    from launchers.supervisor import Server

    if transformers_exe() is None:
        pytest.skip("transformers serve is not installed")
    s = ServeSettings(engine="transformers", model=str(folder), port=free_port(), device="cpu")
    server = Server(build_command(s), log_path=tmp / f"{folder.name}.log", records_dir=tmp / f"rec-{folder.name}")
    server.start()
    try:
        return server, server.wait_ready(240)
    except Exception:
        server.stop()
        raise


def _bench(capsys, *argv) -> dict:
    rc = main(["bench", *argv, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    return out


@pytest.mark.server
@pytest.mark.timeout(600)
def test_transformers_serve_twin_and_identical_pair(tiny_pair, tmp_path, capsys):
    sys.path.insert(0, str(HERE.parent / "launch"))
    bf16, twin = tiny_pair
    (s1, r1), (s2, r2) = _serve(bf16, tmp_path), _serve(twin, tmp_path)
    try:
        ag = _bench(capsys, "--url", r2.base_url, "--reference-url", r1.base_url, "--agreement-only",
                    "--agreement-tokens", "8")["agreement"]
        allk = ag["kinds"][-1]
        assert allk["kind"] == "all" and allk["prompts"] == 12 and allk["tokens"] > 12 * 4
        assert allk["agreement"] < 1.0 and allk["identical"] < 12
        assert {k["kind"] for k in ag["kinds"]} == {"code", "math", "prose", "all"}
        assert allk["mean_kl"] is None and "returned no logprobs" in ag["kl_note"]
        assert ag["token_basis"] == "stream chunks"
        # the identical pair, with the speed suite in the same run: agreement and speed side by side
        out = _bench(capsys, "--url", r1.base_url, "--reference-url", r1.base_url, "--agreement-tokens", "8",
                     "--shots", "1", "--max-tokens", "4", "--long-prompt-words", "0")
        allk = out["agreement"]["kinds"][-1]
        assert allk["agreement"] == 1.0 and allk["identical"] == 12 and out["report"]["kinds"]
    finally:
        s1.stop()
        s2.stop()


@pytest.fixture(scope="module")
def logprob_models(tiny_pair):
    sys.path.insert(0, str(HERE))
    from quality_logprob_server import load

    bf16, twin = tiny_pair
    return {"bf16": load(str(bf16)), "twin": load(str(twin))}


@pytest.mark.server
@pytest.mark.timeout(600)
def test_kl_with_a_logprob_server(logprob_models, capsys):
    from quality_logprob_server import LogprobServer

    srv = LogprobServer(logprob_models).start()
    try:
        ag = _bench(capsys, "--url", srv.url, "--model", "twin", "--reference-url", srv.url, "--reference-model",
                    "bf16", "--agreement-only", "--agreement-tokens", "12")["agreement"]
        allk = ag["kinds"][-1]
        assert ag["token_basis"] == "logprob tokens" and ag["kl_note"] is None
        assert allk["agreement"] < 1.0 and allk["mean_kl"] > 0 and allk["kl_positions"] >= 12
        assert all(k["mean_kl"] > 0 for k in ag["kinds"])
        ag = _bench(capsys, "--url", srv.url, "--model", "bf16", "--reference-url", srv.url, "--reference-model",
                    "bf16", "--agreement-only", "--agreement-tokens", "12")["agreement"]
        allk = ag["kinds"][-1]
        assert allk["agreement"] == 1.0 and allk["identical"] == 12 and allk["mean_kl"] == 0.0
        assert allk["kl_positions"] == allk["tokens"]
    finally:
        srv.stop()


@pytest.mark.server
@pytest.mark.timeout(600)
def test_acceptance_canary_through_metrics(logprob_models, capsys):
    from quality_logprob_server import LogprobServer

    ref = LogprobServer({"m": logprob_models["bf16"]}, accept=[0.8, 0.5]).start()
    cand = LogprobServer({"m": logprob_models["twin"]}, accept=[0.5, 0.2]).start()
    same = LogprobServer({"m": logprob_models["bf16"]}, accept=[0.8, 0.5]).start()
    try:
        ag = _bench(capsys, "--url", cand.url, "--reference-url", ref.url, "--agreement-only",
                    "--agreement-tokens", "10")["agreement"]
        assert "suspect the quantized GEMM path" in ag["canary"]["finding"]
        assert [d["significant"] for d in ag["canary"]["positions"]] == [True, True]
        ag = _bench(capsys, "--url", same.url, "--reference-url", ref.url, "--agreement-only",
                    "--agreement-tokens", "10")["agreement"]
        assert ag["canary"]["finding"] is None
        rc = main(["bench", "--url", cand.url, "--reference-url", ref.url, "--agreement-only",
                   "--agreement-tokens", "4"])
        out = capsys.readouterr().out
        assert rc == 0 and "Speculative acceptance" in out and "z-test" in out
    finally:
        for s in (ref, cand, same):
            s.stop()

"""Draft acceptance read from the engine's own log line (issue 19 point 2), and the launch line carrying
what the plan assumed: draft-head quantization, prefix cache, chat template, each engine's draft-token
counting (issue 19 point 4)."""

from __future__ import annotations

import json

import pytest

from advisor.engines import flags as engine_flags
from advisor.cli import main
from advisor.cost.engine_profile import load_engine_memory
from launch_fake_sse import FakeSSE
from launchers import spec_log
from launchers.engines import build_command
from launchers.settings import ServeSettings, Speculative, settings_from_plan

pytestmark = pytest.mark.timeout(120)

# the engines' own format strings, filled in (vllm/v1/spec_decode/metrics.py:120-136@0.33.0;
# src/models/qwen3_5.cpp:12929-12939@d3aea32f; metrics_reporter.py:963-1005@0.5.23)
VLLM_LINE = ("(EngineCore pid=7) INFO 09-01 12:00:00 [metrics.py:121] SpecDecoding metrics: Mean acceptance length: "
             "2.85, Accepted throughput: 41.20 tokens/s, Drafted throughput: 66.00 tokens/s, Accepted: 412 tokens, "
             "Drafted: 660 tokens, Per-position acceptance rate: 0.800, 0.600, 0.450, Avg Draft acceptance rate: 62.4%")
FASTLLM_LINE = "[Qwen3.5 DFlash2] pos_accept_rate=[90.00%, 70.50%, 41.25%]."
SGLANG_LINE = ("[2026-09-01 12:00:00] Decode batch, #running-req: 1, #token: 900, token usage: 0.01, "
               "accept len: 2.35, accept rate: 0.45, cuda graph: True, gen throughput (token/s): 80.1, #queue-req: 0")


def test_vllm_line_is_read_as_printed_and_the_last_one_wins():
    old = VLLM_LINE.replace("0.800, 0.600, 0.450", "0.100, 0.050, 0.010")
    got = spec_log.parse(f"noise\n{old}\nmore\n{VLLM_LINE}\n")
    assert got.engine == "vllm" and got.kind == "unconditional"
    assert got.per_position == (0.8, 0.6, 0.45) and got.mean_length == 2.85
    assert got.conditional() == pytest.approx((0.8, 0.75, 0.75))
    assert got.plan_args() == "--acceptance 0.8,0.6,0.45 --acceptance-kind unconditional"
    assert "metrics.py" in got.source


def test_fastllm_pos_accept_rate_is_percent_and_unconditional():
    got = spec_log.parse("[Qwen3.5 DFlash2] enabled: layers=5, drafts_per_step=3\n" + FASTLLM_LINE)
    assert got.engine == "fastllm" and got.per_position == pytest.approx((0.9, 0.705, 0.4125))
    assert got.mean_length == pytest.approx(1 + 0.9 + 0.705 + 0.4125)
    assert spec_log.parse("[Qwen3.5 MTP] pos_accept_rate=[85.00%].", "fastllm").per_position == (0.85,)


def test_sglang_prints_only_a_mean_length():
    got = spec_log.parse(SGLANG_LINE)
    assert got.engine == "sglang" and got.kind == "mean_length" and got.per_position == ()
    assert got.mean_length == 2.35
    rates = got.conditional(3)
    assert len(rates) == 3 and 1 + rates[0] + rates[0] ** 2 + rates[0] ** 3 == pytest.approx(2.35, abs=1e-6)
    assert spec_log.parse("no acceptance here") is None
    assert spec_log.parse(VLLM_LINE, "sglang") is None           # a named engine reads only its own line


def test_bench_reads_the_server_log(capsys, tmp_path):
    srv = FakeSSE(tokens=4, interval_s=0.002, ttft_s=0.002).start()
    try:
        log = tmp_path / "server.log"
        log.write_text("starting\n" + FASTLLM_LINE + "\n")
        rc = main(["bench", "--url", srv.url, "--max-tokens", "4", "--shots", "1", "--long-prompt-words", "0",
                   "--server-log", str(log), "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0
        acc = out["logged_acceptance"]
        assert acc["engine"] == "fastllm" and acc["kind"] == "unconditional"
        assert acc["per_position"] == pytest.approx([0.9, 0.705, 0.4125])
        rc = main(["bench", "--url", srv.url, "--max-tokens", "4", "--shots", "1", "--long-prompt-words", "0",
                   "--server-log", str(log)])
        text = " ".join(capsys.readouterr().out.split())           # the terminal wraps long values
        assert rc == 0 and "--acceptance 0.9,0.705,0.412 --acceptance-kind unconditional" in text
        # a missing log is one line naming it, not a traceback
        assert main(["bench", "--url", srv.url, "--max-tokens", "4", "--shots", "1", "--long-prompt-words", "0",
                     "--server-log", str(tmp_path / "nope.log")]) == 3
        assert "nope.log" in capsys.readouterr().err
    finally:
        srv.stop()


# ---------------------------------------------------------------- launch carries the plan's assumptions
def _plan(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fastllm_launch_carries_draft_quant_prefix_cache_and_chat_template(capsys, tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages }}")
    doc = _plan(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-2080-ti", "--gpus", "2", "--engine", "fastllm",
                "--vram", "22", "--tp", "2", "--spec-method", "dflash", "--draft-tokens", "7",
                "--chat-template", str(template))
    rec = doc["recommendation"]
    assert rec["env"] == {"FASTLLM_DRAFT_QUANT": "nvfp4_head"} and rec["prefix_caching"] is True
    assert rec["flags"]["FASTLLM_DRAFT_QUANT"] == "nvfp4_head" and rec["flags"]["--prefix_cache"] == "true"
    assert rec["flags"]["--chat_template"] == str(template)
    assert rec["flags"]["--speculative_num_draft_tokens"] == "8"           # the DFlash block counts the anchor
    assert any(a["key"] == "draft_head_quant" for a in doc["assumptions"])
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(doc))
    assert main(["launch", "/models/q", "--engine", "fastllm", "--plan", str(p), "--draft-model", "/models/d",
                 "--dry-run", "--json"]) == 0
    cmd = json.loads(capsys.readouterr().out)["command"]
    env = dict(cmd["env"])
    pairs = dict(zip(cmd["argv"], cmd["argv"][1:]))
    assert env["FASTLLM_DRAFT_QUANT"] == "nvfp4_head"
    assert pairs["--prefix_cache"] == "true" and pairs["--chat_template"] == str(template)
    for flag, value in rec["flags"].items():          # plan line and launch line agree
        if flag.startswith("-") and flag != "--speculative_draft_model_path":
            assert pairs[flag] == value, flag


def test_a_missing_chat_template_is_one_line(capsys, tmp_path):
    missing = tmp_path / "none.jinja"
    assert main(["plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--chat-template", str(missing)]) == 3
    err = capsys.readouterr().err
    assert "none.jinja" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_without_drafts_no_draft_quant_env(capsys):
    doc = _plan(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-2080-ti", "--gpus", "2", "--engine", "fastllm",
                "--vram", "22", "--tp", "2", "--draft-tokens", "0")
    assert doc["recommendation"]["env"] == {} and "FASTLLM_DRAFT_QUANT" not in doc["recommendation"]["flags"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "fastllm"])
def test_draft_token_flags_follow_each_engines_counting(engine):
    """The profile says whether the engine's flag counts the anchor token; the flag builder must agree."""
    rule = load_engine_memory(engine).draft_token_flag
    method = "dflash"
    argv = engine_flags.speculative_args(engine, method, 5, "/d")
    anchor = 1 if rule["counts_anchor"] else 0
    if engine == "vllm":
        cfg = json.loads(argv[argv.index("--speculative-config") + 1])
        assert cfg["num_speculative_tokens"] == 5 + anchor
    else:
        flag = rule["flag"]
        assert argv[argv.index(flag) + 1] == str(5 + anchor)
    if engine == "fastllm":        # --mtp N counts drafted tokens only (ftllm/util.py:1050@1.9.0)
        assert engine_flags.speculative_args("fastllm", "mtp", 5) == ["--mtp", "5"]


@pytest.mark.parametrize("engine, flag", [("vllm", "--chat-template"), ("sglang", "--chat-template"),
                                          ("fastllm", "--chat_template")])
def test_every_engine_passes_the_chat_template_on(engine, flag):
    s = settings_from_plan({"recommendation": {"kv_cache_dtype": "auto", "max_batch": 1, "memory_share": 0.9,
                                               "chunked_prefill": 2048, "tp": 1, "chat_template": "/t.jinja",
                                               "env": {"X_ASSUMED": "1"}, "prefix_caching": None}},
                           engine=engine, model="/m")
    cmd = build_command(s)
    assert cmd.argv[cmd.argv.index(flag) + 1] == "/t.jinja"
    assert ("X_ASSUMED", "1") in cmd.env
    plain = build_command(ServeSettings(engine=engine, model="/m", speculative=Speculative("mtp", 2)))
    assert flag not in plain.argv

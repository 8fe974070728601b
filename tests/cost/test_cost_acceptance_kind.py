"""--acceptance says which per-position acceptance it holds (issue 19 point 2): engines print the share of
all verify steps in which position i was accepted (unconditional); the model needs it given the earlier
positions were accepted (conditional)."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.cost.speculative import expected_tokens, from_mean_length, to_conditional

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"


def test_unconditional_rates_are_divided_by_the_previous_position():
    u = (0.8, 0.6, 0.45)
    a = to_conditional(u, "unconditional")
    assert a == pytest.approx((0.8, 0.75, 0.75))
    # E[tokens/step] = 1 + sum of the unconditional shares, whichever form goes in
    assert expected_tokens(a) == pytest.approx(1 + sum(u))
    assert to_conditional(u, "conditional") == u
    assert to_conditional((0.5, 0.0, 0.0), "unconditional") == (0.5, 0.0, 0.0)     # nothing past a rejection
    with pytest.raises(ValueError):
        to_conditional(u, "sometimes")


def test_a_mean_accepted_length_becomes_a_constant_conditional_rate():
    rates = from_mean_length(2.5, 4)
    assert len(rates) == 4 and len(set(rates)) == 1
    assert expected_tokens(rates) == pytest.approx(2.5, abs=1e-6)
    assert from_mean_length(1.0, 3) == (0.0, 0.0, 0.0) and from_mean_length(9, 3) == (1.0, 1.0, 1.0)


def _per_k(capsys, *extra):
    assert main(["plan", DEMO, "--gpu", "rtx-5090", "--engine", "vllm", "--spec-method", "mtp", "--acceptance",
                 "0.8,0.6,0.45", *extra, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc, {int(k): v for k, v in doc["predictions"]["speculative"]["per_k"].items()}


def test_plan_reads_acceptance_as_the_engine_prints_it(capsys):
    """vLLM prints unconditional per-position rates (v1/spec_decode/metrics.py): 1 + 0.8 + 0.6 + 0.45 tokens
    per step at k = 3, not 1 + 0.8 + 0.48 + 0.216 as a conditional reading would give."""
    doc, per_k = _per_k(capsys)
    assert per_k[3]["expected_tokens_per_step"] == pytest.approx(2.85, abs=1e-3)
    acc = next(a for a in doc["assumptions"] if a["key"] == "acceptance.mtp")
    assert "unconditional" in acc["source"] and "metrics.py" in acc["source"]
    _, cond = _per_k(capsys, "--acceptance-kind", "conditional")
    assert cond[3]["expected_tokens_per_step"] == pytest.approx(1 + 0.8 + 0.48 + 0.216, abs=1e-3)


def test_fastllm_pos_accept_rate_is_unconditional_too(capsys):
    assert main(["plan", DEMO, "--gpu", "rtx-2080-ti", "--gpus", "2", "--engine", "fastllm", "--vram", "22",
                 "--spec-method", "dflash", "--acceptance", "0.9,0.7", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    per_k = {int(k): v for k, v in doc["predictions"]["speculative"]["per_k"].items()}
    assert per_k[2]["expected_tokens_per_step"] == pytest.approx(2.6, abs=1e-3)


def test_a_bad_acceptance_kind_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as err:
        main(["plan", DEMO, "--gpu", "rtx-5090", "--acceptance", "0.8", "--acceptance-kind", "sometimes"])
    assert err.value.code == 2
    assert "--acceptance-kind" in capsys.readouterr().err

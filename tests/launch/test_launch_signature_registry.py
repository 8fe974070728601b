"""Log signatures are engine data: each EngineSpec names its own, and the matcher reads them from the registry."""

from __future__ import annotations

from advisor import engines
from advisor.engines.log_signatures import COMMON, KINDS, LogSignature
from launchers.signatures import diagnose, match_line, signatures_for


def test_every_engine_signature_has_a_known_kind_and_a_cause():
    for spec in engines.SPECS:
        for sig in spec.log_signatures:
            assert isinstance(sig, LogSignature)
            assert sig.kind in KINDS and sig.cause and sig.pattern


def test_an_engine_matches_its_own_and_the_common_signatures_only():
    sglang_ready = "The server is fired up and ready to roll!"
    assert [f.kind for f in match_line("sglang", sglang_ready)] == ["ready"]
    assert match_line("vllm", sglang_ready) == []
    assert match_line("no-such-engine", sglang_ready) == []
    for name in engines.launchable():
        listed = signatures_for(name)
        assert set(COMMON) <= set(listed)
        assert set(listed) == set(COMMON) | set(engines.get(name).log_signatures)


def test_a_signature_moved_to_another_engine_moves_its_diagnosis():
    line = "FastLLM Error: bad weights"
    assert [f.kind for f in diagnose("fastllm", [line])] == ["fatal_error"]
    # the same line on vLLM is only the exit status
    assert [f.cause for f in diagnose("vllm", [line], exit_code=1)] == [
        "the server exited with status 1 before it was ready"]

"""--tp: impossible sizes are usage errors; heads and KV heads must divide."""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint

from advisor.cli import main
from advisor.cost import feasibility
from advisor.errors import UsageError

@pytest.mark.parametrize("command", ["plan", "explain"])
@pytest.mark.parametrize("gpus,tp,expect", [("1", "2", "needs 2 GPUs"), ("2", "3", "divisible by tensor parallel")])
def test_impossible_tp_is_a_usage_error(capsys, command, gpus, tp, expect):
    assert main([command, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--gpus", gpus, "--tp", tp]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err


def test_tp_problem_checks_heads_and_kv_heads():
    arch = dense_checkpoint().arch                      # 32 heads, 8 KV heads
    assert feasibility.tp_problem(2, arch) is None and feasibility.tp_problem(16, arch) is None   # KV replicated
    assert "(32)" in feasibility.tp_problem(3, arch)
    with pytest.raises(UsageError):
        feasibility.check_tp(4, 2, arch)

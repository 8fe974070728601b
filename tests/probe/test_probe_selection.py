"""resolve_gpus and the shared --gpu/--gpus options: the planning set later commands use."""

from __future__ import annotations

import argparse

import pytest

from advisor.commands._args import add_gpu_arguments, selection_from_args
from advisor.errors import UsageError
from advisor.probe import resolve_gpus


def test_auto_uses_the_probed_cards(probe_snapshot):
    result, _ = probe_snapshot("rtx2080ti_x2_nvlink")
    sel = resolve_gpus(result, "auto", None)
    assert (sel.spec.id, sel.count, sel.source, sel.devices) == ("rtx-2080-ti", 2, "probed", (0, 1))
    assert resolve_gpus(result, None, 1).devices == (0,)


def test_auto_on_a_heterogeneous_box_takes_the_most_common_model(probe_snapshot):
    result, _ = probe_snapshot("hetero_4090_3090x2")
    sel = resolve_gpus(result, "auto", None)
    assert (sel.spec.id, sel.count, sel.devices) == ("rtx-3090", 2, (1, 2))
    assert "rtx-4090" in sel.note
    only = resolve_gpus(result, "rtx-4090", None)
    assert (only.spec.id, only.count, only.source, only.devices) == ("rtx-4090", 1, "probed", (0,))


def test_auto_asks_for_more_cards_than_present(probe_snapshot):
    result, _ = probe_snapshot("rtx3090")
    with pytest.raises(UsageError, match="--gpu rtx-3090 --gpus 4"):
        resolve_gpus(result, "auto", 4)


def test_id_beyond_the_box_is_a_what_if(probe_snapshot):
    result, _ = probe_snapshot("rtx2080ti_x2_nvlink")
    sel = resolve_gpus(result, "rtx-2080-ti", 3)
    assert (sel.source, sel.count, sel.devices) == ("what-if", 3, ())
    assert "2 in this box" in sel.note
    other = resolve_gpus(result, "h100-sxm", 8)
    assert (other.spec.id, other.source, other.label) == ("h100-sxm", "what-if", f"8 x {other.spec.name}")


def test_no_gpu_auto_is_a_usage_error(probe_snapshot):
    result, _ = probe_snapshot("no_driver")
    with pytest.raises(UsageError, match="--gpu ID"):
        resolve_gpus(result, "auto", None)
    with pytest.raises(UsageError, match="unknown GPU"):
        resolve_gpus(result, "not-a-gpu", None)
    with pytest.raises(UsageError, match="at least 1"):
        resolve_gpus(result, "rtx-3090", 0)
    assert resolve_gpus(result, "RTX 3090", None).spec.id == "rtx-3090"   # names work too


def test_shared_arguments(probe_snapshot):
    parser = argparse.ArgumentParser()
    add_gpu_arguments(parser)
    args = parser.parse_args([])
    assert (args.gpu, args.gpus) == ("auto", None)
    result, _ = probe_snapshot("h100_sxm_x2")
    sel = selection_from_args(args, result)
    assert (sel.spec.id, sel.count) == ("h100-sxm", 2)
    args = parser.parse_args(["--gpu", "rtx-5090", "--gpus", "4"])
    sel = selection_from_args(args, result)
    assert (sel.spec.id, sel.count, sel.source) == ("rtx-5090", 4, "what-if")


def test_selection_from_args_probes_when_not_given(install_nvml):
    install_nvml("rtx4090")
    sel = selection_from_args(argparse.Namespace(gpu="auto", gpus=None))
    assert (sel.spec.id, sel.source) == ("rtx-4090", "probed")


def test_mig_enabled_card_is_flagged_in_the_planning_set(probe_snapshot):
    result, _ = probe_snapshot("a100_mig")
    for sel in (resolve_gpus(result, "auto", None), resolve_gpus(result, "a100-40gb-sxm", None)):
        assert sel.source == "probed"
        assert "GPU 0 has MIG on (2 slice(s): 42 SMs / 19.5 GiB)" in sel.note and "optimistic" in sel.note
    plain, _ = probe_snapshot("rtx3090")
    assert "MIG" not in resolve_gpus(plain, "auto", None).note

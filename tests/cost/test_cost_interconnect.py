"""The link between GPUs: PCIe cards are not assumed NVLinked; --nvlink overrides the guess."""

from __future__ import annotations

import json

from advisor.cli import main
from advisor.cost import interconnect
from advisor.gpu_table import get_gpu

def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_pcie_datacenter_cards_are_not_assumed_nvlinked():
    pcie = get_gpu("h100-pcie")
    link = interconnect.link_for(pcie)
    assert link.kind == "pcie" and "--nvlink" in link.source
    assert interconnect.link_for(pcie, nvlink=True).kind == "nvlink"
    assert interconnect.link_for(get_gpu("h100-sxm")).kind == "nvlink"
    assert interconnect.link_for(get_gpu("h100-sxm"), nvlink=False).kind == "pcie"


def test_plan_nvlink_flag_overrides_the_guess(capsys):
    _, guess = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "h100-pcie", "--gpus", "2", "--tp", "2")
    _, bridged = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "h100-pcie", "--gpus", "2", "--tp", "2", "--nvlink")

    def link(doc):
        return next(a["value"] for a in doc["assumptions"] if a["key"] == "interconnect")
    assert link(guess).startswith("PCIe") and link(bridged).startswith("NVLink")

"""The engine registry: one EngineSpec per engine, the lookups every engine list reads, one version choice."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from advisor import engines
from advisor.cost.engine_profile import load_engine_memory
from advisor.engines import flags
from advisor.engines.versions import MEMORY_PROFILES, RULE_FILES, resolve
from advisor.errors import BadInput, UsageError
from advisor.kernel_path.rule_files import load_rules


def test_tuned_engines_are_the_ones_with_rules_and_launchable_adds_the_untuned():
    assert engines.tuned() == ("vllm", "sglang", "fastllm")
    assert engines.launchable() == ("vllm", "sglang", "fastllm", "llamacpp", "trtllm", "transformers")
    with pytest.raises(UsageError, match="unknown engine 'vlm'; choose one of vllm, sglang"):
        engines.get("vlm")
    assert engines.find("vlm") is None


@pytest.mark.parametrize("name", engines.tuned())
def test_a_tuned_engine_has_rules_and_a_memory_profile_of_its_families(name):
    spec = engines.get(name)
    rules, _ = load_rules(name)
    assert rules.engine == spec.rule_family
    assert load_engine_memory(name).engine == name and spec.memory_family


@pytest.mark.parametrize("name", engines.launchable())
def test_every_engine_names_a_launcher_module_that_builds(name):
    assert callable(importlib.import_module(engines.get(name).launcher).build)


def test_the_registry_imports_neither_pydantic_nor_yaml_nor_launchers():
    code = ("import sys, advisor.engines, advisor.engines.flags, advisor.kernel_path.rule_versions\n"
            "bad = [m for m in ('pydantic', 'yaml', 'ruamel', 'launchers') if m in sys.modules]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_spellings_come_from_the_engine_spec():
    assert flags.tp_args("fastllm", 1) == [] and flags.tp_args("fastllm", 2) == ["--tp", "2"]
    assert flags.tp_args("vllm", 1) == ["--tensor-parallel-size", "1"]
    assert flags.prefix_cache_args("sglang", True) == [] and flags.prefix_cache_args("sglang", False) == [
        "--disable-radix-cache"]
    assert flags.eager_args("sglang", "0.5.16") == ["--disable-cuda-graph"]
    assert flags.eager_env("fastllm") == [("FASTLLM_CUDA_GRAPH", "0")] and flags.eager_args("fastllm") == []
    # an engine without the spelling (or unknown) gets nothing
    assert flags.context_args("llamacpp", 4096) == [] and flags.speculative_args("nope", "mtp", 3) == []
    assert flags.speculative_args("vllm", "eagle", 2) == [
        "--speculative-config", '{"method":"eagle","num_speculative_tokens":2,"model":"DRAFT_MODEL_PATH"}']



def test_one_nearest_older_choice_for_rules_and_memory_profiles(tmp_path):
    versions = ["0.33", "0.35"]
    for kind in (RULE_FILES, MEMORY_PROFILES):
        assert resolve(kind, "vllm", None, versions, tmp_path) == ("0.35", "")
        chosen, note = resolve(kind, "vllm", "0.34.2", versions, tmp_path)
        assert chosen == "0.33" and note == f"no {kind.what} for vllm 0.34.2; using 0.33 (nearest older)"
        with pytest.raises(UsageError, match="0.30: the oldest"):
            resolve(kind, "vllm", "0.30", versions, tmp_path)
        with pytest.raises(BadInput):
            resolve(kind, "vllm", None, [], tmp_path)
    # a memory profile serves its patch releases without a note; a rule file says it is another's
    assert resolve(MEMORY_PROFILES, "vllm", "0.33.1", versions, tmp_path) == ("0.33", "")
    assert resolve(RULE_FILES, "vllm", "0.33.1", versions, tmp_path)[1].endswith("(nearest older)")


def test_a_memory_profile_may_extend_an_earlier_version(tmp_path):
    from advisor.cost.engine_profile import profiles_dir

    (tmp_path / "vllm-0.33.yaml").write_text((profiles_dir() / "vllm-0.33.yaml").read_text())
    (tmp_path / "vllm-0.35.yaml").write_text('extends: vllm-0.33\nversion: "0.35.0"\n'
                                             "memory_share: {default: 0.8}\ntp_allreduce_per_layer: 3\n")
    base, new = load_engine_memory("vllm", "0.33", folder=tmp_path), load_engine_memory("vllm", "0.35", folder=tmp_path)
    assert new.version == "0.35.0" and new.profile_version == "0.35"
    # a nested mapping is merged: the share's flag and source stay the base's
    assert new.share_default == 0.8 and new.share_flag == base.share_flag and new.share_covers == base.share_covers
    assert new.allreduce_per_layer == 3 and new.kv_dtypes == base.kv_dtypes and new.memory == base.memory
    (tmp_path / "vllm-0.36.yaml").write_text('extends: vllm-0.30\nengine: vllm\n')
    with pytest.raises(BadInput, match="no such profile"):
        load_engine_memory("vllm", "0.36", folder=tmp_path)

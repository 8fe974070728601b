"""Hub ids through a faked huggingface_hub boundary, the bundled demos, and the inspect command."""

from __future__ import annotations

import json
import os
import shutil
import types

from advisor.checkpoint import hub
from advisor.checkpoint.demo import DEMOS, demo_path, list_demos
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.safetensors_header import read_header
from advisor.cli import main

from ckpt_builders import LLAMA_CONFIG, llama_tensors, write_checkpoint


class RepositoryNotFoundError(Exception):
    pass


class EntryNotFoundError(Exception):
    pass


class NotASafetensorsRepoError(Exception):
    pass


def _fake_api(folder, calls, *, headers=True, missing_repo=False):
    """A stand-in for huggingface_hub serving files of a local folder; records every call."""
    from huggingface_hub.utils._safetensors import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

    def hf_hub_download(repo_id, filename, revision=None):
        calls.append(("download", repo_id, filename, revision))
        if missing_repo:
            raise RepositoryNotFoundError("404")
        assert filename.endswith(".json"), "only config files may be downloaded"
        path = os.path.join(folder, filename)
        if not os.path.exists(path):
            raise EntryNotFoundError(filename)
        return path

    def get_safetensors_metadata(repo_id, revision=None):
        calls.append(("metadata", repo_id, revision))
        if not headers:
            raise NotASafetensorsRepoError("no safetensors")
        files = {}
        for f in sorted(os.listdir(folder)):
            if f.endswith(".safetensors"):
                h = read_header(os.path.join(folder, f))
                files[f] = SafetensorsFileMetadata(metadata=h.metadata, tensors={
                    n: TensorInfo(dtype=t.dtype, shape=list(t.shape), data_offsets=(t.begin, t.end))
                    for n, t in h.tensors.items()})
        idx = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(idx):
            d = json.load(open(idx))
            return SafetensorsRepoMetadata(metadata=d["metadata"], sharded=True, weight_map=d["weight_map"],
                                           files_metadata=files)
        name = next(iter(files))
        return SafetensorsRepoMetadata(metadata=None, sharded=False,
                                       weight_map={n: name for n in files[name].tensors}, files_metadata=files)

    return types.SimpleNamespace(hf_hub_download=hf_hub_download, get_safetensors_metadata=get_safetensors_metadata)


def test_hub_matches_local(tmp_path, monkeypatch):
    folder = write_checkpoint(tmp_path / "repo", llama_tensors("ct_nvfp4a16"), dict(LLAMA_CONFIG, quantization_config={
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float",
                                                                          "strategy": "tensor_group", "group_size": 16},
                                      "input_activations": None}},
        "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}), shards=2)
    calls = []
    monkeypatch.setattr(hub, "_api", lambda: _fake_api(str(folder), calls))
    remote = inspect_checkpoint("acme/tiny-nvfp4@v1.0")
    local = inspect_checkpoint(str(folder))
    assert remote.source == "acme/tiny-nvfp4@v1.0"
    assert (remote.label, remote.modules, remote.totals) == (local.label, local.modules, local.totals)
    assert remote.label == "W4A16-NVFP4" and remote.totals.sizes_from == "headers"
    assert ("metadata", "acme/tiny-nvfp4", "v1.0") in calls
    assert all(c[3] == "v1.0" for c in calls if c[0] == "download")
    assert {c[2] for c in calls if c[0] == "download"} <= set(hub.CONFIG_FILES)


def test_hub_without_headers_uses_config(tmp_path, monkeypatch):
    folder = write_checkpoint(tmp_path / "repo", None, dict(LLAMA_CONFIG))
    monkeypatch.setattr(hub, "_api", lambda: _fake_api(str(folder), [], headers=False))
    info = inspect_checkpoint("acme/cfg-only")
    assert info.totals.sizes_from == "config" and info.label == "BF16"
    assert any(f.code == "no-weights" for f in info.findings)


def test_hub_errors_are_one_line(tmp_path, monkeypatch, capsys):
    folder = write_checkpoint(tmp_path / "repo", None, dict(LLAMA_CONFIG))
    monkeypatch.setattr(hub, "_api", lambda: _fake_api(str(folder), [], missing_repo=True))
    assert main(["inspect", "acme/missing"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "acme/missing" in err and "not found" in err


def test_real_hub_client_offline(tmp_path, monkeypatch, capsys):
    """The real huggingface_hub with HF_HUB_OFFLINE=1 and an empty cache: exit 3, one line, no network."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert main(["inspect", "Qwen/Qwen3-8B"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Qwen/Qwen3-8B" in err and "Traceback" not in err


# ---------------------------------------------------------------- demos

def test_demos_listed_and_classify():
    assert list_demos() == list(DEMOS) and len(DEMOS) >= 5
    for name in list_demos():
        info = inspect_checkpoint(f"demo:{name}")
        assert info.label == DEMOS[name][1], name
        assert info.totals.sizes_from == "config" and info.source == f"demo:{name}"
        assert 0 < info.totals.bytes_per_token <= info.totals.stored_bytes
        assert info.arch.num_layers > 0 and info.arch.kv_layers > 0
        assert (demo_path(name) / "config.json").is_file()


def test_demo_sizes_are_sensible():
    q8 = inspect_checkpoint("demo:qwen3-8b-nvfp4")
    assert 8.0e9 < q8.totals.params < 8.4e9
    # NVFP4 linears (4.5 bits) + BF16 embeddings/lm_head: between 0.55 and 0.85 bytes per parameter
    assert 0.55 < q8.totals.stored_bytes / q8.totals.params < 0.85
    assert q8.kv_cache_quant == "fp8"
    moe = inspect_checkpoint("demo:qwen3-30b-a3b-nvfp4")
    assert 30e9 < moe.totals.params < 31e9 and 2.5e9 < moe.totals.active_params < 3.6e9
    routers = moe.modules_with_role("router")
    assert routers and all(g.scheme == "BF16" for g in routers)
    fp8 = inspect_checkpoint("demo:qwen3-30b-a3b-fp8")
    assert fp8.totals.stored_bytes > moe.totals.stored_bytes * 1.5
    gptq = inspect_checkpoint("demo:llama-3.1-8b-gptq-int4")
    lm = gptq.modules_with_role("lm_head")
    assert lm[0].weight.format == "fp16" and gptq.label == "W4A16-INT4"
    hybrid = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    assert hybrid.label == "MIXED" and hybrid.arch.linear_attention_layers == 48 and hybrid.arch.kv_layers == 16


def test_demo_copy_is_a_plain_folder(tmp_path):
    shutil.copytree(demo_path("qwen3-8b-nvfp4"), tmp_path / "q")
    assert inspect_checkpoint(str(tmp_path / "q")).label == "W4A4-NVFP4"


# ---------------------------------------------------------------- command

def test_inspect_json(capsys):
    assert main(["inspect", "demo:qwen3.6-27b-nvfp4-mixed", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] and doc["kind"] == "inspect"
    ck = doc["checkpoint"]
    assert ck["label"] == "MIXED" and abs(sum(ck["scheme_shares"].values()) - 1) < 1e-6
    assert {"modules", "arch", "totals", "kept_bf16", "findings", "kv_cache_quant"} <= set(ck)
    m = ck["modules"][0]
    assert {"name", "role", "scheme", "weight", "act", "count", "params", "stored_bytes", "shape", "layers"} <= set(m)


def test_inspect_human(capsys, build):
    folder = build("fused", llama_tensors("mo_nvfp4", scales={"model.layers.0.self_attn.k_proj": 3.0}),
                   dict(LLAMA_CONFIG), hf_quant={"producer": {"name": "modelopt", "version": "0.47.0"},
                                                 "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                                  "exclude_modules": ["lm_head"]}})
    assert main(["inspect", folder]) == 0
    out = capsys.readouterr().out
    assert "W4A4-NVFP4" in out and "Kept in 16-bit" in out and "lm_head" in out
    assert "global scales" in out      # the doctor finding is shown


def test_inspect_help_does_not_import_torch():
    import subprocess
    import sys

    code = ("import sys; from advisor.cli import main\n"
            "try:\n    main(['inspect', '--help'])\nexcept SystemExit:\n    pass\n"
            "import advisor.checkpoint.inspect\n"
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().endswith("False"), r.stdout + r.stderr

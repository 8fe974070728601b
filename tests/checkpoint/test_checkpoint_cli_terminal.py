"""What a user sees from `nvfp4-advisor inspect` in an 80-column terminal, and inputs that used to
hang or to produce a plausible-looking answer of zeros."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.checkpoint.model import ModuleGroup
from advisor.checkpoint.report import _layers_text, compact_bytes, human_bytes, to_doc
from advisor.checkpoint.schemes import BF16, NO_ACT
from advisor.cli import main
from advisor.rich_render import renderables
from advisor.doc import Bullets, Table
from tests.conftest import ROOT

from ckpt_builders import LLAMA_CONFIG, llama_tensors, write_checkpoint


def _render(doc, width: int) -> list[str]:
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    for r in renderables(doc):
        console.print(r)
    return buf.getvalue().splitlines()


def _table(doc, title: str) -> Table:
    return next(b for b in doc.blocks if isinstance(b, Table) and b.title == title)


@pytest.mark.parametrize("source", ["demo:qwen3.6-27b-nvfp4-mixed", "demo:qwen3-30b-a3b-nvfp4"])
def test_module_table_is_readable_at_80_columns(source):
    info = inspect_checkpoint(source)
    lines = _render(to_doc(info), 80)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    # decoder module names are shown whole (not folded over two lines) next to role, scheme and bytes
    decoder = [g for g in info.modules if g.name.split(".")[-2:-1] and ".layers.*." in g.name
               and not g.name.startswith(("mtp", "model.visual", "visual"))]
    assert decoder
    for g in decoder:
        short = g.name.split("layers.*.", 1)[1]
        if len(short) <= 24:
            row = [line for line in lines if f" {short} " in line]
            assert row, f"{short} folded or missing:\n{text}"
            assert g.scheme in row[0] and g.role in row[0]


def test_schemes_table_carries_formats_and_adds_up():
    info = inspect_checkpoint("demo:qwen3.6-27b-nvfp4-mixed")
    doc = to_doc(info)
    schemes = _table(doc, "Schemes")
    by_scheme = {}
    for g in info.modules:
        by_scheme[g.scheme] = by_scheme.get(g.scheme, 0) + g.stored_bytes
    assert {r[0] for r in schemes.rows} == set(by_scheme)
    for row in schemes.rows:
        assert row[4] == compact_bytes(by_scheme[row[0]])
    assert abs(sum(float(r[5].rstrip("%")) for r in schemes.rows) - 100.0) < 0.2
    fp8 = next(r for r in schemes.rows if r[0] == "W8A8-FP8")
    assert fp8[1:4] == ("fp8_e4m3", "tensor", "fp8 static tensor")
    # the MIXED line states what its percentages are shares of (they differ from the table's)
    scheme_line = dict(next(b for b in doc.blocks if hasattr(b, "pairs")).pairs)["scheme"]
    assert "of the quantized linear bytes" in scheme_line
    assert f"W8A8-FP8 {info.scheme_shares['W8A8-FP8']:.1%}" in scheme_line


def test_layers_column_shows_experts_per_layer():
    g = ModuleGroup("model.layers.*.mlp.experts.*.down_proj", "expert", "BF16", BF16, NO_ACT, count=48 * 128,
                    layers=tuple(range(48)))
    assert _layers_text(g) == "0-47 x128"
    one = ModuleGroup("model.layers.*.mlp.down_proj", "mlp_down", "BF16", BF16, NO_ACT, count=3, layers=(0, 1, 2))
    assert _layers_text(one) == "0-2"
    assert _layers_text(ModuleGroup("lm_head", "lm_head", "BF16", BF16, NO_ACT)) == ""


def test_compact_bytes_three_digits():
    assert compact_bytes(972 * 2**20) == "972 MiB"
    assert compact_bytes(81 * 2**20) == "81.0 MiB"
    assert compact_bytes(1.16 * 2**30) == "1.16 GiB"
    assert compact_bytes(512) == "512 B"
    assert compact_bytes(1000) == "0.977 KiB"


def test_human_rows_match_json(tmp_path, capsys):
    folder = write_checkpoint(tmp_path / "ck", llama_tensors("mo_nvfp4"), LLAMA_CONFIG)
    assert main(["inspect", str(folder), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)["checkpoint"]
    doc = to_doc(inspect_checkpoint(str(folder)))
    modules = _table(doc, "Modules")
    assert len(modules.rows) == len(payload["modules"])
    for row, m in zip(modules.rows, payload["modules"]):
        assert m["name"].endswith(row[0]) and row[1] == m["role"] and row[2] == m["scheme"]
        assert row[4] == compact_bytes(m["stored_bytes"])


@pytest.mark.parametrize("config,exit_code,words", [
    # GPT-2 spellings are sized through the alias table (n_layer / n_embd / n_head)
    ({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257}, 0, None),
    # keys the advisor cannot read: the scheme is answered, the sizes are N/A with a warning
    ({"model_type": "mystery", "width": 768, "depth": 12}, 0, "cannot be computed"),
    # wrong JSON types: one line naming the key (exit 3)
    ({**LLAMA_CONFIG, "hidden_size": "big", "num_hidden_layers": [3]}, 3, "expected a number"),
])
def test_config_only_sizes_or_scheme_never_zeros(tmp_path, capsys, config, exit_code, words):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    code = main(["inspect", str(folder)])
    out, err = capsys.readouterr()
    assert code == exit_code and "Traceback" not in out + err
    if exit_code:
        assert len(err.strip().splitlines()) == 1 and "config.json" in err and words in err
    elif words:
        assert words in out and "stored" in out and "N/A (sizes unknown)" in out and "0 B" not in out
    else:
        assert "N/A" not in out.split("stored", 1)[1].splitlines()[0]


def test_fifo_shard_is_refused_not_waited_on(tmp_path):
    folder = write_checkpoint(tmp_path / "ck", None, LLAMA_CONFIG)
    os.mkfifo(folder / "model.safetensors")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "advisor", "inspect", str(folder)], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 3
    assert "not a regular file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _pairs(doc) -> dict:
    return dict(next(b for b in doc.blocks if hasattr(b, "pairs")).pairs)


def test_lone_file_and_unknown_config_do_not_print_zero_sizes(tmp_path):
    tensors = llama_tensors("bf16")
    lone = write_checkpoint(tmp_path / "lone", tensors, None) / "model.safetensors"
    pairs = _pairs(to_doc(inspect_checkpoint(str(lone))))
    assert pairs["architecture"] == "unknown (no config.json), 2 layers seen in tensor names"
    assert pairs["kv layers"].startswith("N/A")
    odd = write_checkpoint(tmp_path / "odd", tensors, {"model_type": "mystery", "layers": 2, "width": 128})
    info = inspect_checkpoint(str(odd))
    assert info.arch.num_layers == 2                       # from the tensor names, not 0 from the config
    pairs = _pairs(to_doc(info))
    assert "hidden N/A" in pairs["architecture"] and "hidden 0" not in pairs["architecture"]
    assert pairs["kv layers"].startswith("N/A")
    # GPT-2 spellings are read through the alias table
    gpt2 = write_checkpoint(tmp_path / "gpt2", tensors, {"model_type": "gpt2", "n_layer": 2, "n_embd": 128})
    assert "hidden 128" in _pairs(to_doc(inspect_checkpoint(str(gpt2))))["architecture"]


class LocalEntryNotFoundError(Exception):
    """Same class name as huggingface_hub's offline / unreachable error (matched by name)."""


def test_unfetchable_hub_id_names_both_readings(tmp_path, monkeypatch, capsys):
    """'org/model' is a local path or a hub id: when neither works, the one line says so (a mistyped
    local folder otherwise reads as a hub problem)."""
    from advisor.checkpoint import hub

    calls = []

    class Api:
        @staticmethod
        def hf_hub_download(repo_id, filename, revision=None):
            calls.append((repo_id, filename, revision))
            raise LocalEntryNotFoundError("offline")

    monkeypatch.setattr(hub, "_api", lambda: Api)
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "org/model@v1"]) == 3
    err = capsys.readouterr().err.strip()
    assert calls == [("org/model", "config.json", "v1")]
    assert err.startswith("nvfp4-advisor: error: org/model@v1: no local folder of that name, and as a hub id: ")
    assert "hub cannot be reached" in err and "\n" not in err


def test_producer_line_does_not_repeat_itself():
    assert _pairs(to_doc(inspect_checkpoint("demo:llama-3.1-8b-gptq-int4")))["producer"] == "gptq"
    assert _pairs(to_doc(inspect_checkpoint("demo:qwen3-8b-nvfp4")))["producer"] == "modelopt (NVFP4)"


def test_two_copies_of_the_weights_are_refused_not_double_counted(tmp_path, capsys):
    folder = write_checkpoint(tmp_path / "ck", llama_tensors("bf16"), LLAMA_CONFIG)
    single = inspect_checkpoint(str(folder / "model.safetensors")).totals.stored_bytes
    (folder / "consolidated.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    assert main(["inspect", str(folder)]) == 3
    err = capsys.readouterr().err
    assert "is in both consolidated.safetensors and model.safetensors" in err and "\n" not in err.strip()
    # one file of the two still inspects, at its own size
    assert inspect_checkpoint(str(folder / "consolidated.safetensors")).totals.stored_bytes == single


def test_kept_list_adds_up_to_its_title():
    info = inspect_checkpoint("demo:qwen3-30b-a3b-nvfp4")
    kept = next(b for b in to_doc(info).blocks if isinstance(b, Bullets) and (b.title or "").startswith("Kept"))
    assert any(i.startswith("embed_tokens (embed)") for i in kept.items)
    small = [i for i in kept.items if "small group(s)" in i]
    assert len(small) == 1 and "norm" in small[0]
    norms = sum(g.stored_bytes for g in info.kept_bf16 if g.role == "norm")
    assert norms > 0 and human_bytes(norms) in small[0]


def test_conv1d_weight_is_one_module_not_stacked_experts(tmp_path):
    import torch

    tensors = llama_tensors("bf16")
    for i in range(2):
        tensors[f"model.layers.{i}.linear_attn.conv1d.weight"] = torch.zeros(192, 1, 4, dtype=torch.bfloat16)
    info = inspect_checkpoint(str(write_checkpoint(tmp_path / "ck", tensors, LLAMA_CONFIG)))
    conv = next(g for g in info.modules if g.role == "conv")
    assert (conv.count, conv.shape, conv.params, conv.layers) == (2, None, 2 * 192 * 4, (0, 1))
    assert _layers_text(conv) == "0,1"

"""Size keys under other names (aliases.py): the table mirrors transformers' attribute_maps, and configs
written in those spellings are sized (never "cannot size") or, when sizes are truly unknown, still
answer their scheme with exit 0 and a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.checkpoint.aliases import ATTRIBUTE_MAPS, INIT_ALIASES, tie_default
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from corpus_files import MANIFEST, entry_folder, require

transformers = pytest.importorskip("transformers")
ENTRIES = {e["id"]: e for e in MANIFEST["entries"]}
SIZE_KEYS = {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "vocab_size", "max_position_embeddings", "head_dim", "sliding_window"}


def _config_class(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


@pytest.mark.parametrize("model_type", sorted(ATTRIBUTE_MAPS))
def test_alias_table_mirrors_transformers_attribute_map(model_type):
    theirs = {k: v for k, v in (_config_class(model_type).attribute_map or {}).items() if k in SIZE_KEYS}
    assert ATTRIBUTE_MAPS[model_type] == theirs


def test_tie_default_mirrors_transformers_for_every_causal_lm():
    """A config without tie_word_embeddings is tied exactly where transformers' config class says so
    (falcon-7b's config leaves the key out: counting an lm_head made it 4 % too big)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    off = []
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            theirs = _config_class(model_type)().tie_word_embeddings
        except Exception:                       # config classes that need arguments: no default to mirror
            continue
        if tie_default(model_type) != bool(theirs):
            off.append(f"{model_type}: transformers {theirs}, advisor {tie_default(model_type)}")
    assert not off, "\n".join(off)


@pytest.mark.parametrize("model_type", sorted(INIT_ALIASES))
def test_init_aliases_are_accepted_by_transformers(model_type):
    for canon, src in INIT_ALIASES[model_type].items():
        cfg = _config_class(model_type)(**{src: 96, "num_attention_heads": 4})
        assert getattr(cfg, canon) == 96


# Configs of our own making, written by the family's own config class (save_pretrained: its spelling) with the
# sizes of a published model of that family; the published index totals are facts read from stored copies of
# those checkpoints (repository@revision:file), only the number kept.
OWN = {
    "gpt_bigcode": ("GPTBigCodeConfig", dict(n_layer=40, n_embd=6144, n_head=48, n_inner=24576, multi_query=True,
                                             vocab_size=49153, n_positions=8192, bos_token_id=0, eos_token_id=0)),
    "mpt": ("MptConfig", dict(d_model=4096, n_heads=32, n_layers=32, expansion_ratio=4, max_seq_len=2048,
                              vocab_size=50432)),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                                       intermediate_size=16384, vocab_size=50432, tie_word_embeddings=False,
                                       use_parallel_residual=False)),
    "bloom": ("BloomConfig", dict(n_layer=24, hidden_size=1024, n_head=16, vocab_size=250880)),
    "falcon": ("FalconConfig", dict(hidden_size=14848, num_attention_heads=232, num_hidden_layers=80, num_kv_heads=8,
                                    new_decoder_architecture=True, multi_query=True, parallel_attn=True, bias=False,
                                    alibi=False, vocab_size=65024)),
    "gemma": ("GemmaConfig", dict(hidden_size=2048, num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1,
                                  head_dim=256, intermediate_size=16384, vocab_size=256000)),
}
# Qwen (v1) is remote code, absent from transformers: its keys as QWenConfig writes them (modeling_qwen.py's
# config; the advisor's qwen naming and MLP rule cite the same file), sizes of Qwen-7B and Qwen-72B.
QWEN_V1 = {"model_type": "qwen", "kv_channels": 128, "no_bias": True, "rotary_pct": 1.0, "tie_word_embeddings": False,
           "seq_length": 8192, "torch_dtype": "bfloat16"}
QWEN_SIZES = {"qwen-7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, intermediate_size=22016,
                              vocab_size=151936),
              "qwen-72b": dict(hidden_size=8192, num_hidden_layers=80, num_attention_heads=64, intermediate_size=49152,
                               vocab_size=152064)}
PUBLISHED_TOTAL = {   # name -> (total_size, where it was read; the checkpoint's config has these sizes)
    "falcon": (359045130240, "github:Alikhan13r/falcon-180B-chat@b872674083e3bdad4cae2f4166c68ce058b8b075"),
    "gemma": (5012344832, "github:ananddhanabal/gemma@718cb189da9c5b2e55abe86f2eeffee9b4ae0dad"),
    "qwen-7b": (15442649088, "github:stvlynn/Qwen-7B-Chat-Cantonese@83aed4a0b7aa88f7a1eb3b2b34ece932e617da15"),
    "qwen-72b": (144575840256, "github:mapengAdam/qianwen-72B@c677f291486fda4daae4bfe31fe86582fcc387d5"),
}


def _own(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    if name in QWEN_SIZES:
        d.mkdir()
        (d / "config.json").write_text(json.dumps({**QWEN_V1, **QWEN_SIZES[name]}, indent=2))
    else:
        cls, sizes = OWN[name]
        getattr(transformers, cls)(**sizes).save_pretrained(d)
    return d


def test_gptq_gpt_bigcode_config_only_is_sized(tmp_path, capsys):
    """The issue's case: GPTQ 4-bit GPTBigCode (n_layer / n_embd / n_head, scheme in quantize_config.json)."""
    d = _own(tmp_path, "gpt_bigcode")
    # AutoGPTQ's quantize_config.json: the keys of BaseQuantizeConfig.to_dict (auto_gptq/modeling/_base.py)
    (d / "quantize_config.json").write_text(json.dumps({
        "bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "sym": True, "true_sequential": True,
        "model_name_or_path": None, "model_file_base_name": None}, indent=2))
    cfg = json.loads((d / "config.json").read_text())
    assert "hidden_size" not in cfg and cfg["model_type"] == "gpt_bigcode"
    assert main(["inspect", str(d)]) == 0
    info = inspect_checkpoint(str(d))
    assert info.label == "W4A16-INT4" and info.totals.sizes_from == "config"
    a = info.arch
    assert (a.num_layers, a.hidden_size, a.num_attention_heads) == (cfg["n_layer"], cfg["n_embd"], cfg["n_head"])
    assert a.num_kv_heads == 1                          # multi_query: one KV head (configuration_gpt_bigcode.py)
    assert 15e9 < info.totals.params < 16.5e9           # StarCoder-15B
    names = {g.name for g in info.modules}
    assert "transformer.h.*.attn.c_attn" in names and "transformer.wpe" in names


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTAL))
def test_other_spellings_size_within_3_percent_of_published(tmp_path, name):
    total, source = PUBLISHED_TOTAL[name]
    info = inspect_checkpoint(str(_own(tmp_path, name)))
    assert str(info.arch.model_type) == name.split("-")[0]
    assert abs(info.totals.stored_bytes / total - 1) < 0.03, (info.totals.stored_bytes, total, source)


# Families transformers builds itself: its model, instantiated on the meta device (no memory), is the
# parameter-count oracle for configs in the family's own spellings: real ones from the corpus, and ours.
META_ORACLE = ["llmviz--gpt2", "llmviz--falcon7b", "mpt", "gpt_neox", "bloom", "gpt_bigcode"]


def test_parameter_counts_match_transformers_models(tmp_path):
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    off = []
    for name in META_ORACLE:
        d = require(entry_folder, ENTRIES[name]) if name in ENTRIES else _own(tmp_path, name)
        raw = json.loads((d / "config.json").read_text())
        kwargs = {k: v for k, v in raw.items() if k not in ("model_type", "quantization_config")}
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.for_model(raw["model_type"], **kwargs))
        theirs = sum(p.numel() for p in model.parameters())
        ours = inspect_checkpoint(str(d)).totals.params
        if abs(ours / theirs - 1) > 0.01:
            off.append(f"{name}: advisor {ours:,} vs transformers {theirs:,}")
    assert not off, "\n".join(off)


def test_unknown_sizes_still_answer_the_scheme(tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "mystery", "width": 4096, "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}}))
    assert main(["inspect", str(d)]) == 0
    out = capsys.readouterr().out
    assert "W4A16-INT4" in out and "cannot be computed" in out and "num_hidden_layers" in out
    info = inspect_checkpoint(str(d))
    assert info.label == "W4A16-INT4" and info.totals.sizes_from == "unknown"
    assert any(f.code == "sizes-unknown" and f.severity == "warn" for f in info.findings)


def test_plan_refuses_a_checkpoint_without_sizes(tmp_path, capsys):
    """No made-up figures: `plan` on a scheme-only answer is one line (exit 4), not speeds from zero bytes."""
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "mystery", "width": 4096}))
    assert main(["plan", str(d), "--gpu", "rtx-3090", "--engine", "vllm"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sizes are unknown" in err[0]

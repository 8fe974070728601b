"""A safetensors checkpoint folder as the converter sees it: tensors (headers only), shard
layout, config.json and the other files that travel along."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from advisor.convert.safetensors_io import TensorEntry, read_header
from advisor.errors import BadInput

INDEX_NAME = "model.safetensors.index.json"
# Files that describe weights in another format or the quantization we write ourselves.
NOT_COPIED_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")
NOT_COPIED_NAMES = {INDEX_NAME, "hf_quant_config.json", "config.json", "pytorch_model.bin.index.json"}


@dataclass(frozen=True)
class Checkpoint:
    root: Path
    tensors: dict[str, TensorEntry]          # in source order (shard by shard, header order)
    weight_map: dict[str, str]               # tensor -> shard file name
    shard_files: tuple[str, ...]
    config: dict
    hf_quant_config: dict | None
    index_metadata: dict

    @property
    def total_bytes(self) -> int:
        return sum(e.nbytes for e in self.tensors.values())

    def extra_files(self) -> list[Path]:
        """Top-level files copied unchanged to the output (tokenizer, generation config, ...)."""
        return sorted(p for p in self.root.iterdir()
                      if p.is_file() and p.name not in NOT_COPIED_NAMES
                      and not p.name.endswith(NOT_COPIED_SUFFIXES) and not p.name.startswith("."))


def _load_json(path: Path) -> dict:
    from advisor.textfile import read_text

    try:
        data = json.loads(read_text(path, what="JSON file"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise BadInput(f"invalid JSON: {err}", path=str(path)) from None
    if not isinstance(data, dict):
        raise BadInput("expected a JSON object", path=str(path))
    return data


def open_checkpoint(root: Path) -> Checkpoint:
    root = Path(root)
    if not root.is_dir():
        raise BadInput("not a checkpoint folder (missing or not a directory)", path=str(root))
    index_path = root / INDEX_NAME
    if index_path.exists():
        index = _load_json(index_path)
        wm = index.get("weight_map")
        if not isinstance(wm, dict) or not wm:
            raise BadInput("index has no weight_map", path=str(index_path))
        for v in set(wm.values()):
            if not isinstance(v, str) or not v or "/" in v or "\\" in v or v in (".", ".."):
                raise BadInput(f"weight_map shard name {v!r} is not a file name in the checkpoint folder",
                               path=str(index_path))
        shards = sorted(set(wm.values()))
        meta = index.get("metadata")
        index_metadata = meta if isinstance(meta, dict) else {}
    else:
        try:
            shards = sorted(n for n in os.listdir(root) if n.endswith(".safetensors"))
        except OSError as err:
            raise BadInput(f"cannot list the folder: {err.strerror or err}", path=str(root)) from None
        wm = None
        index_metadata = {}
    if not shards:
        raise BadInput("no .safetensors files found", path=str(root))
    tensors: dict[str, TensorEntry] = {}
    weight_map: dict[str, str] = {}
    for shard in shards:
        path = root / shard
        if not os.path.lexists(path):
            raise BadInput(f"shard {shard} named in the index is missing" if wm is not None
                           else f"shard {shard} is missing", path=str(root))
        entries, _meta = read_header(path)
        for name, entry in entries.items():
            if name in tensors:
                raise BadInput(f"tensor {name} appears in two shards", path=str(path))
            tensors[name] = entry
            weight_map[name] = shard
    if wm is not None:
        missing = [n for n, f in wm.items() if weight_map.get(n) != f]
        if missing:
            raise BadInput(f"index names {len(missing)} tensor(s) not found in their shard, "
                           f"e.g. {missing[0]}", path=str(index_path))
    config_path = root / "config.json"
    config = _load_json(config_path) if config_path.exists() else {}
    hq_path = root / "hf_quant_config.json"
    hf_quant = _load_json(hq_path) if hq_path.exists() else None
    return Checkpoint(root, tensors, weight_map, tuple(shards), config, hf_quant, index_metadata)


def model_type(config: dict) -> str | None:
    """The text model's model_type (VL configs nest it in text_config)."""
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("model_type"):
        return str(text["model_type"])
    mt = config.get("model_type")
    return str(mt) if mt else None

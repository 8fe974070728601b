"""The only place that talks to the Hugging Face Hub: config files and safetensors headers.

``hf_hub_download`` fetches small JSON files (cached under HF_HOME, token from HF_TOKEN, offline
with HF_HUB_OFFLINE, all handled by huggingface_hub itself). Headers come from
``get_safetensors_metadata``, which reads the header bytes with HTTP range requests: no weight
file is ever downloaded. Tests replace :func:`_api` to fake the hub at this boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from advisor.checkpoint.safetensors_header import SafetensorsHeader, parse_header_bytes
from advisor.errors import BadInput

CONFIG_FILES = ("config.json", "hf_quant_config.json", "quantize_config.json")


def _api():
    import huggingface_hub

    return huggingface_hub


@dataclass(frozen=True)
class HubSnapshot:
    configs: dict[str, dict]                 # filename -> parsed JSON (present files only)
    headers: tuple[SafetensorsHeader, ...]   # one per shard
    index: dict | None
    note: str | None = None                  # why headers are missing, when they are


def fetch(repo_id: str, revision: str | None) -> HubSnapshot:
    api = _api()
    label = f"{repo_id}@{revision}" if revision else repo_id
    configs: dict[str, dict] = {}
    for fname in CONFIG_FILES:
        try:
            path = api.hf_hub_download(repo_id, fname, revision=revision)
        except Exception as err:  # huggingface_hub raises many classes; map them to one line
            kind = type(err).__name__
            if kind in ("EntryNotFoundError", "RemoteEntryNotFoundError") or (
                    fname != "config.json" and kind in ("LocalEntryNotFoundError",)):
                continue
            raise BadInput(_hub_message(err, fname), path=label) from None
        configs[fname] = _load_json(path, f"{label}/{fname}")
    if "config.json" not in configs:
        raise BadInput("config.json not found in the repository", path=label)
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision)
    except Exception as err:
        return HubSnapshot(configs, (), None, note=f"safetensors headers unavailable ({_hub_message(err, 'headers')})")
    headers = []
    for fname, fmeta in sorted((getattr(meta, "files_metadata", None) or {}).items()):
        headers.append(_to_header(f"{label}/{fname}", fmeta))
    index = None
    if getattr(meta, "sharded", False):
        index = {"metadata": dict(getattr(meta, "metadata", None) or {}),
                 "weight_map": dict(getattr(meta, "weight_map", None) or {})}
    return HubSnapshot(configs, tuple(headers), index)


def _to_header(path: str, fmeta) -> SafetensorsHeader:
    """huggingface_hub's parsed header -> our validated header (same checks, data size unknown)."""
    raw: dict = {}
    for name, info in (getattr(fmeta, "tensors", None) or {}).items():
        raw[name] = {"dtype": getattr(info, "dtype", None), "shape": list(getattr(info, "shape", []) or []),
                     "data_offsets": list(getattr(info, "data_offsets", []) or [])}
    md = getattr(fmeta, "metadata", None)
    if md:
        raw["__metadata__"] = dict(md)
    return parse_header_bytes(json.dumps(raw).encode(), None, path)


def _load_json(path: str, label: str) -> dict:
    from advisor.jsonout import read_json_object

    return read_json_object(path, label)


def _hub_message(err: Exception, what: str) -> str:
    kind = type(err).__name__
    if kind in ("OfflineModeIsEnabled", "LocalEntryNotFoundError"):
        return f"{what} is not in the local cache and the hub cannot be reached (HF_HUB_OFFLINE=1 or no network)"
    if kind in ("RepositoryNotFoundError",):
        return "repository not found (or private: set HF_TOKEN)"
    if kind in ("RevisionNotFoundError",):
        return "revision not found"
    if kind in ("GatedRepoError",):
        return "gated repository: accept its terms and set HF_TOKEN"
    first = str(err).splitlines()[0][:120] if str(err) else kind
    return f"hub request for {what} failed: {kind}: {first}"

"""The only place that talks to the Hugging Face Hub: config files and safetensors headers.

``hf_hub_download`` fetches small JSON files (cached under HF_HOME, token from HF_TOKEN, offline
with HF_HUB_OFFLINE, all handled by huggingface_hub itself). Headers come from
``get_safetensors_metadata``, which reads the header bytes with HTTP range requests: no weight
file is ever downloaded. Tests replace :func:`_api` to fake the hub at this boundary.

Before any download, one HEAD of config.json with a short timeout and no retries tells a
reachable hub from an unreachable one: huggingface_hub otherwise retries a refused or silent
connection for ~23 s before giving up. When the hub cannot be reached, a cached copy of the configs
is used (headers are then unavailable); without one the error says what happened.
"""

from __future__ import annotations

import errno
import json
import socket
import threading
from dataclasses import dataclass
from urllib.parse import urlparse

from advisor.checkpoint.safetensors_header import SafetensorsHeader, parse_header_bytes
from advisor.errors import BadInput

CONFIG_FILES = ("config.json", "hf_quant_config.json", "quantize_config.json")
REACH_TIMEOUT_S = 4.0        # the reachability HEAD; HF_HUB_ETAG_TIMEOUT set by the user wins
_NO_NETWORK = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN}


def _api():
    import huggingface_hub
    import huggingface_hub.constants  # noqa: F401 - a lazy submodule: makes `huggingface_hub.constants` an attribute

    return huggingface_hub


@dataclass(frozen=True)
class HubSnapshot:
    configs: dict[str, dict]                 # filename -> parsed JSON (present files only)
    headers: tuple[SafetensorsHeader, ...]   # one per shard
    index: dict | None
    note: str | None = None                  # why headers are missing, when they are


class _Unreachable(Exception):
    """The hub could not be asked (no network, refused, silent, 5xx): the cache may still answer."""


def fetch(repo_id: str, revision: str | None) -> HubSnapshot:
    api = _api()
    label = f"{repo_id}@{revision}" if revision else repo_id
    offline = _offline(api)
    try:
        if not offline:
            _check_reachable(api, repo_id, revision, label)
    except _Unreachable as err:
        cached = _cached_configs(api, repo_id, revision, label)
        if "config.json" not in cached:
            raise BadInput(f"{err} (and config.json is not in the local cache)", path=label) from None
        return HubSnapshot(cached, (), None, note=f"safetensors headers unavailable ({err}; configs from the cache)")
    configs: dict[str, dict] = {}
    for fname in CONFIG_FILES:
        try:
            path = api.hf_hub_download(repo_id, fname, revision=revision)
        except Exception as err:  # huggingface_hub raises many classes; map them to one line
            kind = type(err).__name__
            if kind in ("EntryNotFoundError", "RemoteEntryNotFoundError") or (
                    fname != "config.json" and kind in ("LocalEntryNotFoundError",)):
                continue
            raise BadInput(_hub_message(err, fname, offline), path=label) from None
        configs[fname] = _load_json(path, f"{label}/{fname}")
    if "config.json" not in configs:
        raise BadInput("config.json not found in the repository", path=label)
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision)
    except Exception as err:
        return HubSnapshot(configs, (), None,
                           note=f"safetensors headers unavailable ({_hub_message(err, 'headers', offline)})")
    headers = []
    for fname, fmeta in sorted((getattr(meta, "files_metadata", None) or {}).items()):
        headers.append(_to_header(f"{label}/{fname}", fmeta))
    index = None
    if getattr(meta, "sharded", False):
        index = {"metadata": dict(getattr(meta, "metadata", None) or {}),
                 "weight_map": dict(getattr(meta, "weight_map", None) or {})}
    return HubSnapshot(configs, tuple(headers), index)


# ------------------------------------------------------------------ reachability

def _offline(api) -> bool:
    constants = getattr(api, "constants", None)
    check = getattr(constants, "is_offline_mode", None)
    return bool(check()) if callable(check) else bool(getattr(constants, "HF_HUB_OFFLINE", False))


def _reach_timeout(api) -> float:
    constants = getattr(api, "constants", None)
    user = getattr(constants, "HF_HUB_ETAG_TIMEOUT", None)
    default = getattr(constants, "DEFAULT_ETAG_TIMEOUT", None)
    return float(user) if isinstance(user, (int, float)) and user != default and user > 0 else REACH_TIMEOUT_S


def _check_reachable(api, repo_id: str, revision: str | None, label: str) -> None:
    """One HEAD of config.json: returns when the hub has the file; raises BadInput when the hub says
    it has not (repository, revision, file, access), _Unreachable when the hub did not answer."""
    head = getattr(api, "get_hf_file_metadata", None)
    url_of = getattr(api, "hf_hub_url", None)
    if head is None or url_of is None:      # a stand-in without the HEAD call: nothing to check
        return
    url = url_of(repo_id, "config.json", revision=revision)
    endpoint = _endpoint(url)
    timeout = _reach_timeout(api)
    box: dict = {}

    def ask() -> None:
        try:
            head(url, timeout=timeout)      # retry_on_errors defaults to False: one attempt
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = err
        box["done"] = True

    # A thread with a deadline: the HTTP timeout does not cover a hanging DNS lookup.
    t = threading.Thread(target=ask, name="nvfp4-advisor-hub-reach", daemon=True)
    t.start()
    t.join(timeout + 1.0)
    if "done" not in box:
        raise _Unreachable(f"hub unreachable: {endpoint} did not answer within {timeout:.0f} s")
    err = box.get("error")
    if err is None:
        return
    kind = type(err).__name__
    if kind in ("EntryNotFoundError", "RemoteEntryNotFoundError"):
        raise BadInput("config.json not found in the repository", path=label)
    if kind in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError"):
        raise BadInput(_hub_message(err, "config.json", False), path=label)
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(status, int) and status < 500 and status not in (408, 429):
        return                              # the hub answered (e.g. 401/403): the download says what it means
    raise _Unreachable(_network_problem(err, endpoint))


def _endpoint(url: str) -> str:
    p = urlparse(url)
    return f"{p.scheme}://{p.netloc}" if p.netloc else url


def _network_problem(err: BaseException, endpoint: str) -> str:
    """Name what went wrong in words: no network, refused, silent, or the hub's own error status."""
    host = urlparse(endpoint).hostname or endpoint
    names = {c.__name__ for c in type(err).__mro__}
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(status, int):
        return f"hub error: {endpoint} answered HTTP {status}"
    for cause in _chain(err):
        if isinstance(cause, socket.gaierror):
            return f"no network: cannot resolve {host}"
        if isinstance(cause, ConnectionRefusedError):
            return f"hub unreachable: {endpoint} refused the connection"
        if isinstance(cause, OSError) and cause.errno in _NO_NETWORK:
            return f"no network: {host} is unreachable"
        if isinstance(cause, (TimeoutError, socket.timeout)):
            return f"hub unreachable: {endpoint} did not answer in time"
    if "TimeoutException" in names:
        return f"hub unreachable: {endpoint} did not answer in time"
    first = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
    return f"hub unreachable: {endpoint}: {type(err).__name__}: {first}"


def _chain(err: BaseException | None):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _cached_configs(api, repo_id: str, revision: str | None, label: str) -> dict[str, dict]:
    configs: dict[str, dict] = {}
    for fname in CONFIG_FILES:
        try:
            path = api.hf_hub_download(repo_id, fname, revision=revision, local_files_only=True)
        except Exception:  # noqa: BLE001 - not cached (or the cache is unreadable): the caller says so
            continue
        configs[fname] = _load_json(path, f"{label}/{fname}")
    return configs


# ------------------------------------------------------------------ conversion

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


def _hub_message(err: Exception, what: str, offline: bool) -> str:
    kind = type(err).__name__
    if kind in ("OfflineModeIsEnabled", "LocalEntryNotFoundError"):
        if offline:
            return f"HF_HUB_OFFLINE=1 is set and {what} is not in the local cache (unset it to fetch from the hub)"
        return f"{what} is not in the local cache and the hub cannot be reached (HF_HUB_OFFLINE=1 or no network)"
    if kind in ("RepositoryNotFoundError",):
        return "repository not found (or private: set HF_TOKEN)"
    if kind in ("RevisionNotFoundError",):
        return "revision not found"
    if kind in ("GatedRepoError",):
        return "gated repository: accept its terms and set HF_TOKEN"
    first = str(err).splitlines()[0][:120] if str(err) else kind
    return f"hub request for {what} failed: {kind}: {first}"

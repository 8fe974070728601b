"""`transformers serve` (oracles.md §4a): the reference OpenAI-compatible server that runs on a CPU.

The positional model pins the server; its model id is exactly the string passed.
"""

from __future__ import annotations

from advisor.errors import Unsupported
from launchers.command import LaunchCommand
from launchers.engines._common import visible_devices


def build(s, version, note) -> LaunchCommand:
    if s.speculative or s.nodes > 1 or s.tp > 1 or s.pp > 1:
        raise Unsupported("transformers serve runs one model on one device: no speculation, TP/PP or nodes")
    if s.api_key:
        raise Unsupported("transformers serve has no API-key option")
    argv = ["transformers", "serve", s.model, "--host", s.host, "--port", str(s.port),
            "--device", s.device or "auto"]
    notes = []
    if s.max_batch is not None and s.max_batch > 1:
        argv += ["--continuous-batching"]
        notes.append("--continuous-batching serves concurrent requests together (first request warms up slowly)")
    if s.kv_cache_dtype != "auto" or s.memory_share is not None:
        notes.append("transformers serve ignores KV dtype and memory share: it is a reference for HTTP behaviour, "
                     "not speed")
    argv += list(s.extra_args)
    env = [("HF_HUB_OFFLINE", "1")] + visible_devices(s) + list(s.extra_env)
    return LaunchCommand(settings=s, version=version, version_note=note, argv=tuple(argv), env=tuple(env),
                         notes=tuple(notes))

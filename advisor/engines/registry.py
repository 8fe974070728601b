"""The engines the advisor knows, in display order, and the lookups every engine list is read from."""

from __future__ import annotations

from advisor.engines import fastllm, log_signatures, sglang, vllm
from advisor.engines.spec import EngineSpec
from advisor.errors import UsageError

# launch-only engines: no rules, so `plan` cannot tune them and their command takes the settings as given
_UNTUNED = (
    # build numbers, no release version: flags read from the README at commit 00dc8057
    EngineSpec(name="llamacpp", label="llama.cpp", launcher="launchers.engines.llamacpp",
               executables=("llama-server",), log_signatures=log_signatures.LLAMACPP),
    EngineSpec(name="trtllm", label="TensorRT-LLM", launcher="launchers.engines.trtllm",
               executables=("trtllm-serve",), distributions=("tensorrt-llm", "tensorrt_llm"),
               reference_version="1.2.1", log_signatures=log_signatures.TRTLLM),
    EngineSpec(name="transformers", label="transformers serve", launcher="launchers.engines.transformers_serve",
               one_device=True, cpu_without_gpu=True,
               executables=("transformers",), distributions=("transformers",), reference_version="5.24.0"),
)

SPECS: tuple[EngineSpec, ...] = (vllm.SPEC, sglang.SPEC, fastllm.SPEC) + _UNTUNED
_BY_NAME = {s.name: s for s in SPECS}
DEFAULT = "vllm"        # explained, planned and shown first when no engine is named


def find(name: str) -> EngineSpec | None:
    return _BY_NAME.get(name)


def get(name: str) -> EngineSpec:
    """The spec of ``name``; a usage error naming the choices when there is none."""
    spec = _BY_NAME.get(name)
    if spec is None:
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(launchable())}")
    return spec


def launchable() -> tuple[str, ...]:
    """Every engine `launch` can start (argparse and TUI choices)."""
    return tuple(s.name for s in SPECS)


def tuned() -> tuple[str, ...]:
    """The engines with rule files: explain, plan, bench and the TUI's engine picker."""
    return tuple(s.name for s in SPECS if s.tuned)

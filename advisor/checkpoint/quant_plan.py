"""What a quantization config declares, as the producers' readers build it: ``Spec`` per module, the
``QuantPlan`` of a checkpoint, ``Where`` to name a bad value in a finding, and the formats more than
one producer writes. The readers: quant_modelopt, quant_compressed_tensors, quant_methods (the
transformers-native methods), quant_foreign; quant_config picks one.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, overload

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.roles import LINEAR_ROLES

# Roles a producer quantizes when its config only says "Linear" layers.
DECODER_LINEAR = LINEAR_ROLES - {"router", "lm_head"}


@dataclass(frozen=True)
class Spec:
    weight: WeightQuant
    act: ActQuant
    source: str                 # where the declaration came from, e.g. "quant_algo NVFP4", "config_groups.group_1"


@dataclass
class QuantPlan:
    # modelopt | compressed-tensors | fp8 | gptq | awq | bitsandbytes | mxfp4 | none | unknown
    producer: str
    quant_method: str | None = None
    raw: dict | None = None
    kv_cache: str | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)   # (code, message) for doctor findings
    kv_cache_raw: object = None                     # the KV declaration as written (string or object)
    format_note: str = ""                           # a format the kernel rules do not serve, in words
    kv_detail: str = ""                             # the KV-cache quantization in words
    declared_layers: tuple[str, ...] = ()           # module names the config quantizes one by one (quantized_layers)
    _resolver: Callable[[str, str], Spec | None] | None = None

    def spec_for(self, name: str, role: str) -> Spec | None:
        if self._resolver is None:
            return None
        return self._resolver(name, role)

    @property
    def by_pattern(self) -> bool:
        """spec_for answers alike for every name of one group pattern (roles.group_name) and role, so it
        may be asked once per pattern (see by_pattern())."""
        return self._resolver is None or getattr(self._resolver, "by_pattern", False)


def str_list(v: object) -> list[str]:
    """A list of strings from a config value that should be one (anything else counts as empty)."""
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


@overload
def int_or(v: object, default: int) -> int: ...
@overload
def int_or(v: object, default: None = None) -> int | None: ...
def int_or(v: object, default: int | None = None) -> int | None:
    """An int config value (bool is not one), else ``default``."""
    return v if isinstance(v, int) and not isinstance(v, bool) else default


# Doctor codes of the notes below (doctor.py gives them their severity).
INVALID = "invalid-quant-config"        # a value no producer writes: the advisor names what it assumed
CONFLICT = "quant-config-conflict"      # two quantization config files disagree


class Where:
    """Where a config dict lives (file and key path), to name a bad value in a finding."""

    def __init__(self, notes: list, file: str, key: str):
        self.notes, self.file, self.key = notes, file, key

    def sub(self, key: str) -> "Where":
        return Where(self.notes, self.file, f"{self.key}.{key}" if self.key else key)

    def bad(self, key: str, value, why: str, assumed: str) -> None:
        path = f"{self.key}.{key}" if self.key else key
        self.notes.append((INVALID, f"{self.file}: {path} is {show_value(value)}: {why}; {assumed}"))


def show_value(v) -> str:
    if isinstance(v, float) and v != v:
        return "NaN"
    text = repr(v) if isinstance(v, str) else (type(v).__name__ if isinstance(v, (dict, list)) and len(str(v)) > 40
                                                else str(v).replace("None", "null"))
    return text


def group_size_of(d: dict, where: Where | None, assumed: str, *, channel_ok: bool = False) -> int | None:
    """A declared group size: a positive int (or -1 = per channel where the format allows it).
    Absent/null -> None; anything else is reported and treated as absent."""
    v = d.get("group_size")
    if v is None:
        return None
    if int_or(v) is not None and (v > 0 or (channel_ok and v == -1)):
        return v
    if where is not None:
        where.bad("group_size", v, "not a valid group size", assumed)
    return None


# Formats more than one producer writes.
FP8_TENSOR = WeightQuant("fp8_e4m3", 8, "tensor")
FP8_STATIC_ACT = ActQuant("fp8_e4m3", dynamic=False, granularity="tensor")


def nvfp4_weight(gs: int = 16) -> WeightQuant:
    return WeightQuant("nvfp4", 4, "nvfp4", group_size=gs or 16, symmetric=True, packing="uint8-2-per-byte")


NVFP4_ACT = ActQuant("nvfp4", dynamic=True, granularity="group", group_size=16)
MXFP4_WEIGHT = WeightQuant("mxfp4", 4, "mxfp4", group_size=32, symmetric=True, packing="uint8-2-per-byte")
MXFP4_ACT = ActQuant("mxfp4", dynamic=True, granularity="group", group_size=32)


def by_pattern(resolve: Callable[[str, str], Spec | None], *name_tests: object) -> Callable:
    """``resolve``, marked as answering alike for every name of one group pattern (and role) when each of
    its ``name_tests`` (the exclude/skip entries it matches names against: literal text, substrings, or
    fnmatch globs) holds no digit, '?' or '[': such a test cannot tell ``layers.3`` from ``layers.12``, the
    only way two names of one pattern differ (group_name replaces their index runs). A resolver that wraps
    another is a new function, unmarked."""
    if all(not isinstance(t, str) or not _TELLS_INDEXES.search(t) for t in name_tests):
        resolve.by_pattern = True       # type: ignore[attr-defined]
    return resolve


_TELLS_INDEXES = re.compile(r"[\d?\[]")


@lru_cache(maxsize=4096)
def glob_pattern(pattern: str) -> re.Pattern:
    return re.compile(fnmatch.translate(pattern))


def not_converted(name: str, patterns) -> bool:
    """transformers modules_to_not_convert: substring of the module name, or a glob with '*'."""
    for p in patterns or ():
        if not isinstance(p, str) or not p:
            continue
        if "*" in p:
            if glob_pattern(p).match(name) or glob_pattern(p + ".*").match(name):
                return True
        elif p in name or name == p.rstrip("."):
            return True
    return False

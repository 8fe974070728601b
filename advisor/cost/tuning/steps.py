"""What the tuner hands back: every option it weighed, and one step per knob on the way there."""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.cost.context import Settings
from advisor.cost.kv import KvDtype


@dataclass(frozen=True)
class Option:
    knob: str                    # tp | kv_cache_dtype | memory_share | chunked_prefill | max_batch | draft_tokens
    value: str
    metrics: dict[str, float | int | str]
    chosen: bool
    note: str = ""


@dataclass(frozen=True)
class Tuning:
    settings: Settings
    options: tuple[Option, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    """One knob's outcome: the settings it leaves, the options it weighed (in the order shown), its notes."""

    settings: Settings
    options: tuple[Option, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class KvStep(Step):
    fits: bool = False                                          # the chosen dtype holds the workload's context
    weighed: dict[str, KvDtype] = field(default_factory=dict)   # every dtype costed, by name


@dataclass(frozen=True)
class BatchStep(Step):
    batch: int = 1               # the batch chosen before the pool cap (the draft count is costed at it)


@dataclass(frozen=True)
class DraftStep(Step):
    share_raised: bool = False   # the share was raised for the drafts: the earlier share rows are no longer chosen

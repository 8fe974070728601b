"""Validated engine rule files as plain read-only records: what explain, plan and the TUI read.

advisor.kernel_path.rules is the schema (pydantic models) and validates a file; the validated object is
turned into these records (one class per model, same name, same attributes) and that is what loading
returns and what advisor.profile_cache keeps, so a start that finds a rule file in the cache imports
neither pydantic nor the schema (~50 ms of a cold `plan` on a busy 2-core box). Type annotations name
the schema's models, whose fields the records carry.
"""

from __future__ import annotations

from typing import Any, Union

# keys that scope or explain a gate; every other key of Gate is a condition
GATE_SCOPE_KEYS = frozenset({"why", "if_sm_min", "if_sm_max", "if_family_in", "if_kv_dtype_in"})

MmaSpec = Union[str, dict[str, str]]


class Record:
    """A validated model's fields as attributes, in schema order; read-only, equal by class and fields."""

    def __init__(self, fields: dict[str, Any]):
        object.__setattr__(self, "__dict__", fields)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None     # type: ignore[assignment]  # lists inside, as in the frozen pydantic models

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


class Gate(Record):
    @property
    def condition(self) -> str:
        """The one condition key this gate holds (the schema admits exactly one)."""
        return next(k for k, v in self.__dict__.items() if v is not None and k not in GATE_SCOPE_KEYS)


class ModelExclusion(Record):
    pass


class Warn(Record):
    pass


class Failure(Record):
    pass


class Crash(Failure):
    pass


class Refusal(Failure):
    pass


class RowRange(Record):
    pass


class Candidate(Record):
    pass


class Downgrade(Record):
    pass


class PathRule(Record):
    pass


class Dependency(Record):
    pass


class LoadStep(Record):
    pass


class LoadMethod(Record):
    pass


class ConfigLoading(Record):
    pass


class FlagSpec(Record):
    pass


class RuleFile(Record):
    pass


def record(obj: Any) -> Any:
    """A validated schema object (advisor.kernel_path.rules) as records; lists and mappings as they are,
    their items converted; anything else unchanged."""
    fields = getattr(type(obj), "model_fields", None)
    if fields is not None:
        return globals()[type(obj).__name__]({k: record(getattr(obj, k)) for k in fields})
    if isinstance(obj, list):
        return [record(v) for v in obj]
    if isinstance(obj, dict):
        return {k: record(v) for k, v in obj.items()}
    return obj

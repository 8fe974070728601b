"""Stable JSON output: every document carries ``schema_version``; dataclasses become dicts."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from pathlib import PurePath
from typing import Any

SCHEMA_VERSION = "1"


def to_jsonable(obj: Any) -> Any:
    """Convert dataclasses, enums, tuples, sets and paths into plain JSON values.

    Non-finite floats become ``None`` (JSON has no inf/nan) so consumers never choke.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_json"):
            return to_jsonable(obj.to_json())
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if hasattr(obj, "to_json") and callable(obj.to_json):   # e.g. the NOT_SUPPORTED marker
        return to_jsonable(obj.to_json())
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(to_jsonable(v) for v in obj)
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def document(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Wrap a payload as a versioned JSON document."""
    return {"schema_version": SCHEMA_VERSION, "kind": kind, **to_jsonable(payload)}


def dumps(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:    # a lone surrogate (an undecodable file name) has no UTF-8: \u escapes
        text = json.dumps(doc, indent=2, ensure_ascii=True)
    return text


def read_json_object(path, label: str | None = None) -> dict[str, Any]:
    """A JSON file that must hold an object; any problem is one BadInput line naming the file."""
    from advisor.errors import BadInput

    label = label or str(path)
    from advisor.textfile import JSON_LIMIT, read_bytes

    try:
        obj = json.loads(read_bytes(path, limit_bytes=JSON_LIMIT, what="JSON file").decode("utf-8"))
    except BadInput as err:
        raise type(err)(str(err).removeprefix(f"{err.path}: "), path=label) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise BadInput(f"invalid JSON ({str(err).splitlines()[0][:100]})", path=label) from None
    if not isinstance(obj, dict):
        raise BadInput("expected a JSON object", path=label)
    return obj

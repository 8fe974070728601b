"""How a number was obtained: value + formula + inputs + source, and the constants behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Derived:
    """One predicted quantity with its formula, the inputs plugged in, and where they came from."""

    value: float
    unit: str
    formula: str
    inputs: dict[str, Any] = field(default_factory=dict)
    source: str = "advisor cost model"

    def to_json(self) -> dict[str, Any]:
        return {"value": _round(self.value), "unit": self.unit, "formula": self.formula,
                "inputs": {k: _round(v) for k, v in self.inputs.items()}, "source": self.source}


@dataclass(frozen=True)
class Assumption:
    """A constant or efficiency the model used; ``calibrated`` when measured on this GPU."""

    key: str
    value: Any
    unit: str
    source: str
    calibrated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": _round(self.value), "unit": self.unit,
                "source": "calibrated" if self.calibrated else self.source,
                **({"calibration": self.source} if self.calibrated else {})}


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.6g}")
    return v

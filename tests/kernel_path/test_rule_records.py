"""Loaded rule files are plain records (advisor.kernel_path.rule_records): every field the schema
validated, with the same values, read-only, and each gate's condition as the schema's Gate names it."""

from __future__ import annotations

import pytest

from advisor.kernel_path import rules as schema
from advisor.kernel_path.rule_files import _extends_chain, _parse, _patched, all_rule_files, load_rule_file
from advisor.kernel_path import rule_records
from advisor.kernel_path.rule_records import Record, record


def _data(obj):
    if isinstance(obj, Record):
        return {k: _data(v) for k, v in vars(obj).items()}
    if isinstance(obj, list):
        return [_data(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _data(v) for k, v in obj.items()}
    return obj


def _validated(path) -> schema.RuleFile:
    chain = [(w, _parse(w, t)) for w, t in _extends_chain(str(path))]
    raw = chain[-1][1]
    for where, patch in reversed(chain[:-1]):
        raw = _patched(raw, patch, where)
    return schema.RuleFile.model_validate(raw)


@pytest.mark.parametrize("path", all_rule_files(), ids=lambda p: p.stem)
def test_a_loaded_rule_file_holds_what_the_schema_validated(path):
    model = _validated(path)
    loaded = load_rule_file(path)
    assert type(loaded).__name__ == "RuleFile" and not isinstance(loaded, schema.RuleFile)
    assert _data(loaded) == model.model_dump()
    assert [g.condition for p in loaded.paths for c in p.candidates for g in c.gates] == \
           [g.condition for p in model.paths for c in p.candidates for g in c.gates]


def test_records_are_read_only_and_compare_by_class_and_fields():
    gate = record(schema.Gate(sm_min=80, why="w"))
    with pytest.raises(AttributeError):
        gate.sm_min = 90                      # type: ignore[misc]
    assert gate == record(schema.Gate(sm_min=80, why="w")) != record(schema.Gate(sm_min=90, why="w"))
    assert gate.condition == "sm_min"
    fields = {"text": "t", "meaning": "m", "source": "s"}
    assert rule_records.Warn(dict(fields)) != rule_records.Failure(dict(fields))


def test_every_schema_model_has_its_record_class():
    """record() looks each validated model's class up by name: a model added to the schema needs one here."""
    from pydantic import BaseModel

    models = {name: cls for name, cls in vars(schema).items()
              if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__ == schema.__name__
              and not name.startswith("_")}
    assert models, "no models found in advisor.kernel_path.rules"
    for name, model in models.items():
        rec = getattr(rule_records, name, None)
        assert isinstance(rec, type) and issubclass(rec, Record), name
        for base in model.__mro__[1:]:              # Crash and Refusal are Failures there and here
            if base.__module__ == schema.__name__ and base.__name__ in models:
                assert issubclass(rec, getattr(rule_records, base.__name__)), (name, base.__name__)

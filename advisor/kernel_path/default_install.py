"""What a default `pip install` of an engine version brings, from its rule file (``default_install``).

Install facts the user leaves open (None in InstallOptions) take the engine's default: for vLLM 0.33 the
b12x package is present exactly when FlashInfer is, because the FlashInfer wheel ships it.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from advisor.kernel_path.options import DEPENDENCY_FACTS, InstallOptions

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import RuleFile


def resolve_install(rules: RuleFile, options: InstallOptions) -> InstallOptions:
    """OPTIONS with every open fact set from RULES' default install (False where the file is silent)."""
    open_facts = [f.name for f in fields(options) if f.name in DEPENDENCY_FACTS and getattr(options, f.name) is None]
    if not open_facts:
        return options
    values: dict[str, Any] = {}   # field name -> value; the names are only known at runtime
    for name in open_facts:
        default = rules.default_install.get(name, False)
        values[name] = bool(getattr(options, default) if isinstance(default, str) else default)
    return replace(options, **values)


def install_payload(options: InstallOptions, engine: str, version: str) -> dict:
    """The install facts an answer assumed (open ones resolved) and what the engine's default install holds."""
    from advisor.kernel_path.rule_files import load_rules

    rules = load_rules(engine, version)[0]
    resolved = resolve_install(rules, options)
    return {"facts": {f: resolved.fact(f) for f in DEPENDENCY_FACTS},
            "default_pip_install": rules.default_install_note or None}

"""Which environment variables an engine's rule file reads, so an override it never reads is named
rather than silently ignored (e.g. VLLM_MARLIN_INPUT_DTYPE, which the rules do not model)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import RuleFile


def _gates(rules: RuleFile):
    for r in rules.global_refusals:
        yield from r.unless
    for d in rules.downgrades:
        yield from d.when
    for p in rules.paths:
        yield from p.when
        for r in p.refusals:
            yield from r.unless
        for c in p.candidates:
            yield from c.gates
            if c.crash is not None:
                yield from c.crash.when


def env_names_read(rules: RuleFile) -> frozenset[str]:
    names = set(rules.env_defaults)
    names.update(p.disable_env for p in rules.paths if p.disable_env)
    for g in _gates(rules):
        names.update(g.env_in or {})
        names.update(g.env_not_in or {})
    return frozenset(names)


def ignored_env(rules: RuleFile, env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """Names in ``env`` the rules never read: the advisor's answer does not reflect them."""
    known = env_names_read(rules)
    return tuple(sorted({k for k, _ in env if k not in known}))

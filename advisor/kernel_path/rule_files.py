"""Loading engine rule files: read, `extends:` chains patched, validated against the schema
(advisor.kernel_path.rules) once per file version (advisor.profile_cache) and returned as
advisor.kernel_path.rule_records, the version chosen by advisor.kernel_path.rule_versions.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import BadInput
from advisor.kernel_path.rule_versions import engines_dir, resolve_version
from advisor.yamlio import parse_yaml

if TYPE_CHECKING:   # annotations only: what loading returns is advisor.kernel_path.rule_records
    from advisor.kernel_path.rules import RuleFile


def load_rule_file(path: Path) -> RuleFile:
    return _load_cached(str(path), path.stat().st_mtime_ns)


# What a validated rule file depends on besides its text (advisor.profile_cache keys on their source).
_SCHEMA_MODULES = (__name__, "advisor.kernel_path.rules", "advisor.kernel_path.rule_records",
                   "advisor.checkpoint.model", "advisor.kernel_path.model", "advisor.kernel_path.options", "pydantic")


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, _mtime: int) -> RuleFile:
    from advisor.profile_cache import validated

    chain = _extends_chain(path)
    key = "\0".join(text for _, text in chain)      # a file that extends another is stale when that one changes
    # validated before: no pydantic work
    return validated(path, key, lambda: _validate_chain(path, chain), _SCHEMA_MODULES)


def _parse(path: str, text: str) -> Any:
    from advisor.profile_cache import parsed

    return parsed(text, lambda: parse_yaml(text, path, "rule file"))


# ------------------------------------------------------------------ extends: a version as a patch of an earlier one
# `extends: vllm-0.33` names a rule file in the same folder. The extending file's keys replace the base's
# (mappings such as flags or dependencies are merged key by key); its `paths` replace the base's paths
# with the same id and add the others at the end; `remove: [ids]` drops base paths.

_EXTENDS_NAME = re.compile(r"^[a-z0-9_]+-\d+(\.\d+)*$")
_PATCH_KEYS = ("extends", "remove", "paths")
_EXTENDS_LINE = re.compile(r"^extends\s*:", re.M)    # only such a file is parsed before the cache is asked


def _extends_chain(path: str) -> list[tuple[str, str]]:
    """(path, text) of the file and of each file it extends, the file first."""
    from advisor.textfile import JSON_LIMIT, read_text

    chain: list[tuple[str, str]] = []
    while True:
        text = read_text(path, limit_bytes=JSON_LIMIT, what="rule file")
        chain.append((path, text))
        raw = _parse(path, text) if _EXTENDS_LINE.search(text) else None
        base = raw.get("extends") if isinstance(raw, dict) else None
        if base is None:
            return chain
        if not isinstance(base, str) or not _EXTENDS_NAME.match(base):
            raise BadInput(f"extends must name a rule file as <engine>-<version> (got {base!r})", path=path)
        nxt = str(Path(path).with_name(f"{base}.yaml"))
        if any(Path(p) == Path(nxt) for p, _ in chain):
            raise BadInput(f"extends {base!r} comes back to a file already in the chain", path=path)
        if not Path(nxt).is_file():
            raise BadInput(f"extends {base!r}: no such rule file next to this one", path=path)
        path = nxt


def _patched(base: dict, patch: dict, path: str) -> dict:
    """``base`` with ``patch``'s keys, paths and removals applied (see extends above)."""
    out = dict(base)
    for key, value in patch.items():
        if key in _PATCH_KEYS:
            continue
        out[key] = {**out[key], **value} if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    paths = list(base.get("paths") or [])
    ids = [p.get("id") if isinstance(p, dict) else None for p in paths]
    remove = patch.get("remove") or []
    if not isinstance(remove, list) or not all(isinstance(r, str) for r in remove):
        raise BadInput("remove must be a list of path ids", path=path)
    for rid in remove:
        if rid not in ids:
            raise BadInput(f"remove: the extended rules have no path {rid!r}", path=path)
    paths = [p for p, i in zip(paths, ids) if i not in remove]
    added = patch.get("paths") or []
    if not isinstance(added, list):
        raise BadInput("paths must be a list of rules", path=path)
    for rule in added:
        rid = rule.get("id") if isinstance(rule, dict) else None
        at = next((n for n, p in enumerate(paths) if isinstance(p, dict) and p.get("id") == rid), None)
        if rid is not None and at is not None:
            paths[at] = rule
        else:
            paths.append(rule)
    out["paths"] = paths
    return out


def _validate_chain(path: str, chain: list[tuple[str, str]]) -> RuleFile:
    """The rule file at ``path``: the last file of its extends chain patched by each one before it."""
    # the schema and pydantic only here: a rule file found in the cache needs neither (~50 ms of imports)
    from pydantic import ValidationError

    from advisor.kernel_path import rules as schema
    from advisor.kernel_path.rule_records import record

    files = [(where, _parse(where, text)) for where, text in chain]
    for where, raw in files:
        if not isinstance(raw, dict):
            raise BadInput("a rule file is a mapping (engine, version, paths, ...)", path=where)
    raw = files[-1][1]
    if "remove" in raw:
        raise BadInput("remove drops paths of an extended file: it needs extends", path=files[-1][0])
    for where, patch in reversed(files[:-1]):
        raw = _patched(raw, patch, where)
    try:
        rules = schema.RuleFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise BadInput(f"invalid rules at {loc}: {first['msg']}{more}", path=path) from err
    stem = Path(path).stem
    if stem != f"{rules.engine}-{rules.version}":
        raise BadInput(f"file name must be {rules.engine}-{rules.version}.yaml", path=path)
    return record(rules)


def load_rules(engine: str, version: str | None = None, folder: Path | None = None) -> tuple[RuleFile, str | None]:
    """The rule file for ENGINE at VERSION (nearest older when unknown) and the version note."""
    chosen, note = resolve_version(engine, version, folder)
    return load_rule_file((folder or engines_dir()) / f"{engine}-{chosen}.yaml"), note


def all_rule_files(folder: Path | None = None) -> list[Path]:
    folder = folder or engines_dir()
    return sorted(folder.glob("*.yaml"))

"""What a shared report must not carry: secrets and host-specific paths.

A report is pasted into issues and wikis. Secrets (API keys, hub tokens: given by the caller, plus
token-shaped strings) become ``***``; host identifiers (GPU UUIDs) and host-specific path prefixes
(the home directory, the working directory, the install location) become short placeholders. Applied to
the finished Doc and JSON data, so no section can leak what another section forgot to clean.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from advisor.doc import Doc
from advisor.redact import env_secrets, redact


# NVIDIA device UUIDs (GPU-… / MIG-…): they identify one physical card, i.e. one host.
_UUID_RE = re.compile(r"\b(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}\b")


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A re.sub replacement that inserts `text` as is (a string replacement would expand its backslashes)."""
    return lambda _m: text


UUID_PLACEHOLDER = "<gpu-uuid>"


@dataclass(frozen=True)
class Scrubber:
    secrets: tuple[str, ...] = ()
    paths: tuple[tuple[str, str], ...] = ()     # (prefix, placeholder), longest prefix first
    identifiers: tuple[str, ...] = ()           # host identifiers (device UUIDs), replaced by a placeholder

    @staticmethod
    def make(secrets=(), *, home: str | None = None, install_dir: str | None = None,
             cwd: str | None = None, identifiers=(), elsewhere=()) -> "Scrubber":
        """``elsewhere``: folders the report names that lie outside home and the working folder
        (where a checkpoint or the report itself sits): they become ``<dir>``."""
        placeholders: dict[str, str] = {}
        for prefix, placeholder in ((install_dir, "<nvfp4-advisor>"), (cwd, "."), (home, "~"),
                                    *((d, "<dir>") for d in elsewhere)):
            prefix = (prefix or "").rstrip("/")
            if len(prefix) > 1:
                placeholders.setdefault(prefix, placeholder)
        paths = sorted(placeholders.items(), key=lambda p: -len(p[0]))
        return Scrubber(tuple(s for s in secrets if s), tuple(paths),
                        tuple(sorted({i for i in identifiers if i and len(i) >= 8}, key=len, reverse=True)))

    def text(self, s: str) -> str:
        s = redact(s, self.secrets)
        for ident in self.identifiers:
            s = s.replace(ident, UUID_PLACEHOLDER)
        s = _UUID_RE.sub(UUID_PLACEHOLDER, s)
        for prefix, placeholder in self.paths:
            if prefix in s:   # whole path components only: /home/al must not eat /home/alice
                s = re.sub(re.escape(prefix) + r"(?![\w.-])", _literal(placeholder), s)
        return s

    def tree(self, obj: Any) -> Any:
        """A JSON-like value with every string cleaned (keys too)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.text(str(k)): self.tree(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.tree(v) for v in obj]
        return obj

    def doc(self, doc: Doc) -> Doc:
        return Doc(tuple(self._block(b) for b in doc.blocks))

    def _block(self, block):
        changes = {f.name: self._value(getattr(block, f.name)) for f in dataclasses.fields(block)}
        return dataclasses.replace(block, **changes)

    def _value(self, v):
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, tuple):
            return tuple(self._value(x) for x in v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self._block(v)
        return v


def scrubber_for(environ, *, home: str | None, cwd: str | None, secrets=(), probe_result=None,
                 calibration=None, paths=()) -> Scrubber:
    """The scrubber a report written on this machine needs: token variables of ``environ``, the
    given secrets (an --api-key), the probed cards' UUIDs, the home / working / install paths, and
    the folders of ``paths`` (the checkpoint, the report file) that lie elsewhere on the host.
    Callers pass what they read at the edge (os.environ, Path.home(), os.getcwd())."""
    from pathlib import Path

    import advisor

    uuids = []
    for d in getattr(probe_result, "devices", ()) or ():
        uuids.append(d.nvml.uuid)
        uuids += [m.uuid for m in d.nvml.mig_devices]
    if calibration is not None:
        uuids.append(calibration.uuid)
    return Scrubber.make(tuple(s for s in secrets if s) + env_secrets(environ), home=home, cwd=cwd,
                         identifiers=uuids, install_dir=str(Path(advisor.__file__).resolve().parent.parent),
                         elsewhere=host_folders(paths, home=home, cwd=cwd))


def host_folders(paths, *, home: str | None, cwd: str | None) -> tuple[str, ...]:
    """The folders holding ``paths`` (as typed, absolute, and resolved) that lie outside home and
    the working folder: a report names the checkpoint, never where on the host it sits."""
    import os

    base = cwd or os.getcwd()

    def absolute(p: str) -> str:
        if p.startswith("~") and home:
            p = home + p[1:]
        return os.path.normpath(os.path.join(base, p))

    inside = tuple(p.rstrip("/") + "/" for p in (home, cwd) if p and len(p.rstrip("/")) > 1)
    out: list[str] = []
    for p in paths:
        if not p or p.startswith("demo:") or not (p.startswith((".", "/", "~")) or os.path.exists(p)):
            continue                                   # a hub id or a bundled demo names no host folder
        full = absolute(p)
        folders = [os.path.dirname(p.rstrip("/")), os.path.dirname(full)]
        if os.path.exists(full):
            folders.append(os.path.dirname(os.path.realpath(full)))
        for folder in folders:
            named = [c for c in folder.split("/") if c not in ("", ".", "..", "~")]
            if named and not (absolute(folder) + "/").startswith(inside):
                out.append(folder)
    return tuple(dict.fromkeys(out))

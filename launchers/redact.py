"""Secret redaction for everything the advisor shows or writes (command lines, logs, JSON)."""

from __future__ import annotations

from launchers.settings import REDACTED


def redact_text(text: str, secrets) -> str:
    for s in secrets:
        if s and len(s) >= 1 and s != REDACTED:
            text = text.replace(s, REDACTED)
    return text

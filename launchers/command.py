"""A generated launch: argv, environment, files to write, cluster steps, and how to show it.

The display line is shlex-quoted so it can be pasted into a shell, with every secret replaced.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from launchers.settings import REDACTED, ServeSettings


@dataclass(frozen=True)
class GeneratedFile:
    path: str                    # where the command expects it (relative to the launch directory)
    content: str
    purpose: str


@dataclass(frozen=True)
class Step:
    """A command run on another node (or before the server), e.g. `ray start --head`."""

    where: str                   # "head" | "each worker node"
    argv: tuple[str, ...]
    purpose: str


@dataclass(frozen=True)
class LaunchCommand:
    settings: ServeSettings
    version: str | None          # the flag set used
    version_note: str | None
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[GeneratedFile, ...] = ()
    steps: tuple[Step, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def engine(self) -> str:
        return self.settings.engine

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.settings.secrets()

    def display(self) -> str:
        """One copyable shell line, secrets redacted."""
        return display_line(self.argv, self.env, self.secrets)

    def display_multiline(self) -> str:
        """The same command, one flag per line with `\\` continuations: stays copyable when a
        terminal would wrap one long line."""
        from advisor.redact import redact as redact_text

        words = [f"{k}={shlex.quote(redact_text(v, self.secrets))}" for k, v in self.env]
        words += [shlex.quote(redact_text(a, self.secrets)) for a in self.argv]
        lines: list[str] = []
        current: list[str] = []
        n_env = len(self.env)
        for i, w in enumerate(words):
            if i > n_env + 1 and w.startswith("-") and current and not _is_number(w):
                lines.append(" ".join(current))
                current = []
            current.append(w)
        lines.append(" ".join(current))
        return " \\\n  ".join(lines)

    def display_steps(self) -> tuple[str, ...]:
        return tuple(display_line(s.argv, (), self.secrets) for s in self.steps)

    def to_json(self) -> dict:
        from advisor.redact import redact as redact_text

        sec = self.secrets
        return {
            "engine": self.engine,
            "version": self.version,
            "version_note": self.version_note,
            "argv": [redact_text(a, sec) for a in self.argv],
            "env": {k: redact_text(v, sec) for k, v in self.env},
            "command_line": self.display(),
            "files": [{"path": f.path, "purpose": f.purpose, "content": redact_text(f.content, sec)}
                      for f in self.files],
            "steps": [{"where": s.where, "purpose": s.purpose, "command_line": line}
                      for s, line in zip(self.steps, self.display_steps())],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "base_url": self.settings.base_url,
            "settings": self.settings,          # ServeSettings.to_json redacts the API key
        }


def _is_number(word: str) -> bool:
    try:
        float(word)
        return True
    except ValueError:
        return False


def display_line(argv, env=(), secrets=()) -> str:
    from advisor.redact import redact as redact_text

    parts = [f"{k}={shlex.quote(redact_text(v, secrets))}" for k, v in env]
    parts += [shlex.quote(redact_text(a, secrets)) for a in argv]
    return " ".join(parts)


__all__ = ["GeneratedFile", "LaunchCommand", "REDACTED", "Step", "display_line"]

"""The server on a port, as `nvfp4-advisor launch` recorded it: engine, model, device and log.

`bench` reads it to run the kernel check a launch runs (the engine's log against `explain`) and to
know a server meant for the CPU (`transformers serve --device cpu`) from one that fell back to it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from launchers import pidfile

# Where each generated command (launchers/engines/*) puts the model: a flag, or the first positional
# word after these subcommand words.
_MODEL_FLAG = {"sglang": "--model-path", "llamacpp": "-m"}
_SUBCOMMANDS = ("serve", "server")


@dataclass(frozen=True)
class Launched:
    record: pidfile.ServerRecord
    model: str | None
    device: str | None            # --device (transformers serve): "cpu" means the CPU is intended

    @property
    def engine(self) -> str:
        return self.record.engine

    def log_tail(self, lines: int = 4000, limit_bytes: int = 8 << 20) -> list[str]:
        """The last lines of the server's log ([] when it cannot be read)."""
        from advisor.errors import AdvisorError
        from advisor.textfile import read_text

        try:
            text = read_text(self.record.log, limit_bytes=limit_bytes, what="server log", tail=True)
        except (AdvisorError, OSError):
            return []
        return text.splitlines()[-lines:]


def find(port: int, directory: Path | None = None) -> Launched | None:
    """The live server an advisor launch started on ``port`` (the newest when several records name it)."""
    live = [r for r in pidfile.records(directory) if r.port == port and pidfile.alive(r)]
    if not live:
        return None
    rec = max(live, key=lambda r: r.started)
    argv = _argv(rec.command_line)
    return Launched(rec, model_of(rec.engine, argv), _flag(argv, "--device"))


def _argv(line: str) -> list[str]:
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    while words and "=" in words[0] and not words[0].startswith("-"):      # leading VAR=value words
        words.pop(0)
    return words


def _flag(argv: list[str], name: str) -> str | None:
    for i, w in enumerate(argv):
        if w == name and i + 1 < len(argv):
            return argv[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def model_of(engine: str, argv: list[str]) -> str | None:
    """The model argument of a generated command line."""
    flag = _MODEL_FLAG.get(engine)
    if flag:
        found = _flag(argv, flag)
        if found:
            return found
    for w in argv[1:]:
        if w.startswith("-"):
            break
        if w not in _SUBCOMMANDS:
            return w
    return None

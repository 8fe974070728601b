"""Errors the CLI and TUI turn into one-line messages (never tracebacks) and exit codes."""

from __future__ import annotations

# Exit codes (documented in the README).
EXIT_OK = 0
EXIT_FAILURE = 1      # the action ran and failed (server did not come up, benchmark failed, ...)
EXIT_USAGE = 2        # bad command line
EXIT_BAD_INPUT = 3    # unreadable / invalid checkpoint, profile, file
EXIT_UNSUPPORTED = 4  # the requested combination cannot run (e.g. nothing can serve this scheme here)
EXIT_INTERRUPTED = 130


class AdvisorError(Exception):
    """A user-facing failure: `str(err)` is the one line shown to the user."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class BadInput(AdvisorError):
    """A file or value given by the user is invalid. The message names the file and the problem."""

    exit_code = EXIT_BAD_INPUT


class UsageError(AdvisorError):
    exit_code = EXIT_USAGE


class Unsupported(AdvisorError):
    exit_code = EXIT_UNSUPPORTED

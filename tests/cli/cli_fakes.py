"""A fake subcommand in place of the discovered ones, for tests of the CLI shell itself."""

from __future__ import annotations

from advisor import commands


def install_fake_command(monkeypatch, behaviour) -> None:
    """`nvfp4-advisor fake` runs ``behaviour(args)``; it is the only command discovered."""
    mod = type("M", (), {})()
    mod.NAME, mod.HELP, mod.ORDER = "fake", "a fake command", 999
    mod.add_arguments = lambda p: None
    mod.run = behaviour
    monkeypatch.setattr(commands, "discover", lambda: [mod])

"""Small helpers importable by the TUI tests (pytest puts this folder on sys.path)."""

import socket


def free_port_for_test() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

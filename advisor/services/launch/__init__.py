"""Launching an engine server: the command (``command``), the running server (``server``) and the
saved launch profiles (``profiles``)."""

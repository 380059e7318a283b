"""The one address lbench's servers bind and its clients talk to, and free ports on it."""

from __future__ import annotations

import socket

HOST = "127.0.0.1"  # loopback only, always


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]

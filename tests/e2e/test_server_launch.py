"""The embedded launcher against a real server: when another process takes the port it chose before
the server binds it (llama.cpp then exits), the server is launched once more on a fresh port."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx

from harness.run import embedded


def test_a_port_taken_before_the_server_binds_it_is_launched_again_on_a_fresh_port(monkeypatch):
    taken: list[socket.socket] = []
    launch = embedded.embedded_launch

    def first_port_taken(*args, **kwargs):
        managed, server = launch(*args, **kwargs)
        if not taken:  # another process binds the first launch's port before the server does
            holder = socket.socket()
            holder.bind(("127.0.0.1", urlsplit(server.base_url).port))
            holder.listen()
            taken.append(holder)
        return managed, server

    monkeypatch.setattr(embedded, "embedded_launch", first_port_taken)
    try:
        with embedded.embedded_server("llamacpp-cpu", log_name="e2e-port-taken") as server:
            assert urlsplit(server.base_url).port != taken[0].getsockname()[1]
            assert httpx.get(f"{server.base_url}/health", timeout=30).status_code == 200
    finally:
        taken[0].close()

"""A used port is refused in one line, before anything starts: by every game's server (exit 2,
no "Application startup complete") and by the Password Game demo (exit 2, instead of playing
against the server that holds the port and reporting WON)."""

import socket
import subprocess
import sys
import time

import pytest

from tasks.common.client import find_free_port, start_server, stop_server
from tasks.common.ports import PortInUseError, bind_listening_sockets, check_port_free

HOST = "127.0.0.1"
SERVERS = ["tasks.password_game.server", "tasks.wordle.server", "tasks.openspiel.server"]


@pytest.fixture
def held_port():
    """A port another process-like listener holds (a plain listening socket)."""
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_check_port_free(held_port):
    with pytest.raises(PortInUseError) as e:
        check_port_free(HOST, held_port)
    assert str(e.value) == (f"port {held_port} on {HOST} is already in use (another server is "
                            "listening there): stop it or choose another --port")
    check_port_free(HOST, find_free_port())  # a free port passes
    sockets = bind_listening_sockets(HOST, find_free_port())  # and is bound for the server
    assert len(sockets) == 1 and sockets[0].getsockname()[0] == HOST
    sockets[0].close()


@pytest.mark.parametrize("module", SERVERS)
def test_server_on_a_used_port_fails_in_one_line(module, held_port):
    out = subprocess.run([sys.executable, "-m", module, "--port", str(held_port),
                          "--log-level", "info"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert _one_line(out.stderr) == (f"error: port {held_port} on {HOST} is already in use "
                                     "(another server is listening there): stop it or choose "
                                     "another --port")
    assert out.stdout == "" and "startup complete" not in out.stderr


def test_start_server_refuses_a_used_port_without_starting_anything(held_port):
    t0 = time.monotonic()
    with pytest.raises(PortInUseError):
        start_server("tasks.password_game.server", HOST, held_port)
    assert time.monotonic() - t0 < 1.0  # no process was started and waited for


def test_demo_refuses_a_port_another_server_holds():
    port = find_free_port()
    other = start_server("tasks.password_game.server", HOST, port, timeout=60)
    try:
        out = subprocess.run([sys.executable, "-m", "tasks.password_game", "demo", "--port",
                              str(port)], capture_output=True, text=True, timeout=120)
    finally:
        stop_server(other)
    assert out.returncode == 2, out.stdout + out.stderr
    assert _one_line(out.stderr) == (f"demo: port {port} on {HOST} is already in use by another "
                                     "server; the demo starts its own, so stop that one or pass "
                                     "a free --port")
    assert "WON" not in out.stdout and "turn 1" not in out.stdout

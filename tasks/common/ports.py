"""Listening ports: bind them before anything else happens, and say plainly when one is taken.

uvicorn runs the app's startup (and logs "Application startup complete") before it binds its
port, so a second server on a used port looked healthy, then died with a traceback-like log. And
a client that started its own server on a used port found the *other* server answering
``/health`` and used it. Both now ask here first:

* :func:`bind_listening_sockets` binds every address of ``host:port`` the way asyncio's
  ``create_server`` would (``SO_REUSEADDR``, IPv6 sockets IPv6-only) and hands the sockets to
  the server, so the check and the bind are one step (no other process can slip in between);
* :func:`check_port_free` binds and closes at once: for a client about to start a server in
  another process.

Both raise :class:`PortInUseError`, whose message is one line that says what to do.
"""

from __future__ import annotations

import errno
import socket

__all__ = ["PortInUseError", "bind_listening_sockets", "check_port_free"]


class PortInUseError(OSError):
    """Another process is listening on the port."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE,
                         f"port {port} on {host} is already in use (another server is "
                         f"listening there): stop it or choose another --port")
        self.host, self.port = host, port

    def __str__(self) -> str:  # the message alone, without OSError's "[Errno 98]"
        return self.strerror


def bind_listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound (not yet listening) TCP sockets for every address ``host`` resolves to."""
    infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                               socket.IPPROTO_TCP, socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(
                (i[0], i[1], i[2], None, i[4]) for i in infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            # As asyncio and uvicorn do: a port whose last connections are in TIME_WAIT can be
            # bound again at once; a port some process listens on still cannot.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise PortInUseError(host, port) from None
                raise
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def check_port_free(host: str, port: int) -> None:
    """:class:`PortInUseError` if a server already listens on ``host:port``."""
    for sock in bind_listening_sockets(host, port):
        sock.close()

"""What stands between a socket and a game server's app: request-body limits and deadlines, and
running uvicorn with connection limits and a header deadline.

Guarantees (documented in PASSWORD_GAME_README.md and docs/reliability.md):

* a request body over ``max_body_bytes`` is refused (413) before any parsing; one that is not
  valid UTF-8 (RFC 8259 requires UTF-8 JSON; this includes CESU-8 encoded surrogates) is 400;
* a body not complete within ``body_timeout`` seconds of its headers is answered 408 and the
  connection closed (before, a client that announced 5 MiB and never sent it held the socket and
  the buffered part of its body forever);
* a connection that has not sent a complete request head within ``header_timeout`` seconds (of
  connecting, or of the previous response) is closed;
* at most ``max_connections`` connections or requests are served at once: a request beyond that
  is answered 503 at once by uvicorn (``limit_concurrency``), and is never read. So the memory
  held by request bodies stays under ``max_connections * max_body_bytes``;
* idle keep-alive connections close after 5 s (uvicorn's ``timeout_keep_alive``) and request
  heads are at most 16 KiB (h11's ``max_incomplete_event_size``);
* after a request that buffered 1 MiB or more, freed heap memory is handed back to the OS
  (glibc's ``malloc_trim``), so the resident size returns to where it was instead of keeping
  the high-water mark (16 cut-off 5 MiB bodies left it 37 MB higher without this).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import json
import logging
import sys
from typing import Any, Callable, Optional

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .ports import PortInUseError, bind_listening_sockets

logger = logging.getLogger("tasks.common.transport")

KEEP_ALIVE_SECONDS = 5  # uvicorn's default, set explicitly so that the docs can rely on it
MAX_HEAD_BYTES = 16 * 1024  # h11's default, idem
RELEASE_AFTER_BYTES = 1 << 20  # after a body this large, hand freed heap memory back to the OS


def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim`` (returns freed heap pages to the OS), or None where the C library
    has none (musl, macOS): there the memory is simply kept for reuse."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


malloc_trim = _malloc_trim()


# ============================================================================ request bodies
class BodySizeLimitMiddleware:
    """Reads the request body before the app does, and refuses it when it is too large (413),
    too slow (408) or not UTF-8 (400).

    A declared ``Content-Length`` over the limit is refused at once; a body without one (chunked)
    is read until it passes the limit. Bodies that pass are buffered (at most ``max_bytes``) and
    replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: Optional[float] = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        buffered = await self._handle(scope, receive, send)
        if buffered >= RELEASE_AFTER_BYTES and malloc_trim is not None:
            # The body is freed by now. Its 64 KiB pieces leave holes in the C heap that free()
            # does not give back: 16 cut-off 5 MiB bodies left the RSS 37 MB higher for good.
            await anyio.to_thread.run_sync(malloc_trim, 0)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Everything but the memory release; returns how many body bytes were buffered."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await reject(send, 400, "invalid Content-Length header")
                    return 0
                if declared > self.max_bytes:
                    await self._too_large(send, declared)
                    return 0
                break
        read = [0]  # bytes received so far, kept by _read even when it is cut off
        try:
            with anyio.fail_after(self.timeout):
                body = await self._read(receive, read)
        except TimeoutError:
            await reject(send, 408, f"request body not complete after {self.timeout:g} s "
                                    f"(body_timeout); send it at once")
            return read[0]
        if body is None:  # the client went away
            return read[0]
        if body is False:
            await self._too_large(send, None)
            return read[0]
        try:
            body.decode("utf-8")  # strict: lone or paired surrogates (CESU-8) are invalid too
        except UnicodeDecodeError as e:
            await reject(send, 400, f"request body is not valid UTF-8 JSON: {e}")
            return read[0]
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
        return read[0]

    async def _read(self, receive: Receive, read: list[int]) -> Any:
        """The whole body; ``None`` if the client disconnected, ``False`` if it is too large."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect
                return None
            chunk = message.get("body", b"")
            read[0] += len(chunk)
            if read[0] > self.max_bytes:
                return False
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _too_large(self, send: Send, declared: Optional[int]) -> None:
        size = f"{declared} bytes" if declared is not None else "more than that"
        await reject(send, 413, f"request body too large: {size}; the limit is {self.max_bytes} "
                                f"bytes (max_body_bytes)")


async def reject(send: Send, status: int, detail: str) -> None:
    """A JSON error that also closes the connection (the rest of the body is never read)."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


# ============================================================================ connections
def guarded_protocol(header_timeout: float) -> type:
    """uvicorn's h11 protocol, plus a deadline for each request head: a connection that has not
    sent a complete head ``header_timeout`` seconds after connecting, or after its previous
    response, is closed. uvicorn has no such setting: its keep-alive timer starts only after a
    response and stops at the first byte received, so a client sending a header line every few
    seconds (or nothing at all on a new connection) was never timed out."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineH11Protocol(H11Protocol):
        _head_timer: Optional[asyncio.TimerHandle] = None
        _timed_cycle: Any = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm_head_timer()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and self.cycle is not self._timed_cycle:
                self._timed_cycle = self.cycle  # a complete head arrived: its deadline is met
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            self._arm_head_timer()  # before super(), which may already parse a pipelined head
            super().on_response_complete()

        def connection_lost(self, exc: Optional[Exception]) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout, self._head_too_slow)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                logger.info("closing a connection from %s: no complete request head within "
                            "%g s (header_timeout)", self.client, header_timeout)
                self.transport.close()

    return HeadDeadlineH11Protocol


def serve(app: Any, args: argparse.Namespace) -> None:
    """Run ``app`` with uvicorn on ``args.host:args.port``, with the limits of its settings
    (``app.state.settings``: ``max_connections``, ``header_timeout``).

    The port is bound first (:func:`~tasks.common.ports.bind_listening_sockets`) and the bound
    sockets handed to uvicorn: a used port ends the process with one line on stderr and exit
    code 2, before any "Application startup complete" could suggest the server is up."""
    import uvicorn

    settings = app.state.settings
    try:
        sockets = bind_listening_sockets(args.host, args.port)
    except PortInUseError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(level=args.log_level.upper() if args.log_level != "trace" else "DEBUG")
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level,
        access_log=args.log_level in ("info", "debug", "trace"),
        http=guarded_protocol(settings.header_timeout),
        limit_concurrency=settings.max_connections,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES)
    # uvicorn says where it listens only when it binds the port itself.
    url_host = f"[{args.host}]" if ":" in args.host else args.host
    logger.info("serving on http://%s:%d (Ctrl+C to quit)", url_host,
                sockets[0].getsockname()[1])
    try:
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()

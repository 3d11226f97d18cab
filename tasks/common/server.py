"""Game-agnostic FastAPI scaffolding: what every game server in ``tasks/`` shares.

A game's server module builds its app with :func:`create_base_app` (JSON responses, the body-size
middleware, the error handlers, a :class:`SessionStore`), registers ``/health`` and
``DELETE /sessions/{id}`` with :func:`add_health_route` / :func:`add_delete_session_route`, and adds
only its own endpoints. Its ``main()`` uses :func:`add_session_arguments`,
:func:`add_runtime_arguments` and :func:`serve`.

What the scaffolding guarantees (every game's server documents the details for its endpoints):

* bad input is answered with a 4xx and a message, never a 5xx: pydantic errors are 422 with
  ``{"detail": [{"type", "loc", "msg"}, ...]}`` and never echo the input back; bodies the JSON
  parser itself cannot read (invalid UTF-8, numbers over 4300 digits, absurd nesting) are 400;
  bodies over ``max_body_bytes`` are 413 before any parsing (declared or streamed);
* unknown / deleted / expired / evicted sessions are 404 with the reason;
* responses are compact UTF-8 JSON, falling back to ASCII escapes for lone surrogates;
* sessions: at most ``max_sessions`` (the least recently used is evicted), each expires after
  ``session_ttl`` seconds without a request, ids are ``secrets.token_urlsafe(16)``; the table has a
  lock and every session its own, so concurrent requests to one session serialize.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Optional, Union

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .protocol import MAX_SEED, GameOver

try:
    from importlib.metadata import PackageNotFoundError, version as _pkg_version

    try:
        VERSION = _pkg_version("game-rl")
    except PackageNotFoundError:
        VERSION = "0.1.0"
except ImportError:  # pragma: no cover
    VERSION = "0.1.0"

MiB = 1 << 20

__all__ = [
    "BaseServerSettings", "BodySizeLimitMiddleware", "Detail", "ERROR_RESPONSES", "Ended",
    "EPISODE_OVER_RESPONSE", "Health", "MAX_SEED", "MiB", "SafeJSONResponse", "Seed",
    "SessionGone", "SessionStore", "VERSION", "Weight", "add_delete_session_route",
    "add_health_route", "add_runtime_arguments", "add_session_arguments", "check_session_limits",
    "create_base_app", "http_error", "lookup_session", "serve", "short", "strict", "text_type",
    "validation_errors",
]


# ============================================================================ settings
def check_session_limits(settings: Any) -> None:
    """``ValueError`` unless ``max_sessions >= 1`` and ``session_ttl > 0`` (any settings object)."""
    if settings.max_sessions < 1:
        raise ValueError("max_sessions must be >= 1")
    if not settings.session_ttl > 0:
        raise ValueError("session_ttl must be > 0")


@dataclass
class BaseServerSettings:
    """The limits every server has. A game's settings subclass it (or, like the Password Game's,
    declare the same fields) and add their own; :func:`create_base_app` reads only these four.

    ``clock`` is the time source for idle expiry (tests inject their own).
    """

    max_sessions: int = 1024
    session_ttl: float = 3600.0
    max_body_bytes: int = 1 * MiB
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        check_session_limits(self)
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")


# ============================================================================ JSON responses
class SafeJSONResponse(JSONResponse):
    """Compact UTF-8 JSON; falls back to ASCII escapes when the content holds a lone surrogate
    (which UTF-8 cannot encode), so text like ``"\\ud800"`` round-trips instead of a 500."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False,
                              separators=(",", ":")).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode("ascii")


def short(text: Any, limit: int = 64) -> str:
    """An ASCII-safe, bounded rendering of client-supplied text for error messages."""
    s = ascii(text) if isinstance(text, str) else ascii(str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ============================================================================ body size limit
class BodySizeLimitMiddleware:
    """Rejects request bodies over ``max_bytes`` with 413 before the app parses anything.

    A declared ``Content-Length`` over the limit is refused at once; a body without one (chunked)
    is read until it passes the limit and then refused. Bodies within the limit are buffered
    (at most ``max_bytes``) and replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._reject(send, 400, "invalid Content-Length header")
                    return
                if declared > self.max_bytes:
                    await self._reject_too_large(send, declared)
                    return
                break
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # http.disconnect: the client went away
                return
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await self._reject_too_large(send, None)
                return
            if body:
                chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject_too_large(self, send: Send, declared: Optional[int]) -> None:
        size = f"{declared} bytes" if declared is not None else "more than that"
        await self._reject(send, 413, f"request body too large: {size}; the limit is "
                                      f"{self.max_bytes} bytes (max_body_bytes)")

    @staticmethod
    async def _reject(send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


# ============================================================================ sessions
class SessionGone(LookupError):
    pass


class Session:
    """One session: its game object, its lock (hold it while using the game), its last use."""

    __slots__ = ("id", "game", "lock", "last_used")

    def __init__(self, sid: str, game: Any, now: float) -> None:
        self.id = sid
        self.game = game
        self.lock = threading.Lock()
        self.last_used = now


class SessionStore:
    """Sessions in least-recently-used order, with idle expiry and a size cap.

    The dict is kept ordered by last use (``move_to_end`` on every access), so the oldest idle
    session is always first: expiry sweeps from the front, and eviction pops the front. A bounded
    record of ended ids lets a 404 say why a session is gone.
    """

    GONE_MEMORY = 4096

    def __init__(self, max_sessions: int, ttl: float, clock: Callable[[], float]) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self.clock = clock
        self._sessions: "OrderedDict[str, Session]" = OrderedDict()
        self._gone: "OrderedDict[str, str]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._sweep(self.clock())
            return len(self._sessions)

    def add(self, game: Any) -> Session:
        with self._lock:
            now = self.clock()
            self._sweep(now)
            while len(self._sessions) >= self.max_sessions:
                old_id, _ = self._sessions.popitem(last=False)
                self._bury(old_id, f"it was evicted to make room (the server holds at most "
                                   f"{self.max_sessions} sessions and this one was idle longest)")
            sid = secrets.token_urlsafe(16)
            while sid in self._sessions or sid in self._gone:  # never in practice
                sid = secrets.token_urlsafe(16)
            session = Session(sid, game, now)
            self._sessions[sid] = session
            return session

    def get(self, sid: str) -> Session:
        with self._lock:
            now = self.clock()
            self._sweep(now)
            session = self._sessions.get(sid)
            if session is None:
                raise SessionGone(self._why(sid))
            session.last_used = now
            self._sessions.move_to_end(sid)
            return session

    def delete(self, sid: str) -> None:
        with self._lock:
            self._sweep(self.clock())
            if self._sessions.pop(sid, None) is None:
                raise SessionGone(self._why(sid))
            self._bury(sid, "it was deleted")

    def _sweep(self, now: float) -> None:
        while self._sessions:
            sid, session = next(iter(self._sessions.items()))
            if now - session.last_used < self.ttl:
                break
            del self._sessions[sid]
            self._bury(sid, f"it expired after {self.ttl:g} s without a request (session_ttl)")

    def _bury(self, sid: str, why: str) -> None:
        self._gone[sid] = why
        while len(self._gone) > self.GONE_MEMORY:
            self._gone.popitem(last=False)

    def _why(self, sid: str) -> str:
        why = self._gone.get(sid, "no session has this id (or it ended long ago)")
        return f"session {short(sid)} not found: {why}"


# ============================================================================ API models
def strict(extra: str = "forbid") -> ConfigDict:
    """Request models' config: no type coercion (``"7"``, ``7.0``, ``true`` are not ints), no
    unknown fields."""
    return ConfigDict(strict=True, extra=extra)


Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="instance seed, 0 .. 2**63-1",
                            strict=True)]
_BOUND = 1e6
Weight = Annotated[float, Field(ge=-_BOUND, le=_BOUND, allow_inf_nan=False)]


def text_type(max_chars: int, *, too_long: str, description: str) -> Any:
    """A text field: any ``str`` (control characters, NUL, lone surrogates allowed) of at most
    ``max_chars`` code points. ``too_long`` is the 422 message (``{length}`` and ``{max_chars}``
    are filled in); the input itself is never echoed."""

    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        if len(value) > max_chars:
            raise PydanticCustomError("string_too_long", too_long,
                                      {"length": len(value), "max_chars": max_chars})
        return value

    return Annotated[str, PlainValidator(check), WithJsonSchema(
        {"type": "string", "maxLength": max_chars, "description": description})]


class Detail(BaseModel):
    detail: Any


class Ended(BaseModel):
    ended: bool


class Health(BaseModel):
    status: str
    sessions: int
    version: str
    limits: dict[str, Any]


ERROR_RESPONSES: dict[Union[int, str], dict[str, Any]] = {
    404: {"model": Detail, "description": "unknown, deleted, expired or evicted session"},
    413: {"model": Detail, "description": "request body over max_body_bytes"},
    422: {"model": Detail, "description": "invalid request (pydantic errors)"},
}
EPISODE_OVER_RESPONSE: dict[Union[int, str], dict[str, Any]] = {
    409: {"model": Detail, "description": "the episode has ended"}}


# ============================================================================ the app
def validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """pydantic's errors without the offending input (it may be a megabyte) or odd context."""
    out = []
    for err in exc.errors():
        msg = str(err.get("msg", "invalid input"))
        ctx = err.get("ctx") or {}
        if err.get("type") == "json_invalid" and "error" in ctx:
            msg = f"{msg}: {ctx['error']}"
        loc = [part if isinstance(part, int) else short(part, 80).strip("'\"")
               for part in err.get("loc", ())]
        out.append({"type": str(err.get("type", "value_error")), "loc": loc, "msg": msg})
    return out


def http_error(status: int, detail: str) -> HTTPException:
    return HTTPException(status_code=status, detail=detail)


def create_base_app(settings: Any, *, title: str, description: str = "",
                    logger: Optional[logging.Logger] = None) -> FastAPI:
    """A FastAPI app with the shared hardening and an empty :class:`SessionStore`.

    ``settings`` needs ``max_sessions``, ``session_ttl``, ``max_body_bytes`` and ``clock``; it and
    the store are kept as ``app.state.settings`` and ``app.state.sessions``. ``logger`` receives
    the traceback of any unexpected error (answered with a JSON 500: the last resort; every known
    bad input is a 4xx).
    """
    log = logger or logging.getLogger("tasks.common.server")
    store = SessionStore(settings.max_sessions, settings.session_ttl, settings.clock)
    app = FastAPI(title=title, version=VERSION, description=description,
                  default_response_class=SafeJSONResponse)
    app.state.settings = settings
    app.state.sessions = store
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return SafeJSONResponse({"detail": validation_errors(exc)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cause = exc.__cause__
        if exc.status_code == 400 and cause is not None:  # FastAPI could not parse the body
            if isinstance(cause, UnicodeDecodeError):
                exc = HTTPException(400, f"request body is not valid UTF-8 JSON: {cause}")
            elif isinstance(cause, RecursionError):
                exc = HTTPException(400, "request body is not JSON we can parse: nested too deeply")
            elif isinstance(cause, ValueError):
                exc = HTTPException(400, f"request body is not JSON we can parse: {cause}")
        return await http_exception_handler(request, exc)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Last resort only: every known bad input is validated and answered with a 4xx.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return SafeJSONResponse({"detail": "internal server error"}, status_code=500)

    return app


def lookup_session(store: SessionStore, sid: str) -> Session:
    """The session, or an ``HTTPException`` 404 that says why it is gone."""
    try:
        return store.get(sid)
    except SessionGone as e:
        raise http_error(404, str(e)) from None


def add_health_route(app: FastAPI, limits: Callable[[], dict[str, Any]]) -> None:
    """``GET /health``: status, live session count, version and the server's limits."""
    store: SessionStore = app.state.sessions

    @app.get("/health", response_model=Health)
    def health() -> Any:
        return {"status": "ok", "sessions": len(store), "version": VERSION, "limits": limits()}


def add_delete_session_route(app: FastAPI) -> None:
    """``DELETE /sessions/{session_id}``: end a session (404 if it is already gone)."""
    store: SessionStore = app.state.sessions

    @app.delete("/sessions/{session_id}", response_model=Ended, responses=ERROR_RESPONSES)
    def delete_session(session_id: str) -> Any:
        try:
            store.delete(session_id)
        except SessionGone as e:
            raise http_error(404, str(e)) from None
        return {"ended": True}


def add_turn_routes(app: FastAPI, *, action_model: type[BaseModel], action_field: str,
                    step_response: type[BaseModel], feedback_response: type[BaseModel],
                    feedback: Callable[[Any, str], Any], ended_message: str,
                    submit_doc: str, feedback_doc: str) -> None:
    """``POST /sessions/{id}/submit`` and ``/feedback``, the same for every game.

    ``submit`` plays one turn (``game.step(action)``) under the session's lock and answers 409 once
    the episode has ended; ``feedback(game, action)`` answers without using a turn. The request
    model is the game's (its one text field is ``action_field``), so each game keeps its own
    field name, limits and OpenAPI schema.
    """
    store: SessionStore = app.state.sessions

    def submit(session_id: str, req: Any) -> Any:
        session = lookup_session(store, session_id)
        with session.lock:
            try:
                obs, reward, done, info = session.game.step(getattr(req, action_field))
            except GameOver:
                raise http_error(409, ended_message) from None
        return SafeJSONResponse({"observation": obs, "reward": reward, "done": done, "info": info})

    def feedback_route(session_id: str, req: Any) -> Any:
        session = lookup_session(store, session_id)
        with session.lock:
            result = feedback(session.game, getattr(req, action_field))
        return SafeJSONResponse(result)

    # FastAPI reads the body's model from the annotation; this module's annotations are strings
    # (``from __future__ import annotations``), so set the real classes here.
    for route, doc in ((submit, submit_doc), (feedback_route, feedback_doc)):
        route.__annotations__ = {"session_id": str, "req": action_model, "return": Any}
        route.__doc__ = doc
    feedback_route.__name__ = "feedback"
    app.post("/sessions/{session_id}/submit", response_model=step_response,
             responses={**ERROR_RESPONSES, **EPISODE_OVER_RESPONSE})(submit)
    app.post("/sessions/{session_id}/feedback", response_model=feedback_response,
             responses=ERROR_RESPONSES)(feedback_route)


# ============================================================================ command line
def add_session_arguments(parser: argparse.ArgumentParser, defaults: Any, port: int) -> None:
    """``--host``, ``--port``, ``--max-sessions``, ``--session-ttl``."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions)
    parser.add_argument("--session-ttl", type=float, default=defaults.session_ttl,
                        help="seconds without a request before a session expires")


def add_runtime_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """``--max-body-bytes`` and ``--log-level``."""
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--log-level", default="info",
                        choices=["critical", "error", "warning", "info", "debug", "trace"])


def serve(app: FastAPI, args: argparse.Namespace) -> None:
    """Run ``app`` with uvicorn on ``args.host:args.port`` at ``args.log_level``."""
    import uvicorn

    logging.basicConfig(level=args.log_level.upper() if args.log_level != "trace" else "DEBUG")
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.log_level in ("info", "debug", "trace"))

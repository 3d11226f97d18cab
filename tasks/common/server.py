"""Game-agnostic FastAPI scaffolding: what every game server in ``tasks/`` shares.

A game's server module builds its app with :func:`create_base_app` (JSON responses, the body
middleware, the error handlers, a :class:`SessionStore`), registers ``/health`` and
``DELETE /sessions/{id}`` with :func:`add_health_route` / :func:`add_delete_session_route`, the
turn routes with :func:`add_turn_routes`, creates sessions with :func:`new_session`, uses them
with :func:`using_session`, and adds only its own endpoints. Its ``main()`` uses
:func:`add_session_arguments`, :func:`add_runtime_arguments`, :func:`shared_settings` and
:func:`serve`.

What the scaffolding guarantees (every game's server documents the details for its endpoints):

* bad input is answered with a 4xx and a message, never a 5xx: pydantic errors are 422 with
  ``{"detail": [{"type", "loc", "msg"}, ...]}`` and never echo the input back; bodies that are
  not UTF-8 (CESU-8 surrogates included) or that the JSON parser itself cannot read (numbers over
  4300 digits, absurd nesting) are 400; bodies over ``max_body_bytes`` are 413 before any parsing
  (declared or streamed); bodies not complete within ``body_timeout`` are 408;
* unknown / deleted / expired / evicted sessions are 404 with the reason;
* responses are compact UTF-8 JSON, falling back to ASCII escapes for lone surrogates;
* sessions (:mod:`tasks.common.sessions`): ids are ``secrets.token_urlsafe(16)``; each expires
  after ``session_ttl`` seconds without a request; at most ``max_sessions`` in all and
  ``max_sessions_per_client`` per client (its ``X-Client-Token`` header, else its address); when
  a cap is reached the least recently used session under it is evicted only if it has been idle
  ``evict_idle_after`` seconds, else the new session is refused with 429 and ``Retry-After``;
* one request at a time per session: a request to a session that is busy is refused at once with
  409 and ``Retry-After: 1`` (no thread waits for it); ``DELETE`` waits for the request in
  flight (up to ``delete_wait`` seconds) and no turn is ever applied to a deleted game;
* ``/health`` runs on the event loop, never behind game work in the thread pool;
* connections (:mod:`tasks.common.transport`): at most ``max_connections`` at once (503 beyond),
  request heads within ``header_timeout``, bodies within ``body_timeout``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Iterator, Optional, Union

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, create_model
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .protocol import MAX_SEED, GameOver
from .sessions import Session, SessionBusy, SessionGone, SessionStore, StoreFull, short
from .transport import BodySizeLimitMiddleware, serve

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
    "BaseServerSettings", "BodySizeLimitMiddleware", "CLIENT_TOKEN_HEADER", "Detail",
    "ERROR_RESPONSES", "Ended", "EPISODE_OVER_RESPONSE", "Health", "MAX_SEED", "MiB",
    "SafeJSONResponse", "Seed", "Session", "SessionGone", "SessionStore", "VERSION", "Weight",
    "add_delete_session_route", "add_health_route", "add_runtime_arguments",
    "add_session_arguments", "check_session_limits", "client_key", "create_base_app",
    "http_error", "lookup_session", "new_session", "request_model_of", "serve", "shared_settings",
    "short", "strict", "text_type", "using_session", "validation_errors",
]


# ============================================================================ settings
def check_session_limits(settings: Any) -> None:
    """``ValueError`` unless every shared limit of ``settings`` is sensible (any settings object
    with :class:`BaseServerSettings`' fields)."""
    if settings.max_sessions < 1 or settings.max_sessions_per_client < 1:
        raise ValueError("max_sessions and max_sessions_per_client must be >= 1")
    if settings.max_connections < 1:
        raise ValueError("max_connections must be >= 1")
    for name in ("session_ttl", "evict_idle_after", "header_timeout", "body_timeout",
                 "delete_wait"):
        if not getattr(settings, name) > 0:
            raise ValueError(f"{name} must be > 0")


@dataclass
class BaseServerSettings:
    """The limits every server has; a game's settings subclass it and add their own.

    Sessions: ``max_sessions`` in all, ``max_sessions_per_client`` per client, ``session_ttl``
    seconds idle before a session expires, ``evict_idle_after`` seconds idle before a session may
    be evicted to make room (never sooner: a full server answers 429 instead), ``delete_wait``
    seconds that a DELETE waits for the request in flight. Transport: ``max_body_bytes``,
    ``body_timeout`` and ``header_timeout`` seconds, ``max_connections`` served at once.
    ``clock`` is the time source for idle times (tests inject their own).
    """

    max_sessions: int = 1024
    session_ttl: float = 3600.0
    max_body_bytes: int = 1 * MiB
    max_sessions_per_client: int = 256
    evict_idle_after: float = 300.0
    delete_wait: float = 30.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 128
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        check_session_limits(self)
        if self.max_body_bytes < 1024:
            raise ValueError("max_body_bytes must be >= 1024")

    def shared_limits(self) -> dict[str, Any]:
        """The limits above, as ``/health`` reports them."""
        return {name: getattr(self, name) for name in SHARED_LIMITS}


SHARED_LIMITS = ("max_sessions", "max_sessions_per_client", "session_ttl", "evict_idle_after",
                 "delete_wait", "max_body_bytes", "body_timeout", "header_timeout",
                 "max_connections")


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


# ============================================================================ API models
def strict(extra: str = "forbid") -> ConfigDict:
    """Request models' config: no type coercion (``"7"``, ``7.0``, ``true`` are not ints), no
    unknown fields."""
    return ConfigDict(strict=True, extra=extra)


Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="instance seed, 0 .. 2**63-1",
                            strict=True)]
_BOUND = 1e6
Weight = Annotated[float, Field(ge=-_BOUND, le=_BOUND, allow_inf_nan=False)]


def request_model_of(config: type, field_type: Any, *, name: str, module: str,
                     types: Optional[dict[str, Any]] = None) -> type[BaseModel]:
    """A strict request model (``strict()``) with exactly the fields and defaults of the game's
    settings dataclass ``config``, each typed ``types[field]`` or else ``field_type``: a setting is
    declared once, in the game, and the server takes it as the game does (a new reward term needs
    no second list to keep in step). ``name`` and ``module`` name the class (the OpenAPI schema's
    title, pickling)."""
    types = types or {}
    unknown = set(types) - {f.name for f in dataclasses.fields(config)}
    if unknown:
        raise TypeError(f"{config.__name__} has no field(s) {sorted(unknown)}")
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if f.default is dataclasses.MISSING:
            raise TypeError(f"{config.__name__}.{f.name} needs a plain default to be a "
                            "request field")
        fields[f.name] = (types.get(f.name, field_type), f.default)
    return create_model(name, __config__=strict(), __module__=module, **fields)


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
    409: {"model": Detail, "description": "the session is busy with another request "
                                          "(Retry-After: 1)"},
    413: {"model": Detail, "description": "request body over max_body_bytes"},
    422: {"model": Detail, "description": "invalid request (pydantic errors)"},
}
EPISODE_OVER_RESPONSE: dict[Union[int, str], dict[str, Any]] = {
    409: {"model": Detail, "description": "the episode has ended (no Retry-After), or the session "
                                          "is busy with another request (Retry-After: 1)"}}
NEW_SESSION_RESPONSES: dict[Union[int, str], dict[str, Any]] = {
    **ERROR_RESPONSES,
    429: {"model": Detail, "description": "no room for a new session (max_sessions or "
                                          "max_sessions_per_client, all active); see Retry-After"}}


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


def http_error(status: int, detail: str, retry_after: Optional[int] = None) -> HTTPException:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return HTTPException(status_code=status, detail=detail, headers=headers)


def create_base_app(settings: Any, *, title: str, description: str = "",
                    logger: Optional[logging.Logger] = None) -> FastAPI:
    """A FastAPI app with the shared hardening and an empty :class:`SessionStore`.

    ``settings`` needs :class:`BaseServerSettings`' fields; it and the store are kept as
    ``app.state.settings`` and ``app.state.sessions``. ``logger`` receives the traceback of any
    unexpected error (answered with a JSON 500: the last resort; every known bad input is a 4xx).
    """
    log = logger or logging.getLogger("tasks.common.server")
    store = SessionStore(settings.max_sessions, settings.session_ttl, settings.clock,
                         max_per_client=settings.max_sessions_per_client,
                         evict_idle_after=settings.evict_idle_after)
    app = FastAPI(title=title, version=VERSION, description=description,
                  default_response_class=SafeJSONResponse)
    app.state.settings = settings
    app.state.sessions = store
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes,
                       timeout=settings.body_timeout)

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


# ============================================================================ sessions over HTTP
CLIENT_TOKEN_HEADER = "X-Client-Token"
_TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/=-]{1,64}")


def client_key(request: Request) -> str:
    """Whose session quota a request counts against: its ``X-Client-Token`` (any 1-64 URL-safe
    characters the client picks; an accounting key, not a secret), else its address."""
    token = request.headers.get(CLIENT_TOKEN_HEADER)
    if token is not None:
        if not _TOKEN_RE.fullmatch(token):
            raise http_error(400, f"{CLIENT_TOKEN_HEADER} must be 1 to 64 characters among "
                                  f"A-Z a-z 0-9 . _ ~ + / = -")
        return f"token:{token}"
    return f"address:{request.client.host if request.client else 'unknown'}"


def new_session(store: SessionStore, request: Request, make: Callable[[], tuple[Any, Any]]) -> Any:
    """``POST /sessions``: check there is room for the client (429 if not) before ``make()``
    builds the game and its first observation, add it, answer ``{session_id, observation}``."""
    owner = client_key(request)
    try:
        store.check_room(owner)
        game, observation = make()
        session = store.add(game, owner)
    except StoreFull as e:
        raise http_error(429, str(e), retry_after=e.retry_after) from None
    return SafeJSONResponse({"session_id": session.id, "observation": observation})


def lookup_session(store: SessionStore, sid: str) -> Session:
    """The session, or an ``HTTPException`` 404 that says why it is gone."""
    try:
        return store.get(sid)
    except SessionGone as e:
        raise http_error(404, str(e)) from None


@contextmanager
def using_session(store: SessionStore, sid: str) -> Iterator[Session]:
    """The session, held for this request alone: 404 if it is gone, 409 at once if another
    request is using it (no thread ever waits for a session), 409 if a DELETE is waiting."""
    session = lookup_session(store, sid)
    if not session.lock.acquire(blocking=False):
        raise http_error(409, f"session {short(sid)} is busy: another request for it is in "
                              f"progress (one at a time per session); retry when it has "
                              f"answered", retry_after=SessionBusy.retry_after)
    try:
        if session.closed:  # ended between the lookup and the lock
            raise http_error(404, store.why(sid))
        if session.closing:
            raise http_error(409, f"session {short(sid)} is being deleted",
                             retry_after=SessionBusy.retry_after)
        yield session
    finally:
        session.lock.release()
        store.touch(session)


def add_health_route(app: FastAPI, limits: Callable[[], dict[str, Any]]) -> None:
    """``GET /health``: status, live session count, version and the server's limits (the shared
    ones and the game's). It is ``async``: it runs on the event loop, so it answers even while
    every worker thread is busy with game work."""
    store: SessionStore = app.state.sessions
    settings = app.state.settings

    @app.get("/health", response_model=Health)
    async def health() -> Any:
        return {"status": "ok", "sessions": len(store), "version": VERSION,
                "limits": {**BaseServerSettings.shared_limits(settings), **limits()}}


def add_delete_session_route(app: FastAPI) -> None:
    """``DELETE /sessions/{session_id}``: end a session once the request using it, if any, has
    answered (404 if it is already gone; 409 if that request outlasts ``delete_wait``)."""
    store: SessionStore = app.state.sessions
    wait = app.state.settings.delete_wait

    @app.delete("/sessions/{session_id}", response_model=Ended, responses=ERROR_RESPONSES)
    def delete_session(session_id: str) -> Any:
        try:
            store.delete(session_id, wait)
        except SessionGone as e:
            raise http_error(404, str(e)) from None
        except SessionBusy as e:
            raise http_error(409, str(e), retry_after=SessionBusy.retry_after) from None
        return {"ended": True}


def add_turn_routes(app: FastAPI, *, action_model: type[BaseModel], action_field: str,
                    step_response: type[BaseModel], feedback_response: type[BaseModel],
                    feedback: Callable[[Any, str], Any], ended_message: str,
                    submit_doc: str, feedback_doc: str) -> None:
    """``POST /sessions/{id}/submit`` and ``/feedback``, the same for every game.

    ``submit`` plays one turn (``game.step(action)``) holding the session (:func:`using_session`)
    and answers 409 once the episode has ended; ``feedback(game, action)`` answers without using
    a turn. The request model is the game's (its one text field is ``action_field``), so each
    game keeps its own field name, limits and OpenAPI schema.
    """
    store: SessionStore = app.state.sessions

    # The routes are ``async``: the session is claimed (or refused, 404/409) on the event loop
    # and only the game work goes to a worker thread, so a refusal costs no thread hop. With
    # an MCTS search holding the GIL in the request's thread, 45 submits to one busy session
    # had 38-41 refused (the rest arrived after the move) with the claim in a worker thread and
    # 43-44 with it here (3 runs each, 2-core AMD EPYC, 2026-11-25). ``to_thread.run_sync`` is
    # not abandoned on cancellation: the session is held until the game work is done.
    def step(game: Any, action: str) -> Any:
        try:
            return game.step(action)
        except GameOver:
            raise http_error(409, ended_message) from None

    async def submit(session_id: str, req: Any) -> Any:
        with using_session(store, session_id) as session:
            obs, reward, done, info = await anyio.to_thread.run_sync(
                step, session.game, getattr(req, action_field))
        return SafeJSONResponse({"observation": obs, "reward": reward, "done": done, "info": info})

    async def feedback_route(session_id: str, req: Any) -> Any:
        with using_session(store, session_id) as session:
            result = await anyio.to_thread.run_sync(feedback, session.game,
                                                    getattr(req, action_field))
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
    """``--host``, ``--port`` and the session limits."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions)
    parser.add_argument("--max-sessions-per-client", type=int,
                        default=defaults.max_sessions_per_client,
                        help="sessions one client (X-Client-Token, else address) may hold")
    parser.add_argument("--session-ttl", type=float, default=defaults.session_ttl,
                        help="seconds without a request before a session expires")
    parser.add_argument("--evict-idle-after", type=float, default=defaults.evict_idle_after,
                        help="seconds without a request before a session may be evicted to make "
                             "room (a full server answers 429 rather than evict sooner)")


def add_runtime_arguments(parser: argparse.ArgumentParser, defaults: Any) -> None:
    """Transport limits and ``--log-level``."""
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--body-timeout", type=float, default=defaults.body_timeout,
                        help="seconds to receive a request body (408 after)")
    parser.add_argument("--header-timeout", type=float, default=defaults.header_timeout,
                        help="seconds to receive a request head (the connection is closed after)")
    parser.add_argument("--max-connections", type=int, default=defaults.max_connections,
                        help="connections or requests served at once (503 beyond)")
    parser.add_argument("--log-level", default="info",
                        choices=["critical", "error", "warning", "info", "debug", "trace"])


def shared_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings keywords that :func:`add_session_arguments` and
    :func:`add_runtime_arguments` parsed."""
    return {"max_sessions": args.max_sessions,
            "max_sessions_per_client": args.max_sessions_per_client,
            "session_ttl": args.session_ttl, "evict_idle_after": args.evict_idle_after,
            "max_body_bytes": args.max_body_bytes, "body_timeout": args.body_timeout,
            "header_timeout": args.header_timeout, "max_connections": args.max_connections}

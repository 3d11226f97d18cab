"""HTTP server for the Password Game (FastAPI): sessions, stateless checks, batch scoring, the solver.

    python -m tasks.password_game.server --host 127.0.0.1 --port 8000

Interactive docs at ``/docs``; the schema at ``/openapi.json``. Every request body is validated by a
strict pydantic model and every response is described by one (responses are built by the game and
sent as they are, for speed; the tests validate them against the models). Every bad input is
answered with a 4xx and a message, never a 5xx:

===================================  ======  =======================================================
bad input                            status  answer
===================================  ======  =======================================================
unknown / deleted / expired /        404     ``{"detail": "session '...' not found: <why>"}``
evicted session id
submit to an ended episode           409     ``{"detail": "the episode has ended ..."}``
wrong type, missing field, extra     422     ``{"detail": [{"type", "loc", "msg"}, ...]}`` (pydantic;
field, seed outside [0, 2**63-1],            strict: ``"7"``, ``7.0`` and ``true`` are not seeds;
n_revealed outside [0, 26], too              inputs are never echoed back)
many batch items, password longer
than ``max_password_chars``
body that is not JSON                422     ``json_invalid``, or 400 where the JSON parser
                                             itself fails: invalid UTF-8, numbers over 4300
                                             digits, absurd nesting (the message says which)
body larger than ``max_body_bytes``  413     rejected by a middleware from Content-Length, or while
                                             streaming, before any JSON parsing
===================================  ======  =======================================================

Passwords are text: any Python ``str`` a JSON string can carry is accepted, control characters,
NUL and lone surrogates (``"\\ud800"``) included; responses that contain a lone surrogate are sent
with ASCII escapes so that they stay valid JSON and round-trip exactly.

Limits (``ServerSettings``, command-line flags): ``max_password_chars`` 4096 (code points of the
raw password, markup included), ``max_batch`` 1024 passwords, ``max_body_bytes`` 5 MiB (a full
batch of 4096-character ASCII passwords is 4.1 MiB as JSON), ``max_sessions`` 1024,
``session_ttl`` 3600 s.

Sessions live in memory: at most ``max_sessions`` (the least recently used one is evicted when a new
one needs room) and each expires after ``session_ttl`` seconds without a request. Session ids are
``secrets.token_urlsafe(16)``. Endpoints are sync (FastAPI runs them in its thread pool): the session
table has a lock, and each session's game has its own, so concurrent submits to one session
serialize.
"""

# No ``from __future__ import annotations`` here: the request models are built inside create_app
# (their limits come from the settings), and FastAPI must see real annotations on the endpoints.
import argparse
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Literal, Optional, Union

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .game import GameConfig, GameOver, PasswordGame, RewardConfig, check_password
from .instance import MAX_SEED, make_instance
from .richtext import parse
from .rules import NUM_RULES, RULE_HATCH, check_rules
from .solver import solve

logger = logging.getLogger("tasks.password_game.server")

try:
    from importlib.metadata import PackageNotFoundError, version as _pkg_version

    try:
        VERSION = _pkg_version("game-rl")
    except PackageNotFoundError:
        VERSION = "0.1.0"
except ImportError:  # pragma: no cover
    VERSION = "0.1.0"

MiB = 1 << 20


# ============================================================================ settings
@dataclass
class ServerSettings:
    """Limits of one server. The defaults are documented in PASSWORD_GAME_README.md / docs.

    ``max_body_bytes`` (5 MiB) holds a full batch (1024 passwords of 4096 ASCII characters is
    4 MiB plus JSON quoting); a batch of long non-ASCII passwords may need to be split.
    ``clock`` is the time source for idle expiry (tests inject their own).
    """

    max_sessions: int = 1024
    session_ttl: float = 3600.0
    max_password_chars: int = 4096
    max_batch: int = 1024
    max_body_bytes: int = 5 * MiB
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        if not self.session_ttl > 0:
            raise ValueError("session_ttl must be > 0")
        if self.max_password_chars < 1 or self.max_batch < 1 or self.max_body_bytes < 1024:
            raise ValueError("max_password_chars and max_batch must be >= 1, max_body_bytes >= 1024")


# ============================================================================ JSON responses
class SafeJSONResponse(JSONResponse):
    """Compact UTF-8 JSON; falls back to ASCII escapes when the content holds a lone surrogate
    (which UTF-8 cannot encode), so a password like ``"\\ud800"`` round-trips instead of a 500."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False,
                              separators=(",", ":")).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode("ascii")


def _short(text: Any, limit: int = 64) -> str:
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


class _Session:
    __slots__ = ("id", "game", "lock", "last_used")

    def __init__(self, sid: str, game: PasswordGame, now: float) -> None:
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
        self._sessions: "OrderedDict[str, _Session]" = OrderedDict()
        self._gone: "OrderedDict[str, str]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._sweep(self.clock())
            return len(self._sessions)

    def add(self, game: PasswordGame) -> _Session:
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
            session = _Session(sid, game, now)
            self._sessions[sid] = session
            return session

    def get(self, sid: str) -> _Session:
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
        return f"session {_short(sid)} not found: {why}"


# ============================================================================ API models
def _strict(extra: str = "forbid") -> ConfigDict:
    return ConfigDict(strict=True, extra=extra)


Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="instance seed, 0 .. 2**63-1",
                            strict=True)]
NRevealed = Annotated[int, Field(ge=0, le=NUM_RULES, strict=True,
                                 description=f"check rules 0 .. n_revealed-1 (0..{NUM_RULES})")]
_BOUND = 1e6
Weight = Annotated[float, Field(ge=-_BOUND, le=_BOUND, allow_inf_nan=False)]


def password_type(max_chars: int) -> Any:
    """A password: any string (control characters, NUL, lone surrogates allowed) of at most
    ``max_chars`` characters (code points of the raw text: plain characters plus markup)."""

    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        if len(value) > max_chars:
            raise PydanticCustomError(
                "string_too_long",
                "password too long: {length} characters; at most {max_chars} are allowed "
                "(max_password_chars, counting plain characters and markup)",
                {"length": len(value), "max_chars": max_chars})
        return value

    return Annotated[str, PlainValidator(check), WithJsonSchema(
        {"type": "string", "maxLength": max_chars,
         "description": "password with inline markup (**bold**, *italic*, \\* literal)"})]


class RewardModel(BaseModel):
    model_config = _strict()
    reward_per_rule: Weight = 1.0
    length_penalty: Weight = 0.01
    episode_bonus: Weight = 10.0
    bonus_min_rules: Annotated[int, Field(ge=0, le=1000)] = 5
    mode: Literal["absolute", "delta"] = "absolute"


class CreateSessionRequest(BaseModel):
    model_config = _strict()
    seed: Optional[Seed] = Field(None, description="null: a random seed")
    max_steps: Annotated[int, Field(ge=1, le=1000)] = 30
    num_rules: Annotated[int, Field(ge=1, le=NUM_RULES)] = Field(
        NUM_RULES, description="play only the first num_rules rules (shorter games, curricula)")
    reward: RewardModel = Field(default_factory=RewardModel)


class SolveRequest(BaseModel):
    model_config = _strict()
    seed: Seed
    hatched: bool = Field(True, description="Paul as 🐔 (true) or as the unhatched 🥚 (false)")


class RuleRow(BaseModel):
    id: int
    text: str
    satisfied: Optional[bool]


class Observation(BaseModel):
    seed: int
    turn: int
    max_steps: int
    num_rules: int
    num_revealed: int
    rules: list[RuleRow]
    last_password: Optional[str]
    hatched: bool
    done: bool
    success: bool
    text: str


class StepInfo(BaseModel):
    rules: list[RuleRow]
    rules_satisfied: int
    num_revealed: int
    newly_revealed: list[int]
    on_fire: bool
    success: bool
    truncated: bool
    length: int
    score: float
    turn: int
    seed: int


class SessionResponse(BaseModel):
    session_id: str
    observation: Observation


class SubmitResponse(BaseModel):
    observation: Observation
    reward: float
    done: bool
    info: StepInfo


class Feedback(BaseModel):
    rules: list[RuleRow]
    rules_satisfied: int
    all_satisfied: bool
    length: int


class SessionState(Observation):
    instance: dict[str, Any]
    score: float


class CheckResult(Feedback):
    seed: int


class BatchItem(BaseModel):
    seed: int
    satisfied: list[bool] = Field(description="verdict of rules 0 .. n_revealed-1")
    rules_satisfied: int
    all_satisfied: bool
    length: int


class BatchResponse(BaseModel):
    results: list[Union[BatchItem, CheckResult]] = Field(
        description="one per password, in order: BatchItem, or CheckResult when verbose")


class Ended(BaseModel):
    ended: bool


class Health(BaseModel):
    status: str
    sessions: int
    version: str
    limits: dict[str, Any]


class SolveResponse(BaseModel):
    seed: int
    hatched: bool
    password: str


class Detail(BaseModel):
    detail: Any


# ============================================================================ the app
def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """pydantic's errors without the offending input (it may be a megabyte) or odd context."""
    out = []
    for err in exc.errors():
        msg = str(err.get("msg", "invalid input"))
        ctx = err.get("ctx") or {}
        if err.get("type") == "json_invalid" and "error" in ctx:
            msg = f"{msg}: {ctx['error']}"
        loc = [part if isinstance(part, int) else _short(part, 80).strip("'\"")
               for part in err.get("loc", ())]
        out.append({"type": str(err.get("type", "value_error")), "loc": loc, "msg": msg})
    return out


def create_app(settings: Optional[ServerSettings] = None) -> FastAPI:
    """A new app with its own session table (``create_app()`` is what ``app`` is)."""
    settings = settings or ServerSettings()
    store = SessionStore(settings.max_sessions, settings.session_ttl, settings.clock)
    Password = password_type(settings.max_password_chars)

    class PasswordRequest(BaseModel):
        model_config = _strict()
        password: Password  # type: ignore[valid-type]

    class CheckRequest(BaseModel):
        model_config = _strict()
        seed: Seed
        password: Password  # type: ignore[valid-type]
        n_revealed: NRevealed = NUM_RULES

    class BatchRequest(BaseModel):
        model_config = _strict()
        passwords: list[Password] = Field(  # type: ignore[valid-type]
            max_length=settings.max_batch, description=f"at most {settings.max_batch}")
        seed: Optional[Seed] = Field(None, description="one seed for every password, or ...")
        seeds: Optional[list[Seed]] = Field(None, max_length=settings.max_batch,
                                            description="... one seed per password")
        n_revealed: NRevealed = NUM_RULES
        verbose: bool = Field(False, description="full check results with rule texts "
                                                 "(as /check) instead of bare verdicts")

    app = FastAPI(
        title="Password Game",
        version=VERSION,
        description=(__doc__ or "").split("\n\n")[0],
        default_response_class=SafeJSONResponse,
    )
    app.state.settings = settings
    app.state.sessions = store
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return SafeJSONResponse({"detail": _validation_errors(exc)}, status_code=422)

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
        # Last resort only: every known bad input is validated above and answered with a 4xx.
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return SafeJSONResponse({"detail": "internal server error"}, status_code=500)

    def lookup(sid: str) -> _Session:
        try:
            return store.get(sid)
        except SessionGone as e:
            raise _http(404, str(e)) from None

    errors: dict[Union[int, str], dict[str, Any]] = {
        404: {"model": Detail, "description": "unknown, deleted, expired or evicted session"},
        413: {"model": Detail, "description": "request body over max_body_bytes"},
        422: {"model": Detail, "description": "invalid request (pydantic errors)"},
    }

    @app.get("/health", response_model=Health)
    def health() -> Any:
        return {"status": "ok", "sessions": len(store), "version": VERSION,
                "limits": {"max_sessions": settings.max_sessions,
                           "session_ttl": settings.session_ttl,
                           "max_password_chars": settings.max_password_chars,
                           "max_batch": settings.max_batch,
                           "max_body_bytes": settings.max_body_bytes}}

    @app.post("/sessions", response_model=SessionResponse, responses=errors)
    def create_session(req: Optional[CreateSessionRequest] = None) -> Any:
        """Start an episode (``reset``). No body: a random seed and the default config."""
        req = req or CreateSessionRequest()
        config = GameConfig(max_steps=req.max_steps, num_rules=req.num_rules,
                            reward=RewardConfig(**req.reward.model_dump()))
        game = PasswordGame(config)
        observation = game.reset(req.seed)  # builds the instance outside any lock
        session = store.add(game)
        return SafeJSONResponse({"session_id": session.id, "observation": observation})

    @app.post("/sessions/{session_id}/submit", response_model=SubmitResponse,
              responses={**errors, 409: {"model": Detail, "description": "the episode has ended"}})
    def submit(session_id: str, req: PasswordRequest) -> Any:
        """One turn (``step``): check the revealed rules, reveal the next ones, pay the reward."""
        session = lookup(session_id)
        with session.lock:
            try:
                obs, reward, done, info = session.game.step(req.password)
            except GameOver:
                raise _http(409, "the episode has ended (success or max_steps reached); start a "
                                 "new one with POST /sessions") from None
        return SafeJSONResponse({"observation": obs, "reward": reward, "done": done, "info": info})

    @app.post("/sessions/{session_id}/feedback", response_model=Feedback, responses=errors)
    def feedback(session_id: str, req: PasswordRequest) -> Any:
        """Verdicts of the revealed rules for a password; uses no turn, reveals nothing."""
        session = lookup(session_id)
        with session.lock:
            result = session.game.feedback(req.password)
        return SafeJSONResponse(result)

    @app.get("/sessions/{session_id}", response_model=SessionState, responses=errors)
    def get_state(session_id: str) -> Any:
        """The observation plus the instance's data and the last score (debugging)."""
        session = lookup(session_id)
        with session.lock:
            state = session.game.state()
        return SafeJSONResponse(state)

    @app.delete("/sessions/{session_id}", response_model=Ended, responses=errors)
    def delete_session(session_id: str) -> Any:
        try:
            store.delete(session_id)
        except SessionGone as e:
            raise _http(404, str(e)) from None
        return {"ended": True}

    @app.post("/check", response_model=CheckResult, responses=errors)
    def check(req: CheckRequest) -> Any:
        """Stateless: a password against rules 0 .. n_revealed-1 of instance ``seed``."""
        return SafeJSONResponse(check_password(req.password, req.seed, req.n_revealed))

    @app.post("/check/batch", response_model=BatchResponse, responses=errors)
    def check_batch(req: BatchRequest) -> Any:
        """Many stateless checks in one request (rollout scoring): give ``seed`` (one for all) or
        ``seeds`` (one per password)."""
        passwords = req.passwords
        if (req.seed is None) == (req.seeds is None):
            raise _http(422, "give exactly one of 'seed' (for every password) or 'seeds' "
                             "(one per password)")
        if req.seeds is not None and len(req.seeds) != len(passwords):
            raise _http(422, f"'seeds' has {len(req.seeds)} items but 'passwords' has "
                             f"{len(passwords)}; they must match")
        seeds = req.seeds if req.seeds is not None else [req.seed] * len(passwords)
        n = req.n_revealed
        if req.verbose:
            results = [check_password(pw, s, n) for s, pw in zip(seeds, passwords)]
            return SafeJSONResponse({"results": results})
        hatched = n > RULE_HATCH
        instances: dict[int, Any] = {}
        results = []
        append = results.append
        for s, pw in zip(seeds, passwords):
            inst = instances.get(s)
            if inst is None:
                inst = instances[s] = make_instance(s)
            parsed = parse(pw)
            verdicts = check_rules(parsed, inst, n, hatched)
            n_ok = sum(verdicts)
            append({"seed": s, "satisfied": verdicts, "rules_satisfied": n_ok,
                    "all_satisfied": n_ok == n, "length": len(parsed.plain)})
        return SafeJSONResponse({"results": results})

    @app.post("/solve", response_model=SolveResponse, responses=errors)
    def solve_endpoint(req: SolveRequest) -> Any:
        """The constructive solver's password for instance ``seed`` (demos, upper bounds)."""
        return {"seed": req.seed, "hatched": req.hatched,
                "password": solve(make_instance(req.seed), hatched=req.hatched)}

    return app


def _http(status: int, detail: str) -> HTTPException:
    return HTTPException(status_code=status, detail=detail)


app = create_app()


# ============================================================================ command line
def main(argv: Optional[list[str]] = None) -> None:
    defaults = ServerSettings()
    parser = argparse.ArgumentParser(prog="python -m tasks.password_game.server",
                                     description="Serve the Password Game over HTTP.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions)
    parser.add_argument("--session-ttl", type=float, default=defaults.session_ttl,
                        help="seconds without a request before a session expires")
    parser.add_argument("--max-password-chars", type=int, default=defaults.max_password_chars)
    parser.add_argument("--max-batch", type=int, default=defaults.max_batch)
    parser.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    parser.add_argument("--log-level", default="info",
                        choices=["critical", "error", "warning", "info", "debug", "trace"])
    args = parser.parse_args(argv)
    try:
        settings = ServerSettings(max_sessions=args.max_sessions, session_ttl=args.session_ttl,
                                  max_password_chars=args.max_password_chars,
                                  max_batch=args.max_batch, max_body_bytes=args.max_body_bytes)
    except ValueError as e:
        parser.error(str(e))
    import uvicorn

    logging.basicConfig(level=args.log_level.upper() if args.log_level != "trace" else "DEBUG")
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
                access_log=args.log_level in ("info", "debug", "trace"))


if __name__ == "__main__":
    main()

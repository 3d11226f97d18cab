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
session busy with another request    409     at once, with ``Retry-After: 1``
no room for a new session (this      429     with ``Retry-After``; an active game is never
client's quota or the server's cap)          evicted to make room
wrong type, missing field, extra     422     ``{"detail": [{"type", "loc", "msg"}, ...]}`` (pydantic;
field, seed outside [0, 2**63-1],            strict: ``"7"``, ``7.0`` and ``true`` are not seeds;
n_revealed outside [0, 26], too              inputs are never echoed back)
many batch items, password longer
than ``max_password_chars``
body that is not JSON                422     ``json_invalid``, or 400 where the JSON parser
                                             itself fails: invalid UTF-8 (CESU-8 surrogates
                                             too), numbers over 4300 digits, absurd nesting
body slower than ``body_timeout``    408     and the connection is closed
body larger than ``max_body_bytes``  413     rejected by a middleware from Content-Length, or while
                                             streaming, before any JSON parsing
===================================  ======  =======================================================

Passwords are text: any Python ``str`` a JSON string can carry is accepted, control characters,
NUL and lone surrogates (``"\\ud800"``) included; responses that contain a lone surrogate are sent
with ASCII escapes so that they stay valid JSON and round-trip exactly.

Passwords are read as a person sees them (``tasks.password_game.text``: invisible characters
removed, spaces unified, NFC) before any rule looks at them.

Limits (``ServerSettings``, command-line flags): ``max_password_chars`` 4096 (code points of the
raw password, markup included), ``max_batch`` 1024 passwords, ``max_body_bytes`` 5 MiB (a full
batch of 4096-character ASCII passwords is 4.1 MiB as JSON), and the shared ones of
``tasks.common.server`` (sessions: 1024 in all, 256 per client, expiry after 3600 s idle,
eviction only after 300 s idle, else 429; one request at a time per session, else 409 at once;
DELETE waits for the request in flight; body, head and connection limits). Endpoints are sync
(FastAPI runs them in its thread pool); ``/health`` is async.

The game-agnostic parts (middleware, session store, error handlers, JSON responses, command-line
flags) live in ``tasks.common.server``; this module adds the Password Game's endpoints.
"""

# No ``from __future__ import annotations`` here: the request models are built inside create_app
# (their limits come from the settings), and FastAPI must see real annotations on the endpoints.
import argparse
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field

from ..common.server import (VERSION, BaseServerSettings, BodySizeLimitMiddleware,  # noqa: F401
                             Detail, Ended, EPISODE_OVER_RESPONSE, ERROR_RESPONSES, Health, MiB,
                             NEW_SESSION_RESPONSES, SafeJSONResponse, Seed, Session, SessionGone,
                             SessionStore, Weight, add_delete_session_route, add_health_route,
                             add_runtime_arguments, add_session_arguments, add_turn_routes,
                             check_session_limits, create_base_app, lookup_session, new_session,
                             request_model_of, serve, shared_settings, strict, text_type,
                             using_session)
from ..common.server import http_error as _http  # noqa: F401
from ..common.server import short as _short  # noqa: F401
from ..common.server import strict as _strict  # noqa: F401
from ..common.server import validation_errors as _validation_errors  # noqa: F401
from .game import GameConfig, PasswordGame, RewardConfig, check_password
from .instance import MAX_SEED, make_instance  # noqa: F401
from .richtext import parse
from .rules import NUM_RULES, RULE_HATCH, check_rules
from .solver import solve

logger = logging.getLogger("tasks.password_game.server")
_Session = Session  # the old name


# ============================================================================ settings
@dataclass
class ServerSettings(BaseServerSettings):
    """The shared limits (sessions, quotas, timeouts: ``BaseServerSettings``) plus
    ``max_password_chars`` and ``max_batch``. The defaults are documented in
    PASSWORD_GAME_README.md.

    ``max_body_bytes`` (5 MiB) holds a full batch (1024 passwords of 4096 ASCII characters is
    4 MiB plus JSON quoting); a batch of long non-ASCII passwords may need to be split.
    """

    max_password_chars: int = 4096
    max_batch: int = 1024
    max_body_bytes: int = 5 * MiB

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_password_chars < 1 or self.max_batch < 1:
            raise ValueError("max_password_chars and max_batch must be >= 1")


# ============================================================================ API models
NRevealed = Annotated[int, Field(ge=0, le=NUM_RULES, strict=True,
                                 description=f"check rules 0 .. n_revealed-1 (0..{NUM_RULES})")]


def password_type(max_chars: int) -> Any:
    """A password: any string (control characters, NUL, lone surrogates allowed) of at most
    ``max_chars`` characters (code points of the raw text: plain characters plus markup)."""
    return text_type(
        max_chars,
        too_long="password too long: {length} characters; at most {max_chars} are allowed "
                 "(max_password_chars, counting plain characters and markup)",
        description="password with inline markup (**bold**, *italic*, \\* literal)")


# The request's reward settings are the game's RewardConfig, field for field (its docstring says
# what each pays).
RewardModel = request_model_of(
    RewardConfig, Weight, name="RewardModel", module=__name__,
    types={"bonus_min_rules": Annotated[int, Field(ge=0, le=1000)],
           "mode": Literal["absolute", "delta"]})


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


class SolveResponse(BaseModel):
    seed: int
    hatched: bool
    password: str


# ============================================================================ the app
def create_app(settings: Optional[ServerSettings] = None) -> FastAPI:
    """A new app with its own session table (``create_app()`` is what ``app`` is)."""
    settings = settings or ServerSettings()
    Password = password_type(settings.max_password_chars)

    class PasswordRequest(BaseModel):
        model_config = strict()
        password: Password  # type: ignore[valid-type]

    class CheckRequest(BaseModel):
        model_config = strict()
        seed: Seed
        password: Password  # type: ignore[valid-type]
        n_revealed: NRevealed = NUM_RULES

    class BatchRequest(BaseModel):
        model_config = strict()
        passwords: list[Password] = Field(  # type: ignore[valid-type]
            max_length=settings.max_batch, description=f"at most {settings.max_batch}")
        seed: Optional[Seed] = Field(None, description="one seed for every password, or ...")
        seeds: Optional[list[Seed]] = Field(None, max_length=settings.max_batch,
                                            description="... one seed per password")
        n_revealed: NRevealed = NUM_RULES
        verbose: bool = Field(False, description="full check results with rule texts "
                                                 "(as /check) instead of bare verdicts")

    app = create_base_app(settings, title="Password Game",
                          description=(__doc__ or "").split("\n\n")[0], logger=logger)
    store: SessionStore = app.state.sessions

    errors = ERROR_RESPONSES

    add_health_route(app, lambda: {"max_password_chars": settings.max_password_chars,
                                   "max_batch": settings.max_batch})

    @app.post("/sessions", response_model=SessionResponse, responses=NEW_SESSION_RESPONSES)
    def create_session(request: Request, req: Optional[CreateSessionRequest] = None) -> Any:
        """Start an episode (``reset``). No body: a random seed and the default config."""
        req = req or CreateSessionRequest()

        def make() -> Any:
            config = GameConfig(max_steps=req.max_steps, num_rules=req.num_rules,
                                reward=RewardConfig(**req.reward.model_dump()))
            game = PasswordGame(config)
            return game, game.reset(req.seed)  # builds the instance outside any lock

        return new_session(store, request, make)

    add_turn_routes(
        app, action_model=PasswordRequest, action_field="password", step_response=SubmitResponse,
        feedback_response=Feedback, feedback=lambda game, password: game.feedback(password),
        ended_message="the episode has ended (success or max_steps reached); start a new one "
                      "with POST /sessions",
        submit_doc="One turn (``step``): check the revealed rules, reveal the next ones, pay the "
                   "reward.",
        feedback_doc="Verdicts of the revealed rules for a password; uses no turn, reveals "
                     "nothing.")

    @app.get("/sessions/{session_id}", response_model=SessionState, responses=errors)
    def get_state(session_id: str) -> Any:
        """The observation plus the instance's data and the last score (debugging)."""
        with using_session(store, session_id) as session:
            state = session.game.state()
        return SafeJSONResponse(state)

    add_delete_session_route(app)

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
        """The constructive solver's password for instance ``seed`` (demos, the evaluations'
        reference row)."""
        return {"seed": req.seed, "hatched": req.hatched,
                "password": solve(make_instance(req.seed), hatched=req.hatched)}

    return app


app = create_app()


# ============================================================================ command line
def main(argv: Optional[list[str]] = None) -> None:
    defaults = ServerSettings()
    parser = argparse.ArgumentParser(prog="python -m tasks.password_game.server",
                                     description="Serve the Password Game over HTTP.")
    add_session_arguments(parser, defaults, port=8000)
    parser.add_argument("--max-password-chars", type=int, default=defaults.max_password_chars)
    parser.add_argument("--max-batch", type=int, default=defaults.max_batch)
    add_runtime_arguments(parser, defaults)
    args = parser.parse_args(argv)
    try:
        settings = ServerSettings(max_password_chars=args.max_password_chars,
                                  max_batch=args.max_batch, **shared_settings(args))
    except ValueError as e:
        parser.error(str(e))
    serve(create_app(settings), args)


if __name__ == "__main__":
    main()

"""HTTP server for Wordle (FastAPI): sessions, stateless marks, the solver.

    python -m tasks.wordle.server --host 127.0.0.1 --port 8001

Responses are built by the game and sent as they are (the tests validate them against the
response models). Interactive docs at ``/docs``; the schema at ``/openapi.json``. Built on the shared scaffolding in
``tasks.common.server`` (strict request models, body limits and deadlines, session store with idle
expiry, per-client quotas and 429 instead of evicting active games, one request at a time per
session, 4xx for every bad input, never a 5xx); this module adds only Wordle's endpoints:

==============================  =============================================================
``GET /health``                 status, live sessions, version, limits
``POST /sessions``              start an episode: ``{seed?, answer?, max_guesses, hard_mode,
                                reward}`` (no body: a random seed, defaults)
``POST /sessions/{id}/submit``  one turn: ``{guess}`` -> ``{observation, reward, done, info}``
``POST /sessions/{id}/feedback`` would ``{guess}`` be accepted now? (no turn used, no marks)
``GET /sessions/{id}``          observation + answer + reward so far (debugging)
``DELETE /sessions/{id}``       end the session
``POST /feedback``              stateless marks: ``{answer, guess}`` -> ``{marks, pattern, code}``
``POST /solve``                 the solver's guesses: ``{seed}`` or ``{answer}``
==============================  =============================================================

A guess that is not a valid word is a wasted turn (200, with the reason in ``info.message``), as
in the game; only requests that are malformed get a 4xx:

===================================  ======  ==================================================
bad input                            status  answer
===================================  ======  ==================================================
unknown / deleted / expired /        404     ``{"detail": "session '...' not found: <why>"}``
evicted session id
submit to an ended episode           409     ``{"detail": "the episode has ended ..."}``
wrong type, missing or extra field,  422     pydantic's errors (strict: ``"7"``, ``7.0`` and
seed outside [0, 2**63-1], guess or          ``true`` are not seeds; inputs never echoed)
answer longer than
``max_guess_chars``, max_guesses
outside [1, 100], negative reward
weight, answer not one of the
answers, /feedback guess not a
valid word, /solve without exactly
one of seed and answer
body that is not JSON                422     or 400 where the JSON parser itself fails
body larger than ``max_body_bytes``  413     before any parsing
===================================  ======  ==================================================

Limits (``WordleServerSettings``, command-line flags): ``max_guess_chars`` 64, ``max_body_bytes``
64 KiB, and the shared session, quota and transport limits of ``tasks.common.server``.
"""

# No ``from __future__ import annotations``: FastAPI must see real annotations on the endpoints.
import argparse
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Optional

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field

from ..common.server import (ERROR_RESPONSES, NEW_SESSION_RESPONSES, BaseServerSettings,
                             SafeJSONResponse, Seed, SessionStore, add_delete_session_route,
                             add_health_route, add_runtime_arguments, add_session_arguments,
                             add_turn_routes, create_base_app, http_error, new_session, serve,
                             request_model_of, shared_settings, strict, text_type,
                             using_session)
from .game import (RewardConfig, WordleConfig, WordleGame, check_guess, make_instance,
                   normalize_guess)
from .words import answer_index, emoji, is_ascii_lower, pattern_code, score_guess

logger = logging.getLogger("tasks.wordle.server")


@dataclass
class WordleServerSettings(BaseServerSettings):
    """The shared limits plus ``max_guess_chars`` (a longer guess or answer is a 422)."""

    max_body_bytes: int = 64 * 1024
    max_guess_chars: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_guess_chars < 5:
            raise ValueError("max_guess_chars must be >= 5")


# ============================================================================ API models
NonNegative = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]


# The request's reward settings are the game's RewardConfig, field for field (its docstring says
# what each pays); a weight here may not be negative.
RewardModel = request_model_of(RewardConfig, NonNegative, name="RewardModel", module=__name__)


class Attempt(BaseModel):
    guess: str
    valid: bool
    message: Optional[str]


class Observation(BaseModel):
    seed: Optional[int]
    turn: int
    max_guesses: int
    guesses_left: int
    guesses: list[str]
    marks: list[list[str]]
    attempts: list[Attempt]
    letters: dict[str, str]
    hard_mode: bool
    done: bool
    success: bool
    answer: Optional[str]
    text: str


class StepInfo(BaseModel):
    guess: str
    valid: bool
    message: Optional[str]
    marks: Optional[list[str]]
    pattern: Optional[str]
    repeated: bool
    new_greens: int
    new_letters: int
    win_reward: float
    success: bool
    turn: int
    guesses_left: int
    seed: Optional[int]
    answer: Optional[str]


class SessionResponse(BaseModel):
    session_id: str
    observation: Observation


class SubmitResponse(BaseModel):
    observation: Observation
    reward: float
    done: bool
    info: StepInfo


class GuessCheck(BaseModel):
    guess: str
    valid: bool
    message: Optional[str]
    repeated: bool


class SessionState(Observation):
    total_reward: float


class FeedbackResponse(BaseModel):
    answer: str
    guess: str
    marks: list[str]
    pattern: str
    code: int = Field(description="base 3: position i adds 3**i × (0 grey, 1 yellow, 2 green)")


class SolveResponse(BaseModel):
    seed: Optional[int]
    answer: str
    guesses: list[str]
    num_guesses: int


def _answer_problem(text: str) -> Optional[str]:
    word = normalize_guess(text)
    if word not in answer_index():
        return f"answer {text[:24]!r} is not one of the {len(answer_index())} Wordle answers"
    return None


# ============================================================================ the app
def create_app(settings: Optional[WordleServerSettings] = None) -> FastAPI:
    """A new app with its own session table (``create_app()`` is what ``app`` is)."""
    settings = settings or WordleServerSettings()
    Word = text_type(settings.max_guess_chars,
                     too_long="too long: {length} characters; at most {max_chars} are allowed "
                              "(max_guess_chars)",
                     description="a 5-letter word (case and surrounding whitespace ignored)")

    class CreateSessionRequest(BaseModel):
        model_config = strict()
        seed: Optional[Seed] = Field(None, description="null (and no answer): a random seed")
        answer: Optional[Word] = Field(  # type: ignore[valid-type]
            None, description="play this answer (one of the answers) instead of a seed's")
        max_guesses: Annotated[int, Field(ge=1, le=100)] = 6
        hard_mode: bool = False
        reward: RewardModel = Field(default_factory=RewardModel)

    class GuessRequest(BaseModel):
        model_config = strict()
        guess: Word  # type: ignore[valid-type]

    class FeedbackRequest(BaseModel):
        model_config = strict()
        answer: Word  # type: ignore[valid-type]
        guess: Word  # type: ignore[valid-type]

    class SolveRequest(BaseModel):
        model_config = strict()
        seed: Optional[Seed] = None
        answer: Optional[Word] = None  # type: ignore[valid-type]

    app = create_base_app(settings, title="Wordle", description=(__doc__ or "").split("\n\n")[0],
                          logger=logger)
    store: SessionStore = app.state.sessions
    errors = ERROR_RESPONSES

    add_health_route(app, lambda: {"max_guess_chars": settings.max_guess_chars})

    @app.post("/sessions", response_model=SessionResponse, responses=NEW_SESSION_RESPONSES)
    def create_session(request: Request, req: Optional[CreateSessionRequest] = None) -> Any:
        """Start an episode (``reset``). No body: a random seed and the default config."""
        req = req or CreateSessionRequest()
        if req.answer is not None:
            if req.seed is not None:
                raise http_error(422, "give a seed or an answer, not both")
            problem = _answer_problem(req.answer)
            if problem:
                raise http_error(422, problem)

        def make() -> Any:
            config = WordleConfig(max_guesses=req.max_guesses, hard_mode=req.hard_mode,
                                  reward=RewardConfig(**req.reward.model_dump()))
            game = WordleGame(config)
            return game, game.reset(req.seed, answer=req.answer)

        return new_session(store, request, make)

    add_turn_routes(
        app, action_model=GuessRequest, action_field="guess", step_response=SubmitResponse,
        feedback_response=GuessCheck, feedback=lambda game, guess: game.check(guess),
        ended_message="the episode has ended (solved or out of guesses); start a new one with "
                      "POST /sessions",
        submit_doc="One turn (``step``). An invalid word is a wasted turn (200, ``info.message``).",
        feedback_doc="Would this guess be accepted now (valid word, hard mode respected)? Uses no "
                     "turn and\n        reveals no marks.")

    @app.get("/sessions/{session_id}", response_model=SessionState, responses=errors)
    def get_state(session_id: str) -> Any:
        """The observation plus the answer and the reward so far (debugging)."""
        with using_session(store, session_id) as session:
            state = session.game.state()
        return SafeJSONResponse(state)

    add_delete_session_route(app)

    @app.post("/feedback", response_model=FeedbackResponse, responses=errors)
    def stateless_feedback(req: FeedbackRequest) -> Any:
        """Stateless: the marks of ``guess`` (a valid word) against ``answer`` (any 5 letters
        a-z)."""
        answer, guess = normalize_guess(req.answer), normalize_guess(req.guess)
        if len(answer) != 5 or not is_ascii_lower(answer):
            raise http_error(422, f"answer {req.answer[:24]!r} is not a 5-letter word (a-z)")
        problem = check_guess(guess)
        if problem:
            raise http_error(422, f"guess: {problem}")
        marks = score_guess(answer, guess)
        return {"answer": answer, "guess": guess, "marks": marks, "pattern": emoji(marks),
                "code": pattern_code(marks)}

    @app.post("/solve", response_model=SolveResponse, responses=errors)
    def solve_endpoint(req: SolveRequest) -> Any:
        """The entropy solver's guesses for instance ``seed`` or for ``answer`` (exactly one),
        ending with the answer."""
        from .solver import solve  # numpy and the pattern table load on first use

        if (req.seed is None) == (req.answer is None):
            raise http_error(422, "give exactly one of 'seed' and 'answer'")
        if req.answer is not None:
            problem = _answer_problem(req.answer)
            if problem:
                raise http_error(422, problem)
            seed, answer = None, normalize_guess(req.answer)
        else:
            seed, answer = req.seed, make_instance(req.seed).answer
        guesses = solve(answer)
        return {"seed": seed, "answer": answer, "guesses": guesses, "num_guesses": len(guesses)}

    return app


app = create_app()


# ============================================================================ command line
def main(argv: Optional[list[str]] = None) -> None:
    defaults = WordleServerSettings()
    parser = argparse.ArgumentParser(prog="python -m tasks.wordle.server",
                                     description="Serve Wordle over HTTP.")
    add_session_arguments(parser, defaults, port=8001)
    parser.add_argument("--max-guess-chars", type=int, default=defaults.max_guess_chars)
    add_runtime_arguments(parser, defaults)
    args = parser.parse_args(argv)
    try:
        settings = WordleServerSettings(max_guess_chars=args.max_guess_chars,
                                        **shared_settings(args))
    except ValueError as e:
        parser.error(str(e))
    serve(create_app(settings), args)


if __name__ == "__main__":
    main()

"""HTTP server for the OpenSpiel games (FastAPI): sessions over the same game objects as the local env.

    python -m tasks.openspiel.server --host 127.0.0.1 --port 8002

Endpoints (interactive docs at ``/docs``):

==============================  =============================================================
``GET /health``                 status, live sessions, version, limits
``GET /games``                  the supported games (name, title, difficulty, rules, params)
``POST /sessions``              start an episode: ``{"game", "seed", "model_seat", "opponent",
                                "mcts_simulations", "mcts_uct_c", "mcts_rollouts",
                                "illegal_move_policy", "max_illegal_retries", "reward"}`` (all
                                optional; defaults as ``OpenSpielGame``) ->
                                ``{"session_id", "observation"}``
``POST /sessions/{id}/submit``  ``{"move": text}`` -> ``{"observation", "reward", "done",
                                "info"}`` (one answer of the model; illegal answers are
                                answered in ``info``, never with an error)
``POST /sessions/{id}/feedback``  ``{"move": text}`` -> would it be read as a legal move now?
``GET /sessions/{id}``          observation + config + the omniscient state (debugging)
``DELETE /sessions/{id}``       end the session
==============================  =============================================================

Bad requests are 4xx, never 5xx (the scaffolding in ``tasks.common.server``): an unknown game is
422 with the list of supported games; wrong types, extra fields, out-of-range settings or a move
longer than ``max_move_chars`` are 422; an unknown / deleted / expired / evicted session is 404;
a submission after the game ended is 409; a body over ``max_body_bytes`` is 413.

Limits (``ServerSettings`` and flags): ``max_move_chars`` 4096; the MCTS opponent searches
inside the request, so its budget has a ceiling: ``max_mcts_simulations`` 1000 and
``max_mcts_playouts`` 1000 (``mcts_simulations * mcts_rollouts``; 1.3-3.0 s for the costliest
game, Othello, on 2 shared vCPUs; docs/reliability.md), over which a new session is 422. The
shared limits (sessions, per-client quota, 429/409 behaviour, timeouts, ``max_body_bytes``
1 MiB) are those of ``tasks.common.server``.
"""

# No ``from __future__ import annotations``: FastAPI must see real annotations on the endpoints.
import argparse
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field, field_validator, model_validator

from ..common.server import (ERROR_RESPONSES, NEW_SESSION_RESPONSES, BaseServerSettings,
                             SafeJSONResponse, Seed, SessionStore, Weight,
                             add_delete_session_route, add_health_route, add_runtime_arguments,
                             add_session_arguments, add_turn_routes, create_base_app, new_session,
                             request_model_of, serve, shared_settings, strict, text_type,
                             using_session)
from .game import OpenSpielGame, RewardConfig
from .games import GAMES, list_games

logger = logging.getLogger("tasks.openspiel.server")


@dataclass
class ServerSettings(BaseServerSettings):
    """The shared limits plus ``max_move_chars`` and the MCTS ceiling.

    The MCTS opponent searches inside a request, holding a worker thread: one search costs about
    ``mcts_simulations * mcts_rollouts`` random playouts, 0.2 ms (tic-tac-toe) to 2.1 ms
    (Othello, the costliest) each (``MCTSBot.step`` from the opening, 300 simulations, on the
    shared 2-vCPU VM, 2026-11-23). The old ceiling (5000 simulations x 100 rollouts) let one
    request run for minutes; ``max_mcts_playouts`` 1000 keeps the costliest search at 1.3-3.0 s
    there (docs/reliability.md). ``python -m tasks.openspiel.server`` runs the searches in
    ``search_processes`` worker processes (0: in the request's thread), so that a search never
    holds the GIL the event loop needs (``tasks.openspiel.bots``).
    """

    max_move_chars: int = 4096
    max_mcts_simulations: int = 1000
    max_mcts_playouts: int = 1000
    search_processes: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.max_move_chars, self.max_mcts_simulations, self.max_mcts_playouts) < 1:
            raise ValueError("max_move_chars, max_mcts_simulations and max_mcts_playouts must "
                             "be >= 1")
        if self.search_processes < 0:
            raise ValueError("search_processes must be >= 0")


# ============================================================================ API models
Seat = Union[Annotated[int, Field(ge=0, le=1, strict=True)], Literal["random"]]


# The request's reward settings are the game's RewardConfig, field for field (its docstring says
# what each pays).
RewardModel = request_model_of(
    RewardConfig, Weight, name="RewardModel", module=__name__,
    types={"scale": Annotated[Optional[Weight],
                              Field(description="null: the game's reward_scale")]})


class GameRow(BaseModel):
    name: str
    openspiel_name: str
    title: str
    difficulty: str
    params: dict[str, Any]
    players: int
    seats: list[str]
    perfect_information: bool
    reward_scale: float
    rules: str


class GamesResponse(BaseModel):
    games: list[GameRow]


class HistoryRow(BaseModel):
    player: int
    move: str
    by: str


class Observation(BaseModel):
    game: str
    seed: int
    player: int
    turn: int
    done: bool
    board: str
    history: list[HistoryRow]
    legal_moves: list[str]
    legal_actions: list[int]
    retries_left: int
    last_illegal: Optional[dict[str, Any]]
    outcome: Optional[str]
    returns: Optional[list[float]]
    text: str


class StepInfo(BaseModel):
    turn: int
    answer: str
    illegal_move: bool
    reason: Optional[str]
    matched_by: Optional[str]
    move: Optional[str]
    action: Optional[int]
    forced_random: bool
    forfeit: bool
    opponent_moves: list[str]
    penalty: float
    retries_left: int
    done: bool
    outcome: Optional[str]
    returns: Optional[list[float]]
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
    legal: bool
    move: Optional[str]
    action: Optional[int]
    matched_by: Optional[str]
    reason: Optional[str]


class SessionState(Observation):
    config: dict[str, Any]
    state_string: str
    actions: list[int]


# ============================================================================ the app
def create_app(settings: Optional[ServerSettings] = None,
               search_pool: Optional[Executor] = None) -> FastAPI:
    """A new app with its own session table (``create_app()`` is what ``app`` is); its MCTS
    searches run in ``search_pool``'s processes if one is given, else in the request's thread."""
    settings = settings or ServerSettings()
    Move = text_type(settings.max_move_chars,
                     too_long="move too long: {length} characters; at most {max_chars} are "
                              "allowed (max_move_chars)",
                     description="the model's answer: a move name, as listed in legal_moves")

    class CreateSessionRequest(BaseModel):
        model_config = strict()
        game: Annotated[str, Field(max_length=64)] = Field(
            "tic_tac_toe", description=f"one of: {', '.join(GAMES)}")
        seed: Optional[Seed] = Field(None, description="null: a random seed")
        model_seat: Seat = Field(0, description="0, 1 or 'random' (drawn from the seed)")
        opponent: Literal["random", "mcts"] = "random"
        mcts_simulations: Annotated[int, Field(ge=1, le=settings.max_mcts_simulations)] = 200
        mcts_uct_c: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] = 2.0
        mcts_rollouts: Annotated[int, Field(ge=1, le=100)] = 1
        illegal_move_policy: Literal["retry", "random", "loss"] = "retry"
        max_illegal_retries: Annotated[int, Field(ge=0, le=100)] = 2
        reward: RewardModel = Field(default_factory=RewardModel)

        @field_validator("game")
        @classmethod
        def known_game(cls, value: str) -> str:
            if value not in GAMES:
                raise ValueError(f"unknown game; supported games: {', '.join(GAMES)}")
            return value

        @model_validator(mode="after")
        def search_fits_the_ceiling(self) -> "CreateSessionRequest":
            playouts = self.mcts_simulations * self.mcts_rollouts
            if self.opponent == "mcts" and playouts > settings.max_mcts_playouts:
                raise ValueError(
                    f"mcts_simulations x mcts_rollouts = {playouts} random playouts per move is "
                    f"over max_mcts_playouts ({settings.max_mcts_playouts}), which keeps one "
                    f"request under a few seconds")
            return self

    class MoveRequest(BaseModel):
        model_config = strict()
        move: Move  # type: ignore[valid-type]

    app = create_base_app(settings, title="OpenSpiel games",
                          description=(__doc__ or "").split("\n\n")[0], logger=logger)
    store: SessionStore = app.state.sessions
    errors = ERROR_RESPONSES

    add_health_route(app, lambda: {"max_move_chars": settings.max_move_chars,
                                   "max_mcts_simulations": settings.max_mcts_simulations,
                                   "max_mcts_playouts": settings.max_mcts_playouts,
                                   "search_processes": settings.search_processes})

    @app.get("/games", response_model=GamesResponse)
    def games() -> Any:
        """The supported games."""
        return SafeJSONResponse({"games": list_games()})

    @app.post("/sessions", response_model=SessionResponse, responses=NEW_SESSION_RESPONSES)
    def create_session(request: Request, req: Optional[CreateSessionRequest] = None) -> Any:
        """Start an episode (``reset``); the opponent moves first if the model is seat 1."""
        req = req or CreateSessionRequest()

        def make() -> Any:
            game = OpenSpielGame(req.game, model_seat=req.model_seat, opponent=req.opponent,
                                 mcts_simulations=req.mcts_simulations,
                                 mcts_uct_c=req.mcts_uct_c, mcts_rollouts=req.mcts_rollouts,
                                 illegal_move_policy=req.illegal_move_policy,
                                 max_illegal_retries=req.max_illegal_retries,
                                 reward=RewardConfig(**req.reward.model_dump()),
                                 search_pool=search_pool)
            return game, game.reset(req.seed)

        return new_session(store, request, make)

    add_turn_routes(
        app, action_model=MoveRequest, action_field="move", step_response=SubmitResponse,
        feedback_response=Feedback, feedback=lambda game, move: game.feedback(move),
        ended_message="the game has ended; start a new one with POST /sessions",
        submit_doc="One answer of the model (``step``); the opponent replies in the same request.",
        feedback_doc="Would this answer be read as a legal move now? Changes nothing.")

    @app.get("/sessions/{session_id}", response_model=SessionState, responses=errors)
    def get_state(session_id: str) -> Any:
        """Observation, config and the omniscient state (debugging: shows hidden cards)."""
        with using_session(store, session_id) as session:
            state = session.game.state_dict()
        return SafeJSONResponse(state)

    add_delete_session_route(app)
    return app


app = create_app()


# ============================================================================ command line
def main(argv: Optional[list] = None) -> None:
    defaults = ServerSettings()
    parser = argparse.ArgumentParser(prog="python -m tasks.openspiel.server",
                                     description="Serve the OpenSpiel games over HTTP.")
    add_session_arguments(parser, defaults, port=8002)
    parser.add_argument("--max-move-chars", type=int, default=defaults.max_move_chars)
    parser.add_argument("--max-mcts-simulations", type=int,
                        default=defaults.max_mcts_simulations)
    parser.add_argument("--max-mcts-playouts", type=int, default=defaults.max_mcts_playouts,
                        help="ceiling on mcts_simulations x mcts_rollouts (one search's cost)")
    parser.add_argument("--search-processes", type=int, default=defaults.search_processes,
                        help="worker processes for the MCTS searches, off the event loop's GIL "
                             "(0: search in the request's thread)")
    add_runtime_arguments(parser, defaults)
    args = parser.parse_args(argv)
    try:
        settings = ServerSettings(max_move_chars=args.max_move_chars,
                                  max_mcts_simulations=args.max_mcts_simulations,
                                  max_mcts_playouts=args.max_mcts_playouts,
                                  search_processes=args.search_processes,
                                  **shared_settings(args))
    except ValueError as e:
        parser.error(str(e))
    if not settings.search_processes:
        serve(create_app(settings), args)
        return
    # "spawn": the server has threads by now, and a forked child would inherit their locks.
    with ProcessPoolExecutor(settings.search_processes,
                             mp_context=multiprocessing.get_context("spawn"),
                             initializer=exit_with_parent, initargs=(os.getpid(),)) as pool:
        serve(create_app(settings, search_pool=pool), args)


def exit_with_parent(parent: int) -> None:
    """In a search process: exit when the server is gone. uvicorn ends a SIGTERMed server by
    raising the signal again after its shutdown, so the pool's own shutdown never runs, and the
    workers were left behind (as after a SIGKILL)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-server", daemon=True).start()


if __name__ == "__main__":
    main()

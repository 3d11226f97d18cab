"""OpenSpiel games as seeded, text-in / text-out environments (the task protocol of DESIGN.md §1).

``OpenSpielGame(game_name, ...)``: the model plays one seat of a two-player game from the registry
(``games.py``); the opponent bot and chance (deals, dice) move automatically, with seeded RNGs,
until it is the model's turn or the game ends. ``reset(seed)`` returns the observation;
``step(answer)`` reads a move from the answer (``moves.py``), plays it, lets the opponent reply,
and returns ``StepResult(observation, reward, done, info)``. Everything is JSON-able, so the
in-process environment and the HTTP server return identical objects.

Determinism: the seed fixes the model's seat (with ``model_seat="random"``), every chance outcome,
the opponent bot's randomness (including MCTS rollouts) and the moves played for the model after
illegal answers. Same seed and same answers give the same episode.

Illegal or unreadable answers never raise. The next observation and ``info`` say why
(``illegal_move: true``, ``reason``), ``reward.illegal_move_penalty`` is charged, and the policy
decides what happens:

* ``retry`` (default): the same position is asked again, up to ``max_illegal_retries`` times in a
  row; the answer after that, if still illegal, gets a random legal move played for the model;
* ``random``: a random legal move is played for the model at once;
* ``loss``: the game ends at once, scored as a loss (the worst return the game allows).

Rewards: at the end, the model's return in the game times ``reward.scale`` (default: the
registry's ``reward_scale``, ``1 / max_utility``: +1 / 0 / -1 for win / draw / loss in the board
games and liars_dice; chips / 2 in kuhn_poker; chips / 13 in leduc_poker). Optional shaping,
off by default: ``illegal_move_penalty`` per illegal answer and ``legal_move_bonus`` per legal one.
"""

from __future__ import annotations

import math
import random
import secrets
from concurrent.futures import Executor
from dataclasses import asdict, dataclass
from typing import Any, Literal, Optional, Union

import numpy as np

from ..common.protocol import MAX_SEED, GameOver, StepResult, check_seed
from .bots import load_game, make_bot
from .games import GAMES, OPPONENTS, GameSpec, get_spec
from .moves import ParsedMove, echo, parse_move

POLICIES = ("retry", "random", "loss")
MAX_SIMULATIONS = 100_000

__all__ = ["GameOver", "OpenSpielGame", "POLICIES", "RewardConfig", "StepResult"]


@dataclass
class RewardConfig:
    """Terminal reward = the model's game return x ``scale`` (``None``: the registry's
    ``reward_scale``); plus, per answer, ``-illegal_move_penalty`` if it was illegal and
    ``+legal_move_bonus`` if it was legal (both 0 by default: no shaping)."""

    scale: Optional[float] = None
    illegal_move_penalty: float = 0.0
    legal_move_bonus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("scale", "illegal_move_penalty", "legal_move_bonus"):
            value = getattr(self, name)
            if value is None and name == "scale":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"reward.{name} must be a finite number, got {value!r}")


class OpenSpielGame:
    """One episode at a time of a registry game against a bot. Not thread-safe.

    ``model_seat``: 0, 1 or ``"random"`` (drawn from the seed at each reset). ``opponent``:
    ``"random"``, ``"mcts"`` or any object with ``step(state) -> action`` (then it is not
    re-seeded by ``reset``). ``mcts_simulations`` / ``mcts_uct_c`` / ``mcts_rollouts`` configure
    the MCTS opponent. ``illegal_move_policy``: ``retry`` / ``random`` / ``loss`` (module
    docstring); ``max_illegal_retries`` for ``retry``. ``reward``: a ``RewardConfig`` or a dict.
    ``search_pool``: a process pool for the MCTS opponent's searches (the server's), else here.
    """

    def __init__(self, game_name: str = "tic_tac_toe", *,
                 model_seat: Union[int, Literal["random"]] = 0,
                 opponent: Any = "random", mcts_simulations: int = 200,
                 mcts_uct_c: float = 2.0, mcts_rollouts: int = 1,
                 illegal_move_policy: str = "retry", max_illegal_retries: int = 2,
                 reward: Union[RewardConfig, dict, None] = None,
                 search_pool: Optional[Executor] = None) -> None:
        self.spec: GameSpec = get_spec(game_name)
        if model_seat not in (0, 1, "random") or isinstance(model_seat, bool):
            raise ValueError(f"model_seat must be 0, 1 or 'random', got {model_seat!r}")
        if isinstance(opponent, str):
            if opponent not in OPPONENTS:
                raise ValueError(f"opponent must be one of {OPPONENTS} or a bot, got {opponent!r}")
        elif not callable(getattr(opponent, "step", None)):
            raise ValueError("opponent must be 'random', 'mcts' or an object with step(state)")
        if isinstance(mcts_simulations, bool) or not isinstance(mcts_simulations, int) \
                or not 1 <= mcts_simulations <= MAX_SIMULATIONS:
            raise ValueError(f"mcts_simulations must be an int in [1, {MAX_SIMULATIONS}]")
        if isinstance(mcts_rollouts, bool) or not isinstance(mcts_rollouts, int) \
                or not 1 <= mcts_rollouts <= 1000:
            raise ValueError("mcts_rollouts must be an int in [1, 1000]")
        if not isinstance(mcts_uct_c, (int, float)) or not math.isfinite(mcts_uct_c) \
                or mcts_uct_c < 0:
            raise ValueError("mcts_uct_c must be a finite number >= 0")
        if illegal_move_policy not in POLICIES:
            raise ValueError(f"illegal_move_policy must be one of {POLICIES}, "
                             f"got {illegal_move_policy!r}")
        if isinstance(max_illegal_retries, bool) or not isinstance(max_illegal_retries, int) \
                or not 0 <= max_illegal_retries <= 1000:
            raise ValueError("max_illegal_retries must be an int in [0, 1000]")
        self.game_name = self.spec.name
        self.model_seat = model_seat
        self.opponent = opponent
        self.mcts_simulations = mcts_simulations
        self.mcts_uct_c = float(mcts_uct_c)
        self.mcts_rollouts = mcts_rollouts
        self.illegal_move_policy = illegal_move_policy
        self.max_illegal_retries = max_illegal_retries
        self.reward = RewardConfig(**reward) if isinstance(reward, dict) else (reward or RewardConfig())
        self.scale = self.spec.reward_scale if self.reward.scale is None else float(self.reward.scale)
        self.game = load_game(self.spec.name)
        self.state: Any = None
        self.seed: Optional[int] = None
        self.seat = 0
        self.turn = 0
        self.done = False
        self.history: list[dict[str, Any]] = []
        self.retries_left = max_illegal_retries
        self.returns: Optional[list[float]] = None
        self.outcome: Optional[str] = None
        self.forfeit = False
        self.notice: list[str] = []
        self.last_illegal: Optional[dict[str, Any]] = None
        self._bot: Any = None
        self.search_pool = search_pool  # where the MCTS opponent searches (None: here)

    # ------------------------------------------------------------------ protocol
    def reset(self, seed: Optional[int] = None) -> dict[str, Any]:
        seed = secrets.randbelow(MAX_SEED + 1) if seed is None else check_seed(seed)
        master = random.Random(seed)
        self.seed = seed
        self.seat = master.randrange(2) if self.model_seat == "random" else int(self.model_seat)
        self._chance_rng = np.random.RandomState(master.getrandbits(32))
        self._forced_rng = random.Random(master.getrandbits(64))
        bot_seed = master.getrandbits(64)
        if isinstance(self.opponent, str):
            self._bot = make_bot(self.opponent, self.game, bot_seed,
                                 simulations=self.mcts_simulations, uct_c=self.mcts_uct_c,
                                 rollouts=self.mcts_rollouts, search_pool=self.search_pool)
        else:
            self._bot = self.opponent
        self.state = self.game.new_initial_state()
        self._n_chance = 0
        self.turn = 0
        self.done = False
        self.history = []
        self.retries_left = self.max_illegal_retries
        self.returns = None
        self.outcome = None
        self.forfeit = False
        self.last_illegal = None
        opponent_moves = self._advance()
        self.notice = self._opponent_notice(opponent_moves)
        self._finish_if_terminal()
        return self.observation()

    def step(self, answer: str) -> StepResult:
        if self.state is None:
            raise RuntimeError("call reset() first")
        if self.done:
            raise GameOver("the game has ended; call reset()")
        if not isinstance(answer, str):
            raise TypeError("the answer must be a string")
        self.turn += 1
        parsed = self.parse(answer)
        reward = 0.0
        info: dict[str, Any] = {
            "turn": self.turn, "answer": echo(answer), "illegal_move": not parsed.legal,
            "reason": parsed.reason, "matched_by": parsed.matched_by, "move": None,
            "action": None, "forced_random": False, "forfeit": False, "opponent_moves": [],
            "penalty": 0.0,
        }
        self.notice = []
        self.last_illegal = None
        action, name = parsed.action, parsed.move
        if not parsed.legal:
            penalty = float(self.reward.illegal_move_penalty)
            reward -= penalty
            info["penalty"] = penalty
            self.last_illegal = {"answer": echo(answer), "reason": parsed.reason}
            said = f"Your answer {echo(answer)!r} was not accepted: {parsed.reason}."
            policy = self.illegal_move_policy
            if policy == "retry" and self.retries_left > 0:
                self.retries_left -= 1
                self.notice = [said, f"Try again ({self.retries_left} more illegal "
                                     f"answer{'s' if self.retries_left != 1 else ''} allowed "
                                     f"before a random move is played for you)."]
                info["retries_left"] = self.retries_left
                return self._result(reward, info)
            if policy == "loss":
                self._forfeit()
                self.notice = [said, "Illegal answers lose the game: you forfeit."]
                info["forfeit"] = True
                reward += self._terminal_reward()
                info["retries_left"] = self.retries_left
                return self._result(reward, info)
            action = self._forced_rng.choice(self.state.legal_actions())
            name = self.state.action_to_string(self.seat, action)
            info["forced_random"] = True
            self.notice = [said, f"A random legal move was played for you: {name}."]
        else:
            reward += float(self.reward.legal_move_bonus)
        self._apply(action, name)
        self.retries_left = self.max_illegal_retries
        info["move"], info["action"] = name, int(action)
        opponent_moves = self._advance()
        info["opponent_moves"] = opponent_moves
        self.notice += self._opponent_notice(opponent_moves)
        if self._finish_if_terminal():
            reward += self._terminal_reward()
        info["retries_left"] = self.retries_left
        return self._result(reward, info)

    def parse(self, answer: Any) -> ParsedMove:
        """How ``answer`` reads in the current position (see ``moves.py``)."""
        if self.done or self.state is None:
            return ParsedMove(None, None, "the game is over" if self.done else "no game yet")
        legal = self._legal()
        seat = self.seat

        def every() -> list[tuple[int, str]]:
            return [(a, self.state.action_to_string(seat, a))
                    for a in range(self.game.num_distinct_actions())]

        return parse_move(answer, legal, marks=self.spec.marks, aliases=self.spec.aliases,
                          all_moves=every)

    def feedback(self, answer: str) -> dict[str, Any]:
        """Whether ``answer`` would be read as a legal move now; changes nothing."""
        if self.state is None:
            raise RuntimeError("call reset() first")
        if not isinstance(answer, str):
            raise TypeError("the answer must be a string")
        p = self.parse(answer)
        return {"legal": p.legal, "move": p.move, "action": p.action,
                "matched_by": p.matched_by, "reason": p.reason}

    # ------------------------------------------------------------------ internals
    def _legal(self) -> list[tuple[int, str]]:
        return [(int(a), self.state.action_to_string(self.seat, a))
                for a in self.state.legal_actions()]

    def _apply(self, action: int, name: str) -> None:
        player = self.state.current_player()
        self.history.append({"player": int(player), "move": name,
                             "by": "you" if player == self.seat else "opponent"})
        self.state.apply_action(int(action))

    def _advance(self) -> list[str]:
        """Chance and the opponent move until it is the model's turn or the game ends."""
        played: list[str] = []
        state = self.state
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes = state.chance_outcomes()
                probs = np.array([p for _, p in outcomes], dtype=float)
                i = self._chance_rng.choice(len(outcomes), p=probs / probs.sum())
                action = int(outcomes[i][0])
                public = (self.spec.public_chance(self._n_chance, action)
                          if self.spec.public_chance is not None else None)
                if public is not None:
                    self.history.append({"player": -1, "move": public, "by": "chance"})
                self._n_chance += 1
                state.apply_action(action)
                continue
            player = state.current_player()
            if player == self.seat:
                break
            action = int(self._bot.step(state))
            if action not in state.legal_actions():  # a custom bot's mistake
                raise RuntimeError(f"the opponent bot chose an illegal action {action}")
            name = state.action_to_string(player, action)
            self._apply(action, name)
            played.append(name)
        return played

    def _finish_if_terminal(self) -> bool:
        if self.done or not self.state.is_terminal():
            return False
        self.done = True
        self.returns = [float(r) for r in self.state.returns()]
        self.outcome = _outcome(self.returns, self.seat)
        return True

    def _forfeit(self) -> None:
        self.done = True
        self.forfeit = True
        lo, hi = float(self.game.min_utility()), float(self.game.max_utility())
        self.returns = [lo if p == self.seat else hi for p in range(self.game.num_players())]
        self.outcome = "loss"

    def _terminal_reward(self) -> float:
        assert self.returns is not None
        return self.returns[self.seat] * self.scale

    def _result(self, reward: float, info: dict[str, Any]) -> StepResult:
        info.update({"done": self.done, "outcome": self.outcome,
                     "returns": list(self.returns) if self.returns is not None else None,
                     "seed": self.seed})
        return StepResult(self.observation(), float(reward), self.done, info)

    def _opponent_notice(self, moves: list[str]) -> list[str]:
        if not moves:
            return []
        return [f"The opponent played {', then '.join(moves)}."]

    # ------------------------------------------------------------------ views
    def observation(self) -> dict[str, Any]:
        if self.state is None:
            raise RuntimeError("call reset() first")
        legal = [] if self.done else self._legal()
        board = self.spec.render(self.state, self.seat, self.history)
        obs = {
            "game": self.game_name,
            "seed": self.seed,
            "player": self.seat,
            "turn": self.turn,
            "done": self.done,
            "board": board,
            "history": [dict(h) for h in self.history],
            "legal_moves": [name for _, name in legal],
            "legal_actions": [a for a, _ in legal],
            "retries_left": self.retries_left,
            "last_illegal": dict(self.last_illegal) if self.last_illegal else None,
            "outcome": self.outcome,
            "returns": list(self.returns) if self.returns is not None else None,
        }
        obs["text"] = self._render(obs)
        return obs

    def state_dict(self) -> dict[str, Any]:
        """The observation plus the configuration and the full (omniscient) state: for
        debugging only, it shows hidden cards and dice."""
        obs = self.observation()
        return {**obs, "config": self.config(), "state_string": str(self.state),
                "actions": [int(a) for a in self.state.history()]}

    def config(self) -> dict[str, Any]:
        opponent = self.opponent if isinstance(self.opponent, str) else \
            getattr(self.opponent, "name", type(self.opponent).__name__)
        return {"game": self.game_name, "model_seat": self.model_seat, "opponent": opponent,
                "mcts_simulations": self.mcts_simulations, "mcts_uct_c": self.mcts_uct_c,
                "mcts_rollouts": self.mcts_rollouts,
                "illegal_move_policy": self.illegal_move_policy,
                "max_illegal_retries": self.max_illegal_retries,
                "reward": asdict(self.reward), "reward_scale": self.scale}

    def _opponent_text(self) -> str:
        if self.opponent == "mcts":
            return f"an MCTS bot ({self.mcts_simulations} simulations per move)"
        if self.opponent == "random":
            return "a bot that plays random legal moves"
        return "a bot"

    def _render(self, obs: dict[str, Any]) -> str:
        spec, seat = self.spec, self.seat
        lines = [f"Game: {spec.title}. You are player {seat}: {spec.seat_names[seat]}. Your "
                 f"opponent is {self._opponent_text()}.",
                 f"Rules: {spec.rules}", "", "Position (your view):", obs["board"], ""]
        if self.history:
            moves = "; ".join(f"{i + 1}. {h['move']} ({h['by']})"
                              for i, h in enumerate(self.history))
            lines.append(f"Moves so far: {moves}")
        else:
            lines.append("Moves so far: none.")
        lines.extend(self.notice)
        if self.done:
            lines.append(self._end_text())
        else:
            lines.append(f"It is your turn (player {seat}).")
            lines.append("Legal moves: " + ", ".join(obs["legal_moves"]))
            lines.append("Answer with exactly one legal move, written as in the list.")
        return "\n".join(lines)

    def _end_text(self) -> str:
        assert self.returns is not None
        mine = self.returns[self.seat]
        word = {"win": "you won", "loss": "you lost", "draw": "it is a draw"}[self.outcome or "draw"]
        how = " by forfeit" if self.forfeit and self.outcome == "loss" else ""
        return (f"Game over: {word}{how}. Your return: {mine:+g} "
                f"(reward {mine * self.scale:+.3g}).")


def _outcome(returns: list[float], seat: int) -> str:
    mine = returns[seat]
    return "win" if mine > 0 else "loss" if mine < 0 else "draw"


def supported_games() -> list[str]:
    return list(GAMES)

"""Matches through the text interface: reference rows for evaluation (random / MCTS / a model).

``play_match(game_name, agent_a, agent_b, n, seed)`` plays ``n`` games of agent A against agent B
and returns A's win / draw / loss counts. Agent A always plays through the text interface: its
move is written as text and read back by the move parser, exactly as a model's answer is. Seats
alternate (A plays seat 0 in even games, seat 1 in odd ones), so first-move advantage cancels.

Agents:

* A: ``"random"`` / ``"mcts"`` (made here with seeds drawn from ``seed``), a bot object with
  ``step(state) -> action`` (its move is written as the move's name), or a *text agent*: any
  callable ``agent(observation) -> str`` (a model, a scripted player, a junk generator);
* B, the opponent: ``"random"`` / ``"mcts"`` (re-seeded each game) or a bot object.
"""

from __future__ import annotations

import random
from typing import Any, Callable

from .bots import make_bot
from .game import OpenSpielGame


def play_match(game_name: str, agent_a: Any, agent_b: Any = "random", n: int = 20,
               seed: int = 0, *, mcts_simulations: int = 200,
               **game_kwargs: Any) -> dict[str, Any]:
    """Win / draw / loss counts of agent A against agent B over ``n`` games (see module doc).

    Returns ``{"win", "draw", "loss", "games", "illegal_answers", "mean_return",
    "win_rate"}`` from A's side. ``mcts_simulations`` applies to both sides' ``"mcts"``;
    ``game_kwargs`` go to :class:`OpenSpielGame` (``illegal_move_policy``, ``reward`` ...).
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    master = random.Random(seed)
    counts = {"win": 0, "draw": 0, "loss": 0}
    illegal = 0
    total = 0.0
    for i in range(n):
        game = OpenSpielGame(game_name, model_seat=i % 2, opponent=agent_b,
                             mcts_simulations=mcts_simulations, **game_kwargs)
        obs = game.reset(master.getrandbits(63))
        act = _text_agent(agent_a, game, master.getrandbits(63), mcts_simulations)
        done = False
        info: dict[str, Any] = {}
        while not done:
            obs, _, done, info = game.step(act(obs))
            illegal += bool(info["illegal_move"])
        counts[info["outcome"]] += 1
        total += info["returns"][game.seat]
    return {**counts, "games": n, "illegal_answers": illegal, "mean_return": total / n,
            "win_rate": counts["win"] / n}


def _text_agent(agent: Any, game: OpenSpielGame, seed: int,
                simulations: int) -> Callable[[dict], str]:
    """A callable ``observation -> answer text`` for agent A."""
    if isinstance(agent, str):
        agent = make_bot(agent, game.game, seed, simulations=simulations)
    step = getattr(agent, "step", None)
    if callable(step):
        bot = agent

        def via_bot(obs: dict) -> str:
            state = game.state
            return state.action_to_string(state.current_player(), bot.step(state))

        return via_bot
    if callable(agent):
        return agent
    raise ValueError("agent_a must be 'random', 'mcts', a bot with step(state), or a callable "
                     "observation -> text")

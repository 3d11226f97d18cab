"""Opponents and reference players: a seeded random bot and a seeded MCTS bot.

Both have ``step(state) -> action`` (the pyspiel bot convention) for the player to move, and are
deterministic given their seed and the sequence of states they are asked about.

MCTS is OpenSpiel's Python ``MCTSBot`` (UCT with random rollouts, ``solve=True``). In games with
hidden information (kuhn_poker, leduc_poker, liars_dice) it does not look at the hidden cards or
dice: before each search it *determinizes*, drawing the unseen chance outcomes at random among
those consistent with its own information state, and searches that world as if it were known
(perfect-information Monte Carlo with one sampled world per move). That is a fair, modest
opponent, not an oracle.

A search can run in another process (``search_pool``, a ``concurrent.futures`` process pool): the
game servers use one, so that a search never holds the server's GIL. A search is pure Python and
holds the GIL in 5 ms slices: in the server's process it starved the event loop (on 2 cores a
``/health`` waited 0.6-1.3 s during one Othello search of 3,000 simulations and up to 5.6 s when
45 submits hit the busy session, 2026-11-25). The state goes over as its action history and the
bot's two random streams go over and come back, so the moves are the same in either place.
"""

from __future__ import annotations

import random
from concurrent.futures import Executor
from functools import lru_cache
from typing import Any, Optional

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts

from .games import get_spec

DEFAULT_UCT_C = 2.0


def load_game(game: Any) -> Any:
    """A ``pyspiel.Game`` from a registry name (with its parameters) or a game object."""
    if isinstance(game, str):
        spec = get_spec(game)
        return pyspiel.load_game(spec.openspiel_name, dict(spec.params))
    return game


def _np_seed(seed: Optional[int]) -> int:
    return random.Random(seed).getrandbits(32)


class RandomBot:
    """Uniformly random legal moves from its own ``random.Random(seed)``."""

    name = "random"

    def __init__(self, seed: Optional[int] = None) -> None:
        self.rng = random.Random(seed)

    def step(self, state: Any) -> int:
        return self.rng.choice(state.legal_actions())


def determinize(state: Any, player: int, rng: np.random.RandomState,
                attempts: int = 100) -> Any:
    """A copy of ``state`` whose chance outcomes are redrawn where ``player`` cannot see them.

    The history is replayed; at each chance node the outcome is drawn (by its probability) among
    those after which ``player``'s information state is the same as in the real game, so the
    copy agrees with everything ``player`` knows and guesses the rest. A draw that leads to a
    dead end (Leduc: the opponent's guessed card is the public card that is later shown) starts
    over; after ``attempts`` dead ends (never seen in practice) the real state is used.
    """
    for _ in range(attempts):
        world = _draw_world(state, player, rng)
        if world is not None:
            return world
    return state.clone()


def _draw_world(state: Any, player: int, rng: np.random.RandomState) -> Any:
    game = state.get_game()
    real = game.new_initial_state()
    world = game.new_initial_state()
    for action in state.history():
        if real.is_chance_node():
            target = real.child(action).information_state_string(player)
            options = [(a, p) for a, p in world.chance_outcomes()
                       if world.child(a).information_state_string(player) == target]
            if not options:
                return None
            acts = [a for a, _ in options]
            probs = np.array([p for _, p in options], dtype=float)
            world.apply_action(int(acts[rng.choice(len(acts), p=probs / probs.sum())]))
        else:
            world.apply_action(action)
        real.apply_action(action)
    return world


class MCTSBot:
    """OpenSpiel's MCTS (UCT, random rollouts), seeded; determinizes in hidden-information games.

    ``simulations`` per move, ``rollouts`` random playouts per leaf, exploration ``uct_c``.
    """

    name = "mcts"

    def __init__(self, game: Any, simulations: int = 200, seed: Optional[int] = None, *,
                 uct_c: float = DEFAULT_UCT_C, rollouts: int = 1,
                 search_pool: Optional[Executor] = None) -> None:
        if simulations < 1 or rollouts < 1:
            raise ValueError("simulations and rollouts must be >= 1")
        self.game = load_game(game)
        self.simulations = simulations
        self.uct_c = uct_c
        self.rollouts = rollouts
        self.search_pool = search_pool
        master = random.Random(seed)
        self.rollout_rng = np.random.RandomState(master.getrandbits(32))
        self.tree_rng = np.random.RandomState(master.getrandbits(32))
        self.bot = _openspiel_mcts(self.game, simulations, uct_c, rollouts, self.rollout_rng,
                                   self.tree_rng)
        self.world_rng = np.random.RandomState(master.getrandbits(32))
        self.hidden = (self.game.get_type().information
                       != pyspiel.GameType.Information.PERFECT_INFORMATION)

    def step(self, state: Any) -> int:
        legal = state.legal_actions()
        if len(legal) == 1:
            return legal[0]
        search_state = state
        if self.hidden:
            search_state = determinize(state, state.current_player(), self.world_rng)
        if self.search_pool is None:
            action = int(self.bot.step(search_state))
        else:
            action, rollout_rng, tree_rng = self.search_pool.submit(
                search_elsewhere, str(self.game), search_state.serialize(), self.simulations,
                self.uct_c, self.rollouts, self.rollout_rng.get_state(),
                self.tree_rng.get_state()).result()
            self.rollout_rng.set_state(rollout_rng)  # as if the search had run here
            self.tree_rng.set_state(tree_rng)
        # In the registry's games the legal moves never depend on hidden information; keep the
        # guard anyway so a bot can never play an illegal move.
        return action if action in legal else legal[0]


def _openspiel_mcts(game: Any, simulations: int, uct_c: float, rollouts: int,
                    rollout_rng: np.random.RandomState,
                    tree_rng: np.random.RandomState) -> mcts.MCTSBot:
    evaluator = mcts.RandomRolloutEvaluator(n_rollouts=rollouts, random_state=rollout_rng)
    return mcts.MCTSBot(game, uct_c, simulations, evaluator, solve=True, random_state=tree_rng)


@lru_cache(maxsize=32)
def _game_from_string(game: str) -> Any:
    return pyspiel.load_game(game)


def search_elsewhere(game: str, state: str, simulations: int, uct_c: float, rollouts: int,
                     rollout_rng: tuple, tree_rng: tuple) -> tuple[int, tuple, tuple]:
    """One ``MCTSBot`` search in a pool's process: the game as ``str(game)``, the state as
    ``state.serialize()``, the random streams as ``RandomState.get_state()``. Returns the action
    and the streams' states after the search (OpenSpiel's MCTS builds a new tree each move, so
    nothing else carries over)."""
    loaded = _game_from_string(game)
    streams = []
    for saved in (rollout_rng, tree_rng):
        stream = np.random.RandomState()
        stream.set_state(saved)
        streams.append(stream)
    bot = _openspiel_mcts(loaded, simulations, uct_c, rollouts, *streams)
    action = int(bot.step(loaded.deserialize_state(state)))
    return action, streams[0].get_state(), streams[1].get_state()


def random_bot(seed: Optional[int] = None) -> RandomBot:
    """A seeded uniformly random player."""
    return RandomBot(seed)


def mcts_bot(game: Any, simulations: int = 200, seed: Optional[int] = None, *,
             uct_c: float = DEFAULT_UCT_C, rollouts: int = 1,
             search_pool: Optional[Executor] = None) -> MCTSBot:
    """A seeded MCTS player for ``game`` (a registry name or a ``pyspiel.Game``); its searches
    run in ``search_pool``'s processes when one is given."""
    return MCTSBot(game, simulations, seed, uct_c=uct_c, rollouts=rollouts,
                   search_pool=search_pool)


def make_bot(kind: str, game: Any, seed: Optional[int], *, simulations: int = 200,
             uct_c: float = DEFAULT_UCT_C, rollouts: int = 1,
             search_pool: Optional[Executor] = None) -> Any:
    if kind == "random":
        return random_bot(seed)
    if kind == "mcts":
        return mcts_bot(game, simulations, seed, uct_c=uct_c, rollouts=rollouts,
                        search_pool=search_pool)
    raise ValueError(f"unknown bot {kind!r}; expected 'random' or 'mcts'")

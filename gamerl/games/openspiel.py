"""OpenSpiel's games (``tasks.openspiel``) on the trainer's side: everything specific to them.

The run's ``task_config`` with defaults (``openspiel_settings``; ``OPENSPIEL_ENV_KEYS``,
``OPENSPIEL_DEFAULTS``); the system prompt; the move in an answer (``extract_move``); the
position after a move (``openspiel_feedback``); instances (game and opponent per episode, as the
curriculum stages say); the numbers kept per turn, win/draw/loss rates per game with Wilson
intervals, the failure replay's priority; random legal moves as warm-start demonstrations and
as the reference agent. The evaluation table against random and MCTS agents is
``gamerl.games.openspiel_eval``.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Mapping, Optional, Sequence

from .base import Instance, MakeEnv, Task, after_marker, instance_seed, wilson_interval

__all__ = ["OPENSPIEL_DEFAULTS", "OPENSPIEL_ENV_KEYS", "extract_move", "make_task",
           "openspiel_feedback", "openspiel_settings"]

OPENSPIEL_ENV_KEYS = ("games", "opponent", "model_seat", "mcts_simulations", "mcts_uct_c",
                      "mcts_rollouts", "illegal_move_policy", "max_illegal_retries", "reward")
OPENSPIEL_DEFAULTS = {"games": ["tic_tac_toe"], "opponent": "random", "model_seat": "random",
                      "mcts_simulations": 50, "illegal_move_policy": "retry",
                      "max_illegal_retries": 2}


def openspiel_settings(cfg) -> dict:
    """The task_config of an OpenSpiel run with defaults filled in (unknown keys raise)."""
    settings = {**OPENSPIEL_DEFAULTS, **dict(cfg.task_config or {})}
    unknown = set(settings) - set(OPENSPIEL_ENV_KEYS)
    if unknown:
        raise ValueError(f"openspiel task_config: unknown keys {sorted(unknown)}; "
                         f"known: {list(OPENSPIEL_ENV_KEYS)}")
    from tasks.openspiel import GAMES

    games = settings["games"]
    if isinstance(games, str):
        games = [games]
    bad = [g for g in games if g not in GAMES]
    if bad or not games:
        raise ValueError(f"openspiel games {bad or games}: choose from {sorted(GAMES)}")
    settings["games"] = list(games)
    return settings


def extract_move(answer: str) -> str:
    """The move in a model's answer: ``base.extract_answer``'s rule with ``Move:`` as a marker.
    The game's parser is tolerant of case and spacing (``tasks.openspiel.moves``)."""
    return after_marker(answer, "move")


def openspiel_feedback(obs: Mapping[str, Any], info: Mapping[str, Any], action: str,
                       style: str = "compact") -> str:
    """The observation after a move; ``compact`` drops the game/rules header (already in the
    first message) and the closing "Answer with exactly one legal move" line (the system prompt
    and the first message say it), and keeps the position, any notice (the opponent's move, an
    illegal answer), whose turn it is and the legal moves. It keeps the list of moves so far
    only in games of imperfect information (poker, liar's dice: the betting is not on the board).
    In the board games the position says everything, and the list, repeated every turn, made a
    12-turn conversation grow quadratically (connect_four, hex, othello and breakthrough ran
    4.5-5.6k tokens with it; tests/test_game_training.py checks the budget)."""
    text = obs["text"]
    if style != "compact" or "Position (your view):" not in text:
        return text
    from tasks.openspiel import GAMES

    spec = GAMES.get(obs.get("game"))
    drop = ["Answer with exactly one legal move"]
    if spec is not None and spec.perfect_information:
        drop.append("Moves so far:")
    lines = text[text.index("Position (your view):"):].split("\n")
    return "\n".join(line for line in lines if not any(line.startswith(d) for d in drop))


def make_task() -> Task:
    def env_kwargs(settings: dict, instance: Mapping) -> dict:
        kw = {k: settings[k] for k in ("model_seat", "mcts_simulations", "mcts_uct_c",
                                       "mcts_rollouts", "illegal_move_policy",
                                       "max_illegal_retries", "reward") if k in settings}
        kw["opponent"] = instance.get("opponent", settings["opponent"])
        return kw

    def env_factory(cfg) -> MakeEnv:
        from tasks.openspiel.env import LocalOpenSpielEnv

        settings = openspiel_settings(cfg)
        return lambda instance=None: LocalOpenSpielEnv(
            (instance or {}).get("game", settings["games"][0]), **env_kwargs(settings, instance or {}))

    def http_factory(cfg, base_url: str) -> MakeEnv:
        from tasks.openspiel.client import OpenSpielEnv

        settings = openspiel_settings(cfg)
        return lambda instance=None: OpenSpielEnv(
            base_url, game=(instance or {}).get("game", settings["games"][0]),
            **env_kwargs(settings, instance or {}))

    def start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
        env = make_env(instance)
        return env, env.reset(instance_seed(instance))

    def train_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
        settings = openspiel_settings(cfg)
        games = list((stage or {}).get("games") or settings["games"])
        opponent = (stage or {}).get("opponent") or settings["opponent"]
        return [{"seed": s, "game": games[random.Random(f"game:{s}").randrange(len(games))],
                 "opponent": opponent} for s in seeds]

    def eval_instances(cfg, n: int, overrides: Optional[dict] = None) -> list:
        """``n`` held-out games PER GAME of the run (or of ``overrides["games"]``)."""
        settings = openspiel_settings(cfg)
        games = list((overrides or {}).get("games") or settings["games"])
        opponent = (overrides or {}).get("opponent") or settings["opponent"]
        seeds = cfg.eval_seeds(n)
        return [{"seed": s, "game": g, "opponent": opponent} for g in games for s in seeds]

    def turn_stats(info: dict) -> dict:
        return {"illegal": bool(info.get("illegal_move")), "outcome": info.get("outcome"),
                "success": info.get("outcome") == "win"}

    def metrics(episodes, cfg) -> dict:
        n = max(len(episodes), 1)
        turns = [t for ep in episodes for t in ep.turns]
        out: dict[str, Any] = {}
        for key in ("win", "draw", "loss"):
            out[f"{key}_rate"] = sum(ep.outcome == key for ep in episodes) / n
        out["illegal_rate"] = sum(t.stats.get("illegal", False) for t in turns) / max(len(turns), 1)
        per_game: dict[str, dict] = {}
        for ep in episodes:
            g = per_game.setdefault(ep.instance["game"], {"win": 0, "draw": 0, "loss": 0,
                                                          "unfinished": 0, "games": 0})
            g[ep.outcome or "unfinished"] += 1
            g["games"] += 1
        for g in per_game.values():
            g["win_ci"] = list(wilson_interval(g["win"], g["games"]))
        out["per_game"] = per_game
        return out

    def badness(ep, cfg) -> float:
        return {"win": 0.0, "draw": 0.5, "loss": 1.0}.get(ep.outcome, 1.0)

    def demo(cfg, rng: random.Random) -> Callable:
        # a random legal move: the format and legality, not skill
        return lambda ep: rng.choice(ep.last_obs.get("legal_moves") or ["?"])

    def reference_agents(cfg) -> dict:
        def random_answer(ep) -> str:
            rng = random.Random(f"{cfg.seed}:{ep.seed}:{len(ep.turns)}")
            return rng.choice(ep.last_obs.get("legal_moves") or ["?"])

        return {"random": random_answer}

    return Task(
        name="openspiel",
        system_prompt="You are playing a board or card game. Reply with your move only, "
                      "written exactly as in the list of legal moves.",
        extract=extract_move, feedback=openspiel_feedback,
        env_factory=env_factory, http_env_factory=http_factory, start=start,
        train_instances=train_instances, eval_instances=eval_instances,
        turn_stats=turn_stats, metrics=metrics, badness=badness, demo=demo,
        reference_agents=reference_agents, max_turns=lambda cfg: cfg.max_steps,
        headline=("win_rate", "illegal_rate"),
        reference_labels={"random": "random legal moves"},
        metric_descriptions={"win_rate": "games won (fraction)",
                             "draw_rate": "games drawn (fraction)",
                             "loss_rate": "games lost (fraction)",
                             "illegal_rate": "illegal answers (fraction of turns)"},
    )

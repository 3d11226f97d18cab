"""OpenSpiel evaluation: win / draw / loss rates per game with confidence intervals, and reference
rows (a random agent and an MCTS agent against the same opponent). ``gamerl evaluate`` reaches it
through the game's ``Task.evaluation_report`` (``gamerl.games.openspiel``), handing in ``play``:
the trainer's evaluation of the policy on held-out games, so this module imports nothing of the
trainer.

    rows = evaluate_openspiel(play, cfg, settings, num_episodes=100, opponent="mcts")
    print(format_outcome_table(rows))

The policy plays ``num_episodes`` held-out games per game (seeds from ``eval_seed_start``, the
seat drawn per game as in training) through the same rollout as training, sampling by default.
The reference agents play the same number of games through the text interface with
``tasks.openspiel.match.play_match`` (their seat alternates, so first-move advantage cancels).
Rates come with 95% Wilson score intervals (``gamerl.games.base.wilson_interval``): with 100 games a
win rate of 50% is known to about +-10 points, which is what separates a real gain from noise.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .base import wilson_interval

__all__ = ["evaluate_openspiel", "format_outcome_table", "outcome_row"]


def outcome_row(win: int, draw: int, loss: int, games: int, **extra: Any) -> dict[str, Any]:
    """Counts -> rates with the win rate's 95% interval (unfinished games count as not won)."""
    n = max(games, 1)
    return {"win": win, "draw": draw, "loss": loss, "games": games, "win_rate": win / n,
            "draw_rate": draw / n, "loss_rate": loss / n,
            "win_ci": list(wilson_interval(win, games)), **extra}


def evaluate_openspiel(play: Callable[[Any, int, dict], dict], cfg, settings: dict,
                       num_episodes: int = 100, opponent: Optional[str] = None, *,
                       games: Optional[Sequence[str]] = None,
                       mcts_simulations: Optional[int] = None,
                       references: bool = True) -> dict[str, dict]:
    """``{player: {game: outcome_row}}`` for the policy and (``references``) the random and MCTS
    agents, each over ``num_episodes`` games per game against ``opponent`` (default: the run's).
    ``play(cfg, num_episodes, overrides)`` evaluates the policy on the held-out games that
    ``cfg`` and ``overrides`` name; ``settings`` is the run's OpenSpiel settings with defaults."""
    opponent = opponent or settings.get("opponent", "random")
    games = list(games or settings["games"])
    simulations = mcts_simulations or settings.get("mcts_simulations", 50)
    # The opponent's strength is part of the question: the run's settings, this opponent.
    cfg = cfg.replace(task_config={**dict(cfg.task_config or {}), "opponent": opponent,
                                   "mcts_simulations": simulations})
    metrics = play(cfg, num_episodes, {"games": games, "opponent": opponent})
    illegal = metrics["illegal_rate"]
    rows: dict[str, dict] = {"policy": {}}
    for game in games:
        g = metrics["per_game"].get(game, {"win": 0, "draw": 0, "loss": 0, "games": 0})
        rows["policy"][game] = outcome_row(g["win"], g["draw"], g["loss"], g["games"],
                                           unfinished=g.get("unfinished", 0),
                                           illegal_rate=illegal)
    if references:
        from tasks.openspiel.match import play_match

        for agent in ("random", "mcts"):
            rows[agent] = {}
            for game in games:
                r = play_match(game, agent, opponent, num_episodes, seed=cfg.eval_seed_start,
                               mcts_simulations=simulations)
                rows[agent][game] = outcome_row(r["win"], r["draw"], r["loss"], r["games"])
    return rows


def format_outcome_table(rows: dict[str, dict]) -> str:
    """One line per (game, player): win % [95% CI], draw %, loss %, unfinished % (the policy's
    episodes that hit max_steps or the context budget before the game ended), games."""
    head = (f"{'game':<14} {'player':<8} {'win':>7} {'95% CI':>15} {'draw':>7} {'loss':>7} "
            f"{'unfin.':>7} {'games':>6}")
    lines = [head, "-" * len(head)]
    games = list(next(iter(rows.values())).keys()) if rows else []
    for game in games:
        for player, per_game in rows.items():
            r = per_game.get(game)
            if r is None:
                continue
            lo, hi = r["win_ci"]
            lines.append(f"{game:<14} {player:<8} {r['win_rate']:>7.1%} "
                         f"{f'[{lo:.0%}, {hi:.0%}]':>15} {r['draw_rate']:>7.1%} "
                         f"{r['loss_rate']:>7.1%} {r.get('unfinished', 0) / max(r['games'], 1):>7.1%} "
                         f"{r['games']:>6d}")
    return "\n".join(lines)

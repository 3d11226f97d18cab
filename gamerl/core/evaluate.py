"""Evaluation on held-out games: the policy and the task's reference agents (for the Password
Game the solver, which satisfies every rule, and random strings, the floor). The solver is not
an upper bound on reward: its long password pays the length penalty, so a trained policy that
holds every rule with a shorter password earns more.

All of them play through the same ``rollout`` and are scored by the same ``episode_metrics``:

    reward             mean episode return (sum of the env's per-turn rewards, unscaled)
    success_rate       fraction of episodes won (Password Game: all ``num_rules`` rules hold;
                       Wordle: the word found; OpenSpiel: the game won)
    episodes           how many episodes (one per held-out instance, less lost ones)
    lost_episodes      episodes dropped because the game server lost their session and
                       replaying them failed (gamerl.core.sessions); replayed_episodes: rebuilt ones
    turns              mean turns played
    + the task's own numbers (``gamerl.games``). The Password Game's:
    rules_satisfied    mean number of revealed rules the LAST password satisfies
    per_rule_pass_rate list, one entry per rule id 0..num_rules-1: fraction of episodes whose
                       last password satisfied that rule with the rule revealed (a rule never
                       revealed counts as not passed)

The policy samples with the training temperature/top-p/top-k by default (what PPO optimises);
``greedy=True`` takes the argmax. Sampling is seeded (``sample_seed``) inside a forked RNG, so
baseline and final evaluations use the same random numbers and the training RNG is untouched.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from ..games.base import ReportColumn, column_label, episode_instance
from ..games.registry import get_task
from .rollout import Episode, LMPolicy, RolloutConfig, ScriptedPolicy, rollout

log = logging.getLogger("gamerl")


def episode_metrics(episodes: Sequence[Episode], cfg) -> dict[str, Any]:
    """The generic numbers (reward, success_rate, episodes, turns) and the task's own
    (``Task.metrics``: rules satisfied and per-rule pass rates, Wordle's guesses and invalid
    rate, OpenSpiel's win/draw/loss rates per game with confidence intervals)."""
    kept = [ep for ep in episodes if not ep.lost]  # a lost session's episode has no result
    n = len(kept)
    div = max(n, 1)
    out = {"reward": sum(ep.total_reward for ep in kept) / div,
           "success_rate": sum(ep.success for ep in kept) / div,
           "episodes": n,
           "turns": sum(len(ep.turns) for ep in kept) / div,
           "lost_episodes": len(episodes) - n,
           "replayed_episodes": sum(ep.replays > 0 for ep in episodes),
           "distinct_games": distinct_games(cfg, [episode_instance(ep) for ep in episodes])}
    out.update(get_task(cfg.task).metrics(kept, cfg))
    return out


def local_env_factory(cfg) -> Callable[..., Any]:
    """In-process environments for the run's task (``Task.env_factory``)."""
    return get_task(cfg.task).env_factory(cfg)


def http_env_factory(cfg, base_url: str) -> Callable[..., Any]:
    """Environments served by the task's FastAPI server (``python -m tasks.<game>.server``):
    the same game and results over HTTP, one session per episode. A session the server loses
    mid-episode is rebuilt by replaying the episode (gamerl.core.sessions)."""
    from .sessions import ReplayingEnv

    make_env = get_task(cfg.task).http_env_factory(cfg, base_url)
    return lambda *args: ReplayingEnv(make_env(*args))


def eval_instances(cfg, n: Optional[int] = None, overrides: Optional[dict] = None,
                   split: str = "test") -> list:
    """The held-out instances as the task needs them (Wordle: held-out answers; OpenSpiel:
    ``n`` per game): the test games, ``n`` (default ``eval_episodes``) seeds from
    ``eval_seed_start``; or with ``split="validation"`` the validation games (``val_episodes``
    from ``val_seed_start``), which only choose a checkpoint."""
    n = n or len(cfg.eval_seeds(split=split))
    if split != "test":
        overrides = {**(overrides or {}), "split": split}
    return get_task(cfg.task).eval_instances(cfg, n, overrides)


def distinct_games(cfg, instances: Sequence[Any]) -> int:
    """How many different games ``instances`` are, as a player meets them (``Task.game_text``:
    with the Password Game's first 6 or 9 rules every seed is the same game)."""
    game_text = get_task(cfg.task).game_text
    return len({game_text(cfg, instance) for instance in instances})


def evaluate(lm, tokenizer, seeds: Sequence[Any], cfg, *, greedy: bool = False,
             make_env: Optional[Callable[..., Any]] = None, sample_seed: int = 1234,
             return_episodes: bool = False, progress: Optional[str] = None,
             before_turn: Optional[Callable[[list[Episode]], None]] = None):
    """Play one episode per held-out instance (``seeds``) with the LM (``PolicyWithValue.lm`` or
    any causal LM); ``progress``: a tqdm bar with this description, one step per turn.
    ``cfg.eval_batch_size`` games play at once (0: all), the next ones when they end: the KV
    caches of the games in play are the evaluation's memory. The sampling RNG runs on from one
    batch to the next, so a batch size gives its own (deterministic) samples. ``before_turn``:
    see ``rollout``."""
    make_env = make_env or local_env_factory(cfg)
    rcfg = RolloutConfig.from_train_config(cfg, greedy=greedy, evaluation=True)
    rcfg.record_logprobs = False  # evaluation needs no log-probs (and saves B x V per step)
    batch = cfg.eval_batch_size or max(1, len(seeds))
    episodes = []
    # Built inside the forked RNG, as before batches: whatever it sets up stays in the fork.
    with torch.random.fork_rng(devices=[lm.device] if lm.device.type == "cuda" else []):
        torch.manual_seed(sample_seed)
        policy = LMPolicy(lm, tokenizer, rcfg)
        for start in range(0, len(seeds), batch):
            episodes += rollout(policy, tokenizer, seeds[start:start + batch], make_env, rcfg,
                                progress=progress, before_turn=before_turn)
    metrics = episode_metrics(episodes, cfg)
    if metrics["distinct_games"] == 1 < len(episodes):
        log.warning("these %d held-out games are all one game: their score measures one "
                    "memorised answer, not play on games the model has not seen (the Password "
                    "Game's first 9 rules are the same in every game; rule 10 on differ)",
                    len(episodes))
    return (metrics, episodes) if return_episodes else metrics


def evaluate_scripted(fn: Callable[[Episode], str], tokenizer, seeds: Sequence[Any], cfg,
                      make_env: Optional[Callable[..., Any]] = None,
                      return_episodes: bool = False):
    make_env = make_env or local_env_factory(cfg)
    rcfg = RolloutConfig.from_train_config(cfg)
    episodes = rollout(ScriptedPolicy(tokenizer, fn), tokenizer, seeds, make_env, rcfg)
    metrics = episode_metrics(episodes, cfg)
    return (metrics, episodes) if return_episodes else metrics


def reference_rows(tokenizer, seeds: Sequence[Any], cfg,
                   make_env: Optional[Callable[..., Any]] = None) -> dict[str, dict[str, Any]]:
    """The task's reference agents on the same instances, keyed by their short names (the
    Password Game's ``solver`` and ``random``; Wordle's ``solver`` and ``random``; OpenSpiel's
    ``random``). Each row also holds ``label``, what the row is (``Task.reference_labels``:
    "solver (all rules)", "random strings (floor)"), which tables and figures print."""
    task = get_task(cfg.task)
    return {name: {"label": task.reference_labels.get(name, name),
                   **evaluate_scripted(fn, tokenizer, seeds, cfg, make_env)}
            for name, fn in task.reference_agents(cfg).items()}


def format_table(rows: dict[str, dict[str, Any]],
                 extra: Sequence[str | ReportColumn] = ("rules_satisfied",),
                 config: Optional[Mapping[str, Any]] = None) -> str:
    """A plain-text table: one row per policy (named by its ``label`` when it has one, else by
    its key). Reward, success, turns and episodes are always columns; ``extra`` are the task's
    own, shown when a row has them: a metric key (titled by ``column_label``, written "0.00") or
    a ``ReportColumn`` (the game's ``Task.report_columns``, as the docs' tables show them: its
    ``title(config)``, e.g. "rules satisfied (of 12)", and its format). A
    list-valued number (per-rule pass rates) is left to the docs' tables and figures: one row
    of 26 entries is not a column. Column names are printed in full and each column is as wide
    as its name or its numbers."""
    always = ("reward", "success_rate", "turns", "episodes")
    picked = []
    for col in extra:
        col = col if isinstance(col, ReportColumn) else ReportColumn(col, column_label(col))
        if col.key not in always and any(isinstance(r.get(col.key), (int, float))
                                         for r in rows.values()):
            picked.append((col.title(config), col.key, col.fmt))
    names = {key: str(r.get("label", key)) for key, r in rows.items()}
    columns = [("reward", lambda r: f"{r['reward']:.2f}")]
    columns += [(title, lambda r, k=k, fmt=fmt: fmt.format(r[k])  # "-": none, or NaN (no case)
                 if isinstance(r.get(k), (int, float)) and r[k] == r[k] else "-")
                for title, k, fmt in picked]
    columns += [("success", lambda r: f"{r['success_rate']:.1%}"),
                ("turns", lambda r: f"{r['turns']:.2f}"),
                ("episodes", lambda r: f"{r['episodes']:d}")]
    cells = {key: [cell(r) for _, cell in columns] for key, r in rows.items()}
    name_width = max([len("policy"), *map(len, names.values())])
    widths = [max([len(title), *(len(c[i]) for c in cells.values())])
              for i, (title, _) in enumerate(columns)]

    def line(first: str, values: Sequence[str]) -> str:
        return "  ".join([first.ljust(name_width), *(v.rjust(w) for v, w in zip(values, widths))])

    head = line("policy", [title for title, _ in columns])
    return "\n".join([head, "-" * len(head), *(line(names[k], cells[k]) for k in rows)])


__all__ = ["column_label", "distinct_games", "episode_metrics", "eval_instances", "evaluate", "evaluate_scripted",
           "format_table", "http_env_factory", "local_env_factory", "reference_rows"]

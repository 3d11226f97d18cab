"""Evaluation on held-out games: the policy, the solver (upper bound) and random strings (floor).

All three play through the same ``rollout`` and are scored by the same ``episode_metrics``:

    reward             mean episode return (sum of the env's per-turn rewards, unscaled)
    rules_satisfied    mean number of revealed rules the LAST password satisfies
    success_rate       fraction of episodes that satisfied all ``num_rules`` rules
    episodes           how many episodes (one per held-out seed)
    turns              mean turns played
    per_rule_pass_rate list, one entry per rule id 0..num_rules-1: fraction of episodes whose
                       last password satisfied that rule with the rule revealed (a rule never
                       revealed counts as not passed)

The policy samples with the training temperature/top-p/top-k by default (what PPO optimises);
``greedy=True`` takes the argmax. Sampling is seeded (``sample_seed``) inside a forked RNG, so
baseline and final evaluations use the same random numbers and the training RNG is untouched.
"""

from __future__ import annotations

import random
import string
from typing import Any, Callable, Optional, Sequence

import torch

from .rollout import Episode, LMPolicy, RolloutConfig, ScriptedPolicy, rollout


def episode_metrics(episodes: Sequence[Episode], num_rules: int) -> dict[str, Any]:
    n = len(episodes)
    per_rule = [0.0] * num_rules
    for ep in episodes:
        for rule_id, ok in ep.rule_verdicts().items():
            if ok and rule_id < num_rules:
                per_rule[rule_id] += 1
    div = max(n, 1)
    return {
        "reward": sum(ep.total_reward for ep in episodes) / div,
        "rules_satisfied": sum(ep.rules_satisfied for ep in episodes) / div,
        "success_rate": sum(ep.success for ep in episodes) / div,
        "episodes": n,
        "turns": sum(len(ep.turns) for ep in episodes) / div,
        "per_rule_pass_rate": [c / div for c in per_rule],
    }


def local_env_factory(cfg) -> Callable[[], Any]:
    from tasks.password_game import LocalPasswordGameEnv

    game_config = cfg.game_config()
    return lambda: LocalPasswordGameEnv(game_config)


def http_env_factory(cfg, base_url: str) -> Callable[[], Any]:
    """Environments served by the FastAPI server (``python -m tasks.password_game.server``):
    the same game and results over HTTP, one session per episode."""
    from dataclasses import asdict

    from tasks.password_game import PasswordGameEnv

    game_config = cfg.game_config()
    return lambda: PasswordGameEnv(base_url, max_steps=game_config.max_steps,
                                   num_rules=game_config.num_rules,
                                   reward=asdict(game_config.reward))


def evaluate(lm, tokenizer, seeds: Sequence[int], cfg, *, greedy: bool = False,
             make_env: Optional[Callable[[], Any]] = None, sample_seed: int = 1234,
             return_episodes: bool = False):
    """Play one episode per held-out seed with the LM (``PolicyWithValue.lm`` or any causal LM)."""
    make_env = make_env or local_env_factory(cfg)
    rcfg = RolloutConfig.from_train_config(cfg, greedy=greedy)
    rcfg.record_logprobs = False  # evaluation needs no log-probs (and saves B x V per step)
    with torch.random.fork_rng(devices=[lm.device] if lm.device.type == "cuda" else []):
        torch.manual_seed(sample_seed)
        episodes = rollout(LMPolicy(lm, tokenizer, rcfg), tokenizer, seeds, make_env, rcfg)
    metrics = episode_metrics(episodes, cfg.num_rules)
    return (metrics, episodes) if return_episodes else metrics


def solver_answer(episode: Episode) -> str:
    """The solver's password for this game (Paul as 🐔 once he has hatched)."""
    from tasks.password_game import make_instance, solve

    return solve(make_instance(episode.seed), hatched=bool(episode.last_obs.get("hatched")))


def random_answer_fn(seed: int = 0) -> Callable[[Episode], str]:
    """Random strings of 5-20 letters, digits and punctuation (no markup ``*``): the floor."""
    alphabet = string.ascii_letters + string.digits + "!@#$%&?-_.+=~^"

    def answer(episode: Episode) -> str:
        rng = random.Random(f"{seed}:{episode.seed}:{len(episode.turns)}")
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 20)))

    return answer


def evaluate_scripted(fn: Callable[[Episode], str], tokenizer, seeds: Sequence[int], cfg,
                      make_env: Optional[Callable[[], Any]] = None) -> dict[str, Any]:
    make_env = make_env or local_env_factory(cfg)
    rcfg = RolloutConfig.from_train_config(cfg)
    episodes = rollout(ScriptedPolicy(tokenizer, fn), tokenizer, seeds, make_env, rcfg)
    return episode_metrics(episodes, cfg.num_rules)


def reference_rows(tokenizer, seeds: Sequence[int], cfg,
                   make_env: Optional[Callable[[], Any]] = None) -> dict[str, dict[str, Any]]:
    """The solver (upper bound on rules and success) and random strings (floor)."""
    return {"solver": evaluate_scripted(solver_answer, tokenizer, seeds, cfg, make_env),
            "random": evaluate_scripted(random_answer_fn(cfg.seed), tokenizer, seeds, cfg, make_env)}


def format_table(rows: dict[str, dict[str, Any]]) -> str:
    """A plain-text table: one row per policy."""
    head = f"{'policy':<12} {'reward':>8} {'rules':>7} {'success':>8} {'turns':>6} {'episodes':>9}"
    lines = [head, "-" * len(head)]
    for name, r in rows.items():
        lines.append(f"{name:<12} {r['reward']:>8.2f} {r['rules_satisfied']:>7.2f} "
                     f"{r['success_rate']:>8.1%} {r['turns']:>6.2f} {r['episodes']:>9d}")
    return "\n".join(lines)


__all__ = ["episode_metrics", "evaluate", "evaluate_scripted", "format_table",
           "http_env_factory", "local_env_factory", "random_answer_fn", "reference_rows", "solver_answer"]

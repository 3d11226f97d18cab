"""What a game is to the trainer: the ``Task`` dataclass, and helpers the games share.

The rollout, PPO, evaluation and warm start are written once; a ``Task`` tells them, for one
game (one module each: ``password_game``, ``wordle``, ``openspiel``; the registry is
``gamerl.games.registry``):

* **instances**: what one episode is. The Password Game: a seed (``int``). Wordle: a dict
  ``{"seed", "answer"}`` (held-out evaluation uses a fixed set of answers that training never
  sees: seeds alone would not hold answers out, since any 2,309 seeds cover most answers).
  OpenSpiel: a dict ``{"seed", "game", "opponent"}`` (the curriculum picks the game and opponent).
  ``start(make_env, instance) -> (env, first observation)`` opens an episode;
* **text**: the default system prompt, the action in a model's answer (``extract``: the
  password, the guess, the move) and the user message after a move (``feedback``);
* **numbers**: ``turn_stats(info)`` (a few numbers kept per turn), ``metrics(episodes, cfg)``
  (the game's own evaluation columns beside reward and success), ``badness(episode)`` in [0, 1]
  (the failure replay's priority), ``metric_descriptions`` (what its columns are, for figures);
* **helpers**: ``demo(cfg, rng)`` answers for the warm start (format, not skill), and
  ``reference_agents(cfg)`` (the solver / random rows of an evaluation table, keyed by short
  names) with ``reference_labels`` (what each row is, as tables and figures print it).

Nothing here imports the trainer (``gamerl.core``): the games depend on this module only, and
the trainer reaches them through ``gamerl.games.get_task``. An ``Episode`` below is
``gamerl.core.rollout.Episode``.

Answer extraction (``extract_answer``, every game's rule; ``after_marker`` for the games whose
marker is not ``Password:``), in order:
1. if ``</think>`` occurs, keep only the text after its last occurrence (drops thinking);
   an unclosed ``<think>`` drops everything from it to the end;
2. if ``Password:`` occurs (any case), keep the text after its LAST occurrence;
3. take the first non-empty line, skipping lines that are only a code fence (```` ``` ````);
4. strip surrounding whitespace, then matching wrapping quotes/backticks, repeatedly.
Markup (``*``) is never stripped: it is part of the password. An answer with nothing left gives
the empty password, a valid (bad) move, never an exception.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

Instance = Any  # an int seed, or a JSON-able dict with a "seed" key
MakeEnv = Callable[..., Any]
Episode = Any  # gamerl.core.rollout.Episode (not imported: the games never import the trainer)

__all__ = ["GENERIC_METRIC_DESCRIPTIONS", "Instance", "MakeEnv", "Task", "after_marker",
           "extract_answer", "instance_seed", "seed_eval", "seed_instances", "seed_start",
           "wilson_interval"]


def instance_seed(instance: Instance) -> int:
    return int(instance["seed"]) if isinstance(instance, Mapping) else int(instance)


@dataclass(frozen=True)
class Task:
    name: str
    system_prompt: str
    extract: Callable[[str], str]  # model answer text -> the action submitted
    feedback: Callable[[dict, dict, str, str], str]  # (obs, info, action, style) -> user message
    env_factory: Callable[[Any], MakeEnv]  # cfg -> make_env (in-process)
    http_env_factory: Callable[[Any, str], MakeEnv]  # (cfg, base_url) -> make_env (HTTP client)
    start: Callable[[MakeEnv, Instance], tuple[Any, dict]]  # -> (env, first observation)
    train_instances: Callable[[Any, Sequence[int], Optional[dict]], list]  # cfg, seeds, stage
    eval_instances: Callable[[Any, int, Optional[dict]], list]  # cfg, n, overrides
    turn_stats: Callable[[dict], dict]  # the env's info -> numbers kept on the Turn
    metrics: Callable[[Sequence[Episode], Any], dict]  # the game's own evaluation columns
    badness: Callable[[Episode, Any], float]  # 0 (perfect) .. 1 (worst): replay priority
    demo: Callable[[Any, Any], Callable[[Episode], str]]  # (cfg, random.Random) -> answers
    reference_agents: Callable[[Any], dict[str, Callable[[Episode], str]]]
    max_turns: Callable[[Any], int]  # cfg -> turns per episode
    headline: tuple[str, ...] = ()  # metric keys shown in progress bars and tables
    # reference agent name -> what its row is. Named for what the row bounds, not "upper bound":
    # the Password Game's solver satisfies every rule but its long password pays the length
    # penalty, so a trained policy can out-earn it.
    reference_labels: Mapping[str, str] = field(default_factory=dict)
    # metric key (of ``metrics``) -> what the number is, as a figure's axis label says it
    metric_descriptions: Mapping[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------- answers

_PASSWORD_MARK = re.compile(r"password\s*:", re.IGNORECASE)
_FENCE_LINE = re.compile(r"^```[\w+-]*$")
_WRAPPERS = (("```", "```"), ("`", "`"), ('"', '"'), ("'", "'"), ("\u201c", "\u201d"),
             ("\u2018", "\u2019"))


def extract_answer(answer: str) -> str:
    """The action in a model's answer, ``Password:`` as the marker (rules in the module
    docstring)."""
    text = answer
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    marks = list(_PASSWORD_MARK.finditer(text))
    if marks:
        text = text[marks[-1].end():]
    line = ""
    for candidate in text.splitlines():
        candidate = candidate.strip()
        if candidate and not _FENCE_LINE.match(candidate):
            line = candidate
            break
    changed = True
    while changed and line:
        changed = False
        for left, right in _WRAPPERS:
            if (len(line) >= len(left) + len(right) and line.startswith(left)
                    and line.endswith(right)):
                line = line[len(left):len(line) - len(right)].strip()
                changed = True
                break
    return line


def after_marker(answer: str, marker: str) -> str:
    """``extract_answer``'s rule with ``<marker>:`` accepted like ``Password:``."""
    return extract_answer(re.sub(rf"{marker}\s*:", "Password:", answer, flags=re.IGNORECASE))


# ----------------------------------------------------------------------------- episodes by seed

def seed_start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    env = make_env()
    return env, env.reset(instance_seed(instance))


def seed_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    return list(seeds)


def seed_eval(cfg, n: int, overrides: Optional[dict] = None) -> list:
    return cfg.eval_seeds(n)


# ----------------------------------------------------------------------------- numbers

def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a binomial rate (95% by default): unlike the normal
    approximation it stays inside [0, 1] and is honest at 0/n and n/n."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


# What each generic evaluation number is (``gamerl.core.evaluate.episode_metrics``), as an axis
# label says it; each task adds its own (``Task.metric_descriptions``).
GENERIC_METRIC_DESCRIPTIONS: dict[str, str] = {
    "reward": "mean episode reward (game's reward, summed)",
    "success_rate": "games won (fraction)",
    "turns": "turns per game (mean)",
}

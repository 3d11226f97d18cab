"""The games the trainer plays: one ``Task`` per game, and the only game-specific code in gamerl.

The rollout, PPO, evaluation and warm start are written once; a ``Task`` tells them, for one
game (``tasks.password_game``, ``tasks.wordle``, ``tasks.openspiel``):

* **instances**: what one episode is. The Password Game: a seed (``int``). Wordle: a dict
  ``{"seed", "answer"}`` (held-out evaluation uses a fixed set of answers that training never
  sees: seeds alone would not hold answers out, since any 2,309 seeds cover most answers).
  OpenSpiel: a dict ``{"seed", "game", "opponent"}`` (the curriculum picks the game and opponent).
  ``start(make_env, instance) -> (env, first observation)`` opens an episode;
* **text**: the default system prompt, the action in a model's answer (``extract``: the
  password, the guess, the move) and the user message after a move (``feedback``);
* **numbers**: ``turn_stats(info)`` (a few numbers kept per turn), ``metrics(episodes, cfg)``
  (the game's own evaluation columns beside reward and success), ``badness(episode)`` in [0, 1]
  (the failure replay's priority);
* **helpers**: ``demo(cfg, rng)`` answers for the warm start (format, not skill), and
  ``reference_agents(cfg)`` (the solver / random rows of an evaluation table, keyed by short
  names) with ``reference_labels`` (what each row is, as tables and figures print it).

``get_task(name)`` returns the task; ``TASKS`` lists them.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:  # rollout imports this module; the types are only for readers
    from ..core.rollout import Episode

Instance = Any  # an int seed, or a JSON-able dict with a "seed" key
MakeEnv = Callable[..., Any]

__all__ = ["METRIC_DESCRIPTIONS", "TASKS", "Task", "describe_metric", "extract_guess",
           "extract_move", "get_task", "instance_seed", "openspiel_feedback",
           "password_rule_labels", "wilson_interval", "wordle_feedback", "wordle_heldout_answers"]


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
    metrics: Callable[[Sequence["Episode"], Any], dict]  # the game's own evaluation columns
    badness: Callable[["Episode", Any], float]  # 0 (perfect) .. 1 (worst): replay priority
    demo: Callable[[Any, random.Random], Callable[["Episode"], str]]  # warm-start answers
    reference_agents: Callable[[Any], dict[str, Callable[["Episode"], str]]]
    max_turns: Callable[[Any], int]  # cfg -> turns per episode
    headline: tuple[str, ...] = ()  # metric keys shown in progress bars and tables
    # reference agent name -> what its row is. Named for what the row bounds, not "upper bound":
    # the Password Game's solver satisfies every rule but its long password pays the length
    # penalty, so a trained policy can out-earn it.
    reference_labels: Mapping[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------- shared helpers

def _after_marker(answer: str, marker: str) -> str:
    """``extract_password``'s rule with ``<marker>:`` accepted like ``Password:``."""
    from ..core.rollout import extract_password

    return extract_password(re.sub(rf"{marker}\s*:", "Password:", answer, flags=re.IGNORECASE))


def _seed_start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
    env = make_env()
    return env, env.reset(instance_seed(instance))


def _seed_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
    return list(seeds)


def _seed_eval(cfg, n: int, overrides: Optional[dict] = None) -> list:
    return cfg.eval_seeds(n)


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


# ----------------------------------------------------------------------------- Password Game

def _password_task() -> Task:
    from ..core.rollout import extract_password, feedback_message
    from ..core.warmstart import demo_password

    def env_factory(cfg) -> MakeEnv:
        from tasks.password_game import LocalPasswordGameEnv

        game_config = password_game_config(cfg)
        return lambda: LocalPasswordGameEnv(game_config)

    def http_factory(cfg, base_url: str) -> MakeEnv:
        from dataclasses import asdict

        from tasks.password_game import PasswordGameEnv

        gc = password_game_config(cfg)
        return lambda: PasswordGameEnv(base_url, max_steps=gc.max_steps, num_rules=gc.num_rules,
                                       reward=asdict(gc.reward))

    def turn_stats(info: dict) -> dict:
        return {"rules_satisfied": int(info["rules_satisfied"]),
                "num_revealed": int(info["num_revealed"]), "success": bool(info["success"])}

    def metrics(episodes, cfg) -> dict:
        n = max(len(episodes), 1)
        per_rule = [0.0] * cfg.num_rules
        for ep in episodes:
            for rule in ep.final_info.get("rules", []):
                if rule["satisfied"] and rule["id"] < cfg.num_rules:
                    per_rule[rule["id"]] += 1
        return {"rules_satisfied": sum(ep.rules_satisfied for ep in episodes) / n,
                "per_rule_pass_rate": [c / n for c in per_rule]}

    def random_answer(cfg) -> Callable:
        import string

        alphabet = string.ascii_letters + string.digits + "!@#$%&?-_.+=~^"

        def answer(episode) -> str:  # 5-20 letters, digits, punctuation (no markup): the floor
            rng = random.Random(f"{cfg.seed}:{episode.seed}:{len(episode.turns)}")
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 20)))

        return answer

    return Task(
        name="password_game",
        system_prompt=("You are playing the Password Game. Reply with your next password "
                       "only, on one line."),
        extract=extract_password, feedback=feedback_message,
        env_factory=env_factory, http_env_factory=http_factory, start=_seed_start,
        train_instances=_seed_instances, eval_instances=_seed_eval,
        turn_stats=turn_stats, metrics=metrics,
        badness=lambda ep, cfg: 1.0 - ep.rules_satisfied / max(cfg.num_rules, 1),
        demo=lambda cfg, rng: (lambda ep: demo_password(rng, cfg.num_rules,
                                                        cfg.warmstart_extra_prob)),
        reference_agents=lambda cfg: {"solver": password_solver_answer, "random": random_answer(cfg)},
        max_turns=lambda cfg: cfg.max_steps,
        headline=("rules_satisfied",),
        reference_labels={"solver": "solver (all rules)", "random": "random strings (floor)"},
    )


def password_solver_answer(episode) -> str:
    """The solver's password for this game (Paul as 🐔 once he has hatched)."""
    from tasks.password_game import make_instance, solve

    return solve(make_instance(episode.seed), hatched=bool(episode.last_obs.get("hatched")))


def password_game_config(cfg):
    """The Password Game's GameConfig from a TrainConfig (its game fields)."""
    from tasks.password_game import GameConfig, RewardConfig

    return GameConfig(max_steps=cfg.max_steps, num_rules=cfg.num_rules, reward=RewardConfig(
        reward_per_rule=cfg.reward_per_rule, length_penalty=cfg.length_penalty,
        episode_bonus=cfg.episode_bonus, bonus_min_rules=cfg.bonus_min_rules,
        mode=cfg.reward_mode))


# ----------------------------------------------------------------------------- Wordle

_EMPHASIS = "*_"
_TRAILING = ".!?"
WORDLE_HELDOUT = 128  # held-out answers (evaluation only)


def extract_guess(answer: str) -> str:
    """The guess in a model's answer: ``extract_password``'s rule with ``Guess:`` as a marker
    too, then emphasis (``*``, ``_``) around the word and trailing ``.!?`` removed. The game
    itself lowercases and strips whitespace (``tasks.wordle.normalize_guess``)."""
    word = _after_marker(answer, "guess")
    return word.strip(_EMPHASIS).rstrip(_TRAILING).strip(_EMPHASIS).strip()


def wordle_feedback(obs: Mapping[str, Any], info: Mapping[str, Any], action: str,
                    style: str = "compact") -> str:
    """The observation after a guess; ``compact`` drops the instructions paragraph (already in
    the first message): the board (invalid guesses say why), the letters, the guesses left."""
    from tasks.wordle.game import INSTRUCTIONS

    text = obs["text"]
    if style == "compact" and text.startswith(INSTRUCTIONS):
        text = text[len(INSTRUCTIONS):].lstrip("\n")
    return text


def wordle_heldout_answers(n: int = WORDLE_HELDOUT) -> tuple[str, ...]:
    """A fixed, diverse held-out set: every (2309/n)-th answer in alphabetical order, so all
    first letters and letter patterns are represented. Training never draws these answers."""
    from tasks.wordle import answers

    words = sorted(answers())
    return tuple(words[(i * len(words)) // n] for i in range(n))


def wordle_config(cfg):
    from tasks.wordle import WordleConfig

    return WordleConfig(**dict(cfg.task_config or {}))


def _wordle_task() -> Task:
    def env_factory(cfg) -> MakeEnv:
        from tasks.wordle import LocalWordleEnv

        config = wordle_config(cfg)
        return lambda: LocalWordleEnv(config)

    def http_factory(cfg, base_url: str) -> MakeEnv:
        from dataclasses import asdict

        from tasks.wordle import WordleEnv

        c = wordle_config(cfg)
        return lambda: WordleEnv(base_url, max_guesses=c.max_guesses, hard_mode=c.hard_mode,
                                 reward=asdict(c.reward))

    def start(make_env: MakeEnv, instance: Instance) -> tuple[Any, dict]:
        env = make_env()
        return env, env.reset(answer=instance["answer"])

    def train_instances(cfg, seeds: Sequence[int], stage: Optional[dict] = None) -> list:
        from tasks.wordle import answers

        held = set(wordle_heldout_answers())
        pool = [w for w in answers() if w not in held]
        return [{"seed": s, "answer": pool[random.Random(s).randrange(len(pool))]} for s in seeds]

    def eval_instances(cfg, n: int, overrides: Optional[dict] = None) -> list:
        held = wordle_heldout_answers()
        seeds = cfg.eval_seeds(n)
        return [{"seed": s, "answer": held[i % len(held)]} for i, s in enumerate(seeds)]

    def turn_stats(info: dict) -> dict:
        return {"valid": bool(info.get("valid")), "repeated": bool(info.get("repeated")),
                "greens": sum(m == "green" for m in (info.get("marks") or [])),
                "success": bool(info.get("success"))}

    def metrics(episodes, cfg) -> dict:
        n = max(len(episodes), 1)
        turns = [t for ep in episodes for t in ep.turns]
        wins = [len(ep.turns) for ep in episodes if ep.success]
        return {"guesses_when_solved": sum(wins) / len(wins) if wins else float("nan"),
                "invalid_rate": sum(not t.stats.get("valid") for t in turns) / max(len(turns), 1),
                "repeat_rate": sum(t.stats.get("repeated", False) for t in turns)
                / max(len(turns), 1),
                "best_greens": sum(max((t.stats.get("greens", 0) for t in ep.turns), default=0)
                                   for ep in episodes) / n}

    def badness(ep, cfg) -> float:
        if ep.success:
            return 0.0
        return 1.0 - max((t.stats.get("greens", 0) for t in ep.turns), default=0) / 5 * 0.5

    def demo(cfg, rng: random.Random) -> Callable:
        from tasks.wordle import answers

        words = answers()
        return lambda ep: rng.choice(words)  # a valid word, feedback ignored: format, not skill

    def reference_agents(cfg) -> dict:
        from tasks.wordle import answers
        from tasks.wordle.solver import default_solver

        solver = default_solver()
        words = answers()

        def solver_answer(ep) -> str:
            obs = ep.last_obs
            return solver.next_guess(list(zip(obs.get("guesses", []), obs.get("marks", []))))

        def random_answer(ep) -> str:
            return random.Random(f"{cfg.seed}:{ep.seed}:{len(ep.turns)}").choice(words)

        return {"solver": solver_answer, "random": random_answer}

    return Task(
        name="wordle",
        system_prompt="You are playing Wordle. Reply with your next guess only: one 5-letter word.",
        extract=extract_guess, feedback=wordle_feedback,
        env_factory=env_factory, http_env_factory=http_factory, start=start,
        train_instances=train_instances, eval_instances=eval_instances,
        turn_stats=turn_stats, metrics=metrics, badness=badness, demo=demo,
        reference_agents=reference_agents,
        max_turns=lambda cfg: wordle_config(cfg).max_guesses,
        headline=("best_greens",),
        # The entropy solver wins every held-out game in 3.5 guesses on average; a policy that
        # finds words in fewer guesses could out-earn it, so it is not called a bound.
        reference_labels={"solver": "entropy solver (wins every game)",
                          "random": "random answer words"},
    )


# ----------------------------------------------------------------------------- OpenSpiel

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
    """The move in a model's answer: ``extract_password``'s rule with ``Move:`` as a marker.
    The game's parser is tolerant of case and spacing (``tasks.openspiel.moves``)."""
    return _after_marker(answer, "move")


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


def _openspiel_task() -> Task:
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
    )


# ----------------------------------------------------------------------------- describing numbers

# What each evaluation number is, as an axis label says it (figures); the keys are those of
# ``episode_metrics`` and the tasks' ``metrics``. A key not here is shown as its own name.
METRIC_DESCRIPTIONS: dict[str, str] = {
    "reward": "mean episode reward (game's reward, summed)",
    "success_rate": "games won (fraction)",
    "turns": "turns per game (mean)",
    "rules_satisfied": "rules the last password satisfies (mean)",
    "best_greens": "greens in the best guess (mean, of 5)",
    "guesses_when_solved": "guesses per solved game (mean)",
    "invalid_rate": "invalid guesses (fraction of turns)",
    "repeat_rate": "repeated guesses (fraction of turns)",
    "win_rate": "games won (fraction)",
    "draw_rate": "games drawn (fraction)",
    "loss_rate": "games lost (fraction)",
    "illegal_rate": "illegal answers (fraction of turns)",
}


def describe_metric(key: str) -> str:
    return METRIC_DESCRIPTIONS.get(key, key.replace("_", " "))


def password_rule_labels(n: int) -> list[str]:
    """``["1. 5+ characters", "2. a number", ...]`` for the first ``n`` rules: numbered from 1
    as the game's text numbers them (``per_rule_pass_rate[i]`` is rule ``i + 1``)."""
    from tasks.password_game.rules import NUM_RULES, rule_label

    return [rule_label(i) if i < NUM_RULES else f"{i + 1}" for i in range(n)]


# ----------------------------------------------------------------------------- registry

TASKS: dict[str, Callable[[], Task]] = {
    "password_game": _password_task,
    "wordle": _wordle_task,
    "openspiel": _openspiel_task,
}
_BUILT: dict[str, Task] = {}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    if name not in _BUILT:
        _BUILT[name] = TASKS[name]()
    return _BUILT[name]

"""``env_config.json``: the game a run plays and its settings, for every task.

=================  ==============================================================================
key                meaning
=================  ==============================================================================
task               ``password_game``, ``wordle`` or ``openspiel`` (left out: ``openspiel``, as
                   files written before the other games could be configured)
execution          ``local_<task>`` (in-process games: ``local_password_game``, ``local_wordle``,
                   ``local_openspiel``) or ``http`` (the game's server, ``python -m
                   tasks.<task>.server``)
base_url           the server's URL; used (and required) with ``http`` only
=================  ==============================================================================

and the task's own keys:

* ``password_game``: ``num_rules`` (play the first N of 26 rules) and ``reward``:
  ``{reward_per_rule, length_penalty, episode_bonus, bonus_min_rules, mode}``, which are the
  TrainConfig fields ``num_rules``, ``reward_per_rule``, ``length_penalty``, ``episode_bonus``,
  ``bonus_min_rules`` and ``reward_mode`` (PASSWORD_GAME_README.md, "Rewards");
* ``wordle``: ``max_guesses``, ``hard_mode`` and ``reward`` (``tasks.wordle.WordleConfig``'s
  fields, tasks/wordle/README.md): TrainConfig.task_config;
* ``openspiel``: ``games``, ``opponent``, ``model_seat``, ``mcts_simulations``, ``mcts_uct_c``,
  ``mcts_rollouts``, ``illegal_move_policy``, ``max_illegal_retries``, ``reward``
  (``gamerl.games.openspiel.OPENSPIEL_ENV_KEYS``, tasks/openspiel/README.md):
  TrainConfig.task_config. With the curriculum on, training plays the current stage's games and
  opponent; ``games`` and ``opponent`` are then what the held-out evaluation plays.

``read_env`` turns such an object into TrainConfig fields (and the URL); ``env_to_json`` is its
inverse. Unknown keys and bad values are errors naming the file and the key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from .train_config import TrainConfig
from ..games.openspiel import OPENSPIEL_ENV_KEYS
from ..games.registry import TASKS
from .jsonchecks import COMMENT, check_keys, field_value, without_comment

ENV_FILE = "env_config.json"
LEGACY_TASK = "openspiel"  # the task of an env file without "task" (only OpenSpiel had one)
SERVER_PORTS = {"password_game": 8000, "wordle": 8001, "openspiel": 8002}  # the servers' defaults
OPENSPIEL_REWARD_KEYS = ("scale", "illegal_move_penalty", "legal_move_bonus")
# env_config.json's reward keys -> the TrainConfig fields of the Password Game's reward
PASSWORD_REWARD_FIELDS = {"reward_per_rule": "reward_per_rule",
                          "length_penalty": "length_penalty", "episode_bonus": "episode_bonus",
                          "bonus_min_rules": "bonus_min_rules", "mode": "reward_mode"}
WORDLE_ENV_KEYS = ("max_guesses", "hard_mode", "reward")
TASK_ENV_KEYS: dict[str, tuple[str, ...]] = {"password_game": ("num_rules", "reward"),
                                             "wordle": WORDLE_ENV_KEYS,
                                             "openspiel": OPENSPIEL_ENV_KEYS}

ENV_COMMENTS: dict[str, list[str]] = {
    "openspiel": [
        "OpenSpiel environment (tasks/openspiel/README.md). execution: local_openspiel "
        "(in-process) or http (then base_url, a server from `python -m "
        "tasks.openspiel.server`).",
        "opponent random | mcts; model_seat 0 | 1 | random; illegal_move_policy retry | "
        "random | loss. With the curriculum on, training plays the stage's games and "
        "opponent, and these games and opponent are the held-out evaluation's."],
    "wordle": [
        "Wordle environment (tasks/wordle/README.md). execution: local_wordle (in-process) or "
        "http (then base_url, a server from `python -m tasks.wordle.server`).",
        "max_guesses per game; hard_mode: every revealed hint must be used; reward: the "
        "per-turn rewards (win_reward, turn_decay, green_reward, present_reward, "
        "invalid_penalty, repeat_penalty, loss_penalty)."],
    "password_game": [
        "Password Game environment (PASSWORD_GAME_README.md). execution: local_password_game "
        "(in-process) or http (then base_url, a server from `python -m "
        "tasks.password_game.server`).",
        "num_rules: play the first N of the 26 rules. reward: score = rules held x "
        "reward_per_rule - length x length_penalty (+ episode_bonus from bonus_min_rules "
        "rules on); mode delta pays each turn's change in score (a game returns its final "
        "score), absolute pays the score every turn. Turns per game: training.max_steps."],
}

__all__ = ["ENV_FILE", "EnvSettings", "TASK_ENV_KEYS", "env_to_json", "executions", "read_env"]


def executions(task: str) -> tuple[str, str]:
    return (f"local_{task}", "http")


@dataclass
class EnvSettings:
    task: str
    values: dict[str, Any]  # TrainConfig fields
    url: Optional[str]  # the server's URL with "execution": "http", else None


# ----------------------------------------------------------------------------- reading

def read_env(data: dict, path: Path) -> EnvSettings:
    """The TrainConfig fields (``task`` included) and server URL an env_config.json object sets."""
    where = str(path)
    task = data.get("task", LEGACY_TASK)
    if task not in TASKS:
        raise ValueError(f"{where}: task: expected one of {', '.join(TASKS)}, got "
                         f"{json.dumps(task)}")
    check_keys(data, ["task", "execution", "base_url", *TASK_ENV_KEYS[task]], where)
    execution = data.get("execution", executions(task)[0])
    if execution not in executions(task):
        raise ValueError(f"{where}: execution: expected one of {', '.join(executions(task))}, "
                         f"got {json.dumps(execution)}")
    url = data.get("base_url")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError(f"{where}: base_url: expected an http:// or https:// URL, got "
                         f"{json.dumps(url)}")
    if execution == "http" and url is None:
        port = SERVER_PORTS[task]
        raise ValueError(f"{where}: execution \"http\" needs a base_url (the server's URL, e.g. "
                         f"\"http://127.0.0.1:{port}\" for `python -m tasks.{task}.server "
                         f"--port {port}`)")
    settings = {k: data[k] for k in TASK_ENV_KEYS[task] if k in data}
    values = {"password_game": _password_values, "wordle": _wordle_values,
              "openspiel": _openspiel_values}[task](settings, where)
    return EnvSettings(task, {"task": task, **values}, url if execution == "http" else None)


def _reward_object(settings: dict, known, where: str) -> dict:
    reward = settings["reward"]
    if not isinstance(reward, dict):
        raise ValueError(f"{where}: reward: expected an object {{{', '.join(known)}}}, got "
                         f"{json.dumps(reward)}")
    check_keys(reward, known, f"{where}: reward")
    return without_comment(reward)


def _password_values(settings: dict, where: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "num_rules" in settings:
        values["num_rules"] = field_value(settings["num_rules"], "num_rules",
                                          f"{where}: num_rules")
    if "reward" in settings:
        reward = _reward_object(settings, list(PASSWORD_REWARD_FIELDS), where)
        for key, name in PASSWORD_REWARD_FIELDS.items():
            if key in reward:
                values[name] = field_value(reward[key], name, f"{where}: reward.{key}")
    return values


def _wordle_values(settings: dict, where: str) -> dict[str, Any]:
    from tasks.wordle.game import RewardConfig, WordleConfig

    if "reward" in settings:
        settings["reward"] = _reward_object(settings, [f.name for f in fields(RewardConfig)],
                                            where)
    try:
        WordleConfig(**settings)  # its own checks: max_guesses 1..100, finite rewards >= 0
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    return {"task_config": settings}


def _openspiel_values(settings: dict, where: str) -> dict[str, Any]:
    _check_openspiel(settings, where)
    if "reward" in settings:
        settings["reward"] = without_comment(settings["reward"])
    return {"task_config": settings}


def _check_openspiel(s: dict, where: str) -> None:
    from tasks.openspiel.games import GAMES

    from ..games.openspiel import OPPONENTS

    def bad(key: str, expected: str) -> ValueError:
        return ValueError(f"{where}: {key}: expected {expected}, got {json.dumps(s[key])}")

    def is_int(v: Any, low: int) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    if "games" in s:
        games = [s["games"]] if isinstance(s["games"], str) else s["games"]
        if not isinstance(games, list) or not games or not all(isinstance(g, str) for g in games):
            raise bad("games", "a non-empty list of game names")
        unknown = [g for g in games if g not in GAMES]
        if unknown:
            raise ValueError(f"{where}: games: unknown game {unknown[0]!r}; supported games: "
                             + ", ".join(GAMES))
    if "opponent" in s and s["opponent"] not in OPPONENTS:
        raise bad("opponent", " or ".join(repr(o) for o in OPPONENTS))
    if "model_seat" in s and (s["model_seat"] not in (0, 1, "random")
                              or isinstance(s["model_seat"], bool)):
        raise bad("model_seat", "0, 1 or \"random\"")
    for key, low in (("mcts_simulations", 1), ("mcts_rollouts", 1), ("max_illegal_retries", 0)):
        if key in s and not is_int(s[key], low):
            raise bad(key, f"an integer >= {low}")
    if "mcts_uct_c" in s and not (isinstance(s["mcts_uct_c"], (int, float))
                                  and not isinstance(s["mcts_uct_c"], bool)
                                  and math.isfinite(s["mcts_uct_c"]) and s["mcts_uct_c"] >= 0):
        raise bad("mcts_uct_c", "a number >= 0")
    if "illegal_move_policy" in s and s["illegal_move_policy"] not in ("retry", "random", "loss"):
        raise bad("illegal_move_policy", "\"retry\", \"random\" or \"loss\"")
    if "reward" in s:
        reward = s["reward"]
        if not isinstance(reward, dict):
            raise bad("reward", "an object {" + ", ".join(OPENSPIEL_REWARD_KEYS) + "}")
        check_keys(reward, OPENSPIEL_REWARD_KEYS, f"{where}: reward")
        for key in OPENSPIEL_REWARD_KEYS:
            v = reward.get(key, 0.0)
            if v is None and key == "scale":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{where}: reward.{key}: expected a number"
                                 + (" or null (the game's own scale)" if key == "scale" else "")
                                 + f", got {json.dumps(v)}")




# ----------------------------------------------------------------------------- writing

def env_to_json(cfg: TrainConfig, env_url: Optional[str] = None) -> dict[str, Any]:
    """The env_config.json object for ``cfg`` (with "_comment"s): the inverse of
    :func:`read_env`. ``env_url`` set: ``"execution": "http"`` with that ``base_url``."""
    task = cfg.task
    env: dict[str, Any] = {COMMENT: ENV_COMMENTS[task], "task": task,
                           "execution": "http" if env_url else executions(task)[0]}
    if env_url:
        env["base_url"] = env_url
    if task == "password_game":
        env["num_rules"] = cfg.num_rules
        env["reward"] = {key: getattr(cfg, name) for key, name in PASSWORD_REWARD_FIELDS.items()}
        return env
    task_config = dict(cfg.task_config or {})
    known = TASK_ENV_KEYS[task]
    for key in [*known, *sorted(set(task_config) - set(known))]:
        if key in task_config:
            env[key] = _jsonable(task_config[key])
    return env


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value

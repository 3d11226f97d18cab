"""``env_config.json``: the game a run plays and its settings, for every task.

=================  ==============================================================================
key                meaning
=================  ==============================================================================
task               a game of the registry that has env_config.json keys (``password_game``,
                   ``wordle``, ``openspiel``; left out: ``openspiel``, as files written before
                   the other games could be configured)
execution          ``local_<task>`` (in-process games: ``local_password_game``, ``local_wordle``,
                   ``local_openspiel``) or ``http`` (the game's server, ``python -m
                   tasks.<task>.server``)
base_url           the server's URL; used (and required) with ``http`` only
=================  ==============================================================================

and the task's own keys, which its module declares (``Task.config_files``, a
``gamerl.games.pieces.ConfigFiles``: the keys, how they are read and written, the comments; a game
without one has no env_config.json, and reading or writing one for it is a one-line error):

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
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

from .train_config import TrainConfig
from ..games.pieces import ConfigFiles
from ..games.registry import TASKS, get_task
from .jsonchecks import COMMENT, check_keys, field_value, without_comment

ENV_FILE = "env_config.json"
LEGACY_TASK = "openspiel"  # the task of an env file without "task" (only OpenSpiel had one)


__all__ = ["ENV_CHECKS", "ENV_FILE", "EnvSettings", "config_files", "env_tasks", "env_to_json",
           "executions", "read_env"]


def env_tasks() -> list[str]:
    """The registered games that have env_config.json keys (``Task.config_files``)."""
    return [name for name in TASKS if get_task(name).config_files is not None]


def config_files(task: str, where: str = "") -> ConfigFiles:
    """``task``'s part of the run's JSON files; ValueError (one line, prefixed by ``where``) for
    a game nobody registered or one whose module declares none."""
    prefix = f"{where}: task: " if where else ""
    if task not in TASKS:
        raise ValueError(f"{prefix}expected one of {', '.join(env_tasks())}, got "
                         f"{json.dumps(task)}")
    files = get_task(task).config_files
    if files is None:
        raise ValueError(f"{prefix}game {task!r} has no env_config.json settings (its Task "
                         "declares no config_files: docs/how-to/add-a-game.md); play "
                         f"it with `python -m gamerl train --task {task}`, or use one of "
                         f"{', '.join(env_tasks())}")
    return files


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
    files = config_files(task, where)
    check_keys(data, ["task", "execution", "base_url", *files.env_keys], where)
    execution = data.get("execution", executions(task)[0])
    if execution not in executions(task):
        raise ValueError(f"{where}: execution: expected one of {', '.join(executions(task))}, "
                         f"got {json.dumps(execution)}")
    url = data.get("base_url")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise ValueError(f"{where}: base_url: expected an http:// or https:// URL, got "
                         f"{json.dumps(url)}")
    if execution == "http" and url is None:
        port = get_task(task).server_port
        example = (f", e.g. \"http://127.0.0.1:{port}\" for `python -m tasks.{task}.server "
                   f"--port {port}`" if port is not None else "")
        raise ValueError(f"{where}: execution \"http\" needs a base_url (the server's URL"
                         f"{example})")
    settings = {k: data[k] for k in files.env_keys if k in data}
    values = files.read(settings, where, ENV_CHECKS)
    return EnvSettings(task, {"task": task, **values}, url if execution == "http" else None)


def _reward_object(settings: dict, known, where: str) -> dict:
    reward = settings["reward"]
    if not isinstance(reward, dict):
        raise ValueError(f"{where}: reward: expected an object {{{', '.join(known)}}}, got "
                         f"{json.dumps(reward)}")
    check_keys(reward, known, f"{where}: reward")
    return without_comment(reward)


# What a game's ConfigFiles.read is handed (the games import nothing of gamerl.config).
ENV_CHECKS = SimpleNamespace(check_keys=check_keys, field_value=field_value,
                             without_comment=without_comment, reward_object=_reward_object)


# ----------------------------------------------------------------------------- writing

def env_to_json(cfg: TrainConfig, env_url: Optional[str] = None) -> dict[str, Any]:
    """The env_config.json object for ``cfg`` (with "_comment"s): the inverse of
    :func:`read_env`. ``env_url`` set: ``"execution": "http"`` with that ``base_url``."""
    task = cfg.task
    files = config_files(task)
    env: dict[str, Any] = {COMMENT: list(files.env_comment), "task": task,
                           "execution": "http" if env_url else executions(task)[0]}
    if env_url:
        env["base_url"] = env_url
    env.update(files.write(cfg))
    return env

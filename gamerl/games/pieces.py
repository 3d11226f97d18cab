"""What a game declares for the code past the trainer, each piece optional (``Task`` fields):

* ``Task.server_port``: its HTTP server's default port (``python -m tasks.<name>.server``), for
  the examples in messages;
* ``Task.config_files`` (``ConfigFiles``): its part of the run's JSON files: its keys in
  ``env_config.json`` and how they are read and written, and the ``"_comment"``s of both files
  (``gamerl.config.envconfig``, ``gamerl.config.jsonconfig``). Without it the game has no
  env_config.json, so neither ``train --config`` nor ``configure`` offers it (a one-line error
  says so); ``TrainConfig(task=...)`` and ``train --task NAME`` play it all the same;
* ``Task.wizard`` (``WizardQuestions``): its defaults and questions in ``python -m gamerl
  configure`` (``gamerl.config.configure``); without it (but with ``config_files``) the wizard
  offers the game with its preset and asks no question of its own;
* ``Task.verl``: a zero-argument factory of its ``VerlSpec``, what the verl bridge needs
  (``gamerl.integrations.verl.games``); without it the bridge does not list the game.

The games import nothing of ``gamerl.config`` (``TrainConfig`` imports the games), so the
config code hands the helpers a reader or a question needs to the game's functions: ``checks``
(``gamerl.config.envconfig.ENV_CHECKS``) and ``wizard`` (``gamerl.config.configure.Wizard``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

__all__ = ["ConfigFiles", "VerlSpec", "WizardQuestions", "task_config_reader",
           "task_config_writer"]


@dataclass(frozen=True)
class ConfigFiles:
    """A game's part of ``env_config.json`` and ``train_config.json``."""

    # env_config.json's keys of the game (beside task, execution, base_url), in file order
    env_keys: tuple[str, ...]
    # (its keys present in the file, where (the file, for messages), checks) -> the TrainConfig
    # fields they set (ValueError naming ``where`` and the key on a bad value); ``checks`` is
    # gamerl.config.envconfig.ENV_CHECKS: check_keys, field_value, without_comment, reward_object
    read: Callable[[dict, str, Any], dict[str, Any]]
    # cfg -> its keys and JSON values, in file order: the inverse of ``read``
    write: Callable[[Any], dict[str, Any]]
    env_comment: Sequence[str] = ()  # env_config.json's "_comment"
    # what env_config.json holds for it, as train_config.json's first comment says it ("the
    # games", "Wordle's settings")
    env_holds: str = "the game's settings"
    # train_config.json's sections -> the game's lines of their "_comment" (game, sampling,
    # schedule, instances)
    train_comments: Mapping[str, Any] = field(default_factory=dict)
    # cfg -> None, or ValueError: a check of the loaded configuration as a whole (OpenSpiel's
    # task_config with its defaults filled in)
    check: Optional[Callable[[Any], Any]] = None


@dataclass(frozen=True)
class WizardQuestions:
    """A game's part of ``python -m gamerl configure``."""

    label: str = ""  # how the first question describes it: "the Password Game"; "": its name only
    # (the preset's cfg for the chosen model, the model) -> the wizard's defaults for the game
    defaults: Callable[[Any, str], Any] = lambda cfg, model: cfg
    # (cfg, wizard) -> cfg with the game's own settings asked (``wizard.question`` re-asks a bad
    # answer; ``wizard.checked(cfg, **changes)`` validates); None: no question of its own
    ask: Optional[Callable[[Any, Any], Any]] = None


@dataclass(frozen=True)
class VerlSpec:
    """What the verl bridge needs of a game beyond its ``Task`` (the system prompt, ``extract``
    and ``feedback`` come from the Task unless given here). Its configs travel as plain dicts
    and are validated by ``config_cls``."""

    title: str  # the first words of the first user message: "<title> #<seed>"
    config_cls: Callable[..., Any]  # the game's config class (validates)
    default_config: Callable[[], dict]  # the bridge's default config (a dict config_cls takes)
    make_env: Callable[[Any], Any]  # config object -> environment with reset/submit/close
    secret: Callable[[int, Any], str]  # (seed, config object) -> the instance's secret
    max_turns: Callable[[Any], int]  # config object -> the game's turn limit
    extract: Optional[Callable[[str], str]] = None  # None: the Task's
    # (obs, info, action) -> the next user message; None: the Task's, style "compact"
    feedback: Optional[Callable[[dict, dict, str], str]] = None


def task_config_reader(check: Callable[[dict, str, Any], Any]) -> Callable[[dict, str, Any], dict]:
    """A ``ConfigFiles.read`` for a game whose env_config.json keys are its ``task_config``:
    ``check(settings, where, checks)`` validates them (and may normalise them in place)."""

    def read(settings: dict, where: str, checks: Any) -> dict[str, Any]:
        check(settings, where, checks)
        return {"task_config": settings}

    return read


def task_config_writer(keys: Sequence[str]) -> Callable[[Any], dict[str, Any]]:
    """A ``ConfigFiles.write`` for such a game: its ``task_config``, ``keys`` first in their
    order, then any other key (sorted; reading refuses it, naming it)."""

    def write(cfg) -> dict[str, Any]:
        task_config = dict(cfg.task_config or {})
        return {key: _jsonable(task_config[key])
                for key in [*keys, *sorted(set(task_config) - set(keys))] if key in task_config}

    return write


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value

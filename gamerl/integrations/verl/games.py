"""What the verl bridge knows about each game: one ``GameSpec`` per game name, built from the
game's ``Task`` (its system prompt, ``extract`` and ``feedback``, style ``"compact"``) and the
``VerlSpec`` its module declares (``Task.verl``: title, config class and defaults, environment,
secret, turn limit; ``gamerl.games.pieces``). ``GAMES`` is every registered game that declares
one (the Password Game and Wordle; a game added with ``register_task`` whose Task has ``verl`` is
one too), read from the registry each time.

A spec turns a game into the three things a multi-turn rollout needs, on top of the task protocol
(``reset(seed) -> obs``, ``submit(text) -> (obs, reward, done, info)``):

* the first chat messages (``initial_messages``): an optional system prompt and one user message,
  ``"<Title> #<seed>"`` on its first line, then the game's first observation text. The first
  observation is the SAME for every seed in both games (the rules or the empty board), so without
  the header every prompt of a dataset would be identical and verl's validation table (sorted by
  prompt text, then a fixed shuffle) would show the same-looking sample every time;
* the action in a model's answer (``extract``):
  - Password Game: ``gamerl.games.password_game.extract_password`` (the trainer's rule: drop
    ``<think>``, text after the last ``Password:``, first non-empty non-fence line, wrapping quotes
    stripped, markup kept);
  - Wordle: the same rule with ``Guess:`` accepted as the marker too, then ``*``/``_`` emphasis and
    trailing ``.``/``!``/``?`` stripped (``**CRANE**.`` -> ``CRANE``). Anything else is submitted
    as written, so a chatty answer is an invalid guess: a wasted turn that teaches the format;
* the user message after a move (``feedback``):
  - Password Game: ``gamerl.games.password_game.feedback_message`` (compact by default, as in our
    trainer);
  - Wordle: the observation text without the instructions paragraph (board, letters, guesses
    left, and the reason when a guess was invalid).

Game configs travel as plain dicts (JSON in the dataset rows) and are validated by the game's own
config class. The bridge's default config differs from the game's defaults in one place: the
Password Game uses ``reward.mode="delta"``, because the bridge pays an episode the SUM of its turn
rewards and the seed's ``"absolute"`` mode summed over turns pays for stalling (see
``tasks.password_game.RewardConfig``). Pass ``{"reward": {"mode": "absolute"}}`` to get the seed's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping as MappingABC
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Mapping

from gamerl.core.rollout import first_messages
from gamerl.games import TASKS, Task, get_task
# re-exported, as before the specs moved to the games' modules
from gamerl.games.wordle import extract_guess, wordle_feedback  # noqa: F401

__all__ = ["AGENT_NAME", "GAMES", "GameSpec", "deep_merge", "extract_guess", "get_game",
           "spec_from_task", "wordle_feedback"]

AGENT_NAME = "game_rl"  # the agent loop's name: agent_loop.py, config/agent_loops.yaml, rows


@dataclass(frozen=True)
class GameSpec:
    name: str  # the dataset's extra_info.game, and data_source "game_rl/<name>"
    title: str  # first word(s) of the first user message: "<title> #<seed>"
    system_prompt: str
    _defaults: Callable[[], dict]  # the bridge's default config (a dict the config class accepts)
    _config_cls: Callable[..., Any]  # the game's config class (validates)
    _make_env: Callable[[Any], Any]  # config object -> environment with reset/submit/close
    extract: Callable[[str], str]  # model answer text -> action submitted to the game
    feedback: Callable[[dict, dict, str], str]  # (obs, info, action) -> next user message
    _secret: Callable[[int, Any], str]  # (seed, config object) -> the instance's secret
    _max_turns: Callable[[Any], int]  # config object -> the game's turn limit

    # ------------------------------------------------------------------ configs
    def default_config(self) -> dict:
        return self._defaults()

    def config(self, overrides: Mapping[str, Any] | str | None = None):
        """The game's config object: the bridge default with ``overrides`` (a dict or a JSON
        string) merged in recursively, validated by the game's config class."""
        if isinstance(overrides, str):
            overrides = json.loads(overrides) if overrides.strip() else {}
        merged = deep_merge(self._defaults(), dict(overrides or {}))
        try:
            return self._config_cls(**merged)
        except TypeError as e:  # an unknown key: say which game and what it accepts
            raise ValueError(f"bad {self.name} config {merged!r}: {e}") from e

    def config_dict(self, overrides: Mapping[str, Any] | str | None = None) -> dict:
        return asdict(self.config(overrides))

    # ------------------------------------------------------------------ episodes
    def make_env(self, config):
        return self._make_env(config)

    def secret(self, seed: int, config) -> str:
        return self._secret(seed, config)

    def max_turns(self, config) -> int:
        return self._max_turns(config)

    def initial_messages(self, seed: int, obs: Mapping[str, Any],
                         system_prompt: str | None = "default") -> list[dict[str, str]]:
        """System prompt (``"default"``: this game's; ``None`` or ``""``: none) and the first
        user message: ``"<title> #<seed>"``, a newline, the first observation's text."""
        if system_prompt == "default":
            system_prompt = self.system_prompt
        messages = first_messages(obs, system_prompt or None)
        messages[-1] = {"role": "user", "content": f"{self.title} #{seed}\n{obs['text']}"}
        return messages


def deep_merge(base: dict, overrides: Mapping[str, Any]) -> dict:
    """``base`` with ``overrides`` merged in; nested dicts merge key by key. Copies, never
    mutates."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# ----------------------------------------------------------------------------- registry

def spec_from_task(task: Task) -> GameSpec:
    """The bridge's spec of a game: its ``Task`` and the ``VerlSpec`` of ``task.verl()``."""
    if task.verl is None:
        raise ValueError(f"game {task.name!r} has no verl spec (its Task declares no verl: "
                         f"docs/how-to/add-a-game.md); known: {', '.join(GAMES)}")
    verl = task.verl()
    return GameSpec(
        name=task.name, title=verl.title, system_prompt=task.system_prompt,  # our trainer's
        _defaults=verl.default_config, _config_cls=verl.config_cls, _make_env=verl.make_env,
        extract=verl.extract or task.extract,
        feedback=verl.feedback or (lambda obs, info, action: task.feedback(obs, info, action,
                                                                           "compact")),
        _secret=verl.secret, _max_turns=verl.max_turns)


class _Games(MappingABC):
    """game name -> a zero-argument factory of its ``GameSpec``: every registered game whose Task
    declares ``verl``, in the registry's order, read from the registry each time (a game
    registered later is in it)."""

    def _names(self) -> list[str]:
        return [name for name in TASKS if get_task(name).verl is not None]

    def __getitem__(self, name: str) -> Callable[[], GameSpec]:
        if name not in TASKS or get_task(name).verl is None:
            raise KeyError(name)
        return lambda: spec_from_task(get_task(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


GAMES: Mapping[str, Callable[[], GameSpec]] = _Games()
_BUILT: dict[str, tuple[Task, GameSpec]] = {}  # name -> (the Task it was built from, its spec)


def get_game(name: str) -> GameSpec:
    """The spec for ``name`` (one of ``GAMES``); built once per registered Task."""
    if name not in TASKS:
        raise ValueError(f"unknown game {name!r}; known: {', '.join(sorted(GAMES))}")
    task = get_task(name)
    built = _BUILT.get(name)
    if built is None or built[0] is not task:  # re-registered: build it again
        _BUILT[name] = built = (task, spec_from_task(task))
    return built[1]

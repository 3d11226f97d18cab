"""What the verl bridge knows about each game: one ``GameSpec`` per game name.

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
config class. ``bridge_default_config`` differs from the game's defaults in one place: the Password
Game uses ``reward.mode="delta"``, because the bridge pays an episode the SUM of its turn rewards
and the seed's ``"absolute"`` mode summed over turns pays for stalling (see
``tasks.password_game.RewardConfig``). Pass ``{"reward": {"mode": "absolute"}}`` to get the seed's.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

from gamerl.core.rollout import first_messages
from gamerl.games import get_task
from gamerl.games.password_game import extract_password, feedback_message
from gamerl.games.wordle import extract_guess, wordle_feedback

__all__ = ["AGENT_NAME", "GAMES", "GameSpec", "deep_merge", "extract_guess", "get_game",
           "wordle_feedback"]

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


# ----------------------------------------------------------------------------- Password Game


def _password_spec() -> GameSpec:
    from tasks.password_game import GameConfig, LocalPasswordGameEnv, make_instance, solve

    def defaults() -> dict:
        return deep_merge(asdict(GameConfig()), {"reward": {"mode": "delta"}})

    def secret(seed: int, config) -> str:
        # A reference solution of all 26 rules (the solver proves every instance solvable).
        return solve(make_instance(seed), hatched=True)

    return GameSpec(
        name="password_game", title="Password Game",
        system_prompt=get_task("password_game").system_prompt,  # our trainer's
        _defaults=defaults, _config_cls=GameConfig, _make_env=LocalPasswordGameEnv,
        extract=extract_password,
        feedback=lambda obs, info, action: feedback_message(obs, info, action, "compact"),
        _secret=secret, _max_turns=lambda config: config.max_steps)


# ----------------------------------------------------------------------------- Wordle

def _wordle_spec() -> GameSpec:
    from tasks.wordle import LocalWordleEnv, WordleConfig, make_instance

    return GameSpec(
        name="wordle", title="Wordle",
        system_prompt=get_task("wordle").system_prompt,
        _defaults=lambda: asdict(WordleConfig()), _config_cls=WordleConfig,
        _make_env=LocalWordleEnv, extract=extract_guess, feedback=wordle_feedback,
        _secret=lambda seed, config: make_instance(seed).answer,
        _max_turns=lambda config: config.max_guesses)


# ----------------------------------------------------------------------------- registry

GAMES: dict[str, Callable[[], GameSpec]] = {
    "password_game": _password_spec,
    "wordle": _wordle_spec,
}
_BUILT: dict[str, GameSpec] = {}  # one spec per game name (bounded by len(GAMES))


def get_game(name: str) -> GameSpec:
    """The spec for ``name`` (one of ``GAMES``)."""
    if name not in GAMES:
        raise ValueError(f"unknown game {name!r}; known: {', '.join(sorted(GAMES))}")
    if name not in _BUILT:
        _BUILT[name] = GAMES[name]()
    return _BUILT[name]

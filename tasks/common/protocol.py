"""The task protocol's shared types (see DESIGN.md §1).

Every game implements ``reset(seed) -> observation`` and ``step(action) -> StepResult``; the
observation and ``info`` are plain JSON-able dicts, so the in-process environment and the HTTP
server return identical objects. A step on an ended episode raises :class:`GameOver`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class StepResult:
    observation: dict[str, Any]
    reward: float
    done: bool
    info: dict[str, Any]

    def __iter__(self):  # so that `obs, reward, done, info = env.step(p)` works
        return iter((self.observation, self.reward, self.done, self.info))


class GameOver(RuntimeError):
    """A submission to an episode that has ended."""


MAX_SEED = 2**63 - 1


def check_seed(seed: object) -> int:
    """``seed`` if it is an int in [0, 2**63 - 1] (not a bool); ``TypeError``/``ValueError`` else."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**63 - 1], got {seed}")
    return seed


def seed_argument(text: str) -> int:
    """argparse ``type=`` for ``--seed``: an int in [0, 2**63 - 1], else a usage error."""
    import argparse  # only the command lines need it

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError("seed must be in [0, 2**63 - 1]")
    return value


class LocalEnv:
    """The seed's client API over an in-process game, the same methods as the HTTP clients.

    A game's local env sets ``self.game`` and defines ``reset`` and ``get_feedback`` (their
    arguments differ per game); ``submit`` (alias ``step``), ``state`` and the context manager are
    the same for every game.
    """

    game: Any

    def submit(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        obs, reward, done, info = self.game.step(action)
        return obs, reward, done, info

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        return self.submit(action)

    def state(self) -> dict[str, Any]:
        return self.game.state()

    def close(self) -> None:  # nothing to release; the HTTP clients close their connection
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

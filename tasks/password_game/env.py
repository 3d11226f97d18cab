"""The in-process environment with the seed's client API (the fast path for training).

``LocalPasswordGameEnv`` and the HTTP client ``PasswordGameEnv`` (client.py) have the same methods
and return identical JSON-able objects, so a trainer can switch between them with one line.
"""

from __future__ import annotations

from typing import Any

from ..common.protocol import LocalEnv
from .game import GameConfig, PasswordGame


class LocalPasswordGameEnv(LocalEnv):
    """In-process Password Game: ``reset``, ``get_feedback``, ``submit``."""

    def __init__(self, config: GameConfig | None = None) -> None:
        self.game = PasswordGame(config)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        return self.game.reset(seed)

    def get_feedback(self, password: str) -> dict[str, Any]:
        return self.game.feedback(password)

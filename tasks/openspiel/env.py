"""The in-process environment with the Password Game's client API (the fast path for training).

``LocalOpenSpielEnv`` and the HTTP client ``OpenSpielEnv`` (client.py) have the same methods and
return identical JSON-able objects.
"""

from __future__ import annotations

from typing import Any, Optional

from ..common.protocol import LocalEnv
from .game import OpenSpielGame


class LocalOpenSpielEnv(LocalEnv):
    """In-process OpenSpiel game: ``reset``, ``get_feedback``, ``submit`` (alias ``step``),
    ``state``. ``cfg`` are :class:`OpenSpielGame`'s keyword arguments."""

    def __init__(self, game_name: str = "tic_tac_toe", **cfg: Any) -> None:
        self.game = OpenSpielGame(game_name, **cfg)

    def reset(self, seed: Optional[int] = None) -> dict[str, Any]:
        return self.game.reset(seed)

    def get_feedback(self, move_text: str) -> dict[str, Any]:
        """Would ``move_text`` be read as a legal move now? (no state change)"""
        return self.game.feedback(move_text)

    def state(self) -> dict[str, Any]:
        """Observation + config + the omniscient state (debugging: shows hidden cards)."""
        return self.game.state_dict()

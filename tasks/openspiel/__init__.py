"""OpenSpiel games as text environments for language models (see README.md in this folder).

The registry (``games``) and the move parser (``moves``) need nothing beyond the standard
library; everything else needs ``pyspiel`` (``pip install open_spiel``, the ``openspiel`` extra)
and is imported on first use, so ``import tasks.openspiel`` works without it.
"""

from __future__ import annotations

from typing import Any

from .games import GAMES, HARDER_GAMES, SIMPLE_GAMES, GameSpec, get_spec, list_games
from .moves import ParsedMove, parse_move

_LAZY = {
    "OpenSpielGame": ".game", "RewardConfig": ".game", "GameOver": ".game",
    "StepResult": ".game", "LocalOpenSpielEnv": ".env", "random_bot": ".bots",
    "mcts_bot": ".bots", "RandomBot": ".bots", "MCTSBot": ".bots", "play_match": ".match",
}

__all__ = ["GAMES", "GameSpec", "HARDER_GAMES", "SIMPLE_GAMES", "ParsedMove", "get_spec",
           "list_games", "parse_move", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name], __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

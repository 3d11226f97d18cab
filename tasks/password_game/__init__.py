"""The Password Game: 26 cumulative rules after neal.fun's game, seeded and offline.

``LocalPasswordGameEnv`` runs in-process; ``PasswordGameEnv`` talks to the FastAPI server
(``python -m tasks.password_game.server``) with the same methods and results.
"""

from .env import LocalPasswordGameEnv
from .game import (GameConfig, GameOver, PasswordGame, RewardConfig, StepResult, check_password,
                   corpus_texts)
from .instance import Instance, make_instance
from .rules import NUM_RULES, RULES, check_rules, rule_text
from .solver import solve

__all__ = [
    "GameConfig", "GameOver", "Instance", "LocalPasswordGameEnv", "NUM_RULES", "PasswordGame",
    "PasswordGameEnv", "RULES", "RewardConfig", "StepResult", "check_password", "check_rules", "corpus_texts",
    "make_instance", "rule_text", "solve",
]


def __getattr__(name: str):
    # The HTTP client imports httpx; load it only when asked for.
    if name == "PasswordGameEnv":
        from .client import PasswordGameEnv

        return PasswordGameEnv
    raise AttributeError(name)

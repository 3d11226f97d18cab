"""The games, one module each (``password_game``, ``wordle``, ``openspiel``): everything a game
needs on the trainer's side. ``base`` holds the ``Task`` dataclass and shared helpers;
``registry`` maps names to tasks. ``get_task``, ``register_task``, ``TASKS`` and ``Task`` are
re-exported here."""

from .base import Task  # noqa: F401
from .registry import TASKS, get_task, register_task  # noqa: F401

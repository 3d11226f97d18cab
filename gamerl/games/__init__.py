"""The games, one module each; the registry (``get_task``) is re-exported here."""

from .base import TASKS, Task, get_task  # noqa: F401

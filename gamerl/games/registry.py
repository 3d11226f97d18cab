"""The registry of games: ``get_task(name)`` is how the trainer (rollout, trainer, evaluation,
warm start, replay) reaches a game; it never imports a game's module itself.

Adding a game: one module beside ``password_game.py`` with a ``make_task() -> Task``, and one
line in ``TASKS`` below (or ``register_task(name, make_task)`` at run time, as
tests/test_fourth_game.py does).
"""

from __future__ import annotations

from typing import Callable

from . import openspiel, password_game, wordle
from .base import GENERIC_METRIC_DESCRIPTIONS, Task

__all__ = ["TASKS", "describe_metric", "get_task", "metric_entry_labels", "register_task"]

TASKS: dict[str, Callable[[], Task]] = {
    "password_game": password_game.make_task,
    "wordle": wordle.make_task,
    "openspiel": openspiel.make_task,
}
_BUILT: dict[str, Task] = {}


def register_task(name: str, make_task: Callable[[], Task]) -> None:
    """Make ``get_task(name)`` return ``make_task()`` (built once, on first use)."""
    TASKS[name] = make_task
    _BUILT.pop(name, None)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    if name not in _BUILT:
        _BUILT[name] = TASKS[name]()
    return _BUILT[name]


def describe_metric(key: str, task: str | None = None) -> str:
    """What an evaluation number is, as an axis label says it (figures): ``task``'s own
    description when it has one (what "success" is in that game), the generic numbers', then
    each game's (``Task.metric_descriptions``); else the key's own name."""
    if task is not None and key in get_task(task).metric_descriptions:
        return get_task(task).metric_descriptions[key]
    if key in GENERIC_METRIC_DESCRIPTIONS:
        return GENERIC_METRIC_DESCRIPTIONS[key]
    for name in TASKS:
        description = get_task(name).metric_descriptions.get(key)
        if description is not None:
            return description
    return key.replace("_", " ")


def metric_entry_labels(key: str, n: int) -> list[str]:
    """The names of the first ``n`` entries of a list-valued evaluation number, as a figure's
    ticks say them: the game's that has them (``Task.metric_entry_labels``); else 1..n."""
    for name in TASKS:
        labels = get_task(name).metric_entry_labels.get(key)
        if labels is not None:
            return labels(n)
    return [str(i + 1) for i in range(n)]

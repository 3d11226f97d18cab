"""A curriculum's stages as settings name them: ``Stage`` (which games, which opponent, the
success rate that ends it), the game's default stages, and ``parse_stages``, which turns a
config value into checked stages. Settings validation (``TrainConfig.validate``, the JSON
files) checks a curriculum here without the runtime state machine, which is
``gamerl.core.curriculum.Curriculum``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from ..games.base import CurriculumChoices

DEFAULT_WINDOW = 64


@dataclass(frozen=True)
class Stage:
    """One curriculum stage: which games, against which bot, and the success rate that ends it.
    Whether the game knows those games and that bot is ``check``'s question (a game's names).
    ``opponent`` None: the game's default (``CurriculumChoices.default_opponent``: OpenSpiel's
    random bot; the Password Game has no opponent)."""

    name: str
    games: tuple[str, ...]
    opponent: Optional[str] = None
    threshold: float = 0.5

    def __post_init__(self):
        object.__setattr__(self, "games", tuple(self.games))  # lists from JSON configs
        if not self.name:
            raise ValueError("a curriculum stage needs a name")
        if not self.games:
            raise ValueError(f"curriculum stage {self.name!r} has no games")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"curriculum stage {self.name!r}: threshold {self.threshold} is not "
                             "in (0, 1]")

    def check(self, choices: CurriculumChoices) -> None:
        """Raise ``ValueError`` unless the game knows this stage's games and opponent."""
        known = list(choices.games())
        unknown = [g for g in self.games if g not in known]
        if unknown:
            raise ValueError(f"curriculum stage {self.name!r}: unknown games {unknown}; "
                             f"supported games: {', '.join(known)}")
        if not choices.opponents:
            if self.opponent is not None:
                raise ValueError(f"curriculum stage {self.name!r}: this game has no opponent "
                                 f"(got {self.opponent!r}); leave \"opponent\" out")
        elif self.opponent not in choices.opponents:
            raise ValueError(f"curriculum stage {self.name!r}: opponent {self.opponent!r} is not "
                             f"one of {tuple(choices.opponents)}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Stage":
        extra = set(d) - {"name", "games", "opponent", "threshold"}
        if extra:
            raise ValueError(f"unknown curriculum stage keys {sorted(extra)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "games": list(self.games), "opponent": self.opponent,
               "threshold": self.threshold}
        if self.opponent is None:  # a game without opponents: the key it does not take
            del out["opponent"]
        return out


def default_stages(choices: Optional[CurriculumChoices]) -> list[Stage]:
    """The game's default stages (``choices.default_stages``; OpenSpiel's are easy -> medium ->
    hard, ``gamerl.games.openspiel.default_curriculum_stages``)."""
    if choices is None:
        raise ValueError("this game has no curriculum (its Task.curriculum is None)")
    return [Stage.from_dict(d) for d in choices.default_stages()]


def checked_stages(stages: Sequence[Stage], window: int,
                   choices: Optional[CurriculumChoices]) -> list[Stage]:
    """``stages`` as a run plays them: each checked against the game's names (``choices``; a
    stage that names no opponent gets the game's default one), their names unique, ``window``
    at least 1. ``ValueError`` says what is wrong."""
    if not stages:
        raise ValueError("a curriculum needs at least one stage")
    if choices is not None:
        stages = [replace(s, opponent=choices.default_opponent) if s.opponent is None else s
                  for s in stages]
        for stage in stages:
            stage.check(choices)
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"curriculum stage names must be unique, got {names}")
    if window < 1:
        raise ValueError(f"curriculum window must be >= 1, got {window}")
    return list(stages)


def parse_stages(spec: Any, window: int = DEFAULT_WINDOW, *,
                 choices: Optional[CurriculumChoices]) -> tuple[list[Stage], int]:
    """``(stages, window)`` from a config value: ``"default"``, a list of stage dicts
    ``{"name", "games", "opponent", "threshold"}``, or ``{"stages": "default" | [...],
    "window": n}`` (what ``Curriculum.to_dict`` writes). ``choices``: the run's game's
    (``Task.curriculum.for_run(cfg)``); a game without one (None) has no curriculum, and asking
    for one is a ``ValueError``."""
    if choices is None:
        raise ValueError("this game has no curriculum (its Task.curriculum is None)")
    if isinstance(spec, dict):
        extra = set(spec) - {"stages", "window"}
        if extra:
            raise ValueError(f"unknown curriculum keys {sorted(extra)}")
        return parse_stages(spec.get("stages", "default"), spec.get("window", window),
                            choices=choices)
    if spec == "default":
        stages = default_stages(choices)
    elif isinstance(spec, (list, tuple)):
        stages = [s if isinstance(s, Stage) else Stage.from_dict(s) for s in spec]
    else:
        raise ValueError(f"curriculum must be 'default', a list of stages or a dict, got {spec!r}")
    return checked_stages(stages, window, choices), int(window)


__all__ = ["DEFAULT_WINDOW", "Stage", "checked_stages", "default_stages", "parse_stages"]

"""A curriculum over a game's variants: stages of games (and an opponent, where the game has
one), advancing on success rate. OpenSpiel's default: easy -> medium -> hard games and bots; the
Password Game's: the first 6 rules, then 12, then 26 (up to the run's ``num_rules``).

Why: a small model facing an MCTS bot on Othello from the first epoch wins nothing, so PPO sees
only failures and learns nothing. Starting on games a random opponent makes winnable gives the
policy a reward signal; harder games and the MCTS bot come once it is earned. Likewise a game
of 6 Password rules is won where one of 26 is not.

    choices = get_task(cfg.task).curriculum.for_run(cfg)  # what stages may name (Task.curriculum)
    cur = Curriculum.default(choices=choices)   # OpenSpiel: easy -> medium -> hard
    games, opponent = cur.stage.games, cur.stage.opponent      # what to play this epoch
    note = cur.update([ep.success for ep in episodes])         # the epoch's results, in order
    if note: print(note)                                       # "curriculum: easy -> medium ..."

Rule: stage i advances when the success rate over the ``window`` most recent episodes *played
at stage i* reaches its threshold; the window must be full (a lucky first handful of games does
not count), and it starts empty again at every stage change. The last stage's threshold marks the
curriculum "mastered" (logged once, ``cur.mastered``) but there is nothing to advance to.
What counts as a success (a win; a win or a draw; a score above some bar) is the caller's choice.

Which games and opponents a stage may name, and the default stages, are the game's
(``Task.curriculum``, a ``gamerl.games.base.CurriculumChoices``, and ``for_run(cfg)`` where they
depend on the run; OpenSpiel's are in ``gamerl.games.openspiel``, the Password Game's in
``gamerl.games.password_game``): nothing here knows a game.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Iterable, Optional, Sequence

from ..config.curriculum_stages import (DEFAULT_WINDOW, Stage, checked_stages, default_stages,
                                        parse_stages)
from ..games.base import CurriculumChoices

log = logging.getLogger("gamerl")


class Curriculum:
    """Stages in order, the current one, and a window of its most recent episode results.
    With ``choices`` (the game's ``Task.curriculum``) every stage is checked against the game's
    names (a stage that names no opponent gets the game's default one); ``default`` and
    ``from_dict``, which build a run's curriculum, always check."""

    def __init__(self, stages: Sequence[Stage], window: int = DEFAULT_WINDOW,
                 choices: Optional[CurriculumChoices] = None):
        self.stages = checked_stages(stages, window, choices)
        self.window = int(window)
        self.index = 0
        self.recent: deque[bool] = deque(maxlen=self.window)
        self.mastered = False
        self.episodes = 0  # results seen in total (all stages)
        self.history: list[dict[str, Any]] = []  # stage changes: {"from", "to", "episode", "rate"}

    # ------------------------------------------------------------------ construction

    @classmethod
    def default(cls, window: int = DEFAULT_WINDOW, *,
                choices: Optional[CurriculumChoices]) -> "Curriculum":
        return cls(default_stages(choices), window, choices)

    @classmethod
    def from_dict(cls, spec: Any, window: int = DEFAULT_WINDOW, *,
                  choices: Optional[CurriculumChoices]) -> "Curriculum":
        """From a config value: ``"default"``, a list of stage dicts ``{"name", "games",
        "opponent", "threshold"}``, or ``{"stages": "default" | [...], "window": n}``
        (what ``to_dict`` writes). ``choices``: the run's game's
        (``Task.curriculum.for_run(cfg)``); a game without one (None) has no curriculum, and
        asking for one is a ``ValueError``."""
        stages, window = parse_stages(spec, window, choices=choices)
        return cls(stages, window)

    def to_dict(self) -> dict[str, Any]:
        return {"stages": [s.to_dict() for s in self.stages], "window": self.window}

    # ------------------------------------------------------------------ where we are

    @property
    def stage(self) -> Stage:
        return self.stages[self.index]

    @property
    def is_last(self) -> bool:
        return self.index == len(self.stages) - 1

    @property
    def success_rate(self) -> Optional[float]:
        """Success rate over the current window (None before any result at this stage)."""
        return sum(self.recent) / len(self.recent) if self.recent else None

    def metrics(self) -> dict[str, float]:
        """Numbers for the epoch log."""
        rate = self.success_rate
        return {"curriculum/stage": float(self.index),
                "curriculum/window_success_rate": float("nan") if rate is None else rate,
                "curriculum/window_fill": len(self.recent) / self.window,
                "curriculum/mastered": float(self.mastered)}

    # ------------------------------------------------------------------ the rule

    def update(self, successes: Iterable[bool]) -> Optional[str]:
        """Record episode results in the order played; return an announcement if the stage
        changed (also logged), else None.

        Results are checked one by one: the stage changes at the first episode whose window
        reaches the threshold, wherever the batch boundaries fall. The rest of ``successes`` is
        then dropped: those episodes were played at the old stage and must not count toward
        the new one (call ``update`` once per batch of episodes played at one stage).
        """
        for ok in successes:
            self.recent.append(bool(ok))
            self.episodes += 1
            if len(self.recent) < self.window:
                continue
            rate = sum(self.recent) / self.window
            if rate < self.stage.threshold:
                continue
            if self.is_last:
                if not self.mastered:
                    self.mastered = True
                    log.info("curriculum: last stage %r mastered (success %.2f >= %.2f over the "
                             "last %d episodes)", self.stage.name, rate, self.stage.threshold,
                             self.window)
                continue
            return self._advance(rate)
        return None

    def _advance(self, rate: float) -> str:
        old = self.stage
        self.index += 1
        self.recent.clear()
        new = self.stage
        self.history.append({"from": old.name, "to": new.name, "episode": self.episodes,
                             "rate": rate})
        against = f"{new.opponent} opponent on " if new.opponent else ""
        msg = (f"curriculum: stage {old.name!r} -> {new.name!r} after {self.episodes} episodes "
               f"(success {rate:.2f} >= {old.threshold:.2f} over the last {self.window}); now "
               f"{against}{', '.join(new.games)}")
        log.info(msg)
        return msg

    # ------------------------------------------------------------------ resume

    def state_dict(self) -> dict[str, Any]:
        """JSON-able progress (the stages themselves come from the config)."""
        return {"stage": self.stage.name, "index": self.index, "recent": list(self.recent),
                "mastered": self.mastered, "episodes": self.episodes,
                "history": [dict(h) for h in self.history]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore progress. The stage is found by name, so a resumed run whose config has the
        same stages continues exactly; a stage name this curriculum lacks is an error."""
        names = [s.name for s in self.stages]
        if state["stage"] not in names:
            raise ValueError(f"saved curriculum stage {state['stage']!r} is not one of {names}")
        self.index = names.index(state["stage"])
        self.recent = deque((bool(x) for x in state["recent"]), maxlen=self.window)
        self.mastered = bool(state.get("mastered", False))
        self.episodes = int(state.get("episodes", 0))
        self.history = [dict(h) for h in state.get("history", [])]


__all__ = ["DEFAULT_WINDOW", "Curriculum", "Stage", "default_stages"]

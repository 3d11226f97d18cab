"""Lost server sessions: replay the episode on a fresh session, or give the episode up.

A game server can forget a session in the middle of an episode: evicted to make room
(``--max-sessions``), expired (``--session-ttl``), or gone with a restart. The client then raises
``SessionNotFoundError`` (404) on the next move. Our games are deterministic given how they were
reset (seed, answer, game, opponent), so the lost state can be rebuilt exactly: a new session
reset the same way, and the moves so far played again. Every replayed step must give the same
observation, reward and end flag as the first time (compared by digest); otherwise the game is
not deterministic and the episode is given up rather than continued from another state.

``ReplayingEnv`` wraps each HTTP environment of a rollout (``evaluate.http_env_factory``). An
episode that needs more than ``max_replays`` rebuilds, or whose replay differs, raises
``EpisodeLost``; ``rollout`` turns that into a dropped episode (a warning, ``Episode.lost``, the
``lost_episodes`` metric), never a crashed run. Replays are cheap next to generation: no model
call, one request per move already made.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from ..games.base import SessionNotFoundError  # every game client's 404, through the games layer

log = logging.getLogger("gamerl")

MAX_REPLAYS = 3  # rebuilds per episode; each costs one request per move made so far


class EpisodeLost(RuntimeError):
    """The episode's server session was lost and could not be rebuilt."""


def _digest(result: Any) -> str:
    return hashlib.sha256(json.dumps(result, sort_keys=True, default=str).encode()).hexdigest()


class ReplayingEnv:
    """A game environment whose lost session is rebuilt by replaying the episode.

    ``reset`` and ``submit`` (also ``step``) as the wrapped environment; anything else is passed
    through. ``replays`` counts the rebuilds of the current episode."""

    def __init__(self, env: Any, max_replays: int = MAX_REPLAYS):
        self.env = env
        self.max_replays = max_replays
        self.replays = 0
        self._reset: tuple[tuple, dict] = ((), {})
        self._first = ""
        self._moves: list[tuple[Any, str]] = []  # (action, digest of what it returned)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        obs = self.env.reset(*args, **kwargs)
        self._reset, self._first, self._moves, self.replays = (args, kwargs), _digest(obs), [], 0
        return obs

    def submit(self, action: Any) -> Any:
        while True:
            try:
                result = self.env.submit(action)
                break
            except SessionNotFoundError as e:
                self._rebuild(e)
        self._moves.append((action, _digest(result)))
        return result

    step = submit

    def _rebuild(self, error: SessionNotFoundError) -> None:
        """A fresh session in the state the lost one was in (or EpisodeLost)."""
        while True:
            if self.replays >= self.max_replays:
                raise EpisodeLost(f"its server session was lost {self.replays + 1} times "
                                  f"(last: {error.message})") from error
            self.replays += 1
            args, kwargs = self._reset
            try:
                if _digest(self.env.reset(*args, **kwargs)) != self._first:
                    raise EpisodeLost("a fresh session started a different game")
                for turn, (action, digest) in enumerate(self._moves, 1):
                    if _digest(self.env.submit(action)) != digest:
                        raise EpisodeLost(f"replaying move {turn} on a fresh session gave "
                                          "another result (the game is not deterministic)")
            except SessionNotFoundError as e:  # lost again while replaying
                error = e
                continue
            log.info("session lost after %d moves (%s): replayed them on a fresh session",
                     len(self._moves), error.message)
            return

    def close(self) -> None:
        self.env.close()

    # Special methods are looked up on the type, not through __getattr__: `with make_env() as env`
    # (the notebook's first-prompt cell) needs them here.
    def __enter__(self) -> "ReplayingEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:  # session_id, state(), health(), ...
        return getattr(self.env, name)


__all__ = ["EpisodeLost", "MAX_REPLAYS", "ReplayingEnv"]

"""The session table every game server shares: idle expiry, a global cap, a per-client quota, and
one request at a time per session.

Rules (PASSWORD_GAME_README.md and docs/reliability.md state them for users):

* a session idle for ``ttl`` seconds expires;
* a new session needs room under two caps, ``max_sessions`` for the server and
  ``max_per_client`` for the client asking (its token, else its address). When a cap is reached
  the least recently used session under it is evicted **only if it has been idle for at least
  ``evict_idle_after`` seconds** and no request is using it; otherwise the new session is
  refused with :class:`StoreFull` (HTTP 429 with ``Retry-After``). So a flood of new sessions
  can never take an active game away (before, one client creating ~317 sessions/s evicted a
  player who took 5 s per turn);
* a session serves one request at a time: a request that finds it busy is refused at once
  (:class:`SessionBusy`, HTTP 409) instead of queuing a thread behind it;
* ``delete`` waits (up to ``wait`` seconds) for the request in flight to finish and marks the
  session closed under its lock, so no turn is applied to a deleted game.

Every lock here is held only for table bookkeeping, never while a game computes; a session's own
lock is held while its game computes.
"""

from __future__ import annotations

import math
import secrets
import threading
from collections import OrderedDict
from typing import Any, Callable, Optional


def short(text: Any, limit: int = 64) -> str:
    """An ASCII-safe, bounded rendering of client-supplied text for error messages."""
    s = ascii(text) if isinstance(text, str) else ascii(str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."


class SessionGone(LookupError):
    """Unknown, deleted, expired or evicted (HTTP 404); the message says which."""


class SessionBusy(RuntimeError):
    """Another request is using the session (HTTP 409, retry shortly)."""

    retry_after = 1


class StoreFull(RuntimeError):
    """No room for a new session (HTTP 429); ``retry_after`` seconds until a session under the
    full cap can be evicted, if none is deleted sooner."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Session:
    """One session: its game, its lock (held while a request uses the game), its last use, the
    client that owns it, and whether it is closing (a DELETE is waiting) or closed."""

    __slots__ = ("id", "game", "lock", "last_used", "owner", "closing", "closed")

    def __init__(self, sid: str, game: Any, now: float, owner: str) -> None:
        self.id = sid
        self.game = game
        self.lock = threading.Lock()
        self.last_used = now
        self.owner = owner
        self.closing = False
        self.closed = False


class SessionStore:
    """Sessions in least-recently-used order (globally and per owner), with idle expiry, the two
    caps and the eviction rule of the module docstring. A bounded record of ended ids lets a 404
    say why a session is gone."""

    GONE_MEMORY = 4096

    def __init__(self, max_sessions: int, ttl: float, clock: Callable[[], float], *,
                 max_per_client: Optional[int] = None,
                 evict_idle_after: Optional[float] = None) -> None:
        self.max_sessions = max_sessions
        self.ttl = ttl
        self.clock = clock
        self.max_per_client = max_per_client or max_sessions
        self.evict_idle_after = ttl if evict_idle_after is None else evict_idle_after
        self._sessions: "OrderedDict[str, Session]" = OrderedDict()
        self._owned: dict[str, "OrderedDict[str, Session]"] = {}
        self._gone: "OrderedDict[str, str]" = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._sweep(self.clock())
            return len(self._sessions)

    def owned_by(self, owner: str) -> int:
        with self._lock:
            self._sweep(self.clock())
            return len(self._owned.get(owner, ()))

    # ------------------------------------------------------------------ new sessions
    def check_room(self, owner: str) -> None:
        """Raise :class:`StoreFull` now if ``add`` for ``owner`` would (so that no game is built
        for nothing); ``add`` checks again."""
        with self._lock:
            self._make_room(owner, self.clock(), evict=False)

    def add(self, game: Any, owner: str = "") -> Session:
        with self._lock:
            now = self.clock()
            self._make_room(owner, now, evict=True)
            sid = secrets.token_urlsafe(16)
            while sid in self._sessions or sid in self._gone:  # never in practice
                sid = secrets.token_urlsafe(16)
            session = Session(sid, game, now, owner)
            self._sessions[sid] = session
            self._owned.setdefault(owner, OrderedDict())[sid] = session
            return session

    def _make_room(self, owner: str, now: float, *, evict: bool) -> None:
        self._sweep(now)
        owned = self._owned.get(owner)
        if owned is not None and len(owned) >= self.max_per_client:
            self._evict_or_refuse(
                next(iter(owned.values())), now, evict,
                full=(f"this client already holds {len(owned)} sessions, the most one client may "
                      f"hold (max_sessions_per_client; a client is its X-Client-Token, else its "
                      f"address)"),
                evicted=(f"it was evicted to make room for a new session of the same client, "
                         f"which holds at most {self.max_per_client} sessions "
                         f"(max_sessions_per_client), after {{idle}} s without a request"))
        if len(self._sessions) >= self.max_sessions:
            self._evict_or_refuse(
                next(iter(self._sessions.values())), now, evict,
                full=f"the server holds {len(self._sessions)} sessions (max_sessions)",
                evicted=(f"it was evicted to make room (the server holds at most "
                         f"{self.max_sessions} sessions) after {{idle}} s without a request"))

    def _evict_or_refuse(self, oldest: Session, now: float, evict: bool, *, full: str,
                         evicted: str) -> None:
        idle = now - oldest.last_used
        if idle >= self.evict_idle_after and not oldest.lock.locked():
            if evict:
                self._remove(oldest, evicted.format(idle=f"{idle:.0f}"))
            return
        wait = max(1, math.ceil(self.evict_idle_after - idle))
        raise StoreFull(f"no room for a new session: {full}, and every one of them was used in "
                        f"the last {self.evict_idle_after:g} s (evict_idle_after; active games are "
                        f"never evicted). End finished sessions with DELETE /sessions/{{id}}, or "
                        f"retry after {wait} s", wait)

    # ------------------------------------------------------------------ lookups
    def get(self, sid: str) -> Session:
        with self._lock:
            now = self.clock()
            self._sweep(now)
            session = self._sessions.get(sid)
            if session is None:
                raise SessionGone(self._why(sid))
            self._touch(session, now)
            return session

    def touch(self, session: Session) -> None:
        """The session was just used (at the end of a request: idle time counts from there)."""
        with self._lock:
            if not session.closed:
                self._touch(session, self.clock())

    def _touch(self, session: Session, now: float) -> None:
        session.last_used = now
        self._sessions.move_to_end(session.id)
        self._owned[session.owner].move_to_end(session.id)

    def why(self, sid: str) -> str:
        with self._lock:
            return self._why(sid)

    # ------------------------------------------------------------------ ending sessions
    def delete(self, sid: str, wait: float) -> None:
        """End a session once the request using it (if any) has finished: ``SessionGone`` if it
        is already gone, ``SessionBusy`` if that request outlasts ``wait`` seconds (nothing is
        deleted then)."""
        session = self.get(sid)
        session.closing = True  # requests that come in meanwhile are refused (409) at once
        if not session.lock.acquire(timeout=wait):
            session.closing = False
            raise SessionBusy(f"session {short(sid)} is busy: a request has used it for more "
                              f"than {wait:g} s; nothing was deleted, try again")
        try:
            with self._lock:
                if session.closed:  # evicted or expired, or deleted by a concurrent DELETE
                    raise SessionGone(self._why(sid))
                self._remove(session, "it was deleted")
        finally:
            session.closing = False
            session.lock.release()

    def _sweep(self, now: float) -> None:
        while self._sessions:
            session = next(iter(self._sessions.values()))
            if now - session.last_used < self.ttl or session.lock.locked():
                break
            self._remove(session, f"it expired after {self.ttl:g} s without a request "
                                  f"(session_ttl)")

    def _remove(self, session: Session, why: str) -> None:
        session.closed = True  # a request that looked it up before is refused once it has the lock
        del self._sessions[session.id]
        owned = self._owned[session.owner]
        del owned[session.id]
        if not owned:
            del self._owned[session.owner]
        self._gone[session.id] = why
        while len(self._gone) > self.GONE_MEMORY:
            self._gone.popitem(last=False)

    def _why(self, sid: str) -> str:
        why = self._gone.get(sid, "no session has this id (or it ended long ago)")
        return f"session {short(sid)} not found: {why}"

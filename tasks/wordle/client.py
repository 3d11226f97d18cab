"""HTTP client for the Wordle server, with the same API as ``LocalWordleEnv``.

    from tasks.wordle import WordleEnv
    from tasks.wordle.client import start_server, stop_server

    proc = start_server("127.0.0.1", 8001)          # or run the server yourself
    try:
        with WordleEnv("http://127.0.0.1:8001") as env:
            obs = env.reset(seed=7)
            obs, reward, done, info = env.submit("soare")
    finally:
        stop_server(proc)

Results are identical to ``LocalWordleEnv``'s (same JSON-able dicts, same floats), except that a
guess longer than the server's ``max_guess_chars`` (64) is refused with
:class:`InvalidRequestError` (422) where the local env counts it as a wasted turn. Errors and
retries are the shared ones (``tasks.common.client``): :class:`WordleError` is the base class,
:class:`EpisodeOverError` (409) is also the game's ``GameOver``.
"""

from __future__ import annotations

import subprocess
from typing import Any, Iterable

import httpx

from ..common.client import (BaseEnvClient, EpisodeOverError, GameServerError,  # noqa: F401
                             InvalidRequestError, PortInUseError, RequestTooLargeError,
                             ServerUnavailableError, SessionBusyError, SessionNotFoundError,
                             TooManySessionsError,
                             find_free_port, stop_server, wait_for_server)
from ..common.client import start_server as _start_server

__all__ = ["EpisodeOverError", "InvalidRequestError", "PortInUseError", "RequestTooLargeError",
           "ServerUnavailableError", "SessionBusyError", "SessionNotFoundError",
           "TooManySessionsError", "WordleEnv", "WordleError",
           "find_free_port", "start_server", "stop_server", "wait_for_server"]

DEFAULT_URL = "http://127.0.0.1:8001"
WordleError = GameServerError  # the shared base class, under this game's name


class WordleEnv(BaseEnvClient):
    """Wordle over HTTP: ``reset``, ``submit`` (alias ``step``), ``get_feedback``, ``state``, plus
    the stateless ``feedback`` (marks for a known answer) and ``solve``.

    ``max_guesses``, ``hard_mode`` and ``reward`` (a dict of ``RewardConfig`` fields) configure
    each episode, as ``WordleConfig`` does for the local env. With ``client=`` (e.g. FastAPI's
    ``TestClient(app)``) and no ``base_url``, requests go to that client.
    """

    DEFAULT_URL = DEFAULT_URL

    def __init__(self, base_url: str | None = None, *, timeout: float = 10.0,
                 max_guesses: int = 6, hard_mode: bool = False,
                 reward: dict[str, Any] | None = None, client: httpx.Client | None = None,
                 retries: int = 3, backoff: float = 0.1,
                 client_token: str | None = None) -> None:
        super().__init__(base_url, timeout=timeout, client=client, retries=retries,
                         backoff=backoff, client_token=client_token)
        self.max_guesses = max_guesses
        self.hard_mode = hard_mode
        self.reward = dict(reward) if reward else None

    @staticmethod
    def _check_guess(guess: Any) -> None:
        if not isinstance(guess, str):  # as the local env does, before any request
            raise TypeError("guess must be a string")

    # ------------------------------------------------------------------ the env API
    def reset(self, seed: int | None = None, *, answer: str | None = None) -> dict[str, Any]:
        """Start a new episode (a new server session; the previous one is deleted)."""
        payload: dict[str, Any] = {"seed": seed, "max_guesses": self.max_guesses,
                                   "hard_mode": self.hard_mode}
        if answer is not None:
            payload["answer"] = answer
        if self.reward:
            payload["reward"] = self.reward
        return self._start_session(payload)

    def get_feedback(self, guess: str) -> dict[str, Any]:
        """Would ``guess`` be accepted now? No turn used, no marks revealed."""
        self._check_guess(guess)
        return self._request("POST", self._session_path() + "/feedback", {"guess": guess})

    def submit(self, guess: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        self._check_guess(guess)
        body = self._request("POST", self._session_path() + "/submit", {"guess": guess},
                             idempotent=False)
        return body["observation"], float(body["reward"]), bool(body["done"]), body["info"]

    step = submit

    def state(self) -> dict[str, Any]:
        return self._request("GET", self._session_path())

    # ------------------------------------------------------------------ stateless
    def feedback(self, answer: str, guess: str) -> list[str]:
        """The marks of ``guess`` against ``answer`` (``tasks.wordle.feedback`` on the server)."""
        return self._request("POST", "/feedback", {"answer": answer, "guess": guess})["marks"]

    def solve(self, seed: int | None = None, *, answer: str | None = None) -> list[str]:
        """The solver's guesses for instance ``seed`` or for ``answer``, ending with the answer."""
        payload: dict[str, Any] = {"seed": seed} if answer is None else {"answer": answer}
        return self._request("POST", "/solve", payload)["guesses"]

    def __enter__(self) -> "WordleEnv":
        return self


def start_server(host: str = "127.0.0.1", port: int = 8001, *, max_sessions: int | None = None,
                 session_ttl: float | None = None, log_level: str = "warning",
                 extra_args: Iterable[str] = (), wait: bool = True,
                 timeout: float = 30.0) -> subprocess.Popen:
    """Start ``python -m tasks.wordle.server`` as a subprocess and (by default) wait until
    ``/health`` answers (see ``tasks.common.client.start_server``)."""
    return _start_server("tasks.wordle.server", host, port, max_sessions=max_sessions,
                         session_ttl=session_ttl, log_level=log_level, extra_args=extra_args,
                         wait=wait, timeout=timeout, log_prefix="wordle_server_")

"""HTTP client for the Password Game server, with the same API as ``LocalPasswordGameEnv``.

    from tasks.password_game.client import PasswordGameEnv, start_server, stop_server

    proc = start_server("127.0.0.1", 8000)          # or run the server yourself
    try:
        with PasswordGameEnv("http://127.0.0.1:8000") as env:
            obs = env.reset(seed=7)
            obs, reward, done, info = env.submit("Hello1!")
    finally:
        stop_server(proc)

Results are identical to ``LocalPasswordGameEnv``'s (same JSON-able dicts, same floats). Errors the
server reports (4xx) raise :class:`PasswordGameError` (or a subclass) carrying the server's message;
a submission to an ended episode raises :class:`EpisodeOverError`, which is also the game's
``GameOver``, as the local environment raises.

Retries: calls that are safe to repeat (feedback, state, check, check_batch, solve, health, delete)
are retried with exponential backoff on connection errors and timeouts. ``reset`` (creates a
session) and ``submit`` (uses a turn) are retried only when the connection could not be opened at
all, so the request cannot have reached the server.
"""

from __future__ import annotations

import subprocess
from typing import Any, Iterable, Sequence

import httpx

from ..common.client import (_ERRORS, _NOT_SENT, BaseEnvClient, EpisodeOverError,  # noqa: F401
                             GameServerError, InvalidRequestError, PortInUseError,
                             RequestTooLargeError,
                             ServerUnavailableError, SessionBusyError, SessionNotFoundError,
                             TooManySessionsError, _log_tail,
                             _package_root, find_free_port, stop_server, wait_for_server)
from ..common.client import encode_json as _encode  # noqa: F401
from ..common.client import error_message as _message  # noqa: F401
from ..common.client import start_server as _start_server
from .game import GameOver  # noqa: F401  (EpisodeOverError is also this GameOver)

DEFAULT_URL = "http://127.0.0.1:8000"

#: The error base class, shared by every game's client (``tasks.common.client.GameServerError``).
#: Its subclasses ``SessionNotFoundError`` (404), ``EpisodeOverError`` (409, also a ``GameOver``),
#: ``InvalidRequestError`` (422/400), ``RequestTooLargeError`` (413) and
#: ``ServerUnavailableError`` are re-exported here.
PasswordGameError = GameServerError


# ============================================================================ the environment
class PasswordGameEnv(BaseEnvClient):
    """The Password Game over HTTP: ``reset``, ``get_feedback``, ``submit`` (alias ``step``),
    ``state``, plus the stateless ``check``, ``check_batch`` and ``solve``.

    ``base_url`` defaults to ``http://127.0.0.1:8000``; with ``client=`` (any ``httpx.Client``,
    e.g. FastAPI's ``TestClient(app)``) and no ``base_url``, requests go to the client's own base
    URL. ``max_steps``, ``num_rules`` and ``reward`` (a dict of ``RewardConfig`` fields) configure
    each episode, as ``GameConfig`` does for the local env.
    """

    DEFAULT_URL = DEFAULT_URL

    def __init__(self, base_url: str | None = None, *, timeout: float = 10.0, max_steps: int = 30,
                 reward: dict[str, Any] | None = None, client: httpx.Client | None = None,
                 num_rules: int = 26, retries: int = 3, backoff: float = 0.1,
                 client_token: str | None = None) -> None:
        super().__init__(base_url, timeout=timeout, client=client, retries=retries,
                         backoff=backoff, client_token=client_token)
        self.max_steps = max_steps
        self.num_rules = num_rules
        self.reward = dict(reward) if reward else None

    @staticmethod
    def _check_password(password: Any) -> None:
        if not isinstance(password, str):  # as the local env does, before any request
            raise TypeError("password must be a string")

    # ------------------------------------------------------------------ the env API
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start a new episode (a new server session; the previous one is deleted)."""
        payload: dict[str, Any] = {"seed": seed, "max_steps": self.max_steps,
                                   "num_rules": self.num_rules}
        if self.reward:
            payload["reward"] = self.reward
        return self._start_session(payload)

    def get_feedback(self, password: str) -> dict[str, Any]:
        self._check_password(password)
        return self._request("POST", self._session_path() + "/feedback", {"password": password})

    def submit(self, password: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        self._check_password(password)
        body = self._request("POST", self._session_path() + "/submit", {"password": password},
                             idempotent=False)
        return body["observation"], float(body["reward"]), bool(body["done"]), body["info"]

    step = submit

    def state(self) -> dict[str, Any]:
        return self._request("GET", self._session_path())

    # ------------------------------------------------------------------ stateless
    def check(self, password: str, seed: int, n_revealed: int = 26) -> dict[str, Any]:
        """``check_password(password, seed, n_revealed)`` on the server."""
        self._check_password(password)
        return self._request("POST", "/check",
                             {"seed": seed, "password": password, "n_revealed": n_revealed})

    def check_batch(self, passwords: Sequence[str], seed: int | None = None, *,
                    seeds: Sequence[int] | None = None, n_revealed: int = 26,
                    verbose: bool = False, batch_size: int = 1024) -> list[dict[str, Any]]:
        """Check many passwords (split into requests of ``batch_size``): one ``seed`` for all,
        or ``seeds`` with one per password. Each result has ``satisfied`` (the verdict list),
        ``rules_satisfied``, ``all_satisfied``, ``length`` and ``seed``; with ``verbose`` the
        full ``check`` result instead."""
        passwords = list(passwords)
        if (seed is None) == (seeds is None):
            raise ValueError("give exactly one of seed or seeds")
        if seeds is not None and len(seeds) != len(passwords):
            raise ValueError("seeds and passwords must have the same length")
        results: list[dict[str, Any]] = []
        for start in range(0, len(passwords), batch_size):
            payload: dict[str, Any] = {"passwords": passwords[start:start + batch_size],
                                       "n_revealed": n_revealed, "verbose": verbose}
            if seeds is not None:
                payload["seeds"] = list(seeds[start:start + batch_size])
            else:
                payload["seed"] = seed
            results.extend(self._request("POST", "/check/batch", payload)["results"])
        return results

    def solve(self, seed: int, hatched: bool = True) -> str:
        """The solver's password for instance ``seed``."""
        return self._request("POST", "/solve", {"seed": seed, "hatched": hatched})["password"]

    def __enter__(self) -> "PasswordGameEnv":
        return self


# ============================================================================ running a server
def start_server(host: str = "127.0.0.1", port: int = 8000, *, max_sessions: int | None = None,
                 session_ttl: float | None = None, log_level: str = "warning",
                 extra_args: Iterable[str] = (), wait: bool = True,
                 timeout: float = 30.0) -> subprocess.Popen:
    """Start ``python -m tasks.password_game.server`` as a subprocess and (by default) wait until
    ``/health`` answers. Its output goes to a temporary log file (``proc.log_path``), whose tail is
    shown if it fails to start. Stop it with :func:`stop_server`. ``PortInUseError`` (nothing
    started) if a server already listens on the port."""
    return _start_server("tasks.password_game.server", host, port, max_sessions=max_sessions,
                         session_ttl=session_ttl, log_level=log_level, extra_args=extra_args,
                         wait=wait, timeout=timeout, log_prefix="password_game_server_")

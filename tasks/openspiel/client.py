"""HTTP client for the OpenSpiel server, with the same API as ``LocalOpenSpielEnv``.

    from tasks.openspiel.client import OpenSpielEnv, start_server, stop_server

    proc = start_server("127.0.0.1", 8002)          # or run the server yourself
    try:
        with OpenSpielEnv("http://127.0.0.1:8002", game="connect_four", opponent="mcts") as env:
            obs = env.reset(seed=7)
            obs, reward, done, info = env.submit(obs["legal_moves"][0])
    finally:
        stop_server(proc)

Results are identical to ``LocalOpenSpielEnv``'s for the same game, configuration, seed and
answers (same JSON-able dicts, same floats). Server errors raise the shared client errors of
``tasks.common.client``; a submission after the game ended raises :class:`EpisodeOverError`,
which is also the protocol's ``GameOver``, as the local env raises.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict
from typing import Any, Iterable

import httpx

from ..common.client import (BaseEnvClient, EpisodeOverError, GameServerError,  # noqa: F401
                             InvalidRequestError, PortInUseError, RequestTooLargeError,
                             ServerUnavailableError, SessionBusyError, SessionNotFoundError,
                             TooManySessionsError,
                             find_free_port, stop_server, wait_for_server)
from ..common.client import start_server as _start_server

DEFAULT_URL = "http://127.0.0.1:8002"
_CONFIG = ("model_seat", "opponent", "mcts_simulations", "mcts_uct_c", "mcts_rollouts",
           "illegal_move_policy", "max_illegal_retries", "reward")


class OpenSpielEnv(BaseEnvClient):
    """An OpenSpiel game over HTTP: ``reset``, ``get_feedback``, ``submit`` (alias ``step``),
    ``state``, plus ``games`` and ``health``.

    ``game`` and ``cfg`` (``OpenSpielGame``'s keyword arguments; ``opponent`` must be
    ``"random"`` or ``"mcts"`` and ``reward`` a dict) configure every episode.
    """

    DEFAULT_URL = DEFAULT_URL

    def __init__(self, base_url: str | None = None, *, game: str = "tic_tac_toe",
                 timeout: float = 60.0, client: httpx.Client | None = None, retries: int = 3,
                 backoff: float = 0.1, client_token: str | None = None, **cfg: Any) -> None:
        unknown = set(cfg) - set(_CONFIG)
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        super().__init__(base_url, timeout=timeout, client=client, retries=retries,
                         backoff=backoff, client_token=client_token)
        self.game = game
        self.cfg = dict(cfg)
        reward = self.cfg.get("reward")
        if reward is None:
            self.cfg.pop("reward", None)
        elif not isinstance(reward, dict):  # a RewardConfig
            self.cfg["reward"] = asdict(reward)

    @staticmethod
    def _check_move(move: Any) -> None:
        if not isinstance(move, str):  # as the local env does, before any request
            raise TypeError("the answer must be a string")

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start a new episode (a new server session; the previous one is deleted)."""
        return self._start_session({"game": self.game, "seed": seed, **self.cfg})

    def get_feedback(self, move_text: str) -> dict[str, Any]:
        self._check_move(move_text)
        return self._request("POST", self._session_path() + "/feedback", {"move": move_text})

    def submit(self, move_text: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        self._check_move(move_text)
        body = self._request("POST", self._session_path() + "/submit", {"move": move_text},
                             idempotent=False)
        return body["observation"], float(body["reward"]), bool(body["done"]), body["info"]

    step = submit

    def state(self) -> dict[str, Any]:
        return self._request("GET", self._session_path())

    def games(self) -> list[dict[str, Any]]:
        return self._request("GET", "/games")["games"]

    def __enter__(self) -> "OpenSpielEnv":
        return self


def start_server(host: str = "127.0.0.1", port: int = 8002, *, max_sessions: int | None = None,
                 session_ttl: float | None = None, log_level: str = "warning",
                 extra_args: Iterable[str] = (), wait: bool = True,
                 timeout: float = 30.0) -> subprocess.Popen:
    """Start ``python -m tasks.openspiel.server`` as a subprocess (see
    ``tasks.common.client.start_server``); stop it with :func:`stop_server`."""
    return _start_server("tasks.openspiel.server", host, port, max_sessions=max_sessions,
                         session_ttl=session_ttl, log_level=log_level, extra_args=extra_args,
                         wait=wait, timeout=timeout, log_prefix="openspiel_server_")

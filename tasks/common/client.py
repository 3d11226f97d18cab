"""Game-agnostic HTTP client pieces: error classes, the retrying transport, and running a server.

A game's client subclasses :class:`BaseEnvClient` and adds its methods on top of ``_request``;
its ``start_server`` calls :func:`start_server` with its server module.

Errors the server reports (4xx) raise :class:`GameServerError` or a subclass carrying the server's
message; a submission to an ended episode raises :class:`EpisodeOverError`, which is also the task
protocol's ``GameOver``, as the local environments raise.

Retries: calls that are safe to repeat (``idempotent=True``: feedback, state, stateless checks,
health, delete) are retried with exponential backoff on connection errors and timeouts. Calls that
create a session or use a turn (``idempotent=False``) are retried only when the connection could
not be opened at all, so the request cannot have reached the server. Every call is also retried,
up to ``retries`` times, when the server refused it before doing anything and said when to come
back: 409 for a session busy with another request, 429 for no room for a new session, 503 for too
many connections; it waits ``Retry-After`` seconds (or the backoff), and raises at once
(:class:`SessionBusyError`, :class:`TooManySessionsError`, :class:`ServerUnavailableError`, with
``retry_after``) when that wait would be over ``max_retry_wait``.

``client_token`` (default: the ``GAME_CLIENT_TOKEN`` environment variable) is sent as
``X-Client-Token``: the server counts its session quota per token (else per address), so several
trainers on one machine do not share one quota.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import httpx

from .ports import PortInUseError, check_port_free
from .protocol import GameOver

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Our servers close a keep-alive connection after 5 idle seconds (``transport.KEEP_ALIVE_SECONDS``,
# uvicorn's default) and httpx keeps one for 5 s by default: a request written on a connection
# just as the server closes it fails with "Server disconnected without sending a response", and
# a turn (not idempotent) cannot be retried. Seen once in CI, in the notebook on SmolLM2, whose
# turns leave the connection idle for seconds. The client drops idle connections first.
CLIENT_KEEPALIVE_SECONDS = 2.0
CLIENT_TOKEN_HEADER = "X-Client-Token"
CLIENT_TOKEN_ENV = "GAME_CLIENT_TOKEN"

__all__ = [
    "BaseEnvClient", "CLIENT_TOKEN_ENV", "EpisodeOverError", "GameServerError",
    "InvalidRequestError", "PortInUseError", "RequestTooLargeError", "ServerUnavailableError",
    "SessionBusyError", "SessionNotFoundError", "TooManySessionsError", "encode_json",
    "error_message", "find_free_port", "start_server", "stop_server", "wait_for_server",
]


# ============================================================================ errors
class GameServerError(RuntimeError):
    """The server refused a request (4xx/5xx) or could not be reached.

    ``status_code`` is the HTTP status (``None`` for connection failures) and ``detail`` the
    server's ``detail`` field (a string, or pydantic's list of errors for 422).
    """

    def __init__(self, message: str, status_code: int | None = None, detail: Any = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.detail = detail
        self.retry_after = retry_after  # seconds, from the server's Retry-After (429, 409 busy)


class SessionNotFoundError(GameServerError):
    """404: the session is unknown, deleted, expired or was evicted; ``reset()`` starts another."""


class EpisodeOverError(GameServerError, GameOver):
    """409: a submission to an ended episode (also a ``GameOver``, as in the local env)."""


class SessionBusyError(GameServerError):
    """409 with ``Retry-After``: another request is using the session (it was not touched)."""


class TooManySessionsError(GameServerError):
    """429: no room for a new session (this client's quota or the server's cap, all active);
    ``retry_after`` says when a session may be evicted, unless some are deleted sooner."""


class InvalidRequestError(GameServerError):
    """422 (or 400): the server rejected the request's content."""


class RequestTooLargeError(GameServerError):
    """413: the request body is over the server's ``max_body_bytes``."""


class ServerUnavailableError(GameServerError):
    """The server could not be reached (after retries, where allowed)."""


_ERRORS = {404: SessionNotFoundError, 409: EpisodeOverError, 413: RequestTooLargeError,
           422: InvalidRequestError, 400: InvalidRequestError, 429: TooManySessionsError,
           503: ServerUnavailableError}


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        return max(0.0, float(resp.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def _refused_before_acting(resp: httpx.Response) -> bool:
    """The server did nothing and says so: a busy session (409 *with* Retry-After; an ended
    episode's 409 has none), no room for a session (429), too many connections (503)."""
    return resp.status_code in (429, 503) or (
        resp.status_code == 409 and "retry-after" in resp.headers)


def error_message(detail: Any) -> str:
    if isinstance(detail, list):  # pydantic's errors
        parts = []
        for err in detail:
            if isinstance(err, dict):
                loc = ".".join(str(p) for p in err.get("loc", ()))
                parts.append(f"{loc}: {err.get('msg', '')}" if loc else str(err.get("msg", "")))
            else:
                parts.append(str(err))
        return "; ".join(parts)
    return str(detail)


def encode_json(payload: Any) -> bytes:
    """JSON bytes; a lone surrogate (not encodable as UTF-8) is sent as an ASCII escape."""
    try:
        return json.dumps(payload, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(payload, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


# ============================================================================ the client base
class BaseEnvClient:
    """Transport and session bookkeeping shared by the games' HTTP environments.

    ``base_url`` defaults to the class's ``DEFAULT_URL``; with ``client=`` (any ``httpx.Client``,
    e.g. FastAPI's ``TestClient(app)``) and no ``base_url``, requests go to the client's own base
    URL. ``session_id`` is the current episode's session; ``close()`` (or leaving a ``with``
    block) deletes it on the server.
    """

    DEFAULT_URL = "http://127.0.0.1:8000"
    max_retry_wait = 5.0  # longer Retry-After waits are the caller's to decide: raise at once

    def __init__(self, base_url: str | None = None, *, timeout: float = 10.0,
                 client: httpx.Client | None = None, retries: int = 3,
                 backoff: float = 0.1, client_token: str | None = None) -> None:
        if client is None:
            self._prefix = (base_url or self.DEFAULT_URL).rstrip("/")
            self._http = httpx.Client(
                timeout=timeout, limits=httpx.Limits(keepalive_expiry=CLIENT_KEEPALIVE_SECONDS))
            self._owns_client = True
        else:
            self._prefix = base_url.rstrip("/") if base_url else ""
            self._http = client
            self._owns_client = False
        self.base_url = self._prefix or str(client.base_url).rstrip("/")  # type: ignore[union-attr]
        self.retries = retries
        self.backoff = backoff
        self.client_token = client_token or os.environ.get(CLIENT_TOKEN_ENV) or None
        self.session_id: str | None = None

    # ------------------------------------------------------------------ transport
    def _request(self, method: str, path: str, payload: Any = None, *,
                 idempotent: bool = True) -> Any:
        url = self._prefix + path
        content = None if payload is None else encode_json(payload)
        headers = {"content-type": "application/json"} if content is not None else {}
        if self.client_token:
            headers[CLIENT_TOKEN_HEADER] = self.client_token
        attempt = 0
        while True:
            try:
                resp = self._http.request(method, url, content=content, headers=headers)
            except httpx.TransportError as e:
                retryable = isinstance(e, _NOT_SENT) or (
                    idempotent and isinstance(e, (httpx.TimeoutException, httpx.NetworkError,
                                                  httpx.RemoteProtocolError)))
                if not retryable or attempt >= self.retries:
                    raise ServerUnavailableError(
                        f"{method} {url} failed: {type(e).__name__}: {e}") from e
                time.sleep(self.backoff * (2 ** attempt))
                attempt += 1
                continue
            if _refused_before_acting(resp) and attempt < self.retries:
                wait = _retry_after(resp)
                wait = self.backoff * (2 ** attempt) if wait is None else wait
                if wait <= self.max_retry_wait:
                    time.sleep(wait)
                    attempt += 1
                    continue
            break
        try:
            body = json.loads(resp.content) if resp.content else None
        except ValueError:
            body = None
        if resp.status_code >= 400:
            detail = body.get("detail") if isinstance(body, dict) else resp.text[:500]
            cls = _ERRORS.get(resp.status_code, GameServerError)
            if resp.status_code == 409 and _refused_before_acting(resp):
                cls = SessionBusyError
            raise cls(f"{method} {path} -> {resp.status_code}: {error_message(detail)}",
                      status_code=resp.status_code, detail=detail,
                      retry_after=_retry_after(resp))
        if body is None:
            raise GameServerError(f"{method} {path} -> {resp.status_code}: not a JSON response",
                                  status_code=resp.status_code)
        return body

    def _session_path(self) -> str:
        if self.session_id is None:
            raise GameServerError("call reset() first")
        return f"/sessions/{self.session_id}"

    def _start_session(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``POST /sessions``; the previous session (if any) is deleted. Returns the observation."""
        body = self._request("POST", "/sessions", payload, idempotent=False)
        old, self.session_id = self.session_id, body["session_id"]
        if old is not None:
            self._delete_session(old)
        return body["observation"]

    # ------------------------------------------------------------------ shared endpoints
    def health(self) -> dict[str, Any]:
        return self._request("GET", "/health")

    # ------------------------------------------------------------------ lifetime
    def _delete_session(self, sid: str) -> None:
        try:
            self._request("DELETE", f"/sessions/{sid}")
        except GameServerError:
            pass  # already gone (expired, evicted) or the server is down: nothing to free

    def close(self) -> None:
        """End the session on the server (best effort) and close the HTTP client if we made it."""
        if self.session_id is not None:
            sid, self.session_id = self.session_id, None
            self._delete_session(sid)
        if self._owns_client:
            self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ============================================================================ running a server
def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (another process could still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_server(base_url: str = "http://127.0.0.1:8000", timeout: float = 30.0, *,
                    proc: subprocess.Popen | None = None, interval: float = 0.05) -> None:
    """Poll ``GET /health`` until it answers 200; ``TimeoutError`` after ``timeout`` seconds.

    With ``proc`` (the server's process), fail at once if it exits.
    """
    deadline = time.monotonic() + timeout
    url = base_url.rstrip("/") + "/health"
    last: str = "no answer yet"
    with httpx.Client(timeout=min(2.0, max(timeout, 0.1))) as http:
        while True:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the server exited with code {proc.returncode} before it was "
                                   f"ready{_log_tail(proc)}")
            try:
                resp = http.get(url)
                if resp.status_code == 200:
                    return
                last = f"status {resp.status_code}"
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no healthy server at {base_url} after {timeout} s ({last})")
            time.sleep(interval)


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # the folder that holds `tasks/`


def start_server(module: str, host: str = "127.0.0.1", port: int = 8000, *,
                 max_sessions: int | None = None, session_ttl: float | None = None,
                 log_level: str = "warning", extra_args: Iterable[str] = (), wait: bool = True,
                 timeout: float = 30.0, log_prefix: str | None = None) -> subprocess.Popen:
    """Start ``python -m <module>`` (a game's server) as a subprocess and (by default) wait until
    ``/health`` answers. Its output goes to a temporary log file (``proc.log_path``), whose tail is
    shown if it fails to start. Stop it with :func:`stop_server`.

    Raises :class:`~tasks.common.ports.PortInUseError` without starting anything when a server
    already listens on ``host:port``: otherwise that server would answer ``/health`` and the
    caller would play against it, believing it had started its own."""
    check_port_free(host, port)
    cmd = [sys.executable, "-m", module, "--host", host, "--port", str(port),
           "--log-level", log_level]
    if max_sessions is not None:
        cmd += ["--max-sessions", str(max_sessions)]
    if session_ttl is not None:
        cmd += ["--session-ttl", str(session_ttl)]
    cmd += list(extra_args)
    env = dict(os.environ)
    root = _package_root()
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    prefix = log_prefix or module.replace("tasks.", "").replace(".", "_") + "_"
    log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env=env, cwd=root)
    log.close()
    proc.log_path = log.name  # type: ignore[attr-defined]
    if wait:
        url_host = f"[{host}]" if ":" in host else host
        try:
            wait_for_server(f"http://{url_host}:{port}", timeout, proc=proc)
        except BaseException:
            stop_server(proc)
            raise
    return proc


def stop_server(proc: subprocess.Popen, timeout: float = 5.0) -> int | None:
    """Terminate the server (SIGTERM: uvicorn shuts down cleanly), kill it if it lingers; remove
    its log file. Returns its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    log_path = getattr(proc, "log_path", None)
    if log_path:
        try:
            os.unlink(log_path)
        except OSError:
            pass
    return proc.returncode


def _log_tail(proc: subprocess.Popen, n: int = 2000) -> str:
    log_path = getattr(proc, "log_path", None)
    if not log_path:
        return ""
    try:
        text = Path(log_path).read_text("utf-8", errors="replace")
    except OSError:
        return ""
    return f"; its output:\n{text[-n:]}" if text else ""

"""Game-agnostic pieces shared by every game in ``tasks/``.

* ``tasks.common.protocol``: ``StepResult`` and ``GameOver``, the task protocol's types (no
  dependencies; imported by every game's ``game.py``).
* ``tasks.common.server``: the hardened FastAPI scaffolding (strict request models, JSON
  responses, error handlers that answer every bad input with a 4xx, the session routes,
  command-line flags). A game's server adds only its own endpoints.
* ``tasks.common.sessions``: the session table (idle expiry, a global cap and a per-client quota,
  429 rather than evicting an active game, one request at a time per session, DELETE that waits
  for the request in flight).
* ``tasks.common.transport``: the body middleware (size, deadline, UTF-8) and ``serve`` (uvicorn
  with a connection cap and a request-head deadline).
* ``tasks.common.ports``: bind a server's port before anything else, and ``PortInUseError``
  (one line that says what to do) when another server holds it.
* ``tasks.common.terminal``: reading a player's moves in the games' ``play`` commands.
* ``tasks.common.client``: the HTTP client base (error classes, retries) and
  ``find_free_port`` / ``wait_for_server`` / ``start_server`` / ``stop_server``.

This module imports nothing heavy, so ``from tasks.common.protocol import ...`` stays cheap for
the in-process environments (the training fast path); fastapi and httpx load only with the server
and client modules.
"""

from .protocol import MAX_SEED, GameOver, StepResult, check_seed

__all__ = ["GameOver", "MAX_SEED", "StepResult", "check_seed"]

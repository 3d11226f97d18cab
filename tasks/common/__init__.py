"""Game-agnostic pieces shared by every game in ``tasks/``.

* ``tasks.common.protocol``: ``StepResult`` and ``GameOver``, the task protocol's types (no
  dependencies; imported by every game's ``game.py``).
* ``tasks.common.server``: the hardened FastAPI scaffolding (strict request models, body-size
  middleware, session store with idle expiry + LRU eviction + per-session locks, JSON responses,
  error handlers that answer every bad input with a 4xx, command-line flags). A game's server adds
  only its own endpoints.
* ``tasks.common.client``: the HTTP client base (error classes, retries) and
  ``find_free_port`` / ``wait_for_server`` / ``start_server`` / ``stop_server``.

This module imports nothing heavy, so ``from tasks.common.protocol import ...`` stays cheap for
the in-process environments (the training fast path); fastapi and httpx load only with the server
and client modules.
"""

from .protocol import MAX_SEED, GameOver, StepResult, check_seed

__all__ = ["GameOver", "MAX_SEED", "StepResult", "check_seed"]

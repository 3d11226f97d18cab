"""The trainer, written once for every game: the rollout (``rollout``), the PPO math (``ppo``,
``scoring``), the epoch loop (``trainer``), evaluation, the warm start, the failure replay, the
curriculum and lost server sessions. Game-specific code is reached only through
``gamerl.games.get_task``."""

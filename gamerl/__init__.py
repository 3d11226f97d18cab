"""game-RL's trainer: ``python -m gamerl`` (gamerl/cli.py), the notebook, the verl bridge."""

"""Configuration: ``TrainConfig`` and its presets (``train_config``, re-exported here), the run's
JSON files (``jsonconfig``, ``envconfig``, ``jsonchecks``) and the ``configure`` wizard."""

from .train_config import (PRESETS, TrainConfig, coerce_override,  # noqa: F401
                           default_run_dir, get_config, parse_overrides)

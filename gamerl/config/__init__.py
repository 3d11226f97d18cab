"""Configuration: ``TrainConfig`` (``train_config``), its presets (``presets``), ``--set`` text
(``cli_settings``), the run's JSON files (``jsonconfig``, ``envconfig``, ``jsonchecks``) and the
``configure`` wizard."""

from .cli_settings import coerce_override, parse_overrides  # noqa: F401
from .presets import PRESETS  # noqa: F401
from .train_config import TrainConfig, default_run_dir, get_config  # noqa: F401

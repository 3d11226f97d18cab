"""What a run records: metrics and episodes as JSONL plus wandb or tensorboard (``tracker``,
re-exported here), the figures (``figures``) and the sample-episode tables (``samples``)."""

from .tracker import (EPISODES_JSONL, METRICS_JSONL, Tracker, read_jsonl,  # noqa: F401
                      save_figures, truncate_jsonl)

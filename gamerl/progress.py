"""Progress bars: tqdm's (widgets in a notebook, text elsewhere), or plain text everywhere.

``GAMERL_PROGRESS=text`` (the notebook sets it) gives plain-text bars on stdout. A notebook run
headless (``jupyter nbconvert --execute``, nbclient) saves tqdm's widgets at the state they had
when created, 0%, because no frontend rendered their updates; text bars update live in Jupyter
(a carriage return redraws the line) and are saved as they ended. Read at each bar's creation,
so setting the variable before the first bar is enough.
"""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm as _auto_tqdm
from tqdm.std import tqdm as _std_tqdm

__all__ = ["tqdm"]


class _TextTqdm(_std_tqdm):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("file", sys.stdout)  # Jupyter shows stderr as errors
        super().__init__(*args, **kwargs)


def _cls():
    return _TextTqdm if os.environ.get("GAMERL_PROGRESS") == "text" else _auto_tqdm


def tqdm(*args, **kwargs):
    """A progress bar, as ``tqdm.auto.tqdm`` (or plain text with ``GAMERL_PROGRESS=text``)."""
    return _cls()(*args, **kwargs)


def _write(text: str, **kwargs) -> None:
    """A line printed above the bars (``tqdm.write``: stdout unless ``file`` says otherwise)."""
    _cls().write(text, **kwargs)


tqdm.write = _write  # type: ignore[attr-defined]

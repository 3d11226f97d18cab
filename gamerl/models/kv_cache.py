"""The name transformers gives a model's KV cache, in one place.

transformers 5.24 renamed the ``past_key_values`` argument and output field to ``cache``: the old
name still works there but prints a FutureWarning on every run (``generate``: removed in 6.0;
the models' ``forward``: in 5.40). verl 0.9 pins transformers < 5.11, which knows only the old
name, and the ``verl`` extra must keep working (``.ci/run`` tests it in its own venv). So the
rollout and the shared-prefix pass use whichever name the installed version has.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

__all__ = ["CACHE_ARG", "cache_of"]


def _major_minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


CACHE_ARG = "cache" if _major_minor(version("transformers")) >= (5, 24) else "past_key_values"


def cache_of(output: Any) -> Any:
    """The KV cache a forward pass or ``generate`` (``return_dict_in_generate``) returned."""
    return getattr(output, CACHE_ARG)

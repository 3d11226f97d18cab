"""The name transformers gives a model's KV cache, in one place; and the caches the rollout
decodes into: one that grows in place (``growing_cache``) and one of fixed shape for CUDA graphs
(``fixed_cache``).

transformers 5.24 renamed the ``past_key_values`` argument and output field to ``cache``: the old
name still works there but prints a FutureWarning on every run (``generate``: removed in 6.0;
the models' ``forward``: in 5.40). verl 0.9 pins transformers < 5.11, which knows only the old
name, and the ``verl`` extra must keep working (``.ci/run`` tests it in its own venv). So the
rollout and the shared-prefix pass use whichever name the installed version has.
"""

from __future__ import annotations

import weakref
from importlib.metadata import version
from typing import Any

__all__ = ["CACHE_ARG", "cache_of", "fixed_cache", "growing_cache", "is_plain_layer",
           "plain_cache"]


def _major_minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


CACHE_ARG = "cache" if _major_minor(version("transformers")) >= (5, 24) else "past_key_values"


def cache_of(output: Any) -> Any:
    """The KV cache a forward pass or ``generate`` (``return_dict_in_generate``) returned."""
    return getattr(output, CACHE_ARG)


# ----------------------------------------------------------------------------- a cache that grows in place

def _growing_layer_class():
    """``GrowingLayer`` (gamerl/models/growing_layer.py), imported on first use."""
    from .growing_layer import GrowingLayer

    return GrowingLayer


def growing_cache(lm: Any) -> Any:
    """An empty KV cache for ``lm`` whose layers grow in place (``GrowingLayer``), to pass to its
    forward or ``generate``; None where the model has a layer that is not plain full attention
    (sliding windows, linear attention: those keep transformers' own cache) or transformers has
    no per-layer cache classes."""
    return plain_cache(lm, growing=True)


def plain_cache(lm: Any, growing: bool = False) -> Any:
    """An empty cache of plain full-attention layers for ``lm`` (``GrowingLayer`` or
    transformers' ``DynamicLayer``), or None where the model has other kinds of layers."""
    try:
        from transformers.cache_utils import DynamicCache
    except ImportError:
        return None
    config = getattr(lm, "config", None)
    text = config.get_text_config(decoder=True) if config is not None else None
    types = getattr(text, "layer_types", None)
    if types is not None:
        if any(t != "full_attention" for t in types):
            return None
    elif getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return None
    cache = DynamicCache()
    if growing:
        cache.layer_class_to_replicate = _growing_layer_class()
    return cache


def is_plain_layer(layer: Any) -> bool:
    """A layer of plain full-attention keys/values: transformers' ``DynamicLayer`` or ours."""
    from transformers.cache_utils import DynamicLayer

    from .growing_layer import GrowingLayer

    return type(layer) in (DynamicLayer, GrowingLayer)


# ----------------------------------------------------------------------------- a cache for CUDA graphs

# One static cache per model, kept for the run: compiled decoding (torch.compile's
# "reduce-overhead" mode, which transformers' generate turns on for a static cache on a GPU)
# replays CUDA graphs recorded against fixed tensor addresses, so a new cache per call (or per
# epoch's policy wrapper) would mean a new recording. Weak keys: it goes with its model.
_FIXED_CACHES: "weakref.WeakKeyDictionary[Any, tuple[Any, int, int]]" = weakref.WeakKeyDictionary()


def fixed_cache(lm: Any, rows: int, max_len: int) -> tuple[Any, int]:
    """``(cache, its rows)``: transformers' ``StaticCache`` of ``max_len`` tokens and at least
    ``rows`` rows, emptied, the same object every call while it is big enough (a call with more
    rows replaces it, and the graphs are recorded again). Callers fill the rows they do not use.
    Memory: rows x max_len x (layers x kv heads x head dim x 2 x dtype bytes), held between
    calls (Qwen3-0.6B bf16: 114,688 bytes a token; 20 rows x 8,192 tokens = 18.8 GB)."""
    held = _FIXED_CACHES.get(lm)
    if held is not None and held[1] >= rows and held[2] == max_len:
        held[0].reset()
        return held[0], held[1]
    _FIXED_CACHES.pop(lm, None)  # let the old cache's memory go before the new one fills
    from transformers import StaticCache

    cache = StaticCache(config=lm.config, max_cache_len=max_len)
    _FIXED_CACHES[lm] = (cache, rows, max_len)
    return cache, rows

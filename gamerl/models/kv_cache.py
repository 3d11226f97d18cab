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

# Spare room a layer's buffer gets when it (re)allocates: a quarter of what it holds, at least
# this many columns, so that a turn's decoding (max_new_tokens steps of one column) reallocates
# once or not at all.
MIN_SPARE_COLUMNS = 128


def _growing_layer_class():
    """``GrowingLayer``, defined on first use: transformers' cache classes are imported late so
    that this module stays importable wherever ``kv_cache`` only names the argument."""
    global _GrowingLayer
    if _GrowingLayer is not None:
        return _GrowingLayer
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` that writes new keys and values into spare columns of a buffer.

        transformers' ``DynamicLayer`` concatenates on every ``update``: each decoded token copies
        the whole cache of every layer. On a CPU that copy is a large part of a decoding step
        (SmolLM2-135M, 32 rows of ~600 tokens: ``aten::cat`` 25% of the step in a torch profile,
        the rollout 1.11x faster without it; docs/benchmarks.md). Here
        ``keys``/``values`` are views ``buffer[:, :, :n]`` of a ``[B, heads, capacity, head_dim]``
        buffer and an update writes the new columns after them, reallocating (one copy) only when
        the room runs out. Code that replaces ``keys``/``values`` with tensors of their own (the
        turn cache selects rows and columns, the shared prefix expands one row, transformers'
        ``batch_select_indices``) lets the buffer go at the assignment: kept until the next
        update, every layer's old buffer and its replacement lived at once while the turn cache
        went through the layers, most of a 73 GB peak of a 32-game Qwen3-0.6B evaluation on an
        H200 (docs/benchmarks.md). A view of the buffer (``crop``) keeps it. The next update
        copies replaced tensors into a new buffer, which is what a concatenation would have done.
        The numbers are the same as ``DynamicLayer``'s; only the copies are saved."""

        _key_buffer = _value_buffer = None  # class defaults: DynamicLayer.__init__ assigns keys

        @staticmethod
        def _backs(buffer: Any, tensor: Any) -> bool:
            return (buffer is not None and tensor is not None
                    and tensor.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr())

        @property
        def keys(self) -> Any:
            return self._keys

        @keys.setter
        def keys(self, tensor: Any) -> None:
            if not self._backs(self._key_buffer, tensor):
                self._key_buffer = None  # replaced: the buffer goes now, not at the next update
            self._keys = tensor

        @property
        def values(self) -> Any:
            return self._values

        @values.setter
        def values(self, tensor: Any) -> None:
            if not self._backs(self._value_buffer, tensor):
                self._value_buffer = None
            self._values = tensor

        def _in_buffer(self, needed: int) -> bool:
            kb, vb = self._key_buffer, self._value_buffer
            return (kb is not None and vb is not None and kb.shape[-2] >= needed
                    and self.keys.shape[:2] == kb.shape[:2] and self.values.shape[:2] == vb.shape[:2]
                    and self.keys.data_ptr() == kb.data_ptr() and self.keys.stride() == kb.stride()
                    and self.values.data_ptr() == vb.data_ptr()
                    and self.values.stride() == vb.stride())

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any):
            import torch

            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = self.get_seq_length()
            end = n + key_states.shape[-2]
            if not self._in_buffer(end):
                # no room (or replaced): a new buffer with spare room, the columns so far copied
                capacity = end + max(MIN_SPARE_COLUMNS, end // 4)
                b, h, _, d = key_states.shape
                kb = torch.empty((b, h, capacity, d), dtype=key_states.dtype, device=key_states.device)
                vb = torch.empty((b, h, capacity, value_states.shape[-1]), dtype=value_states.dtype,
                                 device=value_states.device)
                if n:
                    kb[:, :, :n] = self.keys
                    vb[:, :, :n] = self.values
                self._key_buffer, self._value_buffer = kb, vb
            self._key_buffer[:, :, n:end] = key_states
            self._value_buffer[:, :, n:end] = value_states
            self.keys = self._key_buffer[:, :, :end]
            self.values = self._value_buffer[:, :, :end]
            return self.keys, self.values

        def reset(self) -> None:
            self._key_buffer = self._value_buffer = None
            super().reset()

    _GrowingLayer = GrowingLayer
    return GrowingLayer


_GrowingLayer = None


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

    return type(layer) is DynamicLayer or (_GrowingLayer is not None and type(layer) is _GrowingLayer)




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

"""``GrowingLayer``: a KV cache layer that grows in place (``kv_cache.growing_cache`` uses it). Its
own module, imported on first use, so that ``kv_cache`` stays importable without transformers'
cache classes wherever it only names the cache argument."""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

# Spare room a layer's buffer gets when it (re)allocates: a quarter of what it holds, at least
# this many columns, so that a turn's decoding (max_new_tokens steps of one column) reallocates
# once or not at all.
MIN_SPARE_COLUMNS = 128


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

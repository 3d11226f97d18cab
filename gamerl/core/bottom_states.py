"""The frozen bottom's output, kept from the rollout so that scoring need not run the bottom again.

With ``trainable_layers`` the bottom layers never change during an epoch, and the rollout has
already run them over every token of every episode: each turn's prefill and each decoding step
pass the new tokens through the whole stack. Scoring then ran the bottom once more over the
whole batch (SmolLM2-135M on 12 rules: 24 of 30 layers over 32 conversations of ~1,000 tokens,
a large part of an epoch on 2 CPU cores). Here the rollout keeps the last frozen layer's output
instead, and scoring starts from it.

How: a forward hook on the last frozen decoder layer appends that layer's output to the KV cache
the call runs with, as one more cache layer (``[B, 1, T, H]`` in the keys' place; the values are
a ``[B, 1, T, 1]`` placeholder). Everything the rollout does to its cache (the shared prompt
prefix expanded to every row, the turn cache's row and column selection, the decoding loop's
parking of finished rows) goes through ``past.layers`` and so moves these states with their
keys: column for column they stay aligned with the tokens. After each call every row's states
over its real tokens are copied onto its episode (``Episode.bottom_states``): the context and
the answer up to its last token, which is fed to the model only at the next turn (the states of
an episode's last few tokens are never computed; nothing is scored from them, see
``batch_states``).

The numbers are those of a fresh pass over the same tokens up to float rounding (the same
weights, positions and keys; other matrix shapes). Where any row of a scoring batch lacks what
it needs, that batch runs the bottom as before.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

import torch

from ..models import lm_trunk
from ..models.kv_cache import CACHE_ARG, is_plain_layer


def boundary_layer(lm: Any, n_top: int) -> int:
    """The index of the last frozen decoder layer under ``n_top`` trained ones."""
    return len(lm_trunk(lm).layers) - n_top - 1


def _states_layer(cache: Any, index: int) -> Optional[Any]:
    """The cache layer at ``index`` (one past the model's own), made where missing; None where
    the cache is not one of plain, lazily made layers."""
    layers = getattr(cache, "layers", None)
    if layers is None or getattr(cache, "layer_class_to_replicate", None) is None:
        return None
    while len(layers) <= index:
        layers.append(cache.layer_class_to_replicate())
    return layers[index] if is_plain_layer(layers[index]) else None


@contextmanager
def record_bottom_states(lm: Any, layer: int) -> Iterator[None]:
    """While inside, every forward of ``lm`` with a plain cache appends decoder layer
    ``layer``'s output to that cache, as its layer number ``num_layers`` (see the module's
    docstring)."""
    layers = lm_trunk(lm).layers
    index = len(layers)

    def hook(module: Any, args: Any, kwargs: dict, output: Any) -> None:
        cache = kwargs.get(CACHE_ARG)
        states = output[0] if isinstance(output, tuple) else output
        target = _states_layer(cache, index) if cache is not None else None
        if target is not None:
            target.update(states[:, None], states.new_zeros(states.shape[:2] + (1,))[:, None])

    handle = layers[layer].register_forward_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def keep_on_episodes(cache: Any, call_mask: torch.Tensor, contexts: Sequence[Sequence[int]],
                     answers: Sequence[Sequence[int]], episodes: Sequence[Any]) -> None:
    """Copy each row's recorded states over its real tokens onto its episode.

    cache: the call's cache, over the first ``W - 1`` columns of its ``[B, W]`` token matrix
    (the last sampled column was never fed); call_mask: ``[B, W]`` 1 on real tokens (the
    context, then the answer through its stop token). Row i's real columns below ``W - 1`` are
    the first tokens of ``contexts[i] + answers[i]``, in order."""
    layers = getattr(cache, "layers", None)
    if not layers or len(layers) < 2 or not layers[-1].is_initialized:
        return
    cached = cache.get_seq_length()
    states = layers[-1].keys  # [B, 1, W - 1, H]
    if states.shape[2] != cached or call_mask.shape[1] != cached + 1:
        return
    real = call_mask[:, :cached].bool()
    for i, ep in enumerate(episodes):
        if ep is None:
            continue
        row = states[i, 0][real[i]]
        tokens = (list(contexts[i]) + list(answers[i]))[:row.shape[0]]
        ep.bottom_states = (row.clone(), tokens)


def batch_states(episodes: Sequence[Any], input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 mask: torch.Tensor) -> Optional[torch.Tensor]:
    """``[B, T, H]`` the kept bottom states of a scoring batch's rows, or None where a row lacks
    what scoring reads from them.

    Scoring reads the states at the positions before each policy token (its log-prob and its
    value), and for an episode cut by the context budget also the last one (the value GAE
    bootstraps from). Positions after what is needed are zeros: the causal top layers carry
    them into nothing that is read."""
    kept = [getattr(ep, "bottom_states", None) for ep in episodes]
    some = next((k for k in kept if k is not None), None)
    if some is None:
        return None
    out = some[0].new_zeros((len(episodes), input_ids.shape[1], some[0].shape[-1]))
    for i, ep in enumerate(episodes):
        policy = mask[i].nonzero()
        needed = int(attention_mask[i].sum()) if ep.context_exhausted else (
            int(policy[-1]) if len(policy) else 0)
        if kept[i] is None:
            if needed:
                return None
            continue  # nothing is read from this row (a lost episode's mask is all 0)
        states, tokens = kept[i]
        n = states.shape[0]
        if n < needed or input_ids[i, :n].tolist() != tokens:
            return None
        out[i, :n] = states
    return out


def forget(episodes: Sequence[Any]) -> None:
    """Let the episodes' kept states go (the batch holds its own copy)."""
    for ep in episodes:
        ep.bottom_states = None

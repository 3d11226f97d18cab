"""Log-probs of the distribution that sampled: temperature, top-k and top-p, in every pass.

The rollout samples each token from softmax(z / T) truncated by top-k, then top-p (the seed's
T 0.7, top-k 50, top-p 0.9), where z are the fp32 logits. PPO's ratio, the KL to the reference
and the entropy must all be of that SAME distribution, or the optimiser works on a policy that
never played (0.05 nats per token apart on a warm-started tiny model, several nats on a fresh
one, when the truncation is ignored as verl and OpenRLHF do).

How each pass gets it:

* **sampling** (``sampling_processors`` + ``SampledLogprobs``): we hand ``generate`` our own
  temperature / top-k / top-p processors (transformers' warpers, so the arithmetic is theirs)
  followed by a recorder that keeps only the sampled token's log-prob of the processed scores
  at each step: one ``[B, V]`` row in flight instead of ``[B, steps, V]`` logits per turn.
* **old** (collection, no grad): the same warpers on the recomputed logits give each policy
  token's *support* (the tokens sampling could have drawn); the sampled token is added to it in
  case a borderline token's rank differs in the last bit between the two passes. The support is
  kept, packed 8 tokens per byte (``pack_bits``), for the next two passes.
* **new** (the update, with grad) and **reference** (no grad): log-probs renormalised over that
  same recorded support. So old, new and reference are three distributions on one set, the
  first minibatch's ratio is exactly 1, and no token can get log-prob -inf (a token outside the
  reference's own top-p set would make KL infinite).

Memory (what a 0.6B model can least afford): logits are computed only at policy tokens, in
chunks of ``chunk_tokens`` rows, upcast to fp32 *before* dividing by T (bf16 division loses
0.02-0.04 nats per token at Qwen's vocabulary), and with grad each chunk is checkpointed: only
its ``[C, hidden]`` input is kept for backward, never an ``[N, vocab]`` fp32 tensor. The entropy
is computed without a graph unless the entropy bonus needs its gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch.utils.checkpoint import checkpoint
from transformers import LogitsProcessor, LogitsProcessorList

__all__ = ["Sampling", "SampledLogprobs", "TokenScores", "pack_bits", "sampling_processors",
           "score_tokens", "support_mask", "unpack_bits", "CHUNK_BYTES"]

# One chunk's fp32 logits take at most this many bytes (about 440 tokens at Qwen3's 151,936-token
# vocabulary, every token at once for the tiny model's 1,024).
CHUNK_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Sampling:
    """The sampling distribution: softmax(z / temperature) after top-k then top-p.

    ``top_k`` 0 (or >= vocabulary) and ``top_p`` 1.0 switch the truncation off."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    @classmethod
    def from_config(cls, cfg) -> "Sampling":
        """From a TrainConfig or RolloutConfig (their temperature/top_k/top_p fields)."""
        return cls(float(cfg.temperature), int(cfg.top_k or 0), float(cfg.top_p))

    def truncates(self, vocab_size: int) -> bool:
        return 0 < self.top_k < vocab_size or self.top_p < 1.0


def sampling_processors(sampling: Sampling) -> LogitsProcessorList:
    """transformers' temperature, top-k and top-p warpers, in generate's own order."""
    from transformers import TemperatureLogitsWarper

    return LogitsProcessorList([TemperatureLogitsWarper(sampling.temperature),
                                *_truncation_warpers(sampling)])


def _truncation_warpers(sampling: Sampling) -> LogitsProcessorList:
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    procs = LogitsProcessorList()
    if sampling.top_k > 0:
        procs.append(TopKLogitsWarper(top_k=sampling.top_k))
    if sampling.top_p < 1.0:
        procs.append(TopPLogitsWarper(top_p=sampling.top_p))
    return procs


class SampledLogprobs(LogitsProcessor):
    """Put LAST in generate's processor list: records log pi(sampled token) at every step.

    At step s it sees the processed scores of step s (truncated: -inf outside the support) and,
    in ``input_ids[:, -1]``, the token sampled at step s - 1; so it keeps one ``[B, V]``
    log-softmax row until the next call. ``finish(sequences)`` gathers the last step's token.
    """

    def __init__(self) -> None:
        self._pending: Optional[torch.Tensor] = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._pending is not None:
            self._steps.append(self._pending.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self._pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        """``[B, steps]`` log-probs of the generated tokens (``sequences`` ends with them)."""
        if self._pending is not None:
            self._steps.append(self._pending.gather(-1, sequences[:, -1:]).squeeze(-1))
            self._pending = None
        out = torch.stack(self._steps, dim=1) if self._steps else sequences.new_zeros(
            (sequences.shape[0], 0), dtype=torch.float32)
        self._steps = []
        return out


# ----------------------------------------------------------------------------- supports

_SHIFTS = torch.arange(8, dtype=torch.uint8)


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """``[N, V]`` bool -> ``[N, ceil(V / 8)]`` uint8 (bit j of byte i is token 8 i + j)."""
    n, v = mask.shape
    padded = torch.nn.functional.pad(mask.to(torch.uint8), (0, (-v) % 8)).view(n, -1, 8)
    return (padded << _SHIFTS.to(mask.device)).sum(-1, dtype=torch.uint8)


def unpack_bits(bits: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The inverse of ``pack_bits``: ``[N, V8]`` uint8 -> ``[N, vocab_size]`` bool."""
    flat = (bits.unsqueeze(-1) >> _SHIFTS.to(bits.device)) & 1
    return flat.view(bits.shape[0], -1)[:, :vocab_size].bool()


@torch.no_grad()
def support_mask(scaled_logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """``[N, V]`` bool: the tokens top-k then top-p keep from ``scaled_logits`` (z / T, fp32),
    exactly generate's set.

    transformers' top-p warper sorts the whole vocabulary (152k entries a token for Qwen3: most
    of the scoring pass's time and several [N, V] temporaries). After top-k only k tokens can
    survive, so with top-k on we apply the same rule to the k largest logits alone; rows whose
    k-th logit is tied with a token outside them (top-k then keeps more than k) go through
    transformers' warpers, as does everything when top-k is off.
    ``tests/test_scoring.py`` checks the two paths agree."""
    n, vocab = scaled_logits.shape
    k = sampling.top_k
    if not 0 < k < vocab:
        return torch.isfinite(_truncation_warpers(sampling)(None, scaled_logits.clone()))
    values, index = scaled_logits.topk(k, dim=-1)  # descending
    tied = (scaled_logits >= values[:, -1:]).sum(-1) > k
    keep_top = torch.ones_like(values, dtype=torch.bool)
    if sampling.top_p < 1.0:
        # The warper's rule on the survivors: in ascending order, drop tokens whose cumulative
        # probability is <= 1 - top_p, always keeping the most likely one.
        ascending = values.flip(-1)
        cumulative = ascending.softmax(-1).cumsum(-1)
        drop = cumulative <= 1.0 - sampling.top_p
        drop[:, -1] = False
        keep_top = ~drop.flip(-1)
    keep = torch.zeros_like(scaled_logits, dtype=torch.bool).scatter_(1, index, keep_top)
    if tied.any():
        keep[tied] = torch.isfinite(
            _truncation_warpers(sampling)(None, scaled_logits[tied].clone()))
    return keep


# ----------------------------------------------------------------------------- scoring


@dataclass
class TokenScores:
    """Per-token results of ``score_tokens`` (``N`` = tokens scored)."""

    logprobs: torch.Tensor  # [N] fp32, with grad when the hidden states have it
    entropy: Optional[torch.Tensor] = None  # [N] fp32 (of the truncated distribution)
    support: Optional[torch.Tensor] = None  # [N, ceil(V/8)] uint8, when it was derived here


def _chunk(hidden: torch.Tensor, labels: torch.Tensor, bits: Optional[torch.Tensor],
           head: Callable[[torch.Tensor], torch.Tensor], temperature: float,
           with_entropy: bool, entropy_grad: bool, sampling: Optional[Sampling]):
    """One chunk: (logprobs [C], entropy [C] or None, support bits [C, V8] or None)."""
    z = head(hidden).float() / temperature  # upcast, THEN divide (as generate does)
    vocab = z.shape[-1]
    keep, new_bits = None, None
    if sampling is not None:  # derive the support from these logits (the old policy)
        keep = support_mask(z.detach(), sampling)
        keep[torch.arange(len(labels), device=keep.device), labels] = True
        new_bits = pack_bits(keep)
    elif bits is not None:
        keep = unpack_bits(bits, vocab)
    if keep is not None:
        z = z.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(z, dim=-1)
    logprobs = z.gather(-1, labels.unsqueeze(-1)).squeeze(-1) - lse
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            # H = lse - sum p z, with z read as 0 outside the support (p is exactly 0 there):
            # never 0 * -inf, never log of a probability.
            finite_z = z if keep is None else z.masked_fill(~keep, 0.0)
            entropy = lse - (torch.exp(z - lse.unsqueeze(-1)) * finite_z).sum(-1)
    return logprobs, entropy, new_bits


def score_tokens(hidden: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor],
                 labels: torch.Tensor, sampling: Sampling, *, support: Optional[torch.Tensor] = None,
                 derive_support: bool = False, with_entropy: bool = False,
                 entropy_grad: bool = False, chunk_tokens: Optional[int] = None) -> TokenScores:
    """log pi(label) (and the entropy) of the sampling distribution at each of N positions.

    Args:
        hidden: ``[N, H]`` last hidden states of the positions that predict ``labels``.
        head: the LM head (hidden -> vocabulary logits).
        labels: ``[N]`` the tokens whose log-prob is wanted.
        sampling: temperature / top-k / top-p of the rollout.
        support: ``[N, ceil(V/8)]`` packed supports to renormalise over (new and reference
            passes); None: derive it (``derive_support``) or use the whole vocabulary.
        derive_support: compute the support from these logits with ``sampling``'s top-k/top-p
            plus the label itself, and return it (the old-policy pass).
        with_entropy / entropy_grad: also the entropy; with a graph only if ``entropy_grad``.
        chunk_tokens: rows per chunk (default: ``CHUNK_BYTES`` of fp32 logits).

    Returns a ``TokenScores``. With grad enabled each chunk runs under activation checkpointing:
    backward recomputes its logits, so peak memory is one chunk's, not N x vocab.
    """
    n = hidden.shape[0]
    weight = getattr(head, "weight", None)
    vocab = int(weight.shape[0]) if weight is not None else int(head(hidden[:1]).shape[-1])
    derive = sampling if derive_support and sampling.truncates(vocab) else None
    if support is not None and derive is not None:
        raise ValueError("score_tokens: pass a support or derive one, not both")
    chunk = chunk_tokens or max(1, CHUNK_BYTES // (4 * vocab))
    grad = torch.is_grad_enabled() and hidden.requires_grad
    logprobs, entropies, supports = [], [], []
    for s in range(0, n, chunk):
        args = (hidden[s:s + chunk], labels[s:s + chunk],
                None if support is None else support[s:s + chunk])
        fn = lambda h, lab, b: _chunk(h, lab, b, head, sampling.temperature,  # noqa: E731
                                      with_entropy, entropy_grad, derive)
        lp, ent, bits = checkpoint(fn, *args, use_reentrant=False) if grad else fn(*args)
        logprobs.append(lp)
        entropies.append(ent)
        supports.append(bits)
    empty = hidden.new_zeros(0, dtype=torch.float32)
    return TokenScores(
        logprobs=torch.cat(logprobs) if logprobs else empty,
        entropy=(torch.cat(entropies) if entropies else empty) if with_entropy else None,
        support=(torch.cat(supports) if supports else None) if derive is not None else None)

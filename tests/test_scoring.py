"""gamerl.core.scoring: every log-prob PPO uses is of the distribution that sampled (temperature,
top-k, top-p), computed in fp32 after the upcast, in chunks that never hold N x vocab.

Hand-computed numbers are written out in comments; the sampling test compares recorded
log-probs with the frequencies generate actually produced.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import math

import pytest
import torch

from gamerl.config import PRESETS
from gamerl.models import PolicyWithValue, chat_prompt, load_policy
from gamerl.core.rollout import LMPolicy, RolloutConfig, encode
from gamerl.core.scoring import (Sampling, SampledLogprobs, pack_bits, score_tokens, support_mask,
                            unpack_bits)
from gamerl.core.forward import forward_policy

Z = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])  # logits over a 5-token vocabulary


class Identity(torch.nn.Module):  # a "head" whose logits are the hidden states themselves
    def forward(self, h):
        return h


def test_support_is_generates_top_k_then_top_p():
    # top_k 3 keeps {0, 1, 2}: softmax([2, 1, 0.5]) = (7.389, 2.718, 1.649) / 11.756
    #   = 0.6285, 0.2312, 0.1402. top_p 0.8 drops, from the least likely, tokens whose
    #   cumulative probability is <= 1 - 0.8 = 0.2: token 2 (0.1402). Kept: {0, 1}.
    keep = support_mask(Z, Sampling(1.0, top_k=3, top_p=0.8))
    assert keep.tolist() == [[True, True, False, False, False]]
    assert support_mask(Z, Sampling(1.0, top_k=0, top_p=1.0)).all()
    # temperature is applied by the caller (z / T): T 0.5 sharpens, top-p 0.8 keeps token 0
    # alone (e^4 / (e^4 + e^2 + e^1 + ...) = 0.84 > 0.8)
    assert support_mask(Z / 0.5, Sampling(0.5, top_k=0, top_p=0.8)).tolist() == [
        [True, False, False, False, False]]


def test_support_fast_path_equals_transformers_warpers():
    """support_mask applies top-p to the top-k survivors only; transformers' warpers sort the
    whole vocabulary. Same sets on peaked, flat and tied logits, for several settings."""
    from gamerl.core.scoring import _truncation_warpers

    g = torch.Generator().manual_seed(7)
    rows = [torch.randn(64, 3000, generator=g) * scale for scale in (0.3, 2.0, 8.0)]
    tied = torch.randn(8, 3000, generator=g)
    tied[:, :60] = 1.5  # 60 equal largest logits: top-k 50 keeps all 60
    for logits in rows + [tied]:
        for k, p in ((50, 0.9), (5, 1.0), (50, 0.5), (2999, 0.95)):
            sampling = Sampling(1.0, k, p)
            reference = torch.isfinite(_truncation_warpers(sampling)(None, logits.clone()))
            assert torch.equal(support_mask(logits, sampling), reference), (k, p)


def test_truncated_logprobs_hand_computed():
    sampling = Sampling(1.0, top_k=3, top_p=0.8)
    hidden = Z.expand(3, 5)
    labels = torch.tensor([0, 1, 2])
    out = score_tokens(hidden, Identity(), labels, sampling, derive_support=True)
    # over the support {0, 1}: log(e^2 / (e^2 + e^1)) = -0.31326, log(e^1 / (e^2 + e^1)) = -1.31326
    # label 2 lies outside the derived support (as a borderline token can, numerically): it is
    # added to ITS row's support, {0, 1, 2}: 0.5 - log(e^2 + e^1 + e^0.5) = 0.5 - 2.46437 = -1.96437
    assert out.logprobs.tolist() == pytest.approx([-0.313262, -1.313262, -1.964369], abs=1e-5)
    supports = unpack_bits(out.support, 5)
    assert supports.tolist() == [[True, True, False, False, False]] * 2 + [
        [True, True, True, False, False]]
    # the same supports passed back (the new and reference passes) give the same numbers
    again = score_tokens(hidden, Identity(), labels, sampling, support=out.support)
    assert torch.equal(again.logprobs, out.logprobs)
    # untruncated, for contrast: log softmax(z)[0] = 2 - log(e^2+e^1+e^.5+e^0+e^-1) = -0.57444
    full = score_tokens(hidden[:1], Identity(), labels[:1], Sampling(1.0))
    assert full.logprobs.item() == pytest.approx(-0.574438, abs=1e-5)


def test_entropy_of_the_truncated_distribution():
    sampling = Sampling(1.0, top_k=2)
    out = score_tokens(Z, Identity(), torch.tensor([0]), sampling, derive_support=True,
                       with_entropy=True)
    # p = (0.7311, 0.2689): H = -(0.7311 ln 0.7311 + 0.2689 ln 0.2689) = 0.58220
    assert out.entropy.item() == pytest.approx(0.582203, abs=1e-5)


def test_pack_bits_round_trip():
    g = torch.Generator().manual_seed(0)
    for vocab in (1, 7, 8, 9, 1023):
        mask = torch.rand(5, vocab, generator=g) > 0.5
        bits = pack_bits(mask)
        assert bits.dtype == torch.uint8 and bits.shape == (5, math.ceil(vocab / 8))
        assert torch.equal(unpack_bits(bits, vocab), mask)


def test_bf16_logits_are_upcast_before_the_temperature():
    """The review's item 4: bf16 logits divided by T in bf16 lose up to ~0.1 nats per token at
    Qwen's vocabulary. Upcast, then divide: the result equals the fp32 computation exactly."""
    g = torch.Generator().manual_seed(1)
    head = torch.nn.Linear(64, 4096, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        head.weight.copy_(torch.randn(4096, 64, generator=g) * 0.2)
    hidden = torch.randn(32, 64, generator=g).to(torch.bfloat16)
    labels = torch.randint(0, 4096, (32,), generator=g)
    out = score_tokens(hidden, head, labels, Sampling(0.7)).logprobs
    logits = head(hidden)
    exact = torch.log_softmax(logits.float() / 0.7, -1).gather(-1, labels[:, None])[:, 0]
    assert torch.allclose(out, exact, atol=1e-5, rtol=0)
    divided_in_bf16 = torch.log_softmax((logits / 0.7).float(), -1).gather(-1, labels[:, None])[:, 0]
    assert (divided_in_bf16 - exact).abs().mean() > 1e-3  # what the old order lost


def test_no_vocab_sized_tensor_is_kept_for_backward():
    """With grad, each chunk is checkpointed: autograd keeps the [C, hidden] inputs, never the
    [N, vocab] fp32 log-softmax (4.7 GB at 7,680 tokens x 151,936 for Qwen3)."""
    g = torch.Generator().manual_seed(2)
    n, hidden_size, vocab = 96, 32, 2048
    head = torch.nn.Linear(hidden_size, vocab, bias=False)
    hidden = torch.randn(n, hidden_size, generator=g, requires_grad=True)
    labels = torch.randint(0, vocab, (n,), generator=g)
    saved = []

    def pack(x):
        saved.append(x.numel())
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = score_tokens(hidden, head, labels, Sampling(0.7), with_entropy=True,
                           chunk_tokens=32)
    assert out.logprobs.requires_grad and not out.entropy.requires_grad  # no entropy graph
    assert max(saved) < n * vocab / 2, saved
    out.logprobs.sum().backward()
    # the gradient is the plain log-softmax's
    h2 = hidden.detach().clone().requires_grad_(True)
    torch.log_softmax(head(h2) / 0.7, -1).gather(-1, labels[:, None]).sum().backward()
    assert torch.allclose(hidden.grad, h2.grad, atol=1e-5)


def test_entropy_gets_a_graph_only_when_the_bonus_needs_it():
    hidden = torch.randn(4, 5, requires_grad=True)
    out = score_tokens(hidden, Identity(), torch.tensor([0, 1, 2, 3]), Sampling(1.0, top_k=3),
                       derive_support=False, with_entropy=True, entropy_grad=True)
    assert out.entropy.requires_grad


# ----------------------------------------------------------------------------- generate


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_policy(str(tiny_dir), device="cpu")


def test_recorded_logprobs_are_the_frequencies_generate_samples(tiny):
    """One next token sampled 4,000 times from one context with T 0.7, top-k 5, top-p 0.9:
    tokens outside the support never appear, and each token's frequency matches the
    probability the recorder gave it (exp of its log-prob) within 4 standard errors."""
    lm, tok = tiny
    cfg = RolloutConfig(max_new_tokens=1, temperature=0.7, top_k=5, top_p=0.9)
    policy = LMPolicy(lm, tok, cfg)
    context = encode(tok, chat_prompt(tok, [{"role": "user", "content": "Rule 1: password"}]))
    torch.manual_seed(0)
    n = 4000
    answers = policy([context] * n, [None] * n)
    firsts = torch.tensor([a.token_ids[0] for a in answers])
    logps = torch.tensor([a.logprobs[0] for a in answers])
    with torch.no_grad():
        ids = torch.tensor([context])
        z = lm(ids).logits[0, -1].float() / 0.7
    keep = support_mask(z[None], Sampling(0.7, 5, 0.9))[0]
    assert keep[firsts].all()
    expected = torch.log_softmax(z.masked_fill(~keep, float("-inf")), -1)
    for token in firsts.unique():
        sel = firsts == token
        assert torch.allclose(logps[sel], expected[token].expand(int(sel.sum())), atol=1e-5)
        p = expected[token].exp().item()
        freq = sel.float().mean().item()
        assert abs(freq - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-3, (int(token), freq, p)
    assert keep.sum() >= 2  # the test exercised a real choice


def test_generate_keeps_no_per_step_logits(tiny, monkeypatch):
    """The recorder replaces output_logits ([B, steps, vocab] per turn: 3 GB at B 20 x 256
    steps x Qwen's vocabulary): generate (the path with ``drop_finished_rows`` off) is asked
    for no logits or scores. gamerl.core.decode keeps one [B, vocab] row of scores at a time."""
    lm, tok = tiny
    seen = {}
    real = lm.generate

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(lm, "generate", spy)
    policy = LMPolicy(lm, tok, RolloutConfig(max_new_tokens=4, drop_finished_rows=False))
    answers = policy([encode(tok, "Rule 1")] * 2, [None] * 2)
    assert not seen.get("output_logits") and not seen.get("output_scores")
    assert any(isinstance(p, SampledLogprobs) for p in seen["logits_processor"])
    assert all(len(a.logprobs) == len(a.token_ids) for a in answers)


def test_forward_policy_matches_recorded_logprobs_of_truncated_sampling(tiny):
    lm, tok = tiny
    sampling = Sampling(0.7, top_k=5, top_p=0.9)
    cfg = RolloutConfig(max_new_tokens=16, temperature=0.7, top_k=5, top_p=0.9)
    torch.manual_seed(3)
    context = encode(tok, chat_prompt(tok, [{"role": "user", "content": "Rule 2: a number"}]))
    answers = LMPolicy(lm, tok, cfg)([context] * 4, [None] * 4)
    for ans in answers:
        ids = torch.tensor([context + ans.token_ids])
        mask = torch.zeros_like(ids)
        mask[0, len(context):] = 1
        with torch.no_grad():
            out = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids), sampling,
                                 mask=mask, derive_support=True)
        assert torch.allclose(out.logprobs[0, len(context):], torch.tensor(ans.logprobs),
                              atol=1e-5)
        # truncation only ever raises a sampled token's log-prob (it renormalises a subset)
        with torch.no_grad():
            full = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids),
                                  Sampling(0.7), mask=mask)
        assert (out.logprobs >= full.logprobs - 1e-6).all()


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_confident_sampled_token_gets_a_gradient_under_the_training_sampling(preset):
    """Under the original notebook's top-p 0.9 a token of probability 0.95 was alone in its
    support: log-prob exactly 0, no gradient, no KL, whatever its advantage. The presets'
    training rollouts sample the whole distribution, so it is scored and pushed like any
    other token."""
    from gamerl.config import get_config

    cfg = get_config(preset, device="cpu")
    sampling = Sampling.from_config(cfg)
    assert not sampling.truncates(vocab_size=50_000)
    # p_T(token 0) at the preset's temperature: e^(z0/T) / sum = 0.95 or more
    hidden = torch.tensor([[6.0 * cfg.temperature, 0.0, 0.0, 0.0, 0.0]], requires_grad=True)
    scores = score_tokens(hidden, Identity(), torch.tensor([0]), sampling, derive_support=True)
    assert math.exp(float(scores.logprobs[0])) >= 0.95
    scores.logprobs.sum().backward()
    assert float(hidden.grad.abs().sum()) > 0
    # the evaluation's sampling (top-p 0.9) would have frozen it
    frozen = torch.tensor([[6.0 * cfg.temperature, 0.0, 0.0, 0.0, 0.0]], requires_grad=True)
    evaluation = Sampling(cfg.eval_temperature, cfg.eval_top_k, cfg.eval_top_p)
    lp = score_tokens(frozen, Identity(), torch.tensor([0]), evaluation, derive_support=True)
    lp.logprobs.sum().backward()
    assert float(lp.logprobs[0]) == 0.0 and float(frozen.grad.abs().sum()) == 0.0

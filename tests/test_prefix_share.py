"""gamerl.core.prefix_share: a shared prefix run once gives the plain pass's hidden states and
gradients, the plan finds GRPO groups and the all-rows prefix, and it stays off where it cannot
help or cannot run."""

import pytest
import torch

from gamerl.core import prefix_share
from gamerl.core.forward import forward_policy, reference_logprobs
from gamerl.core.scoring import Sampling
from gamerl.models import PolicyWithValue, lm_trunk
from gamerl.models.loading import load_policy

SAMPLING = Sampling(temperature=0.7, top_p=0.9, top_k=50)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    lm, tok = load_policy("tiny")
    return lm, tok


def right_padded(rows: list[torch.Tensor], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return ids, mask


def grpo_rows(vocab: int, prompts=(30, 41, 25), group=3, seed=0) -> list[torch.Tensor]:
    """``group`` answers of different lengths after each prompt: rows grouped by prompt."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for n in prompts:
        prompt = torch.randint(3, vocab, (n,), generator=g)
        for k in range(group):
            rows.append(torch.cat([prompt, torch.randint(3, vocab, (5 + 4 * k,), generator=g)]))
    return rows


def test_plan_finds_the_groups_and_the_all_rows_prefix(tiny):
    lm, tok = tiny
    ids, mask = right_padded(grpo_rows(lm.config.vocab_size), tok.pad_token_id)
    plan = prefix_share.plan(ids, mask)
    assert plan.group.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert plan.prefix_len.tolist() == [30, 41, 25]
    # 3 prompts x 41 columns + 9 rows x 13 answer columns, against 9 x 54 slots
    assert plan.cost == 3 * 41 + 9 * 13 < 9 * 54

    # Rows that share only a system prompt (20 tokens) and then differ: one group of all rows.
    shared = torch.randint(3, lm.config.vocab_size, (20,))
    rows = [torch.cat([shared, torch.full((1,), 3 + i), torch.randint(3, 99, (30,))])
            for i in range(6)]
    ids, mask = right_padded(rows, tok.pad_token_id)
    plan = prefix_share.plan(ids, mask)
    assert plan.group.tolist() == [0] * 6 and plan.prefix_len.tolist() == [20]


def test_no_plan_where_nothing_is_shared_or_rows_are_left_padded(tiny):
    lm, tok = tiny
    rows = [torch.randint(3, lm.config.vocab_size, (12,)) for _ in range(4)]
    rows = [torch.cat([torch.tensor([3 + i]), r]) for i, r in enumerate(rows)]  # differ at 0
    ids, mask = right_padded(rows, tok.pad_token_id)
    assert prefix_share.plan(ids, mask) is None
    ids, mask = right_padded(grpo_rows(lm.config.vocab_size), tok.pad_token_id)
    assert prefix_share.plan(ids[:1], mask[:1]) is None  # one row
    assert prefix_share.plan(ids.flip(1), mask.flip(1)) is None  # left padded


@pytest.mark.parametrize("train", [False, True])
def test_shared_forward_equals_the_plain_one_with_gradients(tiny, train):
    lm, tok = tiny
    trunk = lm_trunk(lm)
    trunk.train(train)
    ids, mask = right_padded(grpo_rows(lm.config.vocab_size), tok.pad_token_id)
    real = mask.bool()
    out = {}
    for share in (False, True):
        lm.zero_grad(set_to_none=True)
        hidden = prefix_share.trunk_hidden(trunk, ids, mask, share=share)
        ((hidden * mask[..., None]) ** 2).mean().backward()
        grads = torch.cat([p.grad.flatten() for p in trunk.parameters() if p.grad is not None])
        out[share] = hidden.detach(), grads
    trunk.eval()
    assert torch.isfinite(out[True][0]).all()
    torch.testing.assert_close(out[True][0][real], out[False][0][real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[True][1], out[False][1], atol=1e-6, rtol=1e-4)


def test_policy_and_reference_log_probs_agree_with_the_plain_pass(tiny):
    lm, tok = tiny
    policy = PolicyWithValue(lm)
    ids, mask = right_padded(grpo_rows(lm.config.vocab_size, seed=1), tok.pad_token_id)
    answers = torch.zeros_like(mask)
    for i, n in enumerate([30] * 3 + [41] * 3 + [25] * 3):
        answers[i, n:] = mask[i, n:]
    with torch.no_grad():
        plain = forward_policy(policy, ids, mask, SAMPLING, mask=answers, derive_support=True,
                               share_prefix=False)
        shared = forward_policy(policy, ids, mask, SAMPLING, mask=answers, derive_support=True)
        ref_plain = reference_logprobs(lm, ids, mask, SAMPLING, mask=answers,
                                       support=plain.support, share_prefix=False)
        ref_shared = reference_logprobs(lm, ids, mask, SAMPLING, mask=answers,
                                        support=plain.support)
    m = answers.bool()
    assert torch.equal(plain.support, shared.support)
    torch.testing.assert_close(shared.logprobs[m], plain.logprobs[m], atol=1e-5, rtol=0)
    torch.testing.assert_close(ref_shared[m], ref_plain[m], atol=1e-5, rtol=0)
    torch.testing.assert_close(shared.values[m], plain.values[m], atol=1e-5, rtol=1e-5)


def test_off_under_gradient_checkpointing_and_flash_attention(tiny):
    lm, _ = tiny
    trunk = lm_trunk(lm)
    assert prefix_share.usable(trunk)
    trunk.gradient_checkpointing = True
    try:
        trunk.train()
        assert not prefix_share.usable(trunk)  # HF turns the cache off in training
        trunk.eval()
        assert prefix_share.usable(trunk)
    finally:
        trunk.gradient_checkpointing = False
    attn = trunk.config._attn_implementation
    trunk.config._attn_implementation = "flash_attention_2"
    try:
        assert not prefix_share.usable(trunk)
    finally:
        trunk.config._attn_implementation = attn


def test_frozen_bottom_shares_the_prefix_too(tiny):
    """With ``trainable_layers`` (a ``SplitTrunk``) the scoring pass runs the frozen bottom,
    whose output every update reuses: it runs shared prefixes once like the whole trunk does
    (before, it ran every row's prompt), with the plain pass's numbers."""
    from gamerl.models import SplitTrunk

    lm, tok = tiny
    ids, mask = right_padded(grpo_rows(lm.config.vocab_size, seed=2), tok.pad_token_id)
    answers = torch.zeros_like(mask)
    for i, n in enumerate([30] * 3 + [41] * 3 + [25] * 3):
        answers[i, n:] = mask[i, n:]
    policy = PolicyWithValue(lm)
    policy.split = SplitTrunk.of(lm, 2)
    slots: list[int] = []
    hook = policy.split.bottom.layers[0].register_forward_hook(
        lambda module, args, out: slots.append(args[0].shape[0] * args[0].shape[1]))
    try:
        with torch.no_grad():
            passes = {share: forward_policy(policy, ids, mask, SAMPLING, mask=answers,
                                            derive_support=True, share_prefix=share)
                      for share in (False, True)}
    finally:
        hook.remove()
    plain_slots, shared_slots = slots[0], sum(slots[1:])
    assert plain_slots == ids.numel()
    assert shared_slots == prefix_share.plan(ids, mask).cost < plain_slots
    m, real = answers.bool(), mask.bool()
    plain, shared = passes[False], passes[True]
    torch.testing.assert_close(shared.trunk_cache[real], plain.trunk_cache[real], atol=1e-5,
                               rtol=1e-5)
    torch.testing.assert_close(shared.logprobs[m], plain.logprobs[m], atol=1e-5, rtol=0)
    torch.testing.assert_close(shared.values[m], plain.values[m], atol=1e-5, rtol=1e-5)

"""gamerl.core.decode: sampling a turn without the rows that have answered.

The loop must sample what ``generate`` samples (the same random draws while no row has left),
return ``generate``'s layout (pads after each row's stop, one cache over every row), and a
multi-turn rollout played through it must be the one ``generate`` plays (greedy: token for token).
"""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from gamerl.core.decode import sample_turn
from gamerl.core.rollout import LMPolicy, RolloutConfig, encode, rollout
from gamerl.core.scoring import SampledLogprobs, Sampling, sampling_processors
from gamerl.core.turn_cache import left_pad
from gamerl.models import build_tiny, chat_prompt, load_policy
from gamerl.models.kv_cache import CACHE_ARG, cache_of, growing_cache
from tasks.password_game import GameConfig, LocalPasswordGameEnv

SAMPLING = Sampling(temperature=0.7, top_k=50, top_p=0.9)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny(tmp_path_factory.mktemp("decode") / "tiny")
    lm, tok = load_policy(str(path), device="cpu")
    lm.eval()
    return lm, tok


def batch(tok, n=8):
    """``n`` left-padded prompts of different lengths."""
    rows = [encode(tok, chat_prompt(tok, [{"role": "user", "content": f"Password {i} " * (1 + 3 * i)}]))
            for i in range(n)]
    return left_pad(rows, tok.pad_token_id)


class Scramble(LogitsProcessor):
    """A fixed, row-dependent bias (from the sum of a row's tokens so far): greedy decoding of
    the random tiny model writes one token forever in every row; with this, rows differ and
    finish at different steps, deterministically."""

    def __call__(self, input_ids, scores):
        phase = input_ids.sum(-1, keepdim=True).float() * 0.37
        return scores + 4.0 * torch.sin(phase + torch.arange(scores.shape[-1]) * 1.3)


def generate(lm, tok, ids, mask, stop_ids, max_new, processors=None, do_sample=True):
    extra = (dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, logits_processor=processors)
             if do_sample else dict(do_sample=False, temperature=None, top_p=None, top_k=None,
                                    logits_processor=processors))
    return lm.generate(input_ids=ids, attention_mask=mask, **{CACHE_ARG: growing_cache(lm)},
                       max_new_tokens=max_new, eos_token_id=list(stop_ids),
                       pad_token_id=tok.pad_token_id, use_cache=True,
                       return_dict_in_generate=True, **extra)


def staggered_stop(lm, tok, ids, mask, max_new=24):
    """A token that greedy decoding first writes at different steps in different rows (and not
    at all in some): used as the stop token, rows finish at different steps, as answers do."""
    out = generate(lm, tok, ids, mask, [tok.pad_token_id], max_new,
                   LogitsProcessorList([Scramble()]), do_sample=False)
    new = out.sequences[:, ids.shape[1]:]
    best, spread = None, 0
    for token in torch.unique(new).tolist():
        firsts = {int((row == token).nonzero()[0]) if bool((row == token).any()) else max_new
                  for row in new}
        if len(firsts) > spread:
            best, spread = token, len(firsts)
    assert spread >= 3, "no token that stops rows at different steps"
    return best


@torch.no_grad()
def test_sampling_draws_what_generate_draws_while_every_row_stays(tiny):
    """No row leaves (``compact_fraction`` above 1): the same random numbers, so the same
    tokens as ``generate`` and the log-probs its recorder keeps."""
    lm, tok = tiny
    ids, mask = batch(tok)
    recorder = SampledLogprobs()
    processors = sampling_processors(SAMPLING)
    processors.append(recorder)
    torch.manual_seed(11)
    ref = generate(lm, tok, ids, mask, [tok.eos_token_id], 16, processors)
    ref_lp = recorder.finish(ref.sequences[:, ids.shape[1]:])
    torch.manual_seed(11)
    out = sample_turn(lm, ids, mask, growing_cache(lm), max_new_tokens=16,
                      stop_ids=[tok.eos_token_id], pad_id=tok.pad_token_id,
                      processors=sampling_processors(SAMPLING), record_logprobs=True,
                      compact_fraction=2.0)
    assert torch.equal(out.sequences, ref.sequences)
    real = out.sequences[:, ids.shape[1]:] != tok.pad_token_id
    assert torch.allclose(out.logprobs[real], ref_lp[real], atol=1e-5)
    assert cache_of(ref).get_seq_length() == out.past.get_seq_length()


@torch.no_grad()
def test_finished_rows_leave_and_come_back_with_their_cache(tiny):
    """Greedy, with a stop token rows reach at different steps: the same sequences as
    ``generate``, fewer row-steps, and a cache whose every column a row attends to (its prompt,
    its answer through the stop token) holds generate's keys and values."""
    lm, tok = tiny
    ids, mask = batch(tok)
    stop = staggered_stop(lm, tok, ids, mask)
    ref = generate(lm, tok, ids, mask, [stop], 24, LogitsProcessorList([Scramble()]),
                   do_sample=False)
    out = sample_turn(lm, ids, mask, growing_cache(lm), max_new_tokens=24, stop_ids=[stop],
                      pad_id=tok.pad_token_id, processors=LogitsProcessorList([Scramble()]),
                      do_sample=False, compact_fraction=0.0)  # leave at once
    assert torch.equal(out.sequences, ref.sequences)
    steps = out.sequences.shape[1] - ids.shape[1]
    assert out.row_steps < ids.shape[0] * (steps - 1)  # rows really left
    ref_past = cache_of(ref)
    assert out.past.get_seq_length() == ref_past.get_seq_length()
    # the columns each row attends to next turn: its prompt and its answer through the stop
    new = out.sequences[:, ids.shape[1]:]
    answered = torch.zeros_like(new, dtype=torch.bool)
    for i, row in enumerate(new):
        hits = (row == stop).nonzero()
        answered[i, :int(hits[0]) + 1 if len(hits) else len(row)] = True
    attends = torch.cat([mask.bool(), answered], dim=1)[:, :-1]
    for mine, theirs in zip(out.past.layers, ref_past.layers):
        a, b = mine.keys.permute(0, 2, 1, 3)[attends], theirs.keys.permute(0, 2, 1, 3)[attends]
        assert torch.allclose(a, b, atol=1e-5)
        a, b = mine.values.permute(0, 2, 1, 3)[attends], theirs.values.permute(0, 2, 1, 3)[attends]
        assert torch.allclose(a, b, atol=1e-5)
        assert torch.isfinite(mine.keys).all()  # the columns a row never ran are zeros


def answer_tokens(ep):
    """Each turn's sampled tokens (the runs of the policy mask)."""
    runs, run = [], []
    for token, m in zip(ep.token_ids, ep.policy_mask):
        if m:
            run.append(token)
        elif run:
            runs, run = runs + [run], []
    return runs + ([run] if run else [])


def test_rollout_with_rows_dropped_records_what_a_fresh_pass_scores(tiny):
    """Whole multi-turn rollouts, rows leaving inside turns and the turn cache carrying the
    reassembled cache: every recorded log-prob, of every turn, is what a fresh forward pass over
    the finished episode gives (positions, masks and carried keys right), and fewer row-steps
    ran than ``generate`` would have run."""
    from gamerl.core.forward import forward_policy
    from gamerl.models import PolicyWithValue

    lm, tok = tiny

    def play(stop_extra=None):
        cfg = RolloutConfig(max_turns=3, max_new_tokens=16, temperature=0.7, top_p=0.9, top_k=50,
                            system_prompt="Reply with your next password only.")
        policy = LMPolicy(lm, tok, cfg)
        if stop_extra is not None:
            policy.stop_ids = sorted(set(policy.stop_ids) | {stop_extra})
        torch.manual_seed(5)
        game = GameConfig(max_steps=3, num_rules=2)
        episodes = rollout(policy, tok, list(range(10)), lambda: LocalPasswordGameEnv(game), cfg)
        return episodes, policy.decoded_row_steps

    # a stop token the answers reach at different steps (the random model rarely closes its
    # answers): chosen from a first rollout, so that rows really leave in the one checked
    first, _ = play()
    answers = [a for ep in first for a in answer_tokens(ep)]
    stop_extra = max(set(t for a in answers for t in a),
                     key=lambda t: len({a.index(t) if t in a else -1 for a in answers}))
    episodes, row_steps = play(stop_extra)
    assert max(len(ep.turns) for ep in episodes) == 3
    # what generate runs: every live row until the turn's longest answer ends
    by_turn = [[len(answer_tokens(ep)[t]) for ep in episodes if len(ep.turns) > t] for t in range(3)]
    assert row_steps < sum(len(lens) * (max(lens) - 1) for lens in by_turn)
    for ep in episodes:
        ids = torch.tensor([ep.token_ids])
        lp = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids), SAMPLING,
                            derive_support=True).logprobs[0]
        sampled = torch.tensor(ep.policy_mask, dtype=torch.bool)
        assert torch.allclose(lp[sampled], torch.tensor(ep.gen_logprobs)[sampled], atol=1e-4)

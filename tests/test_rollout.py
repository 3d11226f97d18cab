"""gamerl.core.rollout: batched multi-turn rollouts, masks, rewards, log-probs, password extraction.

CPU only, the tiny model built in a temporary directory; nothing touches the Hugging Face hub.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch

from gamerl.models import IM_END, PolicyWithValue, build_tiny, chat_prompt, load_policy
from gamerl.core.rollout import (Answer, LMPolicy, RolloutConfig, ScriptedPolicy, encode,
                                 episodes_to_batch, first_messages, rollout)
from gamerl.games.password_game import extract_password, feedback_message
from gamerl.core.decode import sample_turn
from gamerl.core.scoring import Sampling
from gamerl.core.forward import forward_policy
from tasks.password_game import GameConfig, LocalPasswordGameEnv

SYSTEM = "Reply with your next password only, on one line."
SAMPLING = Sampling(temperature=0.7, top_k=50, top_p=0.9)  # rcfg()'s


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny(tmp_path_factory.mktemp("rollout") / "tiny")
    return load_policy(str(path), device="cpu")


def env_factory(num_rules=6, max_steps=3):
    game = GameConfig(max_steps=max_steps, num_rules=num_rules)
    return lambda: LocalPasswordGameEnv(game)


def rcfg(**kw):
    base = dict(max_turns=3, max_new_tokens=12, temperature=0.7, top_p=0.9, top_k=50,
                max_context_tokens=4096, system_prompt=SYSTEM)
    return RolloutConfig(**{**base, **kw})


# ----------------------------------------------------------------------------- extraction


@pytest.mark.parametrize("answer, expected", [
    ("Hello1!", "Hello1!"),
    ("  Hello1!  \nsecond line", "Hello1!"),
    ("\n\nfirst non-empty\n", "first non-empty"),
    ("<think>\nlet me think: Password: wrong\n</think>\n\nRight99!", "Right99!"),
    ("<think>never closed Password: nope", ""),
    ("reasoning that leaked</think>final", "final"),
    ("I think so.\nPassword: `Sun5!`", "Sun5!"),
    ("Password: first\nthen PASSWORD:  \"second?\"", "second?"),
    ("password:\n\n  'on the next line'  ", "on the next line"),
    ("```\nCode99!\n```", "Code99!"),
    ("```text\nFenced#1\n```", "Fenced#1"),
    ("`\"nested\"`", "nested"),
    ("\u201cSmart quotes1!\u201d", "Smart quotes1!"),
    ("**H**ello *i*talic", "**H**ello *i*talic"),  # markup is part of the password
    ("'unbalanced", "'unbalanced"),
    ("", ""),
    ("   \n \n", ""),
    ("Password:", ""),
    ("\"\"", ""),
])
def test_extract_password(answer, expected):
    assert extract_password(answer) == expected


def test_answer_without_password_is_a_valid_bad_move(tiny):
    _, tok = tiny
    answers = iter(["", "<think>only thinking", "Password:", "Hello1!"])
    policy = ScriptedPolicy(tok, lambda ep: next(answers))
    eps = rollout(policy, tok, [5], env_factory(max_steps=4), rcfg(max_turns=4))
    (ep,) = eps
    assert [t.action for t in ep.turns] == ["", "", "", "Hello1!"]
    assert [t.stats["rules_satisfied"] for t in ep.turns][:3] == [0, 0, 0]  # empty breaks rule 1
    assert ep.turns[3].stats["rules_satisfied"] >= 4
    assert all(t.n_tokens >= 1 for t in ep.turns)  # every turn still holds its <|im_end|>


# ----------------------------------------------------------------------------- batching


def test_finished_rows_leave_the_batch_by_default_on_a_cpu_only(tiny):
    """``drop_finished_rows=None`` (the default): our decoding loop on a CPU, where rows are
    the cost, ``generate`` on a GPU, where a step's kernel launches are (measured on an H200,
    docs/benchmarks.md); an explicit True or False is kept on either."""
    from types import SimpleNamespace

    lm, tok = tiny
    on_gpu = SimpleNamespace(device=torch.device("cuda"), generation_config=lm.generation_config)
    assert LMPolicy(lm, tok, RolloutConfig()).drops_finished_rows
    assert not LMPolicy(on_gpu, tok, RolloutConfig()).drops_finished_rows
    assert LMPolicy(on_gpu, tok, RolloutConfig(drop_finished_rows=True)).drops_finished_rows
    assert not LMPolicy(lm, tok, RolloutConfig(drop_finished_rows=False)).drops_finished_rows


@pytest.mark.parametrize("drop_finished_rows", [True, False])
def test_one_generate_call_per_turn_for_all_live_episodes(tiny, monkeypatch, drop_finished_rows):
    """One batched call per turn (our decoding loop, or ``generate`` with it off)."""
    import gamerl.core.rollout as rollout_module

    lm, tok = tiny
    calls = []

    def counting(real):
        def call(*args, **kwargs):
            ids = kwargs["input_ids"] if "input_ids" in kwargs else args[1]
            calls.append(ids.shape[0])
            return real(*args, **kwargs)
        return call

    if drop_finished_rows:
        monkeypatch.setattr(rollout_module, "sample_turn", counting(rollout_module.sample_turn))
    else:
        monkeypatch.setattr(lm, "generate", counting(lm.generate))
    torch.manual_seed(0)
    # num_rules=2 (>= 5 characters, a digit): the random model's answers win or not by
    # chance, so episodes end at different turns and the live batch shrinks.
    seeds = list(range(12))
    cfg = rcfg(drop_finished_rows=drop_finished_rows)
    eps = rollout(LMPolicy(lm, tok, cfg), tok, seeds, env_factory(num_rules=2), cfg)
    turns_played = max(len(ep.turns) for ep in eps)
    assert len(calls) == turns_played  # one call per turn, never one per episode
    for t, batch in enumerate(calls):  # each call held exactly the episodes still playing
        assert batch == sum(len(ep.turns) > t for ep in eps)
    print("live episodes per call:", calls)
    assert calls[0] == len(seeds) and calls == sorted(calls, reverse=True)
    assert len(set(calls)) > 1, "every episode ended at the same turn: batch shrinking untested"


def test_left_padding_handles_different_context_lengths(tiny):
    """Episodes whose conversations differ in length (one won, others got feedback) are
    generated together; log-probs stay exact, which needs correct left padding and positions."""
    lm, tok = tiny
    torch.manual_seed(1)
    policy = LMPolicy(lm, tok, rcfg())
    contexts = [encode(tok, chat_prompt(tok, [{"role": "user", "content": "x" * n}]))
                for n in (1, 40, 200)]
    answers = policy(contexts, [None] * 3)
    assert len({len(c) for c in contexts}) == 3
    for ctx, ans in zip(contexts, answers):
        ids = torch.tensor([ctx + ans.token_ids])
        lp = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids), SAMPLING,
                            derive_support=True).logprobs
        fresh = lp[0, len(ctx):]
        assert torch.allclose(fresh, torch.tensor(ans.logprobs), atol=1e-4)


def test_kv_cache_carried_across_turns_changes_nothing_but_the_prefill(tiny):
    """Each turn prefills only its new tokens (gamerl.core.turn_cache), and the episodes are
    token for token those of prefilling the whole conversation every turn, with the same
    log-probs, also while episodes end at different turns and the batch shrinks."""
    lm, tok = tiny
    played, prefilled = {}, {}
    for reuse in (True, False):
        cfg = rcfg(reuse_kv_cache=reuse)
        policy = LMPolicy(lm, tok, cfg)
        torch.manual_seed(3)
        played[reuse] = rollout(policy, tok, list(range(12)), env_factory(num_rules=2), cfg)
        prefilled[reuse] = policy.prefilled_tokens
        assert policy.turn_cache is None  # released when the rollout ends
    assert len({len(ep.turns) for ep in played[True]}) > 1, "no episode ended early: untested"
    assert max(len(ep.turns) for ep in played[True]) == 3
    for a, b in zip(played[True], played[False]):
        assert a.token_ids == b.token_ids
        assert torch.allclose(torch.tensor(a.gen_logprobs), torch.tensor(b.gen_logprobs), atol=1e-5)
    print("prefilled tokens, carried vs fresh:", prefilled)
    assert prefilled[True] < 0.7 * prefilled[False]
    # and against a fresh forward pass over the finished sequence (positions and masks right)
    ep = max(played[True], key=lambda e: len(e.turns))
    ids = torch.tensor([ep.token_ids])
    lp = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids), SAMPLING,
                        derive_support=True).logprobs[0]
    sampled = torch.tensor(ep.policy_mask, dtype=torch.bool)
    assert torch.allclose(lp[sampled], torch.tensor(ep.gen_logprobs)[sampled], atol=1e-4)


def test_shared_prompt_prefix_runs_once_and_changes_nothing_else(tiny):
    """A first turn whose rows open alike (the system prompt and the game's first message) runs
    those tokens once, as one row (gamerl.core.turn_cache.prefill_shared_prefix): the episodes
    are token for token those of a plain left-padded prefill, with the same log-probs, and the
    later turns still carry the cache."""
    lm, tok = tiny
    played, policies = {}, {}
    for share in (True, False):
        cfg = rcfg(share_prompt_prefix=share)
        policies[share] = LMPolicy(lm, tok, cfg)
        torch.manual_seed(5)
        played[share] = rollout(policies[share], tok, list(range(12)), env_factory(num_rules=2), cfg)
    opening = len(played[True][0].token_ids[:played[True][0].prompt_len])
    assert policies[False].shared_prefix_tokens == 0
    # every game's first prompt is the same text here: all of it but the last token is shared
    assert policies[True].shared_prefix_tokens == opening - 1
    assert policies[True].prefilled_tokens == policies[False].prefilled_tokens - (opening - 1)
    assert max(len(ep.turns) for ep in played[True]) == 3
    for a, b in zip(played[True], played[False]):
        assert a.token_ids == b.token_ids
        assert torch.allclose(torch.tensor(a.gen_logprobs), torch.tensor(b.gen_logprobs), atol=1e-5)


def test_shared_prefix_keeps_positions_when_rows_differ_after_it(tiny):
    """Rows that share an opening and then differ in length: each row's sampled log-probs are
    those of one forward pass over its own tokens (positions from the mask, pads between the
    shared part and the rest never attended)."""
    from gamerl.core.turn_cache import MIN_SHARED_PREFIX, shared_prefix_length

    lm, tok = tiny
    contexts = [encode(tok, chat_prompt(tok, [{"role": "system", "content": "shared " * 12},
                                              {"role": "user", "content": "x" * n}]))
                for n in (1, 40, 200)]
    assert shared_prefix_length(contexts) >= MIN_SHARED_PREFIX
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2  # each row keeps a token to run
    assert shared_prefix_length([[1, 2, 3], [4, 2, 3]]) == 0
    policy = LMPolicy(lm, tok, rcfg())
    torch.manual_seed(2)
    answers = policy(contexts, [None] * 3)
    assert policy.shared_prefix_tokens == shared_prefix_length(contexts)
    for ctx, ans in zip(contexts, answers):
        ids = torch.tensor([ctx + ans.token_ids])
        lp = forward_policy(PolicyWithValue(lm), ids, torch.ones_like(ids), SAMPLING,
                            derive_support=True).logprobs
        assert torch.allclose(lp[0, len(ctx):], torch.tensor(ans.logprobs), atol=1e-4)


def test_kv_cache_is_not_used_for_contexts_that_do_not_extend_its_rows(tiny):
    """A context that is not its row's tokens plus new ones (or a new episode) is prefilled
    from scratch: the carried cache can only skip work whose result is the same."""
    lm, tok = tiny
    policy = LMPolicy(lm, tok, rcfg(max_new_tokens=4))
    eps = [object(), object()]
    contexts = [encode(tok, chat_prompt(tok, [{"role": "user", "content": t}])) for t in ("a", "bb")]
    torch.manual_seed(0)
    answers = policy(contexts, eps)
    assert policy.turn_cache is not None
    before = policy.prefilled_tokens
    changed = [contexts[0][:-1] + answers[0].token_ids + [5, 6], contexts[1] + answers[1].token_ids + [7]]
    answers = policy(changed, eps)
    assert policy.prefilled_tokens - before == max(len(c) for c in changed)  # all of it again
    before = policy.prefilled_tokens
    policy([changed[1] + answers[1].token_ids + [9, 10]], [eps[1]])  # one row, 2 new tokens
    # the 2 new tokens, and the answer's last token where it filled the last column (a
    # sampled token is fed to the model only by the next step)
    assert policy.prefilled_tokens - before == 2 + (len(answers[1].token_ids) == 4)


# ----------------------------------------------------------------------------- sequences


@pytest.fixture(scope="module")
def episodes(tiny):
    lm, tok = tiny
    torch.manual_seed(0)
    return rollout(LMPolicy(lm, tok, rcfg()), tok, list(range(6)), env_factory(), rcfg())


def test_masks_rewards_and_turn_structure(tiny, episodes):
    _, tok = tiny
    im_end = tok.convert_tokens_to_ids(IM_END)
    for ep in episodes:
        n = len(ep.token_ids)
        assert len(ep.policy_mask) == len(ep.rewards) == len(ep.gen_logprobs) == n
        # the prompt is exactly the chat-template rendering of system + first observation
        env = env_factory()()
        prompt = chat_prompt(tok, first_messages(env.reset(ep.seed), SYSTEM))
        assert ep.token_ids[:ep.prompt_len] == encode(tok, prompt)
        assert tok.decode(ep.token_ids[:ep.prompt_len]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        expected_mask = [0] * n
        expected_rewards = [0.0] * n
        for turn in ep.turns:  # answers are contiguous runs of policy tokens
            first = turn.last_token - turn.n_tokens + 1
            for i in range(first, turn.last_token + 1):
                expected_mask[i] = 1
            expected_rewards[turn.last_token] = turn.reward
        assert ep.policy_mask == expected_mask  # env/prompt tokens 0, answers 1
        assert ep.rewards == pytest.approx(expected_rewards)  # reward on each turn's last token
        assert sum(ep.rewards) == pytest.approx(ep.total_reward)
        for prev, nxt in zip(ep.turns, ep.turns[1:]):  # env tokens in between: the feedback
            between = tok.decode(ep.token_ids[prev.last_token + 1: nxt.last_token - nxt.n_tokens + 1])
            assert "<|im_start|>user\nTurn " in between
            assert between.rstrip().endswith("<|im_start|>assistant\n<think>\n\n</think>")
            if ep.token_ids[prev.last_token] != im_end:  # the env closes an unclosed answer
                assert between.startswith(IM_END)
        # a later turn's user message is compact: never the full instructions again
        assert tok.decode(ep.token_ids).count("You are playing the Password Game. Write") == 1


def test_generation_logprobs_match_fresh_forward_pass(tiny, episodes):
    lm, tok = tiny
    batch = episodes_to_batch(episodes, tok.pad_token_id)
    with torch.no_grad():
        scored = forward_policy(PolicyWithValue(lm), batch.input_ids, batch.attention_mask,
                                SAMPLING, mask=batch.mask, derive_support=True)
    logprobs, values = scored.logprobs, scored.values
    m = batch.mask.bool()
    assert m.sum() > 0
    assert torch.allclose(logprobs[m], batch.gen_logprobs[m], atol=1e-4), \
        (logprobs[m] - batch.gen_logprobs[m]).abs().max()
    assert (batch.gen_logprobs[~m] == 0).all()
    assert values.shape == batch.mask.shape


def test_episodes_to_batch_right_pads(tiny, episodes):
    _, tok = tiny
    b = episodes_to_batch(episodes, tok.pad_token_id)
    for i, ep in enumerate(episodes):
        n = len(ep.token_ids)
        assert b.attention_mask[i, :n].all() and not b.attention_mask[i, n:].any()
        assert b.input_ids[i, :n].tolist() == ep.token_ids
        assert b.rewards[i].sum().item() == pytest.approx(ep.total_reward, abs=1e-5)


# ----------------------------------------------------------------------------- messages, budget


def test_feedback_message_compact_shows_only_what_changed():
    env = env_factory(num_rules=6)()
    env.reset(3)
    obs, _, _, info = env.submit("Hello1!")  # rules 1-4 hold, rule 5 (digits sum) appears broken
    msg = feedback_message(obs, info, "Hello1!")
    lines = msg.splitlines()
    assert lines[0] == "Turn 1 of 3. 4 of 5 rules hold."
    assert lines[1] == "Your password: Hello1!"  # restated, for a repair to start from
    assert "New: [x] Rule 2: Your password must include a number." in lines
    # a broken counting rule says where the password stands, in numbers
    assert ("New: [ ] Rule 5: The digits in your password must add up to 25. Your digits add "
            "up to 1.") in lines
    assert "Rule 1:" not in msg  # held before and still holds: not repeated
    obs, _, _, info = env.submit("hello")  # now rules 2-5 break
    msg = feedback_message(obs, info, "hello")
    assert "New:" not in msg and "[ ] Rule 2:" in msg and "Rule 1:" not in msg
    assert feedback_message(obs, info, "hello", style="full") == obs["text"]


def test_context_budget_ends_episodes(tiny):
    lm, tok = tiny
    cfg = rcfg(max_context_tokens=150)  # fits the prompt and one answer, not a second turn
    eps = rollout(LMPolicy(lm, tok, cfg), tok, [0, 1], env_factory(), cfg)
    for ep in eps:
        assert ep.done and len(ep.turns) == 1 and ep.context_exhausted
        assert len(ep.token_ids) <= 150 + 80  # the feedback after the last turn may exceed it


def test_any_env_with_the_same_api(tiny):
    """A duck-typed environment (like the HTTP client) works; each one is closed."""
    _, tok = tiny
    closed = []

    class EchoEnv:
        def reset(self, seed):
            self.t = 0
            return {"text": f"Game {seed}: say anything.", "turn": 0, "max_steps": 2}

        def submit(self, password):
            self.t += 1
            info = {"rules_satisfied": len(password) % 3, "num_revealed": 3, "success": False,
                    "rules": [{"id": 0, "text": "Say something.", "satisfied": bool(password)}]}
            obs = {"text": "again", "turn": self.t, "max_steps": 2, "last_password": password}
            return obs, float(len(password)), self.t >= 2, info

        def close(self):
            closed.append(True)

    eps = rollout(ScriptedPolicy(tok, lambda ep: f"pw{len(ep.turns)}"), tok, [1, 2], EchoEnv,
                  rcfg(max_turns=5))
    assert [len(ep.turns) for ep in eps] == [2, 2] and len(closed) == 2
    assert eps[0].total_reward == pytest.approx(6.0)


def test_empty_answer_from_policy_is_rejected(tiny):
    _, tok = tiny

    class Empty:
        def __call__(self, contexts, episodes):
            return [Answer([]) for _ in contexts]

    with pytest.raises(ValueError, match="empty answer"):
        rollout(Empty(), tok, [0], env_factory(), rcfg())


@pytest.mark.slow
def test_http_env_gives_the_same_episodes_as_in_process(tiny):
    """The trainer can play through the FastAPI server (the seed's architecture): same episodes,
    token for token, as the in-process environment."""
    from gamerl.config import get_config
    from gamerl.core.evaluate import http_env_factory, local_env_factory
    from tasks.password_game.client import find_free_port, start_server, stop_server

    _, tok = tiny
    cfg = get_config("tiny", num_rules=6, max_steps=3)
    answers = ["hello", "Hello1!", "Hello997! May"]
    policy = ScriptedPolicy(tok, lambda ep: answers[len(ep.turns)])
    port = find_free_port()
    server = start_server(port=port)
    try:
        over_http = rollout(policy, tok, [3, 4], http_env_factory(cfg, f"http://127.0.0.1:{port}"),
                            rcfg())
    finally:
        stop_server(server)
    local = rollout(policy, tok, [3, 4], local_env_factory(cfg), rcfg())
    for a, b in zip(over_http, local):
        assert a.token_ids == b.token_ids and a.rewards == b.rewards
        assert a.success and [t.stats["rules_satisfied"] for t in a.turns] == [1, 4, 6]


def test_rollout_and_shared_prefix_use_the_current_cache_api(tiny):
    """A multi-turn rollout (the turn KV cache carried between turns) and a shared-prefix
    forward pass (gamerl.core.prefix_share) print no deprecation warning: transformers 5.24
    renamed ``past_key_values`` to ``cache`` (gamerl.models.kv_cache picks the installed
    version's name), and the old name warned on every run of the README's commands."""
    import logging
    import warnings

    from gamerl.core.prefix_share import trunk_hidden
    from gamerl.models import lm_trunk

    lm, tok = tiny
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    logging.getLogger("transformers").addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            torch.manual_seed(0)
            eps = rollout(LMPolicy(lm, tok, rcfg(reuse_kv_cache=True)), tok, [0, 1],
                          env_factory(), rcfg(reuse_kv_cache=True))
            assert max(len(ep.turns) for ep in eps) >= 2  # a later turn reused the cache
            shared = torch.randint(3, lm.config.vocab_size, (20,))
            ids = torch.stack([torch.cat([shared, torch.randint(3, 99, (6,))]) for _ in range(3)])
            trunk_hidden(lm_trunk(lm), ids, torch.ones_like(ids), share=True)
    finally:
        logging.getLogger("transformers").removeHandler(handler)
    assert not [m for m in said if "deprecat" in m.lower()], said


# ----------------------------------------------------------------------------- the cache that grows in place


def test_growing_cache_layer_matches_concatenation_and_survives_reassignment():
    """``GrowingLayer.update`` returns exactly what ``DynamicLayer``'s concatenation returns,
    writes decoding steps into spare columns (no new buffer per token), and keys/values that
    other code assigned (the turn cache selecting rows, the shared prefix expanding one row)
    are copied into a new buffer on the next update, never written through."""
    from transformers.cache_utils import DynamicLayer

    from gamerl.models.growing_layer import MIN_SPARE_COLUMNS
    from gamerl.models.kv_cache import growing_cache

    torch.manual_seed(0)
    cache = growing_cache(build_tiny_for_cache())
    layer_class = cache.layer_class_to_replicate
    grow, plain = layer_class(), DynamicLayer()
    k, v = torch.randn(3, 2, 7, 4), torch.randn(3, 2, 7, 4)
    for a, b in zip(grow.update(k, v), plain.update(k.clone(), v.clone())):
        assert torch.equal(a, b)
    buffer = grow._key_buffer
    assert buffer.shape[-2] == 7 + MIN_SPARE_COLUMNS
    for _ in range(5):  # decoding: one column at a time, in place
        k1, v1 = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
        for a, b in zip(grow.update(k1, v1), plain.update(k1.clone(), v1.clone())):
            assert torch.equal(a, b)
        assert grow._key_buffer is buffer
    # another owner's tensors: rows 2 and 0, every column but the first (turn_cache.extend)
    held_keys = grow.keys
    before = held_keys.clone()
    grow.keys, grow.values = grow.keys[[2, 0]][:, :, 1:], grow.values[[2, 0]][:, :, 1:]
    plain.keys, plain.values = plain.keys[[2, 0]][:, :, 1:], plain.values[[2, 0]][:, :, 1:]
    k2, v2 = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    for a, b in zip(grow.update(k2, v2), plain.update(k2.clone(), v2.clone())):
        assert torch.equal(a, b)
    assert grow._key_buffer is not buffer and torch.equal(held_keys, before)
    # running out of room reallocates once and keeps everything
    big = torch.randn(2, 2, 2 * MIN_SPARE_COLUMNS, 4)
    for a, b in zip(grow.update(big, big), plain.update(big.clone(), big.clone())):
        assert torch.equal(a, b)


def _growing_turn_cache(rows: int, width: int):
    """A TurnCache over a 2-layer growing cache of ``rows`` episodes, every column real."""
    from gamerl.core.turn_cache import TurnCache
    from gamerl.models.kv_cache import growing_cache

    cache = growing_cache(build_tiny_for_cache())
    for i in range(2):
        cache.update(torch.randn(rows, 2, width - 1, 4), torch.randn(rows, 2, width - 1, 4), i)
    episodes = [object() for _ in range(rows)]
    ids = torch.arange(rows * width).reshape(rows, width)
    return TurnCache(episodes=episodes, tokens=ids.tolist(), ids=ids,
                     mask=torch.ones(rows, width, dtype=torch.long), past=cache)


def test_turn_cache_extend_keeps_a_whole_cache_and_lets_replaced_buffers_go():
    """Every episode goes on: ``extend`` hands the growing layers on as they are (the same
    buffers, their spare room kept, nothing copied). One ended: each layer's rows are copied and
    its old buffer is freed then and there, not at its next update, so the old buffers and the
    copies never all live at once (at Qwen3-0.6B's size, 32 games: a 73 GB peak on an H200)."""
    import gc
    import weakref

    whole = _growing_turn_cache(rows=3, width=6)
    buffers = [layer._key_buffer for layer in whole.past.layers]
    contexts = [row + [7, 8] for row in whole.tokens]
    ids, mask, past = whole.extend(contexts, list(whole.episodes), pad_id=0)
    assert all(layer._key_buffer is b for layer, b in zip(past.layers, buffers))
    assert all(layer.keys.data_ptr() == b.data_ptr() for layer, b in zip(past.layers, buffers))
    assert ids.shape == (3, 8) and bool(mask.all())

    ended = _growing_turn_cache(rows=3, width=6)
    before = [layer.keys.clone() for layer in ended.past.layers]
    old = [weakref.ref(layer._key_buffer) for layer in ended.past.layers]
    go_on = [0, 2]
    ids, mask, past = ended.extend([ended.tokens[r] + [9] for r in go_on],
                                   [ended.episodes[r] for r in go_on], pad_id=0)
    gc.collect()
    assert all(ref() is None for ref in old)
    for layer, keys in zip(past.layers, before):
        assert torch.equal(layer.keys, keys[go_on])
    assert ids.shape == (2, 7)


def test_growing_layer_lets_its_buffer_go_when_transformers_replaces_its_tensors():
    """The release lives in the layer, not in our callers: transformers' own cache methods that
    select rows (``batch_select_indices``: beam search, assisted decoding) free the old buffer
    at once; ``crop`` keeps a view of it, so the next update writes in place after the cut."""
    import gc
    import weakref

    from gamerl.models.kv_cache import growing_cache

    cache = growing_cache(build_tiny_for_cache())
    for i in range(2):
        cache.update(torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4), i)
    expected = [layer.keys[[0, 2], :, :4].clone() for layer in cache.layers]
    buffer = cache.layers[0]._key_buffer
    cache.crop(-1)  # a view: the buffer stays and the next column is written into it
    assert cache.layers[0]._key_buffer is buffer
    cache.update(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4), 0)
    assert cache.layers[0].keys.data_ptr() == buffer.data_ptr()
    assert bool((cache.layers[0].keys[:, :, 4] == 0).all())
    del buffer

    old = [weakref.ref(layer._key_buffer) for layer in cache.layers]
    old_values = [weakref.ref(layer._value_buffer) for layer in cache.layers]
    cache.layers[0].crop(-1)  # back to 4 columns like layer 1
    cache.batch_select_indices(torch.tensor([0, 2]))
    gc.collect()
    assert all(ref() is None for ref in old + old_values)
    for layer, keys in zip(cache.layers, expected):
        assert torch.equal(layer.keys, keys)
    cache.update(torch.ones(2, 2, 1, 4), torch.ones(2, 2, 1, 4), 1)  # a new buffer, same numbers
    assert torch.equal(cache.layers[1].keys[:, :, :4], expected[1])


def build_tiny_for_cache():
    """A config-only stand-in: ``growing_cache`` reads only the model's config."""
    from types import SimpleNamespace

    from transformers import LlamaConfig

    return SimpleNamespace(config=LlamaConfig(num_hidden_layers=2))


def test_growing_cache_only_for_plain_full_attention():
    """Models with sliding-window or other non-full-attention layers keep transformers' own
    cache (the growing layer knows only plain keys and values)."""
    from types import SimpleNamespace

    from transformers import LlamaConfig, Qwen2Config

    from gamerl.models.kv_cache import growing_cache

    assert growing_cache(SimpleNamespace(config=LlamaConfig())) is not None
    sliding = Qwen2Config(use_sliding_window=True, sliding_window=64, max_window_layers=0,
                          num_hidden_layers=2)
    assert growing_cache(SimpleNamespace(config=sliding)) is None


def test_inplace_kv_cache_plays_the_same_episodes(tiny, monkeypatch):
    """The rollout with the cache that grows in place (the default) and with transformers'
    concatenating cache: token for token the same episodes, the same sampling-time log-probs,
    over turns that carry the cache and a first turn with a shared prefix; and the default
    path really uses the growing layers."""
    import gamerl.core.rollout as rollout_module
    from gamerl.models.kv_cache import is_plain_layer

    lm, tok = tiny
    played, seen = {}, {}
    for inplace in (True, False):
        cfg = rcfg(inplace_kv_cache=inplace)
        policy = LMPolicy(lm, tok, cfg)
        kinds: set = set()

        def decode(*a, _kinds=kinds, **k):
            out = sample_turn(*a, **k)
            layers = out.past.layers
            _kinds.update(type(layer).__name__ for layer in layers)
            assert all(is_plain_layer(layer) for layer in layers)
            return out

        monkeypatch.setattr(rollout_module, "sample_turn", decode)
        torch.manual_seed(7)
        played[inplace] = rollout(policy, tok, list(range(12)), env_factory(num_rules=2), cfg)
        seen[inplace] = kinds
    assert seen == {True: {"GrowingLayer"}, False: {"DynamicLayer"}}
    assert max(len(ep.turns) for ep in played[True]) == 3
    for a, b in zip(played[True], played[False]):
        assert a.token_ids == b.token_ids
        assert a.gen_logprobs == b.gen_logprobs

"""Every chat template works through the rollout: an episode's tokens are what the model's own
template renders for that conversation (one system block or the template's default, then one
user and one assistant block per turn), for tiny, SmolLM2 and Qwen3 with thinking off.

Answers come from a scripted policy (so only the tokenizers are needed, not the weights); one
answer per episode runs out of tokens (no <|im_end|>), which the environment then closes.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest

from gamerl.models import IM_END, chat_prompt, load_tokenizer
from gamerl.models.pretrained import ensure_smollm2, qwen3_tokenizer
from gamerl.core.rollout import Answer, RolloutConfig, encode, env_turn_ids, rollout, turn_template
from tasks.password_game import GameConfig, LocalPasswordGameEnv

SYSTEM = "Reply with your next password only, on one line."
ANSWERS = ["hello", "Hello1!", "Hello1!*May*"]


class Scripted:
    """Answers ANSWERS in turn; the second one is cut off (no end-of-turn token)."""

    def __init__(self, tok):
        self.tok, self.im_end = tok, tok.convert_tokens_to_ids(IM_END)

    def __call__(self, contexts, episodes):
        out = []
        for ep in episodes:
            k = len(ep.turns)
            ids = encode(self.tok, ANSWERS[k])
            out.append(Answer(ids if k == 1 else ids + [self.im_end]))
        return out


def play(tok, system_prompt):
    cfg = RolloutConfig(max_turns=3, max_new_tokens=16, system_prompt=system_prompt)
    make_env = lambda: LocalPasswordGameEnv(GameConfig(max_steps=3, num_rules=26))  # noqa: E731
    (ep,) = rollout(Scripted(tok), tok, [7], make_env, cfg)
    assert len(ep.turns) == 3
    return ep


@pytest.fixture(scope="module")
def tiny_tok(tiny_dir):
    return load_tokenizer(str(tiny_dir))


@pytest.fixture(scope="module")
def smollm2_tok():
    return load_tokenizer(str(ensure_smollm2()))


@pytest.fixture(scope="module")
def qwen3_tok():
    return qwen3_tokenizer()


def segments(tok, ep):
    """The episode's token runs: [prompt, answer 1, env 1, answer 2, env 2, answer 3]."""
    runs, start = [], 0
    for i in range(1, len(ep.policy_mask) + 1):
        if i == len(ep.policy_mask) or ep.policy_mask[i] != ep.policy_mask[start]:
            runs.append(ep.token_ids[start:i])
            start = i
    return runs


@pytest.mark.parametrize("which", ["tiny", "smollm2", "qwen3"])
def test_env_turns_are_what_the_template_renders(which, request):
    tok = request.getfixturevalue(f"{which}_tok")
    ep = play(tok, SYSTEM)
    runs = segments(tok, ep)
    assert len(runs) == 6
    prompt, env_runs = runs[0], runs[2::2]
    assert prompt == encode(tok, chat_prompt(tok, [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": _first_obs(ep)}]))
    before, after = turn_template(tok, SYSTEM)
    for k, env in enumerate(env_runs):
        text = tok.decode(env, skip_special_tokens=False)
        closed = k != 1  # answer 2 ran out of tokens: the template's <|im_end|> closes it here
        expected = before[len(IM_END):] if closed else before
        assert text.startswith(expected), (which, k, text)
        assert text.endswith(after), (which, k, text)
        assert text.count("<|im_start|>system") == 0  # no default system prompt mid-conversation


def _first_obs(ep):
    return LocalPasswordGameEnv(GameConfig(max_steps=3, num_rules=26)).reset(ep.seed)["text"]


@pytest.mark.parametrize("which", ["smollm2"])
def test_whole_episode_is_the_templates_rendering(which, request):
    """SmolLM2's template renders history unchanged, so the whole episode must decode to the
    template's rendering of the conversation, its default system prompt included when the run
    has none (the template adds it once, before the first message)."""
    tok = request.getfixturevalue(f"{which}_tok")
    for system_prompt in (SYSTEM, None):
        ep = play(tok, system_prompt)
        runs = segments(tok, ep)
        feedback = [tok.decode(r, skip_special_tokens=False) for r in runs[2::2]]
        before, after = turn_template(tok, system_prompt)
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": _first_obs(ep)}]
        for k, answer in enumerate(ANSWERS):
            messages.append({"role": "assistant", "content": answer})
            if k < 2:
                text = feedback[k]
                start = text.index(before[len(IM_END):]) + len(before[len(IM_END):])
                messages.append({"role": "user", "content": text[start:len(text) - len(after)]})
        rendered = tok.apply_chat_template(messages, tokenize=False)
        decoded = tok.decode(ep.token_ids, skip_special_tokens=False)
        assert rendered == decoded + "\n", (rendered[-300:], decoded[-300:])
        if system_prompt is None:
            assert decoded.count("<|im_start|>system") == 1  # the template's default, once


def test_qwen3_last_turn_matches_a_fresh_rendering(qwen3_tok):
    """Qwen3's template drops earlier turns' <think> blocks when it re-renders history, so only
    the part after the last answer can match a fresh rendering: it must, thinking off."""
    tok = qwen3_tok
    ep = play(tok, SYSTEM)
    runs = segments(tok, ep)
    env_text = tok.decode(runs[-2], skip_special_tokens=False)  # after answer 2 (cut off)
    assert env_text.startswith(IM_END)
    message = env_text[len(turn_template(tok, SYSTEM)[0]):-len(turn_template(tok, SYSTEM)[1])]
    fresh = chat_prompt(tok, [{"role": "system", "content": SYSTEM},
                              {"role": "user", "content": "x"},
                              {"role": "assistant", "content": ANSWERS[1]},
                              {"role": "user", "content": message}])
    assert fresh.endswith(ANSWERS[1] + env_text)
    assert fresh.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_env_turn_ids_thinking_on_has_no_empty_think_block(qwen3_tok):
    on = qwen3_tok.decode(env_turn_ids(qwen3_tok, "fb", True, enable_thinking=True))
    off = qwen3_tok.decode(env_turn_ids(qwen3_tok, "fb", True))
    assert on == "\n<|im_start|>user\nfb<|im_end|>\n<|im_start|>assistant\n"
    assert off == on + "<think>\n\n</think>\n\n"


def test_qwen3_presets_expert_demonstrations_use_its_template_thinking_off(qwen3_tok):
    """The qwen3-0.6b preset's warm start (issue 21): the expert's games rendered in Qwen3's own
    chat template with thinking off (every answer after an empty <think></think> block, which
    is context), the loss on the password and its <|im_end|> only."""
    from gamerl.config import get_config
    from gamerl.core.warmstart import demonstrations

    cfg = get_config("qwen3-0.6b", model="qwen3-0.6b-random", warmstart_examples=6, max_steps=4)
    assert cfg.warmstart and cfg.warmstart_demos == "expert"
    for ids, mask in demonstrations(cfg, qwen3_tok, seed=0):
        ep = type("Ep", (), {"token_ids": ids, "policy_mask": mask})
        runs = segments(qwen3_tok, ep)
        prompts, answers = runs[0::2], runs[1::2]
        assert answers and mask[0] == 0
        for before, answer in zip(prompts, answers):
            assert qwen3_tok.decode(before).endswith(
                "<|im_start|>assistant\n<think>\n\n</think>\n\n"), qwen3_tok.decode(before)[-80:]
            text = qwen3_tok.decode(answer)
            assert text.endswith("<|im_end|>") and "<think>" not in text, text

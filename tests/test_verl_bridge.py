"""gamerl.integrations.verl: the verl 0.9 scale-out bridge.

Two groups:
* without verl (the normal suite): answer extraction, game configs, the dataset rows, and whole
  episodes of BOTH games through ``episode.play_episode`` against a stand-in inference server that
  samples from the tiny model with torch on CPU (masks, lengths, rewards against a replay of the
  environment, turn counts, budgets, no state left behind);
* with verl (skipped where verl is not installed; run with the venv that has it): the agent loop
  registered from our YAML and run by verl's own ``AgentLoopWorker``, the exported parquet loaded
  by verl's ``RLHFDataset``, and our hydra configs composed onto verl's ``ppo_trainer``.

``GAMERL_REQUIRE_VERL=1`` turns every such skip (verl, pyarrow or bash missing) into a failure:
``.ci/run`` sets it in its verl venv, so CI cannot pass with these tests silently skipped.

CPU only, nothing downloads.
"""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import asyncio
import builtins
import dataclasses
import gc
import importlib
import json
import random
import shutil
import subprocess
import sys
import tracemalloc
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from gamerl.integrations.verl import dataset as export
from gamerl.integrations.verl.episode import (EpisodeLimits, Generation, feedback_ids,
                                              play_episode, prompt_ids_for)
from gamerl.integrations.verl.games import (AGENT_NAME, GAMES, extract_guess, get_game,
                                            wordle_feedback)
from gamerl.models import IM_END, build_tiny, load_policy
from gamerl.core.rollout import encode, stop_token_ids

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "gamerl" / "integrations" / "verl" / "config"
# short games: the tiny model never wins, so episodes last the game's whole turn limit
SHORT = {"password_game": {"max_steps": 4, "num_rules": 6}, "wordle": {"max_guesses": 4}}
# CI's verl venv: what the verl group needs must be there, a skip would hide the group
REQUIRE_VERL = os.environ.get("GAMERL_REQUIRE_VERL", "") not in ("", "0")


def need(module: str):
    """``pytest.importorskip(module)``, but with GAMERL_REQUIRE_VERL=1 a missing module fails."""
    if REQUIRE_VERL:
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(f"GAMERL_REQUIRE_VERL=1 but {module} does not import: {e!r}")
    return pytest.importorskip(module)


def skip_unless_required(reason: str):
    if REQUIRE_VERL:
        pytest.fail(f"GAMERL_REQUIRE_VERL=1 but {reason}")
    pytest.skip(reason)


# ----------------------------------------------------------------------------- stand-ins


class TinyServer:
    """Stand-in for verl 0.9's ``LLMServerClient``: ``await generate(request_id, *, prompt_ids,
    sampling_params, image_data=None, video_data=None, audio_data=None,
    mm_processor_kwargs=None, **kwargs)`` returning ``output_cls(token_ids, log_probs,
    stop_reason, num_preempted, extra_fields)`` (verl's ``TokenOutput`` or ``Generation``).
    Samples from a local causal LM token by token (KV cache), with temperature / top-k / top-p,
    stopping on the model's stop tokens or ``sampling_params["max_tokens"]``."""

    def __init__(self, model, tokenizer, output_cls=Generation, seed=0, global_steps=7):
        self.model, self.tokenizer, self.output_cls = model, tokenizer, output_cls
        self.stop_ids = set(stop_token_ids(model, tokenizer))
        self.rng = torch.Generator().manual_seed(seed)
        self.global_steps = global_steps
        self.calls = []

    def _pick(self, logits, temperature, top_k, top_p):
        logp = torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), -1)
        if temperature <= 0:
            tok = int(logits.argmax())
            return tok, float(logp[tok])
        probs = logp.exp()
        if top_k > 0:
            kth = torch.topk(probs, min(top_k, probs.numel())).values[-1]
            probs = torch.where(probs < kth, torch.zeros_like(probs), probs)
        if top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            keep = order[(torch.cumsum(sorted_p, 0) - sorted_p) < top_p * sorted_p.sum()]
            kept = torch.zeros_like(probs)
            kept[keep] = probs[keep]
            probs = kept
        tok = int(torch.multinomial(probs / probs.sum(), 1, generator=self.rng))
        return tok, float(logp[tok])

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None,
                       video_data=None, audio_data=None, mm_processor_kwargs=None, **kwargs):
        sp = dict(sampling_params)
        max_tokens = int(sp.pop("max_tokens"))
        temperature = float(sp.get("temperature", 1.0))
        top_k, top_p = int(sp.get("top_k", -1)), float(sp.get("top_p", 1.0))
        x, past, tokens, logprobs = torch.tensor([list(prompt_ids)]), None, [], []
        with torch.no_grad():
            for _ in range(max_tokens):
                out = self.model(input_ids=x, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok, lp = self._pick(out.logits[0, -1].float(), temperature, top_k, top_p)
                tokens.append(tok)
                logprobs.append(lp)
                if tok in self.stop_ids:
                    break
                x = torch.tensor([[tok]])
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids),
                           "max_tokens": max_tokens, "token_ids": list(tokens), "kwargs": kwargs})
        await asyncio.sleep(0)  # a real server yields to other episodes here
        return self.output_cls(token_ids=tokens, log_probs=logprobs if sp.get("logprobs") else None,
                               stop_reason="completed", num_preempted=0,
                               extra_fields={"global_steps": self.global_steps})


class ScriptedServer:
    """A fast stand-in: answers each call with the next text of a cycle, closed by <|im_end|>."""

    def __init__(self, tokenizer, texts, close=True):
        self.tokenizer, self.texts, self.close = tokenizer, list(texts), close
        self.im_end = tokenizer.convert_tokens_to_ids(IM_END)
        self.n = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        text = self.texts[self.n % len(self.texts)]
        self.n += 1
        ids = encode(self.tokenizer, text) + ([self.im_end] if self.close else [])
        return Generation(token_ids=ids[:int(sampling_params["max_tokens"])])


def generate_fn(server, request_id="episode", sampling=None):
    sampling = dict(temperature=0.9, top_p=0.95, top_k=50, logprobs=True, **(sampling or {}))

    async def generate(ids, max_tokens):
        return await server.generate(request_id, prompt_ids=ids,
                                     sampling_params={**sampling, "max_tokens": max_tokens})
    return generate




@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("verl_bridge") / "tiny")


@pytest.fixture(scope="module")
def tiny(tiny_path):
    return load_policy(str(tiny_path), device="cpu")


# ----------------------------------------------------------------------------- checks


def runs(mask):
    """[(value, start, end)] of the runs of equal values in a 0/1 mask."""
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((mask[start], start, i))
            start = i
    return out


def check_episode(res, calls, spec, config, seed, tokenizer, enable_thinking=False):
    """Everything an episode must satisfy, against the server's record and a replay of the
    environment with the submitted actions."""
    n = res.game_turns
    assert len(res.response_ids) == len(res.response_mask) > 0
    if res.response_logprobs is not None:
        assert len(res.response_logprobs) == len(res.response_ids)
    assert set(res.response_mask) <= {0, 1}
    assert res.response_mask[-1] == 1, "the response must end on the last answer's tokens"
    segments = runs(res.response_mask)
    answers = [s for s in segments if s[0] == 1]
    feedback = [s for s in segments if s[0] == 0]
    assert len(answers) == n == len(calls) == len(res.actions)
    assert len(feedback) == n - 1  # between answers only, never after the last one
    assert segments[0][0] == 1  # the response starts with the first answer
    im_end = tokenizer.convert_tokens_to_ids(IM_END)

    env = spec.make_env(config)
    env.reset(seed)
    replay = []
    for i, ((_, a, b), call) in enumerate(zip(answers, calls)):
        # token in, token out: the model saw exactly prompt + response so far, and its tokens
        # are in the response unchanged, with mask 1 (and only they have mask 1)
        assert call["prompt_ids"] == res.prompt_ids + res.response_ids[:a]
        assert res.response_ids[a:b] == call["token_ids"]
        if res.response_logprobs is not None:
            assert all(lp <= 0.0 for lp in res.response_logprobs[a:b])
        text = tokenizer.decode(call["token_ids"], skip_special_tokens=True)
        assert res.actions[i] == spec.extract(text)
        obs, reward, done, info = env.submit(res.actions[i])
        replay.append(reward)
        if i < len(feedback):
            _, fa, fb = feedback[i]
            expected = feedback_ids(tokenizer, spec.feedback(obs, info, res.actions[i]),
                                    answer_closed=call["token_ids"][-1] == im_end,
                                    enable_thinking=enable_thinking)
            assert res.response_ids[fa:fb] == expected
            if res.response_logprobs is not None:
                assert res.response_logprobs[fa:fb] == [0.0] * (fb - fa)
    env.close()
    assert res.turn_rewards == pytest.approx(replay)
    assert res.episode_return == pytest.approx(sum(replay))
    assert res.done == done
    # verl's num_turns: the first user message, n answers, n-1 feedback messages
    assert res.chat_turns == 2 * n
    return replay


# ----------------------------------------------------------------------------- no verl needed


@pytest.mark.parametrize("answer, expected", [
    ("crane", "crane"),
    ("  CRANE  \nbecause it is good", "CRANE"),
    ("Guess: slate", "slate"),
    ("My guess: **CRANE**.", "CRANE"),
    ("<think>guess: wrong</think>\nGUESS:  `adieu`", "adieu"),
    ("Password: pious", "pious"),
    ("I think crane", "I think crane"),  # chatty answers stay invalid guesses
    ("", ""),
])
def test_extract_guess(answer, expected):
    assert extract_guess(answer) == expected


def test_wordle_feedback_drops_instructions_keeps_board():
    spec = get_game("wordle")
    env = spec.make_env(spec.config())
    env.reset(5)
    obs, _, _, info = env.submit("crane")
    text = wordle_feedback(obs, info, "crane")
    assert text.startswith("Board:\n1. CRANE") and "Guesses left: 5 of 6" in text
    assert "You are playing Wordle" not in text
    obs, _, _, info = env.submit("xx")
    assert "(wasted turn) 'xx' has 2 letters" in wordle_feedback(obs, info, "xx")


def test_game_configs():
    pw = get_game("password_game")
    assert pw.config().reward.mode == "delta"  # the bridge sums turn rewards: no stalling bonus
    cfg = pw.config('{"num_rules": 8, "reward": {"length_penalty": 0.5}}')
    assert (cfg.num_rules, cfg.reward.length_penalty, cfg.reward.mode) == (8, 0.5, "delta")
    assert pw.config({"reward": {"mode": "absolute"}}).reward.mode == "absolute"
    assert pw.config_dict({"max_steps": 3})["max_steps"] == 3
    with pytest.raises(ValueError, match="password_game"):
        pw.config({"no_such_key": 1})
    wd = get_game("wordle")
    assert wd.config({"hard_mode": True}).hard_mode and wd.max_turns(wd.config()) == 6
    assert pw.max_turns(pw.config({"max_steps": 7})) == 7
    with pytest.raises(ValueError, match="unknown game"):
        get_game("chess")


@pytest.mark.parametrize("game", sorted(GAMES))
def test_first_messages_differ_per_seed(game):
    spec = get_game(game)
    config = spec.config()
    prompts = set()
    for seed in (0, 1, 2):
        env = spec.make_env(config)
        obs = env.reset(seed)
        messages = spec.initial_messages(seed, obs)
        assert messages[0] == {"role": "system", "content": spec.system_prompt}
        assert messages[-1]["content"] == f"{spec.title} #{seed}\n{obs['text']}"
        prompts.add(messages[-1]["content"])
    assert len(prompts) == 3
    assert len(spec.initial_messages(0, obs, system_prompt=None)) == 1


@pytest.mark.parametrize("game", sorted(GAMES))
def test_episode_tiny_model(game, tiny):
    """Real episodes against the tiny model: masks, token-in/token-out, rewards, turns."""
    model, tok = tiny
    spec = get_game(game)
    config = spec.config(SHORT[game])
    for seed in (3, 4):
        server = TinyServer(model, tok, seed=seed)
        messages = spec.initial_messages(seed, spec.make_env(config).reset(seed))
        prompt = prompt_ids_for(tok, messages)
        limits = EpisodeLimits(response_length=4096, max_tokens_per_turn=12)
        res = asyncio.run(play_episode(spec, config, seed, prompt, tok, generate_fn(server),
                                       limits, check_prompt=messages[-1]["content"]))
        assert res.prompt_ids == prompt
        assert res.stop_reason == "done" and res.game_turns == spec.max_turns(config)
        assert all(c["max_tokens"] == 12 for c in server.calls)
        assert res.response_logprobs is not None  # the server sent log-probs every turn
        assert res.min_global_steps == res.max_global_steps == 7
        replay = check_episode(res, server.calls, spec, config, seed, tok)
        assert res.reward == pytest.approx(sum(replay))


def test_episode_with_thinking_headers(tiny):
    model, tok = tiny
    spec = get_game("wordle")
    config = spec.config(SHORT["wordle"])
    server = TinyServer(model, tok, seed=1)
    messages = spec.initial_messages(9, spec.make_env(config).reset(9))
    prompt = prompt_ids_for(tok, messages, enable_thinking=True)
    assert "</think>" not in tok.decode(prompt)
    limits = EpisodeLimits(response_length=4096, max_tokens_per_turn=8, enable_thinking=True)
    res = asyncio.run(play_episode(spec, config, 9, prompt, tok, generate_fn(server), limits))
    check_episode(res, server.calls, spec, config, 9, tok, enable_thinking=True)


def test_episode_budget_max_turns_discount(tiny):
    _, tok = tiny
    spec = get_game("password_game")
    config = spec.config({"max_steps": 30})
    messages = spec.initial_messages(11, spec.make_env(config).reset(11))
    prompt = prompt_ids_for(tok, messages)
    texts = ["Password: hello", "Password: hello world 12"]

    # the response budget: a turn is played only if its feedback + a full answer fit
    limits = EpisodeLimits(response_length=300, max_tokens_per_turn=40)
    res = asyncio.run(play_episode(spec, config, 11, prompt, tok,
                                   generate_fn(ScriptedServer(tok, texts)), limits))
    assert res.stop_reason == "response_length" and not res.done
    assert len(res.response_ids) <= 300 and res.response_mask[-1] == 1
    assert 1 <= res.game_turns < 30

    # an agent-side turn cap below the game's, and a discounted episode reward
    limits = EpisodeLimits(response_length=8192, max_tokens_per_turn=40, max_turns=3,
                           turn_discount=0.5)
    res = asyncio.run(play_episode(spec, config, 11, prompt, tok,
                                   generate_fn(ScriptedServer(tok, texts)), limits))
    assert res.stop_reason == "max_turns" and res.game_turns == 3
    r = res.turn_rewards
    assert res.reward == pytest.approx(r[0] + 0.5 * r[1] + 0.25 * r[2])
    assert res.episode_return == pytest.approx(sum(r))
    assert res.response_logprobs is None  # the scripted server sends none

    # answers cut by max_tokens (no <|im_end|>) get it closed by the feedback tokens (mask 0)
    limits = EpisodeLimits(response_length=8192, max_tokens_per_turn=40, max_turns=2)
    res = asyncio.run(play_episode(spec, config, 11, prompt, tok,
                                   generate_fn(ScriptedServer(tok, texts, close=False)), limits))
    gap = runs(res.response_mask)[1]
    assert gap[0] == 0 and tok.decode(res.response_ids[gap[1]:gap[2]]).startswith(IM_END)


def test_episode_empty_generation_and_stale_prompt(tiny):
    _, tok = tiny
    spec = get_game("wordle")
    config = spec.config()
    messages = spec.initial_messages(2, spec.make_env(config).reset(2))
    prompt = prompt_ids_for(tok, messages)
    answers = iter([[*encode(tok, "crane"), tok.convert_tokens_to_ids(IM_END)], []])

    async def generate(ids, max_tokens):
        return Generation(token_ids=next(answers))
    res = asyncio.run(play_episode(spec, config, 2, prompt, tok, generate,
                                   EpisodeLimits(response_length=2048)))
    # the second request came back empty: no move, and its feedback tokens were taken back
    assert res.stop_reason == "empty_generation" and res.game_turns == 1
    assert set(res.response_mask) == {1} and res.chat_turns == 2

    stale = get_game("wordle").initial_messages(2, {"text": "an old observation"})
    with pytest.raises(ValueError, match="export it again"):
        asyncio.run(play_episode(spec, config, 2, prompt, tok, generate,
                                 EpisodeLimits(response_length=2048),
                                 check_prompt=stale[-1]["content"]))


def test_no_state_left_behind(tiny):
    """Hundreds of episodes: every environment is closed and freed, and memory does not grow
    with the number of episodes (the games' own caches are bounded; warm them up first)."""
    _, tok = tiny
    alive = weakref.WeakSet()
    closed = []

    def tracked(make):
        def make_env(config):
            env = make(config)
            alive.add(env)
            close = env.close
            env.close = lambda: (closed.append(1), close())
            return env
        return make_env

    specs = {g: dataclasses.replace(get_game(g), _make_env=tracked(get_game(g)._make_env))
             for g in GAMES}
    configs = {g: specs[g].config(SHORT[g]) for g in GAMES}
    texts = {"password_game": ["Password: Hello12345", "hi"], "wordle": ["crane", "slate", "xx"]}
    limits = EpisodeLimits(response_length=2048, max_tokens_per_turn=24)
    prompts = {g: prompt_ids_for(tok, specs[g].initial_messages(0, {"text": ""}, None))
               for g in GAMES}

    def play_many(n):
        for i in range(n):
            g = "wordle" if i % 2 else "password_game"
            server = ScriptedServer(tok, texts[g])
            asyncio.run(play_episode(specs[g], configs[g], i % 50, prompts[g], tok,
                                     generate_fn(server), limits))

    play_many(100)  # warm-up: instance caches, tokenizer caches, asyncio internals
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    play_many(300)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert len(alive) == 0, "environments outlived their episodes"
    assert len(closed) == 400
    assert growth < 256 * 1024, f"memory grew by {growth} bytes over 300 episodes"


def test_export_rows_and_seeds():
    overrides = {"num_rules": 8}
    rows = list(export.build_rows("password_game", export.train_seeds(5), "train", overrides))
    assert [r["extra_info"]["index"] for r in rows] == list(range(5))
    for r, seed in zip(rows, range(5)):
        assert r["data_source"] == "game_rl/password_game" and r["agent_name"] == AGENT_NAME
        assert r["prompt"][-1]["content"].startswith(f"Password Game #{seed}\n")
        assert r["extra_info"]["seed"] == seed and r["extra_info"]["split"] == "train"
        assert r["reward_model"]["ground_truth"] == r["extra_info"]["answer"] != ""
        assert json.loads(r["extra_info"]["game_config"]) == \
            get_game("password_game").config_dict(overrides)
        json.dumps(r)  # plain JSON types only
    assert len({r["prompt"][-1]["content"] for r in rows}) == 5

    vs = export.val_seeds("wordle", 300)
    assert vs[0] == export.DEFAULT_VAL_SEED_START and len(set(vs)) == 300
    assert not set(vs) & set(export.train_seeds(10_000))
    spec = get_game("wordle")
    answers = [spec.secret(s, spec.config()) for s in vs]
    assert len(set(answers)) == 300  # distinct secrets: a diverse validation set
    assert vs == export.val_seeds("wordle", 300)  # fixed


def test_export_cli_parquet(tmp_path):
    pa = need("pyarrow.parquet")
    out = tmp_path / "data"
    assert export.main(["--game", "password_game,wordle", "--train", "6", "--val", "4",
                        "--out", str(out), "--game-config",
                        '{"password_game": {"max_steps": 5}}']) == 0
    train = pa.read_table(out / "train.parquet").to_pylist()
    val = pa.read_table(out / "val.parquet").to_pylist()
    assert len(train) == 12 and len(val) == 8
    assert [r["extra_info"]["index"] for r in val] == list(range(8))
    assert {r["data_source"] for r in val} == {"game_rl/password_game", "game_rl/wordle"}
    assert len({r["prompt"][-1]["content"] for r in train + val}) == 20
    train_keys = {(r["extra_info"]["game"], r["extra_info"]["seed"]) for r in train}
    assert not train_keys & {(r["extra_info"]["game"], r["extra_info"]["seed"]) for r in val}
    wordle = [r for r in val if r["extra_info"]["game"] == "wordle"]
    assert json.loads(wordle[0]["extra_info"]["game_config"])["max_guesses"] == 6
    assert json.loads(train[0]["extra_info"]["game_config"])["max_steps"] == 5
    with pytest.raises(ValueError, match="mixes game names"):
        export.main(["--game", "wordle", "--out", str(out), "--game-config",
                     '{"wordle": {}, "max_steps": 5}'])
    with pytest.raises(ValueError, match="bad wordle config"):
        export.main(["--game", "wordle", "--out", str(out), "--game-config", '{"max_steps": 5}'])
    with pytest.raises(SystemExit, match="overlap"):
        export.main(["--game", "wordle", "--train", "5", "--val", "2", "--out", str(out),
                     "--val-seed-start", "3"])


# ----------------------------------------------------------------------------- resume guard
# verl resumes with torch.load(weights_only=False); launch.sh checks the files first. No verl
# needed: the checkpoints below have the layout verl 0.9 writes.


class _Payload:
    """Unpickling this creates ``marker``: stands for any code a crafted file runs."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


def _verl_checkpoint(root: Path, extra_state) -> Path:
    actor = root / "global_step_5" / "actor"
    actor.mkdir(parents=True)
    torch.save({"w": torch.zeros(2)}, actor / "model_world_size_1_rank_0.pt")
    torch.save({"state": {0: {"exp_avg": torch.zeros(2)}}, "param_groups": [{"lr": 1e-6}]},
               actor / "optim_world_size_1_rank_0.pt")
    torch.save(extra_state, actor / "extra_state_world_size_1_rank_0.pt")
    torch.save({"_num_yielded": 3}, root / "global_step_5" / "data.pt")
    (root / "latest_checkpointed_iteration.txt").write_text("5")
    return root


def test_resume_guard_passes_a_plain_verl_checkpoint(tmp_path):
    from gamerl.integrations.verl.resume_guard import main

    rng = {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(),
           "random": random.getstate()}
    ck = _verl_checkpoint(tmp_path / "ck", {"lr_scheduler": {"last_epoch": 3}, "rng": rng})
    assert main(["--experiment", "x", f"trainer.default_local_dir={ck}"]) == 0
    assert main(["--experiment", "x", f"trainer.default_local_dir={tmp_path / 'none'}"]) == 0


def test_resume_guard_refuses_code_in_a_verl_checkpoint(tmp_path, capsys):
    from gamerl.integrations.verl.resume_guard import main

    marker = tmp_path / "pwned"
    ck = _verl_checkpoint(tmp_path / "ck", {"lr_scheduler": None, "rng": _Payload(marker)})
    assert main(["--experiment", "x", f"trainer.default_local_dir={ck}"]) == 2
    err = capsys.readouterr().err
    assert "extra_state_world_size_1_rank_0.pt" in err and "io.open" in err  # builtins.open
    assert main(["--experiment", "x", "trainer.resume_mode=resume_path",
                 f"trainer.resume_from_path={ck / 'global_step_5'}"]) == 2
    assert main(["--experiment", "x", f"trainer.default_local_dir={ck}",
                 "trainer.resume_mode=disable"]) == 0  # verl will not read it
    assert not marker.exists()


def test_launch_script_refuses_to_resume_a_crafted_checkpoint(tmp_path):
    if shutil.which("bash") is None:
        skip_unless_required("no bash")
    marker = tmp_path / "pwned"
    ck = _verl_checkpoint(tmp_path / "ck", {"lr_scheduler": None, "rng": _Payload(marker)})
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.parquet", "val.parquet"):  # present: launch.sh exports nothing
        (data / name).write_bytes(b"")
    env = {**os.environ, "PYTHON": sys.executable, "DATA_DIR": str(data)}
    out = subprocess.run(["bash", str(REPO / "gamerl/integrations/verl/launch.sh"), "grpo",
                          f"trainer.default_local_dir={ck}"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]  # before verl starts
    assert "refusing to let verl resume" in out.stderr
    assert not marker.exists()


# ----------------------------------------------------------------------------- verl needed


@pytest.fixture(scope="module")
def verl():
    return need("verl")


def compose(name, *overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return hydra_compose(config_name=name, overrides=list(overrides))


@pytest.fixture(scope="module")
def agent_yaml(tmp_path_factory):
    """Our agent_loops.yaml with short answers (the tiny model never stops on its own)."""
    import yaml

    entries = yaml.safe_load((CONFIG_DIR / "agent_loops.yaml").read_text())
    entries[0]["max_tokens_per_turn"] = 10
    path = tmp_path_factory.mktemp("agent") / "agent_loops.yaml"
    path.write_text(yaml.safe_dump(entries))
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    need("pyarrow")
    out = tmp_path_factory.mktemp("export")
    export.main(["--game", "password_game,wordle", "--train", "4", "--val", "4", "--out",
                 str(out), "--game-config", json.dumps({"password_game": SHORT["password_game"],
                                                        "wordle": SHORT["wordle"]})])
    return out


def test_shipped_yaml_registers_game_agent_loop(verl):
    import hydra
    import yaml
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry

    from gamerl.integrations.verl.agent_loop import GameAgentLoop

    entries = yaml.safe_load((CONFIG_DIR / "agent_loops.yaml").read_text())
    assert [e["name"] for e in entries] == [AGENT_NAME]
    assert hydra.utils.get_class(entries[0]["_target_"]) is GameAgentLoop
    assert issubclass(GameAgentLoop, AgentLoopBase)
    # @register did the same in this process (importing agent_loop above)
    assert _agent_loop_registry[AGENT_NAME]["_target_"] == entries[0]["_target_"]


def test_configs_compose_and_validate(verl, tiny_path, monkeypatch):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.import_utils import resolve_config_path

    monkeypatch.chdir(REPO)  # launch.sh runs from the repo root
    for name, estimator, n, critic in (("game_rl_grpo", "grpo", 8, False),
                                       ("game_rl_ppo", "gae", 1, True)):
        cfg = compose(name, f"actor_rollout_ref.model.path={tiny_path}")
        assert cfg.algorithm.adv_estimator == estimator and cfg.actor_rollout_ref.rollout.n == n
        assert need_critic(cfg) is critic
        assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, 8)
        rollout = cfg.actor_rollout_ref.rollout
        assert rollout.agent.default_agent_loop == AGENT_NAME
        assert rollout.response_length == cfg.data.max_response_length == 8192
        assert cfg.data.apply_chat_template_kwargs.enable_thinking is False
        assert cfg.reward.reward_model.enable is False
        path = resolve_config_path(rollout.agent.agent_loop_config_path)
        assert Path(path) == CONFIG_DIR / "agent_loops.yaml"
        assert OmegaConf.load(path)[0].name == AGENT_NAME
        omega_conf_to_dataclass(rollout)  # verl's RolloutConfig accepts it
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg),
                        use_critic=need_critic(cfg))


def test_launch_script_composes(verl, tiny_path, exported, tmp_path):
    if shutil.which("bash") is None:
        skip_unless_required("no bash")
    env = {**os.environ, "PYTHON": sys.executable, "DATA_DIR": str(exported),
           "MODEL": str(tiny_path), "NNODES": "2", "GAME": "wordle"}
    out = subprocess.run(["bash", str(REPO / "gamerl/integrations/verl/launch.sh"), "ppo",
                          "--cfg", "job"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import yaml

    cfg = yaml.safe_load(out.stdout)
    assert cfg["algorithm"]["adv_estimator"] == "gae"
    assert cfg["trainer"]["nnodes"] == 2
    assert cfg["data"]["max_response_length"] == 3072
    assert cfg["data"]["train_files"] == f"{exported}/train.parquet"


def _rlhf_dataset(cfg, tokenizer, files, cache):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    data = OmegaConf.to_container(cfg.data, resolve=True)
    data.update(cache_dir=str(cache), filter_overlong_prompts_workers=1)
    return RLHFDataset([str(f) for f in files], tokenizer, OmegaConf.create(data))


def test_rlhf_dataset_loads_export(verl, tiny, tiny_path, exported, tmp_path):
    _, tok = tiny
    cfg = compose("game_rl_grpo", f"actor_rollout_ref.model.path={tiny_path}")
    ds = _rlhf_dataset(cfg, tok, [exported / "val.parquet"], tmp_path / "cache")
    assert len(ds) == 8  # filter_overlong_prompts kept every row
    items = [ds[i] for i in range(len(ds))]
    for i, item in enumerate(items):
        assert item["index"] == i and item["agent_name"] == AGENT_NAME
        assert item["raw_prompt"] == item["prompt"]
        assert item["extra_info"]["game"] in GAMES and item["tools_kwargs"] == {}
    assert len({item["raw_prompt"][-1]["content"] for item in items}) == 8
    assert len({item["reward_model"]["ground_truth"] for item in items}) == 8


def test_verl_agent_loop_worker_plays_both_games(verl, tiny, tiny_path, exported, agent_yaml,
                                                 tmp_path):
    """verl's own AgentLoopWorker (the V0 path): registration from the YAML file, a batch from
    RLHFDataset, our loop per row, verl's padding and reward placement."""
    import numpy as np
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn
    from verl.workers.rollout.replica import TokenOutput

    model, tok = tiny
    cfg = compose("game_rl_grpo", f"actor_rollout_ref.model.path={tiny_path}",
                  f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_yaml}",
                  "data.max_prompt_length=512", "data.max_response_length=1024")
    server = TinyServer(model, tok, TokenOutput)  # same tokenizer files as the worker's
    worker = AgentLoopWorker(cfg, server)
    ds = _rlhf_dataset(cfg, worker.tokenizer, [exported / "val.parquet"], tmp_path / "cache")
    rows = [0, 4, 1, 5]  # two Password Game rows, two Wordle rows
    batch = DataProto.from_single_dict(collate_fn([ds[i] for i in rows]))
    batch.meta_info = {"validate": False, "global_steps": 1}
    out = asyncio.run(worker.generate_sequences(batch))

    b = out.batch
    assert tuple(b["prompts"].shape) == (4, 512) and tuple(b["responses"].shape) == (4, 1024)
    assert tuple(b["input_ids"].shape) == (4, 1536)
    nt = out.non_tensor_batch
    assert sorted(out.meta_info["reward_extra_keys"]) == \
        ["episode_return", "game_turns", "length_truncated", "success"]
    by_request = {}
    for call in server.calls:
        by_request.setdefault(call["request_id"], []).append(call)
    assert len(by_request) == 4  # one request id per episode, kept across its turns
    for i in range(4):
        game, seed = nt["game"][i], nt["seed"][i]
        assert nt["data_source"][i] == f"game_rl/{game}"
        spec = get_game(game)
        config = spec.config(ds[rows[i]]["extra_info"]["game_config"])
        n_resp = int(b["attention_mask"][i, 512:].sum())
        mask = b["response_mask"][i, :n_resp].tolist()
        assert b["response_mask"][i, n_resp:].sum() == 0
        replay_env = spec.make_env(config)
        replay_env.reset(int(seed))
        replay = [replay_env.submit(a)[1] for a in nt["actions"][i]]
        assert nt["turn_scores"][i] == pytest.approx(replay)
        assert len(replay) == nt["game_turns"][i] == spec.max_turns(config)
        # the episode reward sits on the last response token, which is an answer token
        assert float(b["rm_scores"][i].sum()) == pytest.approx(sum(replay), abs=1e-5)
        assert float(b["rm_scores"][i, n_resp - 1]) == pytest.approx(sum(replay), abs=1e-5)
        assert mask[-1] == 1 and len([r for r in runs(mask) if r[0] == 1]) == len(replay)
        assert nt["__num_turns__"][i] == 2 * len(replay)
        # the policy tokens in the batch are exactly what the server sampled for this episode
        prompt_len = int(b["attention_mask"][i, :512].sum())
        prompt = b["prompts"][i, 512 - prompt_len:].tolist()
        response = b["responses"][i, :n_resp].tolist()
        calls = next(c for c in by_request.values() if c[0]["prompt_ids"] == prompt)
        assert [response[a:e] for v, a, e in runs(mask) if v == 1] == \
            [c["token_ids"] for c in calls]
        lp = b["rollout_log_probs"][i, :n_resp]
        assert float(lp[torch.tensor(mask) == 0].abs().sum()) == 0.0
    assert np.all(nt["length_truncated"] == 0.0)


def test_verl_agent_loop_output_and_cleanup(verl, tiny, tiny_path, exported, agent_yaml,
                                            tmp_path):
    """The loop as verl instantiates it (hydra, a new object per episode): AgentLoopOutput's
    fields, the V1 trainer's as_dict() (rm_scores on the last token), nothing kept alive."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import (AgentLoopOutput, AgentLoopWorker,
                                                         DictConfigWrap, ToolListWrap,
                                                         _agent_loop_registry)
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.rollout.replica import TokenOutput

    from gamerl.integrations.verl.agent_loop import GameAgentLoop

    model, _ = tiny
    cfg = compose("game_rl_grpo", f"actor_rollout_ref.model.path={tiny_path}",
                  f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_yaml}",
                  "data.max_prompt_length=512", "data.max_response_length=1024",
                  "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2")
    worker = AgentLoopWorker(cfg, None)  # loads our YAML into verl's registry
    tok = worker.tokenizer
    server = TinyServer(model, tok, TokenOutput)
    ds = _rlhf_dataset(cfg, tok, [exported / "val.parquet"], tmp_path / "cache")
    registry_size = len(_agent_loop_registry)
    loops = weakref.WeakSet()

    async def one(row, sampling):
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry[row["agent_name"]], trainer_config=DictConfigWrap(cfg),
            server_manager=server, tokenizer=tok, processor=None, hf_model_type="qwen3",
            dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
            tools=ToolListWrap([]))
        loops.add(loop)
        assert isinstance(loop, GameAgentLoop) and loop.limits.max_tokens_per_turn == 10
        kwargs = {k: v for k, v in row.items() if k not in ("agent_name", "dummy_tensor")}
        return await loop.run(sampling, uid="u", session_id=0, global_steps=1, **kwargs)

    sampling = dict(temperature=0.7, top_p=0.9, top_k=50, repetition_penalty=1.0, logprobs=True)
    rows = [ds[i] for i in range(len(ds))]

    async def all_rows():  # concurrently, as the worker runs them
        return await asyncio.gather(*(one(r, sampling) for r in rows))
    outputs = asyncio.run(all_rows())
    gc.collect()
    assert len(loops) == 0, "agent loop objects outlived their episodes"
    assert len(_agent_loop_registry) == registry_size

    for row, out in zip(rows, outputs):
        assert isinstance(out, AgentLoopOutput)
        assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
        assert len(out.response_ids) <= 1024 and len(out.prompt_ids) <= 512
        assert out.response_mask[-1] == 1
        info = out.extra_fields["reward_extra_info"]
        assert info["game_turns"] == 2  # multi_turn.max_assistant_turns=2 caps the episode
        assert out.extra_fields["stop_reason"] == "max_turns"
        assert out.reward_score == pytest.approx(sum(out.extra_fields["turn_scores"]))
        assert info["episode_return"] == pytest.approx(out.reward_score)
        assert out.num_turns == 4 and out.metrics.generate_sequences > 0
        assert out.extra_fields["seed"] == row["extra_info"]["seed"]
        d = out.as_dict()  # what the V1 trainer stores
        assert float(d["rm_scores"][-1]) == pytest.approx(out.reward_score)
        assert float(d["rm_scores"][:-1].abs().sum()) == 0.0
        assert d["response_mask"].tolist() == out.response_mask
        assert d["extra_fields"]["min_global_steps"] == 7
        assert tok.decode(out.prompt_ids).count(f"#{row['extra_info']['seed']}\n") == 1
    assert len({tuple(o.prompt_ids) for o in outputs}) == len(rows)

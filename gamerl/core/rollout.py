"""Batched multi-turn rollouts: many game episodes played at once by one policy.

The game-specific parts (how an episode starts, the action in an answer, the feedback message,
the numbers kept per turn) come from the run's ``Task`` (``gamerl.games.get_task``; each game's
module in ``gamerl.games`` describes its own).

Every episode is kept as ONE token sequence, exactly the tokens the model saw and produced:

    [chat prompt: system + first observation, ending in the assistant header]   mask 0
    [answer 1: the sampled tokens, up to and including the stop token]          mask 1  <- reward 1
    [user message 2: feedback on answer 1, then the next assistant header]      mask 0
    [answer 2]                                                                  mask 1  <- reward 2
    ...

Tokens are appended, never re-tokenized ("token in, token out"), so what PPO trains on is what was
sampled. Each turn's reward sits on that turn's last policy token; environment tokens (mask 0) never
carry a reward, a log-prob or a loss.

Batching: at each turn ALL live episodes generate their next answer in ONE batched call (left
padding so every row ends at the same column, KV cache on). Episodes that ended drop out; within
a turn, rows that have answered stop being decoded (``gamerl.core.decode``; ``generate`` would
feed them padding until the longest answer ends).
The KV cache of one turn's call carries over to the next (``gamerl.core.turn_cache``): a turn
prefills only its new tokens, not the whole conversation again. On the first turn the tokens every
row opens with (the system prompt and, where the game's first message is the same text, that too)
run once, as one row, and every row attends to them (``prefill_shared_prefix``).
On a GPU, ``cuda_graphs`` (off by default) replaces all of this with a fixed batch decoding into a
static cache, compiled into CUDA graphs (``LMPolicy._generate_on_graphs``).

User messages: turn 1 is the system prompt and the game's first observation
(``first_messages``); later turns are the task's ``feedback`` (the Password Game's compact
message shows only the rules that changed the picture: ``gamerl.games.password_game``).

Context budget: an episode whose sequence plus ``max_new_tokens`` would exceed
``max_context_tokens`` ends before that turn (``context_exhausted``). Compact feedback keeps this
rare; the budget exists so a runaway conversation can never exhaust memory.

The action in an answer is the task's ``extract`` (every game uses the rule of
``gamerl.games.base.extract_answer``).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence

import torch
from transformers import GenerationConfig, LogitsProcessor

from ..progress import tqdm

from ..games.base import Task, TooManySessionsError, instance_seed
from ..games.registry import get_task
from ..models import ENDOFTEXT, IM_END, chat_prompt, unwrap_lm
from ..models.kv_cache import CACHE_ARG, cache_of, fixed_cache, plain_cache
from .decode import sample_turn
from .scoring import Sampling, SampledLogprobs, sampling_processors
from .sessions import EpisodeLost
from .bottom_states import keep_on_episodes, record_bottom_states
from .turn_cache import TurnCache, call_mask, left_pad, prefill_shared_prefix

log = logging.getLogger("gamerl")

# ----------------------------------------------------------------------------- messages


def first_messages(obs: dict[str, Any], system_prompt: Optional[str]) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": obs["text"]}]


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


# Placeholders rendered through the model's own chat template to read off what it writes around
# a user message that follows an assistant answer (never seen by a model).
_ANSWER_MARK, _MESSAGE_MARK = "GAMERL-ANSWER-9f1c", "GAMERL-MESSAGE-9f1c"


def turn_template(tokenizer, system_prompt: Optional[str] = None,
                  enable_thinking: bool = False) -> tuple[str, str]:
    """``(before, after)``: the text the tokenizer's chat template writes between the end of an
    assistant answer and the next user message's text, and from there through the next
    assistant header. Read off a rendering of [system?, user, assistant, user] with
    placeholders, so it is exactly what the template renders for a conversation, whatever it
    adds (Qwen3's empty think block with thinking off; SmolLM2's default system prompt appears
    only before the first message, never here)."""
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": "?"}, {"role": "assistant", "content": _ANSWER_MARK},
        {"role": "user", "content": _MESSAGE_MARK}]
    text = chat_prompt(tokenizer, messages, enable_thinking=enable_thinking)
    tail = text[text.index(_ANSWER_MARK) + len(_ANSWER_MARK):]
    before, after = tail.split(_MESSAGE_MARK)
    return before, after


def env_turn_ids(tokenizer, message: str, answer_closed: bool, *,
                 system_prompt: Optional[str] = None, enable_thinking: bool = False) -> list[int]:
    """Environment tokens between two answers: what the model's chat template renders after an
    answer for a new user message, through the next assistant header (``turn_template``). When
    the model closed its answer itself (it sampled <|im_end|>), that token is already in the
    sequence and is not repeated; when it ran out of tokens or stopped on <|endoftext|>, the
    template's <|im_end|> closes the answer here. The answer's own tokens are never re-encoded."""
    before, after = turn_template(tokenizer, system_prompt, enable_thinking)
    if answer_closed and before.startswith(IM_END):
        before = before[len(IM_END):]
    return encode(tokenizer, before + message + after)


# ----------------------------------------------------------------------------- episodes


@dataclass
class Turn:
    answer: str  # the decoded answer (special tokens dropped)
    action: str  # what was submitted (the password, guess or move extracted from the answer)
    reward: float  # the env's reward for this turn (unscaled)
    success: bool
    n_tokens: int  # policy tokens in this answer
    last_token: int  # index in token_ids of this answer's last token (where the reward sits)
    stats: dict[str, Any] = field(default_factory=dict)  # Task.turn_stats(info)


@dataclass
class Episode:
    seed: int
    token_ids: list[int]
    policy_mask: list[int]  # 1 on tokens the policy generated
    gen_logprobs: list[float]  # log pi(token) at sampling time (0.0 on mask-0 tokens)
    rewards: list[float]  # per token: each turn's reward on its last policy token
    prompt_len: int
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    success: bool = False
    context_exhausted: bool = False
    last_obs: dict[str, Any] = field(default_factory=dict)
    final_info: dict[str, Any] = field(default_factory=dict)
    instance: Any = None  # what the task started the episode from (a seed, or a dict)
    # The server lost the session and replaying failed (gamerl.core.sessions): no result, no loss
    # (its policy mask is zeroed), left out of every average. replays: sessions rebuilt.
    lost: bool = False
    replays: int = 0
    # (states [n, H], the n tokens they are of): the frozen bottom's output over the episode's
    # first n tokens, kept by a training rollout for scoring (gamerl.core.bottom_states)
    bottom_states: Optional[tuple[torch.Tensor, list[int]]] = field(default=None, repr=False)

    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    def record(self, task: Task) -> dict[str, Any]:
        """A JSON-able summary (for episodes.jsonl and wandb): the generic fields, then the
        game's own (``task.record_fields``: the Password Game's rules satisfied, OpenSpiel's
        outcome). ``task`` is the run's: an episode does not know which game it played."""
        out = {"seed": self.seed, "reward": self.total_reward, "success": self.success,
               "turns": len(self.turns), "context_exhausted": self.context_exhausted,
               "tokens": len(self.token_ids), "policy_tokens": int(sum(self.policy_mask)),
               "actions": [t.action for t in self.turns],
               "turn_rewards": [t.reward for t in self.turns]}
        if isinstance(self.instance, dict):
            out["instance"] = self.instance
        if task.record_fields is not None:
            out.update(task.record_fields(self))
        if self.lost or self.replays:
            out.update(lost=self.lost, session_replays=self.replays)
        return out


# ----------------------------------------------------------------------------- policies


@dataclass
class Answer:
    token_ids: list[int]  # generated tokens, including the stop token when there is one
    logprobs: Optional[list[float]] = None  # log pi of each, at sampling time


class TurnPolicy(Protocol):
    """Anything that answers a batch of conversations at once."""

    def __call__(self, contexts: list[list[int]], episodes: list[Episode]) -> list[Answer]: ...


@dataclass
class RolloutConfig:
    max_turns: int = 30
    max_new_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 50
    greedy: bool = False
    max_context_tokens: int = 4096
    feedback: str = "compact"
    system_prompt: Optional[str] = None
    record_logprobs: bool = True  # log pi of each sampled token (for the trainer's self-check)
    reuse_kv_cache: bool = True  # prefill only each turn's new tokens (gamerl.core.turn_cache)
    share_prompt_prefix: bool = True  # run the rows' common opening tokens once (turn_cache)
    inplace_kv_cache: bool = True  # decode into spare cache columns, no per-token copy (kv_cache)
    # stop decoding rows that have answered (gamerl.core.decode); None: on CPU only. On a GPU a
    # decoding step's time is kernel launches, not rows (docs/benchmarks.md, the H200 section:
    # our loop 0.96-1.02x generate's speed there, no gain to win), so generate stays the GPU's path.
    drop_finished_rows: Optional[bool] = None
    # decode with a static cache compiled into CUDA graphs (``LMPolicy._generate_on_graphs``);
    # takes the place of the three cache options above. On a CPU it runs the same path uncompiled.
    cuda_graphs: bool = False
    task: str = "password_game"  # gamerl.games.TASKS

    @classmethod
    def from_train_config(cls, cfg, greedy: bool = False,
                          evaluation: bool = False) -> "RolloutConfig":
        """The rollouts of a run: training's sampling, or with ``evaluation`` the evaluation's
        (``eval_temperature``, ``eval_top_p``, ``eval_top_k``)."""
        task = get_task(cfg.task)
        sampling = ((cfg.eval_temperature, cfg.eval_top_p, cfg.eval_top_k) if evaluation
                    else (cfg.temperature, cfg.top_p, cfg.top_k))
        return cls(max_turns=task.max_turns(cfg), max_new_tokens=cfg.max_new_tokens,
                   temperature=sampling[0], top_p=sampling[1], top_k=sampling[2], greedy=greedy,
                   max_context_tokens=cfg.max_context_tokens, feedback=cfg.feedback,
                   system_prompt=cfg.effective_system_prompt(), cuda_graphs=cfg.cuda_graphs,
                   task=cfg.task)


def stop_token_ids(lm, tokenizer) -> list[int]:
    """<|im_end|> ends a turn; like Qwen3's generation config we also stop on <|endoftext|>."""
    ids = {tokenizer.convert_tokens_to_ids(IM_END)}
    eos = lm.generation_config.eos_token_id if lm is not None else None
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if ENDOFTEXT in tokenizer.get_vocab():
        ids.add(tokenizer.convert_tokens_to_ids(ENDOFTEXT))
    return sorted(i for i in ids if i is not None)


# What generate() may keep of a model's own generation_config: token ids and how it caches and
# compiles. Nothing that shapes the distribution (a shipped repetition_penalty, min_p,
# no_repeat_ngram_size, suppressed tokens, ...): scoring applies only the run's own temperature,
# top-k and top-p, so anything else would make PPO optimise a policy other than the one that
# played. A whitelist, so that a processor a later transformers adds is left out too.
GENERATION_CONFIG_KEPT = ("bos_token_id", "eos_token_id", "pad_token_id",
                          "decoder_start_token_id", "cache_implementation", "compile_config")


@contextmanager
def only_run_sampling(lm) -> Iterator[None]:
    """For the duration, ``lm``'s ``generation_config`` holds only ``GENERATION_CONFIG_KEPT``:
    generate() fills every setting a call leaves unset from the model's own config, so the
    model's sampling settings must be absent there, not merely overridden."""
    model = unwrap_lm(lm)
    own = model.generation_config
    model.generation_config = GenerationConfig(**{
        k: getattr(own, k) for k in GENERATION_CONFIG_KEPT if getattr(own, k, None) is not None})
    try:
        yield
    finally:
        model.generation_config = own


class LMPolicy:
    """A causal LM as a TurnPolicy: one batched, left-padded ``generate`` call per turn.

    Sampling runs through ``gamerl.core.scoring``'s processors (temperature, top-k, top-p: the
    warpers of transformers, in generate's order), followed by a recorder that keeps each
    sampled token's log-prob under that truncated distribution: exactly what PPO scores later
    (scoring.score_tokens), one ``[B, V]`` row in memory at a time.
    """

    def __init__(self, lm, tokenizer, cfg: RolloutConfig,
                 bottom_states_layer: Optional[int] = None):
        self.lm, self.tokenizer, self.cfg = lm, tokenizer, cfg
        # keep this decoder layer's output on the episodes (gamerl.core.bottom_states): the
        # frozen bottom's, which training's scoring then need not compute again
        self.bottom_states_layer = bottom_states_layer
        self.stop_ids = stop_token_ids(lm, tokenizer)
        self.generate_calls = 0
        self.turn_cache: Optional[TurnCache] = None  # the last call's, for the next turn
        self.prefilled_tokens = 0  # prefill width (columns a row runs before sampling), all calls
        self.shared_prefix_tokens = 0  # tokens run once for all rows of a call (turn_cache), all calls
        self.decoded_row_steps = 0  # rows x decoding steps the model ran after prefills, all calls

    def _inputs(self, contexts: list[list[int]], episodes: list[Episode]):
        """``(input_ids, attention_mask, past)`` for this call's ``generate``: the last call's
        rows extended by their new tokens (``TurnCache``), or a first turn whose shared opening
        runs once (``prefill_shared_prefix``), or a plain left-padded prefill."""
        tok, device = self.tokenizer, self.lm.device
        carried, self.turn_cache = self.turn_cache, None
        extended = carried.extend(contexts, episodes, tok.pad_token_id) if carried else None
        if extended is not None:  # the same episodes' next turn: prefill only the new tokens
            ids, mask, past = extended
            self.prefilled_tokens += ids.shape[1] - past.get_seq_length()
            return ids, mask, past
        shared = (prefill_shared_prefix(self.lm, contexts, tok.pad_token_id, device,
                                        cache=self._empty_cache())
                  if self.cfg.share_prompt_prefix else None)
        if shared is not None:  # the common opening ran once; each row prefills its rest
            ids, mask, past, n_shared = shared
            self.prefilled_tokens += ids.shape[1] - n_shared
            self.shared_prefix_tokens += n_shared
            return ids, mask, past
        ids, mask = left_pad(contexts, tok.pad_token_id, device)
        self.prefilled_tokens += ids.shape[1]
        return ids, mask, self._empty_cache()

    @property
    def drops_finished_rows(self) -> bool:
        """``cfg.drop_finished_rows``, or where it is None, whether the model runs on a CPU."""
        on = self.cfg.drop_finished_rows
        return self.lm.device.type == "cpu" if on is None else on

    def _empty_cache(self):
        """The cache a fresh prefill fills: one that grows in place (``kv_cache.growing_cache``:
        no copy of the whole cache per decoded token), else transformers' plain layers where
        finished rows are dropped (``decode``: it splits plain keys and values), or None for the
        model's own (also for models with other than full-attention layers)."""
        if self.cfg.inplace_kv_cache or self.drops_finished_rows:
            return plain_cache(self.lm, growing=self.cfg.inplace_kv_cache)
        return None

    def _generate(self, ids: torch.Tensor, mask: torch.Tensor, past: Any,
                  filler_from: Optional[int] = None):
        """transformers' ``generate`` (``drop_finished_rows`` off, or a model whose cache our
        loop cannot split): ``(sequences, cache, log-probs of the new tokens or None)``. Rows
        from ``filler_from`` on only fill a fixed batch: they stop at once (``EndRows``)."""
        cfg, tok = self.cfg, self.tokenizer
        recorder = None
        fillers = [] if filler_from is None else [EndRows(filler_from, self.stop_ids[0])]
        if cfg.greedy:
            sampling = dict(do_sample=False, temperature=None, top_p=None, top_k=None,
                            logits_processor=fillers)
        else:
            # generate's own warpers off (temperature 1, top_k 0, top_p 1: none is added), ours
            # on, in the same order, then the recorder: it must see the final, truncated scores.
            processors = fillers + sampling_processors(Sampling.from_config(cfg))
            if cfg.record_logprobs:
                recorder = SampledLogprobs()
                processors.append(recorder)
            sampling = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                            logits_processor=processors)
        with only_run_sampling(self.lm):
            out = self.lm.generate(
                input_ids=ids, attention_mask=mask, **{CACHE_ARG: past},
                max_new_tokens=cfg.max_new_tokens, eos_token_id=self.stop_ids,
                pad_token_id=tok.pad_token_id, use_cache=True, return_dict_in_generate=True,
                **sampling)
        width = ids.shape[1]
        self.decoded_row_steps += ids.shape[0] * max(out.sequences.shape[1] - width - 1, 0)
        recorded = recorder.finish(out.sequences[:, width:]) if recorder is not None else None
        return out.sequences, cache_of(out), recorded

    def _generate_on_graphs(self, contexts: list[list[int]]):
        """``cuda_graphs``: ``generate`` into the model's fixed static cache (``fixed_cache``:
        ``max_context_tokens`` columns, rows at least this call's), which transformers decodes
        with a compiled step, CUDA graphs, on a GPU. Graphs replay fixed shapes, so the batch is
        filled to the cache's rows with copies of the first context that stop at once (as games
        end, the rows do not shrink: on a GPU a step costs its launches, not its rows), and each
        turn prefills its whole context (a static cache is not carried into the next turn; the
        prefill is one eager pass). ``(sequences, mask, log-probs or None)``, this call's rows."""
        n = len(contexts)
        cache, rows = fixed_cache(self.lm, n, self.cfg.max_context_tokens)
        ids, mask = left_pad(contexts + [contexts[0]] * (rows - n), self.tokenizer.pad_token_id,
                             self.lm.device)
        self.prefilled_tokens += ids.shape[1]
        sequences, _, recorded = self._generate(ids, mask, cache,
                                                filler_from=n if rows > n else None)
        return (sequences[:n], mask[:n], recorded[:n] if recorded is not None else None)

    def _decode(self, contexts: list[list[int]], episodes: list[Episode]):
        """One turn with the cache options (``_inputs``): ``(sequences, in_mask, cache,
        log-probs or None)``; sequences [B, W_in + G], in_mask [B, W_in]."""
        cfg, tok = self.cfg, self.tokenizer
        ids, mask, past = self._inputs(contexts, episodes)
        if self.drops_finished_rows and past is not None:
            # our loop: the same sampling as generate, without the rows that have answered
            # (a growing or carried cache: plain keys and values, which it can split)
            out = sample_turn(
                self.lm, ids, mask, past, max_new_tokens=cfg.max_new_tokens,
                stop_ids=self.stop_ids, pad_id=tok.pad_token_id,
                processors=None if cfg.greedy else sampling_processors(
                    Sampling.from_config(cfg)),
                do_sample=not cfg.greedy,
                record_logprobs=cfg.record_logprobs and not cfg.greedy)
            self.decoded_row_steps += out.row_steps
            return out.sequences, mask, out.past, out.logprobs
        sequences, cache, recorded = self._generate(ids, mask, past)
        return sequences, mask, cache, recorded

    @torch.no_grad()
    def __call__(self, contexts: list[list[int]], episodes: list[Episode]) -> list[Answer]:
        was_training = self.lm.training
        self.lm.eval()  # the shared-prefix pass and decoding both run in eval mode
        layer = None if self.cfg.cuda_graphs else self.bottom_states_layer
        try:
            with record_bottom_states(self.lm, layer) if layer is not None else nullcontext():
                if self.cfg.cuda_graphs:  # a static cache, whole contexts: nothing to carry over
                    sequences, mask, recorded = self._generate_on_graphs(contexts)
                    cache = None
                else:
                    sequences, mask, cache, recorded = self._decode(contexts, episodes)
        finally:
            self.lm.train(was_training)
        self.generate_calls += 1
        answers = self._answers(sequences[:, mask.shape[1]:], recorded)
        answer_ids = [a.token_ids for a in answers]
        if layer is not None and cache is not None:
            keep_on_episodes(cache, call_mask(mask, sequences, answer_ids), contexts, answer_ids,
                             episodes)
        if self.cfg.reuse_kv_cache and cache is not None:
            self.turn_cache = TurnCache.after_generate(episodes, contexts, answer_ids, mask,
                                                       sequences, cache)
        return answers

    def _answers(self, new: torch.Tensor, recorded: Optional[torch.Tensor]) -> list[Answer]:
        """Each row's answer: its new tokens through the first stop token, and their log-probs."""
        logprobs = recorded.cpu() if recorded is not None else None
        new = new.cpu()
        answers = []
        stops = torch.tensor(self.stop_ids)
        for i in range(new.shape[0]):
            row = new[i]
            hits = torch.isin(row, stops).nonzero()
            n = int(hits[0]) + 1 if len(hits) else row.shape[0]  # through the first stop token
            answers.append(Answer(row[:n].tolist(),
                                  logprobs[i, :n].tolist() if logprobs is not None else None))
        return answers


class EndRows(LogitsProcessor):
    """A logits processor for the rows from ``first`` on, which only fill a fixed batch (CUDA
    graphs): they can only write ``stop_id``, so they end at their first step and never keep a
    turn going longer than its real rows."""

    def __init__(self, first: int, stop_id: int) -> None:
        self.first, self.stop_id = first, stop_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        keep = scores[self.first:, self.stop_id].clone()
        scores[self.first:] = -float("inf")
        scores[self.first:, self.stop_id] = keep
        return scores


class ScriptedPolicy:
    """A TurnPolicy from a text function ``fn(episode) -> answer text`` (solver, random strings,
    demonstrations). The answer is tokenized and closed with <|im_end|> like a model's."""

    def __init__(self, tokenizer, fn: Callable[[Episode], str]):
        self.tokenizer, self.fn = tokenizer, fn
        self.im_end = tokenizer.convert_tokens_to_ids(IM_END)

    def __call__(self, contexts: list[list[int]], episodes: list[Episode]) -> list[Answer]:
        return [Answer(encode(self.tokenizer, self.fn(ep)) + [self.im_end]) for ep in episodes]


# ----------------------------------------------------------------------------- the rollout


def rollout(policy: TurnPolicy, tokenizer, seeds: Sequence[Any], make_env: Callable[..., Any],
            cfg: RolloutConfig, progress: Optional[str] = None,
            before_turn: Optional[Callable[[list[Episode]], None]] = None) -> list[Episode]:
    """Play one episode per instance (``seeds``: ints, or the task's instance dicts), all of
    them in lockstep (one policy call per turn).

    ``make_env`` builds a fresh environment with the task protocol (``reset``,
    ``submit(action) -> (obs, reward, done, info)``), in-process (``Task.env_factory``) or an
    HTTP client (``Task.http_env_factory``); the task's ``start`` opens each episode with it.
    One environment per episode; each is closed at the end. ``progress``: a tqdm bar with this
    description, one step per turn, showing how many episodes still play (None: no bar).
    """
    task = get_task(cfg.task)
    # plumbing: the progress bar, and the games' sessions and episodes (``_Games``)
    bar = tqdm(total=cfg.max_turns, desc=progress, unit="turn", leave=False, mininterval=1.0,
               disable=progress is None)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    games = _Games(task, tokenizer, seeds, make_env, cfg)
    try:
        games.start_pending()
        while True:
            games.close_ended()  # ALGO LOGIC: the context budget and max_turns end episodes
            if games.start_next_wave():  # a server short of sessions: the next wave starts
                bar.total += cfg.max_turns
                bar.refresh()
            live = games.live()
            if not live:
                break
            bar.set_postfix(playing=f"{len(live)}/{len(seeds)}")
            # ALGO LOGIC: one batched policy call answers the turn of every live episode
            episodes = [games.episodes[i] for i in live]
            if before_turn is not None:
                before_turn(episodes)
            answers = policy([ep.token_ids for ep in episodes], episodes)
            for i, answer in zip(live, answers):
                # ALGO LOGIC: the answer's tokens (mask 1), its reward, the feedback (mask 0)
                play_turn(games.episodes[i], games.envs[i], answer, task, tokenizer, cfg, im_end)
            bar.update(1)
    finally:  # plumbing: every session closed, the batch's KV cache let go, whatever happened
        bar.close()
        games.close_all()
        if isinstance(policy, LMPolicy):
            policy.turn_cache = None  # the batch's KV cache: memory no later call can use
    return games.episodes


class _Games:
    """Plumbing of one ``rollout``: per instance, its environment (open while it plays; None
    once closed or before it opened) and its ``Episode`` (None until it starts). Episodes open
    in instance order while the game server has room; the rest wait in ``pending``."""

    def __init__(self, task: Task, tokenizer, seeds: Sequence[Any], make_env: Callable[..., Any],
                 cfg: RolloutConfig):
        self.task, self.tokenizer, self.seeds, self.make_env, self.cfg = (
            task, tokenizer, seeds, make_env, cfg)
        self.envs: list[Any] = [None] * len(seeds)
        self.episodes: list[Optional[Episode]] = [None] * len(seeds)
        self.pending = list(range(len(seeds)))  # instances whose episode has not started yet
        self.last_made: list[Any] = []  # what make_env built last: a failed start closes it
        self.warned_about_waves = False

    def _tracked_make_env(self, *args: Any, **kwargs: Any) -> Any:
        self.last_made[:] = [self.make_env(*args, **kwargs)]
        return self.last_made[0]

    def close(self, i: int) -> None:
        env, self.envs[i] = self.envs[i], None
        _close_env(env)

    def close_all(self) -> None:
        for i in range(len(self.envs)):
            self.close(i)

    def live(self) -> list[int]:
        """The instances whose episode plays the next turn."""
        return [i for i, ep in enumerate(self.episodes) if ep is not None and not ep.done]

    def start_pending(self) -> None:
        """Open episodes in instance order while the game server has room. A server that holds
        fewer sessions than the batch (429: its --max-sessions, or another client's quota) gets
        the rest as sessions free up: the batch then plays in waves instead of in lockstep."""
        while self.pending:
            i = self.pending[0]
            self.last_made.clear()
            try:
                env, obs = self.task.start(self._tracked_make_env, self.seeds[i])
            except TooManySessionsError as e:
                if self.last_made:  # built, then refused a session: close what it holds
                    _close_env(self.last_made.pop())
                self._wait_for_room(e)
                return
            self.pending.pop(0)
            self.envs[i] = env
            self.episodes[i] = new_episode(self.tokenizer, self.seeds[i], obs,
                                           self.cfg.system_prompt)

    def _wait_for_room(self, e: TooManySessionsError) -> None:
        """The server refused a session: wait for ours to end (warned once), or, when none of
        ours plays, raise: nothing would ever free one."""
        playing = sum(ep is not None and not ep.done for ep in self.episodes)
        if not playing:  # nothing of ours will free a session: the server is full
            raise TooManySessionsError(
                f"the game server has no room for any of this batch's sessions ({e}). "
                "Start it with a larger --max-sessions, or stop the other clients that "
                "hold its sessions.", status_code=e.status_code,
                retry_after=e.retry_after) from e
        if not self.warned_about_waves:
            self.warned_about_waves = True
            n = len(self.seeds)
            log.warning("the game server took %d of this batch's %d sessions (%s): the "
                        "other episodes start as those end. Start the server with "
                        "--max-sessions of at least %d to play them in lockstep.",
                        playing, n, e.message, n)

    def start_next_wave(self) -> bool:
        """Start pending episodes if sessions freed up; True if a new wave began (some started,
        after a first wave)."""
        if not self.pending:
            return False
        started = len(self.seeds) - len(self.pending)
        self.start_pending()
        return len(self.seeds) - len(self.pending) > started and started > 0

    def close_ended(self) -> None:
        """End the episodes out of room (``end_if_out_of_room``), then close the session of
        every ended one that is still open (room for the next)."""
        for i, ep in enumerate(self.episodes):
            if ep is None or self.envs[i] is None:
                continue
            end_if_out_of_room(ep, self.cfg)
            if ep.done:
                self.finish(i)

    def finish(self, i: int) -> None:
        """An episode that ended: record its replays, close its session (room for the next)."""
        ep = self.episodes[i]
        ep.done = True
        ep.replays = int(getattr(self.envs[i], "replays", 0) or 0)
        self.close(i)


def _close_env(env: Any) -> None:
    if env is not None and hasattr(env, "close"):
        env.close()


def new_episode(tokenizer, instance: Any, obs: dict[str, Any],
                system_prompt: Optional[str]) -> Episode:
    """An episode at its start: the chat prompt (system prompt and first observation, ending in
    the assistant header) as its first ``prompt_len`` tokens, all mask 0."""
    prompt = encode(tokenizer, chat_prompt(tokenizer, first_messages(obs, system_prompt)))
    n = len(prompt)
    return Episode(seed=instance_seed(instance), token_ids=list(prompt), policy_mask=[0] * n,
                   gen_logprobs=[0.0] * n, rewards=[0.0] * n, prompt_len=n, last_obs=obs,
                   instance=instance)


def end_if_out_of_room(ep: Episode, cfg: RolloutConfig) -> None:
    """Mark ``ep`` done when it may not play another turn: its sequence plus
    ``max_new_tokens`` could overflow ``max_context_tokens`` (``context_exhausted``), or it
    played ``max_turns`` (below the game's own max_steps)."""
    # ALGO LOGIC
    if not ep.done and len(ep.token_ids) + cfg.max_new_tokens > cfg.max_context_tokens:
        ep.done = ep.context_exhausted = True  # the context budget: it could overflow
    if len(ep.turns) >= cfg.max_turns:  # max_turns below max_steps ends episodes here
        ep.done = True


def append_tokens(ep: Episode, token_ids: list[int], policy: bool,
                  logprobs: Optional[list[float]] = None) -> None:
    """Append tokens to the episode's one sequence: the policy's (mask 1, with their
    sampling-time log-probs when recorded) or the environment's (mask 0); reward 0 on each."""
    # ALGO LOGIC
    n = len(token_ids)
    ep.token_ids += token_ids
    ep.policy_mask += [1 if policy else 0] * n
    ep.gen_logprobs += logprobs if logprobs is not None else [0.0] * n
    ep.rewards += [0.0] * n


def play_turn(ep: Episode, env: Any, answer: Answer, task: Task, tokenizer, cfg: RolloutConfig,
              im_end: int) -> None:
    """One turn of one episode: the answer's tokens appended (mask 1), its action submitted,
    the reward put on the answer's last token, then (unless the game ended) the feedback and
    the next assistant header (mask 0). A session lost for good drops the episode."""
    # ALGO LOGIC
    n = len(answer.token_ids)
    if n == 0:
        raise ValueError("a policy returned an empty answer (no token to reward)")
    append_tokens(ep, answer.token_ids, policy=True, logprobs=answer.logprobs)
    text = tokenizer.decode(answer.token_ids, skip_special_tokens=True)
    action = task.extract(text)
    try:
        obs, reward, done, info = env.submit(action)
    except EpisodeLost as e:
        drop_lost(ep, e)
        return
    ep.rewards[-1] += float(reward)  # the turn's reward on its last policy token
    stats = task.turn_stats(info)
    ep.turns.append(Turn(answer=text, action=action, reward=float(reward),
                         success=bool(stats["success"]), n_tokens=n,
                         last_token=len(ep.token_ids) - 1, stats=stats))
    ep.last_obs, ep.final_info = obs, info
    ep.success = bool(stats["success"])
    if done:
        ep.done = True
        return
    env_ids = env_turn_ids(tokenizer, task.feedback(obs, info, action, cfg.feedback),
                           answer_closed=answer.token_ids[-1] == im_end,
                           system_prompt=cfg.system_prompt)
    append_tokens(ep, env_ids, policy=False)


def drop_lost(ep: Episode, error: Exception) -> None:
    """End an episode whose server session is gone for good: no loss on any of its tokens."""
    log.warning("episode seed %s dropped after %d turns: %s", ep.seed, len(ep.turns), error)
    ep.done = ep.lost = True
    ep.policy_mask = [0] * len(ep.token_ids)
    ep.rewards = [0.0] * len(ep.token_ids)


# ----------------------------------------------------------------------------- to tensors


@dataclass
class TokenBatch:
    """Episodes as right-padded ``[B, T]`` tensors, index t = token t of the sequence."""

    input_ids: torch.Tensor  # long
    attention_mask: torch.Tensor  # long, 1 on real tokens
    mask: torch.Tensor  # float, 1 on policy tokens
    rewards: torch.Tensor  # float, env rewards on each turn's last policy token
    gen_logprobs: torch.Tensor  # float, sampling-time log-probs on policy tokens

    def to(self, device) -> "TokenBatch":
        return TokenBatch(**{k: v.to(device) for k, v in asdict(self).items()})


def episodes_to_batch(episodes: Sequence[Episode], pad_id: int) -> TokenBatch:
    """Right padding for training: every row starts at column 0, so position t of a row is the
    same RoPE position it had while sampling (models.positions_from_mask), and no query row is
    fully masked."""
    width = max(len(ep.token_ids) for ep in episodes)
    b = len(episodes)
    out = TokenBatch(input_ids=torch.full((b, width), pad_id, dtype=torch.long),
                     attention_mask=torch.zeros((b, width), dtype=torch.long),
                     mask=torch.zeros((b, width)), rewards=torch.zeros((b, width)),
                     gen_logprobs=torch.zeros((b, width)))
    for i, ep in enumerate(episodes):
        n = len(ep.token_ids)
        out.input_ids[i, :n] = torch.tensor(ep.token_ids)
        out.attention_mask[i, :n] = 1
        out.mask[i, :n] = torch.tensor(ep.policy_mask, dtype=torch.float)
        out.rewards[i, :n] = torch.tensor(ep.rewards)
        out.gen_logprobs[i, :n] = torch.tensor(ep.gen_logprobs)
    return out


def summarize(episodes: Sequence[Episode], cfg) -> dict[str, Any]:
    """Mean episode return, success rate, turns, policy tokens, and the task's own numbers
    (``Task.metrics`` of the TrainConfig ``cfg``'s task: rules satisfied, win rate, ...),
    scalars only."""
    everything, episodes = episodes, [ep for ep in episodes if not ep.lost]
    n = max(len(episodes), 1)
    out: dict[str, Any] = {"reward": sum(ep.total_reward for ep in episodes) / n,
                           "success_rate": sum(ep.success for ep in episodes) / n,
                           "turns": sum(len(ep.turns) for ep in episodes) / n,
                           "policy_tokens": sum(sum(ep.policy_mask) for ep in episodes) / n,
                           "episodes": len(episodes),
                           "lost_episodes": len(everything) - len(episodes),
                           "replayed_episodes": sum(ep.replays > 0 for ep in everything)}
    extra = get_task(cfg.task).metrics(episodes, cfg)
    out.update({k: v for k, v in extra.items() if isinstance(v, (int, float))})
    return out


__all__ = ["Answer", "Episode", "LMPolicy", "RolloutConfig", "ScriptedPolicy", "TokenBatch",
           "Turn", "TurnPolicy", "append_tokens", "drop_lost", "encode", "end_if_out_of_room",
           "env_turn_ids", "episodes_to_batch", "first_messages", "new_episode", "only_run_sampling",
           "play_turn",
           "rollout", "stop_token_ids", "summarize"]

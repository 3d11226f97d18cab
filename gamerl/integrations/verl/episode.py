"""One game episode as ONE token sequence, played against an async ``generate`` function.

This is the whole multi-turn logic of the verl bridge, kept free of verl so that it can be tested
(and reused) without it; ``agent_loop.GameAgentLoop`` only adapts verl's server manager and
output type to it.

The sequence, token in / token out (never re-tokenized, as in ``gamerl.core.rollout``):

    prompt_ids:   [chat template of the dataset's messages, ending in the assistant header]
    response_ids: [answer 1]          mask 1   (sampled tokens, including the stop token)
                  [feedback 1]        mask 0   (closing <|im_end|> if the answer had none, the
                                                user message, the next assistant header)
                  [answer 2]          mask 1
                  ...
                  [answer n]          mask 1   <- the response always ENDS on policy tokens

The episode ends when the game says done (solved or out of turns), after ``max_turns`` answers,
or when the next turn would not fit: every turn needs room for its feedback plus a full
``max_tokens_per_turn`` answer inside ``response_length`` (verl pads every response to that
length, so it is a hard budget; the last answer is never cut by the budget, only by
``max_tokens_per_turn`` as in every turn). Feedback for a turn that will not be played is never
appended, so the last token is the last answer's and verl's episode reward (placed on the last
response token) sits on a policy token.

Episode reward: ``sum_t turn_discount**t * r_t`` over the game's per-turn rewards ``r_t`` (t from
0). With the default ``turn_discount=1`` it is the plain sum, the game's own episode return. The
per-turn rewards are kept too (``turn_rewards``) for logging; verl 0.9 trains on one scalar per
trajectory (``AgentLoopOutput.reward_score``) unless a custom reward manager reads more.

Per-episode state: the environment is created inside ``play_episode`` and closed in ``finally``;
nothing outlives the call except the returned ``EpisodeResult``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Sequence

from gamerl.models import IM_END, chat_prompt
from gamerl.core.rollout import encode, env_turn_ids

from .games import GameSpec

__all__ = ["EpisodeLimits", "EpisodeResult", "GenerateFn", "Generation", "feedback_ids",
           "play_episode", "prompt_ids_for"]


@dataclass
class Generation:
    """What one ``generate`` call returns (verl's ``TokenOutput`` has these fields)."""

    token_ids: list[int]
    log_probs: Optional[list[float]] = None
    stop_reason: Optional[str] = None
    num_preempted: Optional[int] = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


# generate(prompt_ids, max_tokens) -> Generation (or anything with the same attributes)
GenerateFn = Callable[[list[int], int], Awaitable[Any]]


@dataclass(frozen=True)
class EpisodeLimits:
    response_length: int  # all response tokens (answers + feedback): rollout.response_length
    max_tokens_per_turn: int = 256  # tokens per answer (capped at response_length)
    max_turns: Optional[int] = None  # answers per episode; None: the game's own limit
    turn_discount: float = 1.0  # episode reward = sum_t turn_discount**t * r_t
    enable_thinking: bool = False  # Qwen3 chat template switch, for every assistant header

    def __post_init__(self) -> None:
        if self.response_length < 1:
            raise ValueError("response_length must be >= 1")
        if self.max_tokens_per_turn < 1:
            raise ValueError("max_tokens_per_turn must be >= 1")
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("max_turns must be >= 1 (or None)")
        if not 0.0 < self.turn_discount <= 1.0:
            raise ValueError("turn_discount must be in (0, 1]")


@dataclass
class EpisodeResult:
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]  # 1 on answer tokens, 0 on feedback tokens
    response_logprobs: Optional[list[float]]  # None unless every answer came with log-probs
    turn_rewards: list[float]
    actions: list[str]  # what was submitted each turn
    reward: float  # the (discounted) sum of turn_rewards: the trajectory's reward
    success: bool
    done: bool  # the game ended (success or out of its turns)
    stop_reason: str  # "done" | "max_turns" | "response_length" | "empty_generation"
    chat_turns: int  # verl's num_turns: messages in the conversation (user + assistant)
    generate_s: float = 0.0
    env_s: float = 0.0
    num_preempted: int = -1
    min_global_steps: Any = None  # policy versions that produced the answers (verl's async
    max_global_steps: Any = None  # trainers use them for staleness control)

    @property
    def game_turns(self) -> int:
        return len(self.turn_rewards)

    @property
    def episode_return(self) -> float:
        return float(sum(self.turn_rewards))


def prompt_ids_for(tokenizer, messages: Sequence[dict], enable_thinking: bool = False
                   ) -> list[int]:
    """The prompt tokens: the chat template with the assistant header (``gamerl.models
    .chat_prompt``, the same text our own trainer feeds the model), tokenized without adding
    special tokens (the template already has them)."""
    text = chat_prompt(tokenizer, list(messages), enable_thinking=enable_thinking)
    return encode(tokenizer, text)


def feedback_ids(tokenizer, message: str, answer_closed: bool, enable_thinking: bool = False
                 ) -> list[int]:
    """Environment tokens between two answers (``gamerl.core.rollout.env_turn_ids``: what the chat
    template renders there, with thinking on or off)."""
    return env_turn_ids(tokenizer, message, answer_closed, enable_thinking=enable_thinking)


def _merge_steps(current, new, pick):
    if new is None:
        return current
    return new if current is None else pick(current, new)


@dataclass
class _Response:
    """The response as it grows: answer tokens (mask 1, their log-probs) and feedback tokens
    (mask 0, log-prob 0); ``logprobs`` None once an answer came without them."""
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: Optional[list[float]] = field(default_factory=list)
    num_preempted: int = -1
    min_steps: Any = None
    max_steps: Any = None

    def add_feedback(self, tokens: list[int]) -> None:
        self.ids += tokens
        self.mask += [0] * len(tokens)
        if self.logprobs is not None:
            self.logprobs += [0.0] * len(tokens)

    def drop_last(self, n: int) -> None:
        del self.ids[-n:], self.mask[-n:]
        if self.logprobs is not None:
            del self.logprobs[-n:]

    def add_answer(self, tokens: list[int], out: Any) -> None:
        """An answer's tokens, with what the server said about them (log-probs, preemptions, the
        policy versions that produced it)."""
        self.ids += tokens
        self.mask += [1] * len(tokens)
        out_lp = getattr(out, "log_probs", None)
        if self.logprobs is not None and out_lp is not None and len(out_lp) >= len(tokens):
            self.logprobs += [float(x) for x in out_lp[:len(tokens)]]
        else:
            self.logprobs = None
        preempted = getattr(out, "num_preempted", None)
        if preempted is not None:
            self.num_preempted = preempted + max(self.num_preempted, 0)
        extra = getattr(out, "extra_fields", None) or {}
        self.min_steps = _merge_steps(self.min_steps, extra.get("min_global_steps",
                                                                extra.get("global_steps")), min)
        self.max_steps = _merge_steps(self.max_steps, extra.get("max_global_steps",
                                                                extra.get("global_steps")), max)


async def play_episode(spec: GameSpec, config, seed: int, prompt_ids: list[int], tokenizer,
                       generate: GenerateFn, limits: EpisodeLimits,
                       check_prompt: Optional[str] = None) -> EpisodeResult:
    """Play one episode of ``spec`` (config object ``config``, instance ``seed``).

    ``prompt_ids`` are the tokens of the first messages (``prompt_ids_for``). ``check_prompt``
    is the first messages' last content: if given, the environment's first observation must
    appear in it, so a dataset exported with other game settings (or an older game version)
    fails loudly instead of training on rules the model never saw.
    """
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    max_new = min(limits.max_tokens_per_turn, limits.response_length)
    turn_cap = spec.max_turns(config) if limits.max_turns is None else limits.max_turns
    response = _Response()
    turn_rewards: list[float] = []
    actions: list[str] = []
    pending: list[int] = []  # feedback tokens, appended only when another answer follows
    chat_turns = 1  # the first user message
    success = done = False
    stop_reason = "max_turns"
    generate_s = env_s = 0.0

    env = spec.make_env(config)
    try:
        obs = env.reset(seed)
        if check_prompt is not None and obs["text"] not in check_prompt:
            raise ValueError(
                f"the prompt of {spec.name} seed {seed} does not contain the game's first "
                f"observation: the dataset was exported with other game settings or an older "
                f"game version; export it again (python -m gamerl.integrations.verl.dataset)")
        while len(turn_rewards) < turn_cap:
            if len(response.ids) + len(pending) + max_new > limits.response_length:
                stop_reason = "response_length"
                break
            if pending:
                response.add_feedback(pending)
                chat_turns += 1
            t0 = time.perf_counter()
            out = await generate(list(prompt_ids) + response.ids, max_new)
            generate_s += time.perf_counter() - t0
            tokens = list(out.token_ids)[:max_new]
            if not tokens:  # nothing sampled (an aborted request): no move, no trailing feedback
                if pending:
                    response.drop_last(len(pending))
                    chat_turns -= 1
                stop_reason = "empty_generation"
                break
            pending = []
            response.add_answer(tokens, out)
            chat_turns += 1

            text = tokenizer.decode(tokens, skip_special_tokens=True)
            action = spec.extract(text)
            t0 = time.perf_counter()
            obs, reward, done, info = env.submit(action)
            env_s += time.perf_counter() - t0
            turn_rewards.append(float(reward))
            actions.append(action)
            success = bool(info.get("success", False))
            if done:
                stop_reason = "done"
                break
            pending = feedback_ids(tokenizer, spec.feedback(obs, info, action),
                                   answer_closed=tokens[-1] == im_end,
                                   enable_thinking=limits.enable_thinking)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()
        del env

    reward = float(sum(r * limits.turn_discount ** t for t, r in enumerate(turn_rewards)))
    return EpisodeResult(
        prompt_ids=list(prompt_ids), response_ids=response.ids, response_mask=response.mask,
        response_logprobs=response.logprobs if response.ids else None,
        turn_rewards=turn_rewards, actions=actions, reward=reward, success=success, done=done,
        stop_reason=stop_reason, chat_turns=chat_turns, generate_s=generate_s, env_s=env_s,
        num_preempted=response.num_preempted, min_global_steps=response.min_steps,
        max_global_steps=response.max_steps)

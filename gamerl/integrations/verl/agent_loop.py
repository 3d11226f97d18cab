"""``GameAgentLoop``: our games as a verl 0.9 agent loop (``agent_name: game_rl``).

ONE generic loop serves every game in ``games.GAMES``: each dataset row says which game, seed and
game config it is (``extra_info.game`` / ``.seed`` / ``.game_config``), so one training run can
mix games and verl's validation metrics come out per game (``data_source`` =
``game_rl/<game>``).

How verl 0.9.1 finds and runs it (``verl/experimental/agent_loop/agent_loop.py``):

* ``AgentLoopWorker.__init__`` loads ``actor_rollout_ref.rollout.agent.agent_loop_config_path``,
  a YAML list of ``{name, _target_, ...}`` entries, into ``_agent_loop_registry``; our
  ``config/agent_loops.yaml`` maps ``game_rl`` to this class. (``@register("game_rl")`` below
  does the same, but only in a process that imports this module; the worker is a Ray actor that
  does not, hence the YAML.)
* per trajectory, the worker calls ``hydra.utils.instantiate(entry, trainer_config=...,
  server_manager=..., tokenizer=..., processor=..., dataset_cls=..., data_config=...,
  hf_model_type=..., tools=...)``: a NEW instance per episode, so nothing on ``self`` outlives
  it. Extra keys of the YAML entry (``max_tokens_per_turn``, ``max_turns``, ``turn_discount``,
  ``system_prompt``, ``check_prompt``) arrive here as keyword arguments.
* then ``await loop.run(sampling_params, **row)``, where ``row`` is the dataset row as
  ``RLHFDataset.__getitem__`` made it (``raw_prompt``, ``extra_info``, ``reward_model``,
  ``data_source``, ``index``, ...; the V1 trainer adds ``uid``, ``global_steps``,
  ``session_id``).
* model calls: ``await self.server_manager.generate(request_id=..., prompt_ids=...,
  sampling_params=...)`` returns ``verl.workers.rollout.replica.TokenOutput`` (``token_ids``,
  ``log_probs``, ``num_preempted``, ``extra_fields``). One ``request_id`` per episode keeps every
  turn on the same inference server (prefix cache). ``sampling_params["max_tokens"]`` caps each
  answer (vLLM and SGLang servers both read it).
* the returned ``AgentLoopOutput.reward_score`` becomes ``rm_scores`` on the last response token
  (``AgentLoopWorker._postprocess`` in V0, ``AgentLoopOutput.as_dict`` in V1); with
  ``reward.reward_model.enable=False`` (the default) the trainer trains on it directly
  (``verl.trainer.ppo.reward.extract_reward``), and no reward function is called.
  ``extra_fields["reward_extra_info"]`` (scalars: ``episode_return``, ``success``,
  ``game_turns``, ``length_truncated``) shows up in validation metrics
  (``val-aux/game_rl/<game>/success/mean@N``, ...) and in ``trainer.validation_data_dir`` dumps;
  ``extra_fields["turn_scores"]`` holds the per-turn rewards (verl's own key for them).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Optional
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from .episode import EpisodeLimits, play_episode, prompt_ids_for
from .games import AGENT_NAME, get_game

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))



def _as_dict(value: Any) -> dict:
    """``extra_info`` arrives as a dict (RLHFDataset), but tolerate a JSON string or None."""
    if value is None:
        return {}
    if isinstance(value, str):
        return json.loads(value)
    return dict(value)


@register(AGENT_NAME)
class GameAgentLoop(AgentLoopBase):
    """Plays one game episode per call; see ``episode.play_episode`` for the token layout."""

    def __init__(self, *args, max_tokens_per_turn: int = 256, max_turns: Optional[int] = None,
                 turn_discount: float = 1.0, system_prompt: Optional[str] = "default",
                 check_prompt: bool = True, name: Optional[str] = None, tools: Any = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)
        if max_turns is None:  # verl's own knob, if set
            max_turns = self.rollout_config.multi_turn.get("max_assistant_turns", None)
        self.limits = EpisodeLimits(
            response_length=self.response_length,
            max_tokens_per_turn=int(max_tokens_per_turn),
            max_turns=None if max_turns is None else int(max_turns),
            turn_discount=float(turn_discount),
            enable_thinking=bool(self.apply_chat_template_kwargs.get("enable_thinking", False)))
        self.system_prompt = system_prompt
        self.check_prompt = bool(check_prompt)

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        extra_info = _as_dict(kwargs.get("extra_info"))
        if "game" not in extra_info or "seed" not in extra_info:
            raise ValueError("a game_rl row needs extra_info.game and extra_info.seed "
                             "(export it with python -m gamerl.integrations.verl.dataset)")
        spec = get_game(str(extra_info["game"]))
        seed = int(extra_info["seed"])
        config = spec.config(extra_info.get("game_config"))

        messages = [dict(m) for m in (kwargs.get("raw_prompt") or [])]
        if not messages:  # a row without a prompt: the bridge's own first messages
            env = spec.make_env(config)
            try:
                messages = spec.initial_messages(seed, env.reset(seed), self.system_prompt)
            finally:
                env.close()
        prompt_ids = prompt_ids_for(self.tokenizer, messages, self.limits.enable_thinking)
        prompt_ids = self._cap_text_prompt_length(prompt_ids)

        priority = int(kwargs.get("priority", 0) or 0)
        if getattr(self.rollout_config, "full_determinism", False):
            request_id = f"det-{kwargs.get('uid', priority)}-{kwargs.get('session_id', 0)}"
        else:
            request_id = uuid4().hex

        async def generate(ids: list[int], max_tokens: int):
            return await self.server_manager.generate(
                request_id=request_id, prompt_ids=ids,
                sampling_params={**sampling_params, "max_tokens": max_tokens},
                priority=priority)

        result = await play_episode(
            spec, config, seed, prompt_ids, self.tokenizer, generate, self.limits,
            check_prompt=messages[-1].get("content") if self.check_prompt else None)

        extra_fields = {
            "turn_scores": result.turn_rewards,  # verl's key for per-turn scores
            "tool_rewards": [],  # schema of verl's own loops
            "game": spec.name,
            "seed": seed,
            "actions": result.actions,
            "stop_reason": result.stop_reason,
            "reward_extra_info": {
                "episode_return": result.episode_return,
                "success": float(result.success),
                "game_turns": result.game_turns,
                "length_truncated": float(result.stop_reason == "response_length"),
            },
        }
        if result.min_global_steps is not None:
            extra_fields["min_global_steps"] = result.min_global_steps
            extra_fields["max_global_steps"] = result.max_global_steps
        return AgentLoopOutput(
            prompt_ids=result.prompt_ids,
            response_ids=result.response_ids,
            response_mask=result.response_mask,
            response_logprobs=result.response_logprobs,
            reward_score=result.reward,
            num_turns=result.chat_turns,
            metrics={"generate_sequences": result.generate_s, "tool_calls": result.env_s,
                     "num_preempted": result.num_preempted},
            extra_fields=extra_fields,
        )

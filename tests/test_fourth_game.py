"""A fourth game is one module and one registry line: a trivial in-process game ("say the
number"), registered as a ``Task`` here, is played by the rollout and scored by the evaluation
with no change to gamerl.core (docs/training.md, "Adding a game"). It names none of the optional
fields (``record_fields``, ``sample_table``, ``curriculum``): its episode records and sample
table are the generic ones."""

import random
from types import SimpleNamespace

import pytest

from gamerl.core.evaluate import episode_metrics
from gamerl.core.rollout import LMPolicy, RolloutConfig, ScriptedPolicy, rollout, summarize
from gamerl.games import Task, get_task, register_task
from gamerl.games.base import after_marker, seed_eval, seed_instances, seed_start
from gamerl.models import build_tiny, load_policy
from gamerl.tracking.samples import episode_table

TURNS = 2


class SayTheNumberEnv:
    """Each turn asks for one number; saying it scores 1. The episode ends after TURNS turns."""

    def reset(self, seed: int) -> dict:
        self.rng, self.turn = random.Random(seed), 0
        self.target = self.rng.randint(0, 99)
        return {"text": f"Say the number {self.target}.", "turn": 0}

    def submit(self, action: str):
        right = action.strip() == str(self.target)
        self.turn += 1
        self.target = self.rng.randint(0, 99)
        obs = {"text": f"Now say {self.target}.", "turn": self.turn}
        return obs, float(right), self.turn >= TURNS, {"right": right}

    def close(self) -> None:
        pass


def make_task() -> Task:
    """The whole game on the trainer's side (a real one is a module in gamerl/games/)."""
    return Task(
        name="say_the_number",
        system_prompt="Reply with the number only.",
        extract=lambda answer: after_marker(answer, "number"),
        feedback=lambda obs, info, action, style: obs["text"],
        env_factory=lambda cfg: SayTheNumberEnv,
        http_env_factory=lambda cfg, base_url: SayTheNumberEnv,
        start=seed_start, train_instances=seed_instances, eval_instances=seed_eval,
        turn_stats=lambda info: {"right": info["right"], "success": info["right"]},
        metrics=lambda episodes, cfg: {"right_rate": sum(t.stats["right"] for ep in episodes
                                                         for t in ep.turns)
                                       / max(sum(len(ep.turns) for ep in episodes), 1)},
        badness=lambda ep, cfg: 0.0 if ep.success else 1.0,
        demo=lambda cfg, rng: (lambda ep: str(rng.randint(0, 99))),
        reference_agents=lambda cfg: {},
        max_turns=lambda cfg: TURNS,
        headline=("right_rate",),
        metric_descriptions={"right_rate": "numbers said right (fraction of turns)"},
    )


@pytest.fixture(scope="module")
def registered():
    register_task("say_the_number", make_task)
    yield get_task("say_the_number")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_policy(str(build_tiny(tmp_path_factory.mktemp("fourth") / "tiny")), device="cpu")


def rcfg() -> RolloutConfig:
    return RolloutConfig(max_turns=TURNS, max_new_tokens=8, task="say_the_number",
                         system_prompt="Reply with the number only.")


def test_a_scripted_player_wins_the_new_game(registered, tiny):
    _, tok = tiny

    def say(ep):  # reads the number off the last message
        text = ep.last_obs.get("text") if ep.last_obs else None
        return "Number: " + "".join(c for c in text if c.isdigit())

    episodes = rollout(ScriptedPolicy(tok, say), tok, [1, 2, 3], SayTheNumberEnv, rcfg())
    assert all(len(ep.turns) == TURNS and ep.success for ep in episodes)
    assert sum(ep.total_reward for ep in episodes) == 3 * TURNS
    cfg = SimpleNamespace(task="say_the_number")
    metrics = episode_metrics(episodes, cfg)
    assert metrics["right_rate"] == 1.0 and metrics["success_rate"] == 1.0
    assert summarize(episodes, cfg)["right_rate"] == 1.0

    record = episodes[0].record(registered)
    assert set(record) == {"seed", "reward", "success", "turns", "context_exhausted", "tokens",
                           "policy_tokens", "actions", "turn_rewards"}
    assert record["actions"] == [t.action for t in episodes[0].turns]
    table = episode_table(episodes, "say_the_number").splitlines()
    assert table[0] == "| instance | actions | result |" and len(table) == 2 + 3
    assert table[2].startswith(f"| 1 | `{episodes[0].turns[0].action}` → ")
    assert table[2].endswith("| won |")


def test_the_tiny_model_plays_the_new_game(registered, tiny):
    lm, tok = tiny
    episodes = rollout(LMPolicy(lm, tok, rcfg()), tok, [4, 5], SayTheNumberEnv, rcfg())
    for ep in episodes:
        assert len(ep.turns) == TURNS and ep.done
        assert sum(ep.policy_mask) == sum(t.n_tokens for t in ep.turns) > 0
        assert all("right" in t.stats for t in ep.turns)


def test_a_registered_game_is_a_valid_train_config(registered):
    """TrainConfig.task is checked against the registry, not a fixed list: the new game is a
    valid setting once registered, and a game nobody registered is refused by name."""
    from gamerl.config import TrainConfig, get_config

    cfg = TrainConfig(task="say_the_number", model="tiny", max_steps=TURNS)
    assert cfg.task == "say_the_number"
    assert get_config("tiny", task="say_the_number").task == "say_the_number"
    with pytest.raises(ValueError, match="'chess960' is not a registered game; choose from "
                                         r".*say_the_number"):
        TrainConfig(task="chess960")

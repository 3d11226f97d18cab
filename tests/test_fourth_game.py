"""A fourth game is one module and one registry line: a trivial in-process game ("say the
number"), registered as a ``Task`` here, is played by the rollout and scored by the evaluation
with no change to gamerl.core (docs/how-to/add-a-game.md). It names none of the optional
trainer fields (``record_fields``, ``sample_table``, ``curriculum``): its episode records and
sample table are the generic ones.

Past gamerl/core: ``python -m gamerl train --task say_the_number`` runs it end to end (in this
process, where it is registered); the verl bridge lists it and builds its spec from the one
optional piece past the trainer it declares (``verl``, a ``VerlSpec``); and the pieces it leaves
out (``config_files``, ``wizard``, ``server_port``) are refused in one line where they are
needed (env_config.json, ``configure``) and nowhere else."""

import json
import random
from dataclasses import asdict, dataclass, replace
from types import SimpleNamespace

import pytest

from gamerl.core.evaluate import episode_metrics
from gamerl.core.rollout import LMPolicy, RolloutConfig, ScriptedPolicy, rollout, summarize
from gamerl.games import TASKS, Task, get_task, register_task
from gamerl.games import registry
from gamerl.games.base import after_marker, seed_eval, seed_instances, seed_start
from gamerl.games.pieces import VerlSpec
from gamerl.models import load_policy
from gamerl.tracking.samples import episode_table

pytestmark = pytest.mark.usefixtures("one_torch_thread")

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


@dataclass
class SayConfig:
    """The game's config class, as the verl bridge validates configs with it."""
    turns: int = TURNS


class VerlSayTheNumberEnv(SayTheNumberEnv):
    def __init__(self, config: SayConfig):
        self.turns = config.turns

    def submit(self, action: str):
        obs, reward, _, info = super().submit(action)
        return obs, reward, self.turn >= self.turns, {**info, "success": info["right"]}


def verl_spec() -> VerlSpec:
    """The one piece past the trainer this game declares: what the verl bridge needs."""
    return VerlSpec(title="Say the number", config_cls=SayConfig,
                    default_config=lambda: asdict(SayConfig()), make_env=VerlSayTheNumberEnv,
                    secret=lambda seed, config: str(random.Random(seed).randint(0, 99)),
                    max_turns=lambda config: config.turns)


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
        verl=verl_spec,
        presets={"tiny": dict(max_new_tokens=4, max_steps=TURNS)},  # a number is a few tokens
    )


def _unregister(name: str) -> None:
    TASKS.pop(name, None)
    registry._BUILT.pop(name, None)


@pytest.fixture(scope="module")
def registered():
    register_task("say_the_number", make_task)
    yield get_task("say_the_number")
    _unregister("say_the_number")  # the other test modules see the three games only




@pytest.fixture(scope="module")
def tiny(tiny_dir):  # conftest's: "tiny" resolves to it, for the CLI's run too
    return load_policy(str(tiny_dir), device="cpu")


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
    # the game's own presets apply over the preset, and the caller's overrides over them
    assert get_config("tiny", task="say_the_number").max_new_tokens == 4
    assert get_config("tiny").max_new_tokens == 24  # the Password Game's tiny preset, its own
    assert get_config("tiny", task="say_the_number", max_new_tokens=6).max_new_tokens == 6
    assert get_config("smollm2-135m", task="say_the_number").max_new_tokens == 32  # not named
    with pytest.raises(ValueError, match="'chess960' is not a registered game; choose from "
                                         r".*say_the_number"):
        TrainConfig(task="chess960")


# ----------------------------------------------------------------------------- past gamerl/core

def test_the_cli_trains_the_new_game(registered, tiny_dir, tmp_path, capsys):
    """``python -m gamerl train --task say_the_number`` (gamerl.cli.main in this process, where
    the game is registered): the --task choices come from the registry, and a short run (no
    warm start, one epoch) writes its summary."""
    from gamerl.cli import main

    out = tmp_path / "run"
    assert main(["train", "--task", "say_the_number", "--out", str(out), "--epochs", "1",
                 "--episodes-per-epoch", "2", "--eval-episodes", "2", "--wandb-mode",
                 "disabled", "--no-progress", "--set", "warmstart=false",
                 "--set", "minibatch_size=2", "--set", "ppo_epochs=1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["task"] == "say_the_number" and summary["epochs"] == 1
    # the game's presets reach the CLI's run: its 4 new tokens and 2 turns, nothing passed
    assert (summary["config"]["max_new_tokens"], summary["config"]["max_steps"]) == (4, TURNS)
    assert "right_rate" in summary["final"]
    assert "say_the_number, held-out games: 2" in capsys.readouterr().out


def test_the_verl_bridge_plays_the_new_game(registered, tiny):
    """The bridge's registry is the games' registry: the game is in ``GAMES`` once registered,
    ``get_game`` builds its spec from its Task (system prompt, extract, feedback) and its
    ``VerlSpec``, the exporter writes its rows, and an episode plays through
    ``episode.play_episode`` (all without verl)."""
    import asyncio

    from gamerl.integrations.verl import dataset as export
    from gamerl.integrations.verl.episode import (EpisodeLimits, Generation, play_episode,
                                                  prompt_ids_for)
    from gamerl.integrations.verl.games import GAMES, get_game
    from gamerl.core.rollout import encode
    from gamerl.models import IM_END

    assert "say_the_number" in GAMES and list(GAMES)[:2] == ["password_game", "wordle"]
    assert "openspiel" not in GAMES  # declares no verl spec
    spec = get_game("say_the_number")
    assert spec is get_game("say_the_number")  # built once
    assert spec.system_prompt == registered.system_prompt and spec.title == "Say the number"
    assert spec.extract("Number: 42") == "42"
    assert spec.config({"turns": 3}).turns == 3 and spec.max_turns(spec.config()) == TURNS
    with pytest.raises(ValueError, match="bad say_the_number config"):
        spec.config({"no_such_key": 1})

    rows = list(export.build_rows("say_the_number", export.train_seeds(3), "train"))
    assert [r["data_source"] for r in rows] == ["game_rl/say_the_number"] * 3
    env = SayTheNumberEnv()
    for seed, row in enumerate(rows):
        assert row["prompt"][-1]["content"] == f"Say the number #{seed}\n{env.reset(seed)['text']}"
        assert row["reward_model"]["ground_truth"] == str(env.target)

    _, tok = tiny
    im_end = tok.convert_tokens_to_ids(IM_END)
    config = spec.config()
    env = spec.make_env(config)
    first = env.reset(7)
    targets = []
    for _ in range(TURNS):  # the numbers the game asks for, in order
        targets.append(env.target)
        env.submit(str(env.target))
    answers = iter(targets)

    async def generate(ids, max_tokens):  # a stand-in server that says each number right
        return Generation(token_ids=encode(tok, f"Number: {next(answers)}") + [im_end])

    prompt = prompt_ids_for(tok, spec.initial_messages(7, first))
    res = asyncio.run(play_episode(spec, config, 7, prompt, tok, generate,
                                   EpisodeLimits(response_length=512, max_tokens_per_turn=16)))
    assert res.actions == [str(t) for t in targets] and res.turn_rewards == [1.0] * TURNS
    assert res.done and res.success and res.stop_reason == "done"


def test_a_game_without_a_verl_spec_is_refused_by_the_bridge_only(registered):
    from gamerl.integrations.verl.games import GAMES, get_game

    register_task("say_nothing", lambda: replace(make_task(), name="say_nothing", verl=None))
    try:
        assert "say_nothing" not in GAMES and "say_the_number" in GAMES
        with pytest.raises(ValueError, match="game 'say_nothing' has no verl spec"):
            get_game("say_nothing")
        with pytest.raises(ValueError, match="unknown game 'chess'"):
            get_game("chess")
    finally:
        _unregister("say_nothing")


def test_env_config_and_configure_refuse_it_in_one_line(registered, tmp_path):
    """The game declares no ``config_files``: it is a valid TrainConfig and trains (above), but
    env_config.json cannot hold it and the wizard does not offer it; each says so in one line."""
    from gamerl.config import get_config
    from gamerl.config.configure import default_config, game_choices
    from gamerl.config.jsonconfig import config_to_json, load_run_config

    cfg = get_config("tiny", task="say_the_number")
    with pytest.raises(ValueError) as e:
        config_to_json(cfg)
    assert "game 'say_the_number' has no env_config.json settings" in str(e.value)
    assert "\n" not in str(e.value)

    (tmp_path / "train_config.json").write_text("{}")
    (tmp_path / "env_config.json").write_text(json.dumps({"task": "say_the_number"}))
    with pytest.raises(ValueError, match=r"env_config.json: task: game 'say_the_number' has no "
                                         r"env_config.json settings .*password_game, wordle, "
                                         "openspiel"):
        load_run_config(tmp_path / "train_config.json")

    assert "say_the_number" not in game_choices()
    assert game_choices() == ["password_game", "wordle", "openspiel"]
    with pytest.raises(ValueError, match="configure: task 'say_the_number'"):
        default_config("tiny", "say_the_number")
